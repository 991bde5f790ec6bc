//! What Operon adds to jaq's definitions so that filters behave as in jq: the update
//! operators rewritten to jq's path-based definitions, and the definitions themselves.
//!
//! jaq compiles `l = r`, `l |= r`, `l += r`... to its own in-place updates, which have
//! no hook to change. jq defines them by the paths of `l` instead, and so does gojq,
//! which shell-operator runs; [`rewrite`] turns each into a call of such a definition
//! (`_assign`, `_modify`), and [`DEFS`] defines them on [`super::paths`]'s natives.
//! Definitions that jaq writes with its update operators (`del`, `map_values`,
//! `walk`...) are defined again here, after jaq's, so user filters get these.
//!
//! [`DEFS`] also gives jq's behaviour where jaq's standard library differs in ways
//! hooks meet: numbers in strings (`"\(.a / 2)"` is `"1"`, not `"1.0"`), `join` and
//! `ltrimstr` on other values than strings, `@csv` and `@tsv`, `todate` of a fraction.

use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Def, Pattern, Term};
use jaq_core::path::{Part, Path};

/// jq's definitions, written for jaq, that replace jaq's own. They follow gojq
/// (shell-operator's jq) where jq versions differ: `from_entries` accepts `key`, `Key`,
/// `name` or `Name` and `value` or `Value`; `walk` applies `f` to children first.
pub(super) const DEFS: &str = r#"
def _modify(paths; update): _modify_paths([path(paths)]; update);
def _assign(paths; $value): _modify_paths([path(paths)]; $value);
def setpath($path; $value): _setpath($path; $value);
def delpaths($paths): _delpaths($paths);
def del(f): _delpaths([path(f)]);
def map_values(f): _modify(.[]; f);
def walk(f):
  def w: if type == "array" then map(w) elif type == "object" then map_values(w) end | f;
  w;
