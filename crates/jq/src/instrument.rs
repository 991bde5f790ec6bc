//! Puts the run limits of [`super::budget`] into a parsed filter.
//!
//! Every definition's body and every `reduce`/`foreach` update starts with a guard
//! call (`_guard | body`: the body stays in tail position, so jaq's tail calls still
//! run in constant stack), and so does every [`GUARD_EVERY`]th level of nesting of the
//! syntax tree. Arrays are built by `_collect(f)` instead of `[f]`, and objects pass
//! through `_nest`, which bound their length and nesting; `+`, `*` and `/` become calls
//! of `_add`, `_mul` and `_div`, and computed strings pass through `_grown`, which charge what
//! they build to the run's memory budget ([`super::memory`]). The pass applies to jaq's
//! own definitions as much as to the user's, since `repeat`, `while`, `recurse` and
//! the rest loop through them.

use super::budget::{CLOSURE_GUARD, COLLECT, GUARD, GUARD_EVERY, NEST};
use super::memory::{ADD, DIV, GROWN, MUL};
use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Def, Pattern, Term};
use jaq_core::ops::Math;
use jaq_core::path::{Part, Path};

/// `_guard | term`.
fn guarded(term: Term<&str>) -> Term<&str> {
    pipe(Term::Call(GUARD, Vec::new()), term)
}

fn pipe<'s>(l: Term<&'s str>, r: Term<&'s str>) -> Term<&'s str> {
    Term::BinOp(Box::new(l), BinaryOp::Pipe(None), Box::new(r))
}

/// A definition with a guard at the start of its body.
///
/// A definition with filter parameters that calls itself gets the closure guard: each
/// of its calls binds a closure over the caller's, so a tail-recursive loop of it
/// (which takes no stack) builds a chain that is dropped recursively when the run ends.
pub(super) fn def(def: Def<&str>) -> Def<&str> {
    let closures = def.args.iter().any(|arg| !arg.starts_with('$'));
    let guard = if closures && calls(&def.body, def.name) {
        CLOSURE_GUARD
    } else {
        GUARD
    };
    Def {
        name: def.name,
        args: def.args,
        body: pipe(Term::Call(guard, Vec::new()), term(def.body, 1)),
    }
}

/// Whether `t` calls a filter named `name` (any arity, at any depth).
fn calls(t: &Term<&str>, name: &str) -> bool {
    match t {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Break(_) | Term::Var(_) => false,
        Term::Arr(items) => items.as_deref().is_some_and(|t| calls(t, name)),
        Term::Obj(entries) => entries
            .iter()
            .any(|(k, v)| calls(k, name) || v.as_ref().is_some_and(|v| calls(v, name))),
        Term::Str(_, parts) => parts.iter().any(|part| match part {
            StrPart::Term(t) => calls(t, name),
            _ => false,
        }),
        Term::Neg(t) | Term::Label(_, t) => calls(t, name),
        Term::BinOp(l, op, r) => {
            calls(l, name)
                || calls(r, name)
                || matches!(op, BinaryOp::Pipe(Some(p)) if pattern_calls(p, name))
        }
        Term::Fold(_, xs, pattern, args) => {
            calls(xs, name) || pattern_calls(pattern, name) || args.iter().any(|t| calls(t, name))
        }
        Term::TryCatch(t, catch) => {
            calls(t, name) || catch.as_deref().is_some_and(|c| calls(c, name))
        }
        Term::IfThenElse(branches, otherwise) => {
            branches
                .iter()
                .any(|(c, t)| calls(c, name) || calls(t, name))
                || otherwise.as_deref().is_some_and(|o| calls(o, name))
        }
        Term::Def(defs, t) => defs.iter().any(|d| calls(&d.body, name)) || calls(t, name),
        Term::Call(called, args) => *called == name || args.iter().any(|t| calls(t, name)),
        Term::Path(t, path) => {
            calls(t, name)
                || path.0.iter().any(|(part, _)| match part {
                    Part::Index(i) => calls(i, name),
                    Part::Range(from, upto) => {
                        from.as_ref().is_some_and(|t| calls(t, name))
                            || upto.as_ref().is_some_and(|t| calls(t, name))
                    }
                })
        }
    }
}

fn pattern_calls(pattern: &Pattern<&str>, name: &str) -> bool {
    match pattern {
        Pattern::Var(_) => false,
        Pattern::Arr(items) => items.iter().any(|p| pattern_calls(p, name)),
        Pattern::Obj(entries) => entries
            .iter()
            .any(|(k, p)| calls(k, name) || pattern_calls(p, name)),
    }
}

/// `term` with the limits put in; `depth` is its level in the syntax tree.
pub(super) fn term(t: Term<&str>, depth: usize) -> Term<&str> {
    let t = inner(t, depth);
    if depth.is_multiple_of(GUARD_EVERY) {
        guarded(t)
    } else {
        t
    }
}

