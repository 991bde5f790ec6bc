//! jq's path semantics for assignments, updates and deletions, as jaq natives.
//!
//! jaq updates a value through its own rules, which refuse to go through `null` or past
//! the end of an array. jq, and gojq (which shell-operator runs), create what is
//! missing instead: `null | .a[2] = 1` is `{"a": [null, null, 1]}`, and deleting a path
//! that does not exist changes nothing. jq defines every update operator by the paths
//! of its left-hand side (`reduce path(l) as $p (.; setpath($p; getpath($p) | r))`), so
//! this module implements `setpath`, `delpaths` and that loop on jaq's values, and
//! [`super::prelude`] routes the operators and `del` to them.
//!
//! An update whose right-hand side yields nothing deletes the path, all such paths at
//! the end and together, as gojq and jq 1.7 do (so `[1,2,3] | .[] |= empty` is `[]`).

use super::budget::{self, Limit, MAX_DEPTH};
use jaq_core::box_iter::box_once;
use jaq_core::data::JustLut;
use jaq_core::native::{Fun, v};
use jaq_core::{Bind, Exn, Native, ValT, ValX};
use jaq_json::{Map, Num, Val};
use std::collections::BTreeMap;
use std::rc::Rc;

type Error = jaq_core::Error<Val>;

/// The largest array index an assignment may pad an array up to. jq and gojq allow
/// about 2^29, which at 16 bytes an element lets one filter take gigabytes of the
/// engine's memory; no Kubernetes object has lists anywhere near this long.
pub(super) const MAX_ARRAY_INDEX: usize = 1 << 20;

/// The natives the prelude's definitions call: `_full_slices` (a path with each slice
/// as jq writes it), `_setpath($path; $value)`,
/// `_delpaths($paths)` and `_modify_paths($paths; f)`, which replaces the value at each
/// path by the first output of `f` on it (or deletes it when `f` yields nothing).
pub(super) fn funs() -> [Fun<JustLut<Val>>; 4] {
    [
        (
            "_full_slices",
            v(0),
            Native::new(|cv| box_once(Ok(full_slices(cv.1)))),
        ),
        (
            "_setpath",
            v(2),
            Native::new(|mut cv| {
                let value = cv.0.pop_var();
                let path = cv.0.pop_var();
                let length = match &path {
                    Val::Arr(keys) => keys.len(),
                    _ => 0,
                };
                if too_deep(length, &value) {
                    return box_once(Err(budget::trip(Limit::Depth(MAX_DEPTH))));
                }
                box_once(set_path(cv.1, &path, value).map_err(Exn::from))
            }),
        ),
        (
            "_delpaths",
            v(1),
            Native::new(|mut cv| {
                let paths = cv.0.pop_var();
                box_once(delete_paths(cv.1, &paths).map_err(Exn::from))
            }),
        ),
        (
            "_modify_paths",
            Box::new([Bind::Var(()), Bind::Fun(())]),
            Native::new(|mut cv| {
                let (update, update_ctx) = cv.0.pop_fun();
                let paths = cv.0.pop_var();
                box_once(modify(cv.1, &paths, |old| {
                    update.run((update_ctx.clone(), old)).next().transpose()
                }))
            }),
        ),
    ]
}

/// Whether `new` put `length` levels down would nest deeper than [`MAX_DEPTH`] (what is
/// already there is within it, or was refused when it was built).
fn too_deep(length: usize, new: &Val) -> bool {
    length > MAX_DEPTH || budget::deeper_than(new, MAX_DEPTH - length)
}

/// `path`'s output as jq writes it: jaq leaves out a slice's absent bound (`.[1:]` is
/// `{"start": 1}`), jq writes it as `null`.
fn full_slices(path: Val) -> Val {
    let Val::Arr(keys) = path else {
        return path;
    };
    if !keys.iter().any(|key| matches!(key, Val::Obj(_))) {
        return Val::Arr(keys);
    }
    keys.iter()
        .map(|key| match key {
            Val::Obj(bounds) => {
                let bound = |name: &'static str| {
                    let name = Val::utf8_str(name);
                    let value = bounds.get(&name).cloned().unwrap_or_default();
                    (name, value)
                };
                Val::obj(Map::from_iter([bound("start"), bound("end")]))
            }
            other => other.clone(),
        })
        .collect()
}

/// `v | reduce $paths[] as $p (.; setpath($p; getpath($p) | first(f)))`, where an `f`
/// yielding nothing marks `$p` for deletion once every path is updated.
fn modify<'a>(
    mut value: Val,
    paths: &Val,
    mut update: impl FnMut(Val) -> Result<Option<Val>, Exn<'a, Val>>,
) -> ValX<'a, Val> {
    let mut doomed = Vec::new();
    for path in as_array(paths, "Paths must be specified as an array")? {
        let keys = as_array(path, "Path must be specified as an array")?;
        let old = keys
            .iter()
            .try_fold(value.clone(), |at, key| at.index(key))?;
        match update(old)? {
            Some(new) if too_deep(keys.len(), &new) => {
                return Err(budget::trip(Limit::Depth(MAX_DEPTH)));
            }
            Some(new) => value = set(value, keys, new)?,
            None => doomed.push(keys),
        }
    }
    Ok(delete(value, doomed)?)
}

