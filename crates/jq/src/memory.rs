//! The memory budget of a run: bytes of the values built by the operations that can
//! grow a value past its inputs.
//!
//! The time limit alone does not bound memory: `"x" * 1000000000` allocates a
//! gigabyte in one step, and `reduce range(60) as $_ ("x"; . + .)` doubles a string
//! far past any machine's memory well within a second. So every operation that can
//! build a value larger than its inputs charges the size of what it builds to the run
//! before building it: `+` and `*` (which [`super::instrument`] turns into calls of
//! [`ADD`] and [`MUL`]) what they add beyond the larger operand, string interpolation
//! and `tostring`/`tojson` the text they build (a value made of shared parts,
//! `[range(1e5) | $big]`, prints far larger than it is), `/` of two strings its
//! pieces ([`DIV`], before jaq splits), arrays (`[f]`) and objects (`{...}`) their
//! elements and what those hold at their top level, and the natives of jaq that build
//! a new string or array (`implode`, `explode`, `ascii_downcase`, `ascii_upcase`,
//! `indices`, `tobytes`, `strftime`, the escapes behind `@html`, `@uri`, `@sh`,
//! `@base64` and `@base64d`, and the regular expressions' matches) what they built, as
//! they produce it ([`GROWN`], [`BUILT`]; `super::PRE_DEFS` wraps them). Natives that
//! return a part of their input (`ltrimstr`, `rtrimstr`, `trim`, `.[i:j]`) build no new
//! bytes and are not charged; `join`, `@csv` and `@tsv` are defined with `+` and
//! `split`, and `@text` and `@json` are `tostring` and `tojson`. Sizes are
//! approximate, from lengths: a string's bytes, an array's elements and an object's
//! entries times the size of a value. The charge adds up over the run (values dropped
//! are not given back). Charging `+` only what it adds keeps the usual loops cheap:
//! `reduce .[] as $x ([]; . + [$x])` and `join` are charged the size of their result,
//! not the quadratic sum of the copies jaq makes on the way.
//!
//! Over the budget the run stops with jaq's uncatchable halt, reporting
//! [`Limit::Memory`].

use super::budget::{Limit, charge, trip};
use jaq_core::box_iter::box_once;
use jaq_core::data::JustLut;
use jaq_core::native::{Fun, v};
use jaq_core::{Exn, Native, ValX};
use jaq_json::{Num, Val};

/// The native that `l + r` is rewritten to (`_add(l; r)`, same order of outputs).
pub(super) const ADD: &str = "_add";
/// The native that `l * r` is rewritten to.
pub(super) const MUL: &str = "_mul";
/// The native that `l / r` is rewritten to (for strings, a split into pieces).
pub(super) const DIV: &str = "_div";
/// The native that charges the string an interpolation built (`"\(f)..." | _grown`),
/// and the string or array a native of jaq built (`_jaq_implode | _grown`).
pub(super) const GROWN: &str = "_grown";
/// The native that charges a value a native of jaq built, nested parts included
/// (the arrays of match objects of the regular expressions).
pub(super) const BUILT: &str = "_built";
/// The native that checks, before a regular expression runs on its input with
/// `$flags`, that the budget has room for a match at every character.
const REGEX_ROOM: &str = "_regex_room";

/// The least a match of a regular expression takes: its object (offset, length,
/// string, captures) and its slot in the array of matches.
const MATCH_BYTES: usize = 5 * 2 * VAL_BYTES;

/// The approximate bytes of one piece of a split string beyond its slot in the array:
/// pieces share the string's bytes, but each has a handle of its own.
const PIECE_BYTES: usize = size_of::<bytes::Bytes>() + size_of::<usize>();

/// The approximate bytes of one array element or object key or value.
pub(super) const VAL_BYTES: usize = size_of::<Val>();

/// The approximate bytes `value` holds at its top level (shared parts below are not
/// counted: they were charged when they were built).
pub(super) fn top_size(value: &Val) -> usize {
    match value {
        Val::TStr(s) | Val::BStr(s) => s.len(),
        Val::Arr(items) => items.len().saturating_mul(VAL_BYTES),
        Val::Obj(fields) => fields.len().saturating_mul(2 * VAL_BYTES),
        _ => 0,
    }
}