/// [`term`] without a guard in front, for the places whose form jaq reads (object keys,
/// which may be shorthands such as `{a}` or `{$x}`).
fn inner<'s>(t: Term<&'s str>, depth: usize) -> Term<&'s str> {
    let next = depth + 1;
    let sub = |t: Term<&'s str>| term(t, next);
    match t {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Break(_) | Term::Var(_) => t,
        Term::Arr(None) => Term::Arr(None),
        Term::Arr(Some(items)) => Term::Call(COLLECT, vec![term(*items, next)]),
        Term::Obj(entries) => {
            let entries = entries
                .into_iter()
                .map(|(k, v)| (inner(k, next), v.map(|v| term(v, next))))
                .collect();
            pipe(Term::Obj(entries), Term::Call(NEST, Vec::new()))
        }
        Term::Str(format, parts) => {
            let computed = parts.iter().any(|part| matches!(part, StrPart::Term(_)));
            let parts = parts
                .into_iter()
                .map(|part| match part {
                    StrPart::Term(t) => StrPart::Term(term(t, next)),
                    other => other,
                })
                .collect();
            if computed {
                pipe(Term::Str(format, parts), Term::Call(GROWN, Vec::new()))
            } else {
                Term::Str(format, parts)
            }
        }
        Term::Neg(t) => Term::Neg(Box::new(term(*t, next))),
        Term::BinOp(l, BinaryOp::Math(op @ (Math::Add | Math::Mul | Math::Div)), r) => {
            let native = match op {
                Math::Add => ADD,
                Math::Mul => MUL,
                _ => DIV,
            };
            Term::Call(native, vec![term(*l, next), term(*r, next)])
        }
        Term::BinOp(l, op, r) => {
            let op = match op {
                BinaryOp::Pipe(Some(pattern)) => BinaryOp::Pipe(Some(pattern_(pattern, next))),
                op => op,
            };
            Term::BinOp(Box::new(term(*l, next)), op, Box::new(term(*r, next)))
        }
        Term::Label(name, t) => Term::Label(name, Box::new(term(*t, next))),
        Term::Fold(kind, xs, pattern, args) => {
            let args = args
                .into_iter()
                .enumerate()
                // The update, run once per value of `xs`.
                .map(|(i, arg)| if i == 1 { guarded(sub(arg)) } else { sub(arg) })
                .collect();
            Term::Fold(
                kind,
                Box::new(term(*xs, next)),
                pattern_(pattern, next),
                args,
            )
        }
        Term::TryCatch(t, catch) => Term::TryCatch(
            Box::new(term(*t, next)),
            catch.map(|c| Box::new(term(*c, next))),
        ),
        Term::IfThenElse(branches, otherwise) => Term::IfThenElse(
            branches
                .into_iter()
                .map(|(cond, then)| (term(cond, next), term(then, next)))
                .collect(),
            otherwise.map(|o| Box::new(term(*o, next))),
        ),
        Term::Def(defs, t) => Term::Def(
            defs.into_iter().map(def).collect(),
            Box::new(term(*t, next)),
        ),
        // An argument is a closure; one that calls a filter may be the parameter of
        // the caller (`def f(g): [g | f(g)]`), and calling it then goes through every
        // level's closure in turn, in recursion no definition's guard sees.
        Term::Call(name, args) => Term::Call(
            name,
            args.into_iter()
                .map(|arg| {
                    if is_plain(&arg) {
                        sub(arg)
                    } else {
                        guarded(sub(arg))
                    }
                })
                .collect(),
        ),
        Term::Path(t, path) => Term::Path(Box::new(term(*t, next)), path_(path, next)),
    }
}

/// Whether `t` calls no filter: `.`, numbers, variables, plain strings and paths made
/// of those (`.metadata.name`), which are most arguments.
fn is_plain(t: &Term<&str>) -> bool {
    match t {
        Term::Id | Term::Num(_) | Term::Var(_) => true,
        Term::Str(None, parts) => parts.iter().all(|p| !matches!(p, StrPart::Term(_))),
        Term::Path(base, path) => {
            is_plain(base)
                && path.0.iter().all(|(part, _)| match part {
                    Part::Index(i) => is_plain(i),
                    Part::Range(from, upto) => {
                        from.as_ref().is_none_or(is_plain) && upto.as_ref().is_none_or(is_plain)
                    }
                })
        }
        _ => false,
    }
}

fn pattern_(pattern: Pattern<&str>, depth: usize) -> Pattern<&str> {
    match pattern {
        Pattern::Var(_) => pattern,
        Pattern::Arr(items) => {
            Pattern::Arr(items.into_iter().map(|p| pattern_(p, depth + 1)).collect())
        }
        Pattern::Obj(entries) => Pattern::Obj(
            entries
                .into_iter()
                .map(|(k, p)| (inner(k, depth + 1), pattern_(p, depth + 1)))
                .collect(),
        ),
    }
}

fn path_(path: Path<Term<&str>>, depth: usize) -> Path<Term<&str>> {
    Path(
        path.0
            .into_iter()
            .map(|(part, opt)| {
                let part = match part {
                    Part::Index(i) => Part::Index(inner(i, depth + 1)),
                    Part::Range(from, upto) => Part::Range(
                        from.map(|t| term(t, depth + 1)),
                        upto.map(|t| term(t, depth + 1)),
                    ),
                };
                (part, opt)
            })
            .collect(),
    )
}