/// jq's `setpath($path; $new)`.
fn set_path(value: Val, path: &Val, new: Val) -> Result<Val, Error> {
    set(
        value,
        as_array(path, "Path must be specified as an array")?,
        new,
    )
}

/// jq's `delpaths($paths)`: every path is read in the input, so deleting `[1]` and
/// `[2]` of `[0,1,2,3]` gives `[0,3]`; paths that do not exist are ignored.
fn delete_paths(value: Val, paths: &Val) -> Result<Val, Error> {
    let mut all = Vec::new();
    for path in as_array(paths, "Paths must be specified as an array")? {
        all.push(as_array(path, "Path must be specified as an array")?);
    }
    delete(value, all)
}

fn as_array<'v>(value: &'v Val, message: &'static str) -> Result<&'v [Val], Error> {
    match value {
        Val::Arr(items) => Ok(items),
        _ => Err(Error::str(message)),
    }
}

/// One element of a path, as jq reads it.
enum Key<'a> {
    /// An object key.
    Field(&'a Val),
    /// An array index, negative from the end; jq rounds fractions down.
    Index(isize),
    /// `{"start": s, "end": e}`, either bound absent or `null` for the array's end.
    Slice(Option<f64>, Option<f64>),
}

fn key(key: &Val) -> Result<Key<'_>, Error> {
    match key {
        Val::TStr(_) | Val::BStr(_) => Ok(Key::Field(key)),
        Val::Num(n) => Ok(Key::Index(index_of(n))),
        Val::Obj(bounds) => {
            let bound = |name: &'static str| match bounds.get(&Val::utf8_str(name)) {
                None | Some(Val::Null) => Ok(None),
                Some(Val::Num(n)) => Ok(Some(to_f64(n))),
                Some(_) => Err(Error::str(
                    "Start and end indices of an array slice must be numbers",
                )),
            };
            Ok(Key::Slice(bound("start")?, bound("end")?))
        }
        other => Err(Error::str(format_args!(
            "Invalid path component {other} ({})",
            type_name(other)
        ))),
    }
}

fn to_f64(n: &Num) -> f64 {
    match n {
        Num::Int(i) => *i as f64,
        Num::Float(f) => *f,
        Num::BigInt(_) | Num::Dec(_) => n.to_string().parse().unwrap_or(f64::NAN),
    }
}

fn index_of(n: &Num) -> isize {
    match n {
        Num::Int(i) => *i,
        // `as` saturates, and turns NaN into 0, as jq's conversion does.
        other => to_f64(other).floor() as isize,
    }
}

/// The indexes `[start, end)` a slice selects in an array of `len` elements: negative
/// bounds count from the end, the start rounds down and the end up, both are clamped.
fn slice_bounds(start: Option<f64>, end: Option<f64>, len: usize) -> (usize, usize) {
    let len_f = len as f64;
    let from_end = |x: f64| if x < 0.0 { x + len_f } else { x };
    let start = from_end(start.unwrap_or(0.0)).clamp(0.0, len_f);
    let end = from_end(end.unwrap_or(len_f)).min(len_f).max(start);
    (start.floor() as usize, end.ceil() as usize)
}

fn type_name(value: &Val) -> &'static str {
    match value {
        Val::Null => "null",
        Val::Bool(_) => "boolean",
        Val::Num(_) => "number",
        Val::TStr(_) | Val::BStr(_) => "string",
        Val::Arr(_) => "array",
        Val::Obj(_) => "object",
    }
}

fn cannot_index(value: &Val, key: &Val) -> Error {
    match key {
        Val::TStr(_) | Val::BStr(_) => {
            Error::str(format_args!("Cannot index {} with {key}", type_name(value)))
        }
        _ => Error::str(format_args!(
            "Cannot index {} with {}",
            type_name(value),
            type_name(key)
        )),
    }
}

/// The array in `value`, or a new one when it is `null`.
fn array_or_new(value: Val) -> Rc<Vec<Val>> {
    match value {
        Val::Arr(items) => items,
        _ => Rc::default(),
    }
}