/// What `l + r` adds to memory, in bytes: the shorter operand, copied after the
/// longer (0 when it builds nothing new).
fn add_size(l: &Val, r: &Val) -> usize {
    match (l, r) {
        (Val::TStr(_) | Val::BStr(_), Val::TStr(_) | Val::BStr(_))
        | (Val::Arr(_), Val::Arr(_))
        | (Val::Obj(_), Val::Obj(_)) => top_size(l).min(top_size(r)),
        _ => 0,
    }
}

/// What `l / r` adds to memory, in bytes: for two strings, the pieces of the split
/// (one per character for an empty separator), each a slot of the array and a handle
/// to its part of the string; counted before jaq splits, since a string of n bytes
/// split by `""` takes some fifty times n.
fn div_size(l: &Val, r: &Val) -> usize {
    let (Val::TStr(s) | Val::BStr(s), Val::TStr(sep) | Val::BStr(sep)) = (l, r) else {
        return 0;
    };
    let pieces = if s.is_empty() {
        0
    } else if sep.is_empty() {
        // Characters: bytes that do not continue a UTF-8 sequence (invalid bytes
        // count as characters of their own, as jaq splits them).
        s.iter().filter(|&&b| b & 0xC0 != 0x80).count()
    } else {
        occurrences(s, sep).saturating_add(1)
    };
    pieces.saturating_mul(VAL_BYTES + PIECE_BYTES)
}

/// How many times `sep` (not empty) occurs in `s` without overlapping, as jaq splits.
fn occurrences(s: &[u8], sep: &[u8]) -> usize {
    match (std::str::from_utf8(s), std::str::from_utf8(sep)) {
        // The standard library's substring search takes linear time.
        (Ok(s), Ok(sep)) => s.matches(sep).count(),
        // Not text: at most one piece per separator's length.
        _ => s.len() / sep.len(),
    }
}

/// The approximate bytes of `value` with everything it holds (shared parts counted as
/// if they were not), for values a native just built; iterative, as values may nest
/// up to [`super::MAX_DEPTH`] levels.
fn deep_size(value: &Val) -> usize {
    let mut total = 0usize;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        total = total.saturating_add(top_size(value));
        match value {
            Val::Arr(items) => pending.extend(items.iter()),
            Val::Obj(fields) => {
                for (k, v) in fields.iter() {
                    pending.push(k);
                    pending.push(v);
                }
            }
            _ => {}
        }
    }
    total
}

/// What `l * r` adds to memory, in bytes: a string's further copies, or the smaller of
/// two objects merged into the other.
fn mul_size(l: &Val, r: &Val) -> usize {
    match (l, r) {
        (s @ (Val::TStr(_) | Val::BStr(_)), Val::Num(n))
        | (Val::Num(n), s @ (Val::TStr(_) | Val::BStr(_))) => {
            let times = match n {
                Num::Int(i) => usize::try_from(*i).unwrap_or(0),
                // Saturated by jaq to the largest machine integer.
                Num::BigInt(_) => usize::MAX,
                _ => 0,
            };
            top_size(s).saturating_mul(times.saturating_sub(1))
        }
        (Val::Obj(_), Val::Obj(_)) => top_size(l).min(top_size(r)),
        _ => 0,
    }
}

/// What the elements of an array or the values of an object hold at their top level:
/// charged when they are gathered into one (`[f]`, `{...}`), so that many copies of a
/// large value built by an operation that was charged only what it added
/// (`[range(1000) | $s + "y"]`) do not escape the budget.
pub(super) fn items_size<'v>(items: impl Iterator<Item = &'v Val>) -> usize {
    items.fold(0usize, |sum, item| sum.saturating_add(top_size(item)))
}

/// Charges `bytes` to the run; the exception that ends it when over the budget.
pub(super) fn spend<'a>(bytes: usize) -> Result<(), Exn<'a, Val>> {
    match charge(bytes) {
        None => Ok(()),
        Some(limit) => Err(trip(limit)),
    }
}