def from_entries:
  map({(.key // .Key // .name // .Name): (if has("value") then .value else .Value end)})
  | add // {};
def with_entries(f): to_entries | map(f) | from_entries;
def _jaq_path(f): path(f);
def _jaq_ltrimstr($s): ltrimstr($s);
def _jaq_rtrimstr($s): rtrimstr($s);
def _jaq_todateiso8601: todateiso8601;
def ltrimstr($s): if type == "string" and ($s | type) == "string" then _jaq_ltrimstr($s) end;
def rtrimstr($s): if type == "string" and ($s | type) == "string" then _jaq_rtrimstr($s) end;
def tostring: _tostring;
def tojson: _tojson;
def @text: _tostring;
def @json: _tojson;
def join($sep):
  [.[] | if . == null then "" elif type == "string" then . else _tojson end]
  | if length == 0 then "" else reduce .[1:][] as $s (.[0]; . + $sep + $s) end;
def _row(name; separator; quote):
  if type != "array" then error("\(type) (\(_tojson)) cannot be \(name)-formatted, only an array can be") end
  | map(
      if type == "string" then quote
      elif type == "number" or type == "boolean" then _tojson
      elif . == null then ""
      else error("\(type) (\(_tojson)) is not valid in a \(name) row") end)
  | join(separator);
def @csv: _row("csv"; ","; "\"" + (split("\"") | join("\"\"")) + "\"");
def @tsv:
  _row("tsv"; "\t";
    split("\\") | join("\\\\") | split("\t") | join("\\t")
    | split("\n") | join("\\n") | split("\r") | join("\\r"));
def todateiso8601: if type == "number" then floor end | _jaq_todateiso8601;
def todate: todateiso8601;
def path(f): _jaq_path(f) | _full_slices;
"#;

/// The variable that holds the right-hand side of `l op= r` while `l` is updated; only
/// the update `. op $x` sees it, and no filter has a reason to name it.
const RHS: &str = "$__operon_rhs";

/// Rewrites every assignment operator in `term` into the call jq defines it as:
/// `l = r` is `_assign(l; r)`, `l |= r` is `_modify(l; r)`, `l op= r` is
/// `r as $x | _modify(l; . op $x)`, and `l //= r` is `r as $x | _modify(l; . // $x)`.
pub(super) fn rewrite<'s>(term: Term<&'s str>) -> Term<&'s str> {
    let boxed = |t: Box<Term<&'s str>>| Box::new(rewrite(*t));
    match term {
        Term::BinOp(l, op, r) => {
            let (l, r) = (rewrite(*l), rewrite(*r));
            match op {
                BinaryOp::Assign => Term::Call("_assign", vec![l, r]),
                BinaryOp::Update => Term::Call("_modify", vec![l, r]),
                BinaryOp::UpdateMath(op) => with_rhs(l, BinaryOp::Math(op), r),
                BinaryOp::UpdateAlt => with_rhs(l, BinaryOp::Alt, r),
                BinaryOp::Pipe(pattern) => Term::BinOp(
                    Box::new(l),
                    BinaryOp::Pipe(pattern.map(rewrite_pattern)),
                    Box::new(r),
                ),
                op => Term::BinOp(Box::new(l), op, Box::new(r)),
            }
        }
        Term::Id | Term::Recurse | Term::Num(_) | Term::Break(_) | Term::Var(_) => term,
        Term::Str(format, parts) => {
            // Without a format (`@base64 "..."`), jaq prints interpolated values its
            // own way (`2.0`); jq's way is `_tostring`.
            let plain = format.is_none();
            let part = |part| match part {
                StrPart::Term(t) if plain => StrPart::Term(Term::BinOp(
                    Box::new(rewrite(t)),
                    BinaryOp::Pipe(None),
                    Box::new(Term::Call("_tostring", Vec::new())),
                )),
                StrPart::Term(t) => StrPart::Term(rewrite(t)),
                other => other,
            };
            Term::Str(format, parts.into_iter().map(part).collect())
        }
        Term::Arr(items) => Term::Arr(items.map(boxed)),
        Term::Obj(entries) => Term::Obj(
            entries
                .into_iter()
                .map(|(k, v)| (rewrite(k), v.map(rewrite)))
                .collect(),
        ),
        Term::Neg(t) => Term::Neg(boxed(t)),
        Term::Label(name, t) => Term::Label(name, boxed(t)),
        Term::Fold(kind, xs, pattern, args) => Term::Fold(
            kind,
            boxed(xs),
            rewrite_pattern(pattern),
            args.into_iter().map(rewrite).collect(),
        ),
        Term::TryCatch(t, catch) => Term::TryCatch(boxed(t), catch.map(boxed)),
        Term::IfThenElse(branches, otherwise) => Term::IfThenElse(
            branches
                .into_iter()
                .map(|(cond, then)| (rewrite(cond), rewrite(then)))
                .collect(),
            otherwise.map(boxed),
        ),
        Term::Def(defs, t) => Term::Def(defs.into_iter().map(rewrite_def).collect(), boxed(t)),
        Term::Call(name, args) => Term::Call(name, args.into_iter().map(rewrite).collect()),
        Term::Path(t, path) => Term::Path(boxed(t), rewrite_path(path)),
    }
}

/// `r as $x | _modify(l; . op $x)`: the right-hand side runs on the input, once.
fn with_rhs<'s>(l: Term<&'s str>, op: BinaryOp<&'s str>, r: Term<&'s str>) -> Term<&'s str> {
    let update = Term::BinOp(Box::new(Term::Id), op, Box::new(Term::Var(RHS)));
    Term::BinOp(
        Box::new(r),
        BinaryOp::Pipe(Some(Pattern::Var(RHS))),
        Box::new(Term::Call("_modify", vec![l, update])),
    )
}

/// Rewrites the body of a definition.
pub(super) fn rewrite_def(def: Def<&str>) -> Def<&str> {
    Def {
        name: def.name,
        args: def.args,
        body: rewrite(def.body),
    }
}

fn rewrite_pattern(pattern: Pattern<&str>) -> Pattern<&str> {
    match pattern {
        Pattern::Var(_) => pattern,
        Pattern::Arr(items) => Pattern::Arr(items.into_iter().map(rewrite_pattern).collect()),
        Pattern::Obj(entries) => Pattern::Obj(
            entries
                .into_iter()
                .map(|(k, p)| (rewrite(k), rewrite_pattern(p)))
                .collect(),
        ),
    }
}

fn rewrite_path(path: Path<Term<&str>>) -> Path<Term<&str>> {
    Path(
        path.0
            .into_iter()
            .map(|(part, opt)| {
                let part = match part {
                    Part::Index(i) => Part::Index(rewrite(i)),
                    Part::Range(from, upto) => Part::Range(from.map(rewrite), upto.map(rewrite)),
                };
                (part, opt)
            })
            .collect(),
    )
}