/// `value | setpath(path; new)`, creating objects and arrays where `value` has `null`
/// and padding arrays with `null` up to an index past their end. Values along the path
/// are taken out and put back so that a value nothing else holds is changed in place.
fn set(value: Val, path: &[Val], new: Val) -> Result<Val, Error> {
    let Some((head, rest)) = path.split_first() else {
        return Ok(new);
    };
    match (key(head)?, value) {
        (Key::Field(name), Val::Null) => {
            let child = set(Val::Null, rest, new)?;
            Ok(Val::obj(Map::from_iter([(name.clone(), child)])))
        }
        (Key::Field(name), Val::Obj(mut object)) => {
            let fields = Rc::make_mut(&mut object);
            let child = fields.get_mut(name).map(std::mem::take).unwrap_or_default();
            let child = set(child, rest, new)?;
            fields.insert(name.clone(), child);
            Ok(Val::Obj(object))
        }
        (Key::Index(index), value @ (Val::Null | Val::Arr(_))) => {
            let mut items = array_or_new(value);
            let len = items.len() as isize;
            let at = if index < 0 { index + len } else { index };
            let at = usize::try_from(at)
                .map_err(|_| Error::str("Out of bounds negative array index"))?;
            if at > MAX_ARRAY_INDEX {
                return Err(Error::str(format_args!(
                    "Array index {at} too large (at most {MAX_ARRAY_INDEX})"
                )));
            }
            let list = Rc::make_mut(&mut items);
            if at >= list.len() {
                list.resize(at + 1, Val::Null);
            }
            let child = std::mem::take(&mut list[at]);
            list[at] = set(child, rest, new)?;
            Ok(Val::Arr(items))
        }
        (Key::Slice(start, end), value @ (Val::Null | Val::Arr(_))) => {
            let mut items = array_or_new(value);
            let (start, end) = slice_bounds(start, end, items.len());
            let part: Val = items[start..end].iter().cloned().collect();
            let Val::Arr(replacement) = set(part, rest, new)? else {
                return Err(Error::str(
                    "A slice of an array can only be assigned another array",
                ));
            };
            let replacement = Rc::unwrap_or_clone(replacement);
            Rc::make_mut(&mut items).splice(start..end, replacement);
            Ok(Val::Arr(items))
        }
        (_, value) => Err(cannot_index(&value, head)),
    }
}

/// Where a path goes in an array, relative to its start.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    /// One element.
    At(usize),
    /// The elements `[start, end)`.
    Span(usize, usize),
}

/// Resolves the leading keys of `path` (not empty) against an array of `len` elements.
/// A slice followed by more keys is an array of its own, so the keys after it index
/// into it: `.[1:][0]` is element 1. `None` when the path names no element.
fn place(path: &[Val], len: usize) -> Result<Option<(Place, &[Val])>, Error> {
    let (mut low, mut high) = (0, len);
    let mut rest = path;
    while let Some((head, tail)) = rest.split_first() {
        match key(head)? {
            Key::Index(index) => {
                let width = (high - low) as isize;
                let at = if index < 0 { index + width } else { index };
                if !(0..width).contains(&at) {
                    return Ok(None);
                }
                return Ok(Some((Place::At(low + at as usize), tail)));
            }
            Key::Slice(start, end) => {
                let (start, end) = slice_bounds(start, end, high - low);
                (low, high) = (low + start, low + end);
                if tail.is_empty() {
                    return Ok(Some((Place::Span(low, high), tail)));
                }
                rest = tail;
            }
            Key::Field(name) => {
                return Err(Error::str(format_args!(
                    "Cannot delete field at object index of array ({name})"
                )));
            }
        }
    }
    Ok(None)
}

/// `value | delpaths(paths)`: a path that is empty deletes everything (`null`).
fn delete(value: Val, paths: Vec<&[Val]>) -> Result<Val, Error> {
    if paths.is_empty() {
        return Ok(value);
    }
    if paths.iter().any(|path| path.is_empty()) {
        return Ok(Val::Null);
    }
    match value {
        Val::Null => Ok(Val::Null),
        Val::Obj(mut object) => {
            // Each key with the rest of the paths through it; `None` once a path ends
            // there, as the whole key goes.
            let mut keys: BTreeMap<&Val, Option<Vec<&[Val]>>> = BTreeMap::new();
            for path in paths {
                let (head, tail) = (&path[0], &path[1..]);
                if !matches!(head, Val::TStr(_) | Val::BStr(_)) {
                    return Err(cannot_index(&Val::Obj(object), head));
                }
                let entry = keys.entry(head).or_insert_with(|| Some(Vec::new()));
                match entry {
                    Some(tails) if !tail.is_empty() => tails.push(tail),
                    _ => *entry = None,
                }
            }
            let fields = Rc::make_mut(&mut object);
            for (name, tails) in keys {
                match tails {
                    None => {
                        fields.shift_remove(name);
                    }
                    Some(tails) => {
                        if let Some(child) = fields.get_mut(name) {
                            *child = delete(std::mem::take(child), tails)?;
                        }
                    }
                }
            }
            Ok(Val::Obj(object))
        }
        Val::Arr(mut items) => {
            let len = items.len();
            let mut doomed = vec![false; len];
            let mut inner: BTreeMap<usize, Vec<&[Val]>> = BTreeMap::new();
            for path in paths {
                match place(path, len)? {
                    None => {}
                    Some((Place::At(at), [])) => doomed[at] = true,
                    Some((Place::Span(start, end), _)) => doomed[start..end].fill(true),
                    Some((Place::At(at), tail)) => inner.entry(at).or_default().push(tail),
                }
            }
            let list = Rc::make_mut(&mut items);
            for (at, tails) in inner {
                list[at] = delete(std::mem::take(&mut list[at]), tails)?;
            }
            let mut keep = doomed.iter().map(|doomed| !doomed);
            list.retain(|_| keep.next().unwrap_or(true));
            Ok(Val::Arr(items))
        }
        other => Err(Error::str(format_args!(
            "Cannot delete paths of {} ({other})",
            type_name(&other)
        ))),
    }
}