fn math<'a>(l: Val, r: Val, size: usize, op: fn(Val, Val) -> jaq_json::ValR) -> ValX<'a, Val> {
    if size > 0 {
        spend(size)?;
    }
    Ok(op(l, r)?)
}

/// Whether the JSON text of `value` is longer than `max` bytes, found without
/// printing it: a walk that stops as soon as the text passes `max`, so it never
/// takes longer than printing `max` bytes would.
pub(super) fn text_over(value: &Val, max: usize) -> Option<usize> {
    let mut total = 0usize;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        total = total.saturating_add(match value {
            Val::Null | Val::Bool(_) => 5,
            // Numbers print in at most a few dozen bytes, except big ones.
            Val::Num(n) => match n {
                Num::BigInt(_) | Num::Dec(_) => n.to_string().len(),
                _ => 24,
            },
            // Escaping may take up to six bytes a byte; the plain case is one.
            Val::TStr(s) | Val::BStr(s) => s.len() + 2,
            Val::Arr(items) => {
                pending.extend(items.iter());
                items.len() + 2
            }
            Val::Obj(fields) => {
                for (k, v) in fields.iter() {
                    pending.push(k);
                    pending.push(v);
                }
                fields.len() * 2 + 2
            }
        });
        if total > max {
            return None;
        }
    }
    Some(total)
}

/// Charges the JSON text of `value` before it is printed.
pub(super) fn spend_text<'a>(value: &Val) -> Result<(), Exn<'a, Val>> {
    match text_over(value, super::budget::memory_left()) {
        Some(bytes) => spend(bytes),
        None => Err(trip(Limit::Memory(super::budget::memory_limit()))),
    }
}

/// Whether a regular expression with `flags` on `input` has room in the budget for
/// the most matches it may build: one per character with `g` (jaq builds them all
/// before the first is used, in one step no guard interrupts), one without.
fn regex_room<'a>(input: &Val, flags: &Val) -> Result<(), Exn<'a, Val>> {
    let global = matches!(flags, Val::TStr(f) | Val::BStr(f) if f.contains(&b'g'));
    let (true, Val::TStr(text) | Val::BStr(text)) = (global, input) else {
        return Ok(());
    };
    let most = text.len().saturating_add(1).saturating_mul(MATCH_BYTES);
    if most > super::budget::memory_left() {
        return Err(trip(Limit::Memory(super::budget::memory_limit())));
    }
    Ok(())
}

/// `_add(l; r)`, `_mul(l; r)`, `_div(l; r)`, `_grown`, `_built` and `_regex_room`:
/// the operators, interpolation and the natives that build strings and arrays,
/// charged.
pub(super) fn funs() -> [Fun<JustLut<Val>>; 6] {
    [
        (
            ADD,
            v(2),
            Native::new(|mut cv| {
                let r = cv.0.pop_var();
                let l = cv.0.pop_var();
                let size = add_size(&l, &r);
                box_once(math(l, r, size, |l, r| l + r))
            }),
        ),
        (
            MUL,
            v(2),
            Native::new(|mut cv| {
                let r = cv.0.pop_var();
                let l = cv.0.pop_var();
                let size = mul_size(&l, &r);
                box_once(math(l, r, size, |l, r| l * r))
            }),
        ),
        (
            DIV,
            v(2),
            Native::new(|mut cv| {
                let r = cv.0.pop_var();
                let l = cv.0.pop_var();
                let size = div_size(&l, &r);
                box_once(math(l, r, size, |l, r| l / r))
            }),
        ),
        (
            GROWN,
            v(0),
            Native::new(|cv| {
                let size = top_size(&cv.1);
                box_once(spend(size).map(|()| cv.1))
            }),
        ),
        (
            BUILT,
            v(0),
            Native::new(|cv| {
                let size = deep_size(&cv.1);
                box_once(spend(size).map(|()| cv.1))
            }),
        ),
        (
            REGEX_ROOM,
            v(1),
            Native::new(|mut cv| {
                let flags = cv.0.pop_var();
                box_once(regex_room(&cv.1, &flags).map(|()| cv.1))
            }),
        ),
    ]
}

#[cfg(test)]
mod tests;
