//! jq filters (jaq), compiled once and cached.
//!
//! Hooks name jq filters in their bindings (`jqFilter`) and in `JQPatch` operations. The
//! same few filters run on every event, and compiling one costs about fifty times more
//! than running it, so [`compile`] keeps a process-wide, bounded cache keyed by the
//! filter text and hands out cheap clones of the compiled filter.
//!
//! The jq standard library of jaq (`jaq-core`, `jaq-std`, `jaq-json` definitions) is
//! available, except `env`: the engine's environment holds credentials that a filter,
//! whose results are passed to sandboxed guests, must never see.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Ctx, Vars, data::JustLut};
use jaq_json::{Num, Val};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// How many compiled filters the process keeps; a hook set rarely has more than a few
/// dozen distinct filters, so this only bounds filters generated on the fly.
const CACHE_CAPACITY: usize = 1024;

/// A filter yielding more values than this is treated as runaway (`repeat`, `range(1e9)`)
/// rather than collected until memory runs out.
const MAX_OUTPUTS: usize = 100_000;

/// Filter text longer than this is shortened in error messages.
const MAX_TEXT_IN_ERRORS: usize = 80;

/// Native filters that are not offered to hook authors.
const EXCLUDED_NATIVES: &[&str] = &["env"];

type Compiled = jaq_core::Filter<JustLut<Val>>;

/// Why a jq filter could not be compiled or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JqError {
    /// The filter does not parse, or calls something that is not defined.
    #[error("jq filter {filter:?}: {message} at line {line}, column {column}")]
    Compile {
        /// The filter text (shortened when long).
        filter: String,
        /// The line of the first problem, from 1.
        line: usize,
        /// The column of the first problem, in characters, from 1.
        column: usize,
        /// What is wrong (every problem found, separated by `; `).
        message: String,
    },
    /// Running the filter raised an error (`error(...)`, a type error, `halt`...).
    #[error("jq filter {filter:?} failed: {message}")]
    Runtime {
        /// The filter text (shortened when long).
        filter: String,
        /// The jq error.
        message: String,
    },
    /// An output cannot be expressed as JSON (an object key that is not a string).
    #[error("jq filter {filter:?} produced a value that is not JSON: {reason}")]
    NotJson {
        /// The filter text (shortened when long).
        filter: String,
        /// Why.
        reason: String,
    },
    /// The filter yielded more outputs than a run may collect.
    #[error("jq filter {filter:?} yielded more than {limit} outputs")]
    TooManyOutputs {
        /// The filter text (shortened when long).
        filter: String,
        /// The limit.
        limit: usize,
    },
    /// [`Filter::run_one`] got no output or several.
    #[error("jq filter {filter:?} yielded {count} outputs, expected exactly one")]
    NotOneOutput {
        /// The filter text (shortened when long).
        filter: String,
        /// How many outputs it yielded.
        count: usize,
    },
}

/// A compiled jq filter. Clones share the compiled program.
#[derive(Clone)]
pub struct Filter {
    /// Shared so the cache and every binding using the same text hold one program.
    inner: Arc<Inner>,
}

struct Inner {
    /// The source, kept for error messages.
    text: String,
    compiled: Compiled,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Filter").field(&self.inner.text).finish()
    }
}

impl Filter {
    /// The filter's source text.
    pub fn text(&self) -> &str {
        &self.inner.text
    }

    /// Runs the filter on `input` and returns every output, in order. A runtime error
    /// anywhere fails the whole run, as in `jq`.
    pub fn run(&self, input: &Value) -> Result<Vec<Value>, JqError> {
        let compiled = &self.inner.compiled;
        let ctx = Ctx::<JustLut<Val>>::new(&compiled.lut, Vars::new([]));
        let mut outputs = Vec::new();
        for output in compiled.id.run((ctx, to_val(input))) {
            let value = output.map_err(|exn| self.runtime_error(exn))?;
            if outputs.len() == MAX_OUTPUTS {
                return Err(JqError::TooManyOutputs {
                    filter: self.short_text(),
                    limit: MAX_OUTPUTS,
                });
            }
            outputs.push(from_val(&value).map_err(|reason| JqError::NotJson {
                filter: self.short_text(),
                reason,
            })?);
        }
        Ok(outputs)
    }

    /// Runs the filter and requires exactly one output.
    pub fn run_one(&self, input: &Value) -> Result<Value, JqError> {
        let mut outputs = self.run(input)?;
        match outputs.pop() {
            Some(value) if outputs.is_empty() => Ok(value),
            last => Err(JqError::NotOneOutput {
                filter: self.short_text(),
                count: outputs.len() + usize::from(last.is_some()),
            }),
        }
    }

    fn runtime_error(&self, exn: jaq_core::Exn<'_, Val>) -> JqError {
        // `halt` must not end the process (jaq's `unwrap_valr` would exit): it only
        // ends this run, as an error.
        let message = match exn.get_err() {
            Ok(error) => error.to_string(),
            Err(exn) => match exn.get_halt() {
                Ok(code) => format!("halted with exit code {code}"),
                Err(_) => "unexpected control flow (break outside its label)".to_owned(),
            },
        };
        JqError::Runtime {
            filter: self.short_text(),
            message,
        }
    }

    fn short_text(&self) -> String {
        shorten(&self.inner.text)
    }
}

/// Compiles `text`, or returns the filter compiled earlier from the same text.
pub fn compile(text: &str) -> Result<Filter, JqError> {
    if let Some(filter) = lock_cache().get(text) {
        return Ok(filter);
    }
    // Compiled outside the lock so a slow compile never blocks running hooks; two
    // threads racing on the same new text both compile, and the first insert wins.
    let filter = compile_uncached(text)?;
    Ok(lock_cache().insert(filter))
}

/// Compiles `text` without looking at or filling the cache.
pub fn compile_uncached(text: &str) -> Result<Filter, JqError> {
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(|(name, ..)| !EXCLUDED_NATIVES.contains(name));
    let arena = Arena::default();
    let loader = Loader::new(defs);
    let modules = loader
        .load(
            &arena,
            File {
                code: text,
                path: (),
            },
        )
        .map_err(|errors| {
            let mut problems = Vec::new();
            for (_, error) in errors {
                match error {
                    jaq_core::load::Error::Io(items) => {
                        for (path, message) in items {
                            problems
                                .push((path, format!("cannot load module {path:?}: {message}")));
                        }
                    }
                    jaq_core::load::Error::Lex(items) => {
                        for (expected, found) in items {
                            problems.push((found, format!("expected {}", expected.as_str())));
                        }
                    }
                    jaq_core::load::Error::Parse(items) => {
                        for (expected, found) in items {
                            let found_text = if found.is_empty() {
                                "end of input".to_owned()
                            } else {
                                format!("{found:?}")
                            };
                            problems.push((
                                found,
                                format!("expected {}, found {found_text}", expected.as_str()),
                            ));
                        }
                    }
                }
            }
            compile_error(text, problems)
        })?;
    let compiled = jaq_core::Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errors| {
            let problems = errors
                .into_iter()
                .flat_map(|(_, items)| items)
                .map(|(name, undefined)| (name, format!("undefined {} {name}", undefined.as_str())))
                .collect();
            compile_error(text, problems)
        })?;
    Ok(Filter {
        inner: Arc::new(Inner {
            text: text.to_owned(),
            compiled,
        }),
    })
}

/// Builds the error for `problems`, each a slice of the source (or of the standard
/// library, which has no position in the user's text) and a message.
fn compile_error(text: &str, problems: Vec<(&str, String)>) -> JqError {
    let offset = problems
        .first()
        .and_then(|(at, _)| offset_in(text, at))
        .unwrap_or(0);
    let (line, column) = line_column(text, offset);
    let message = if problems.is_empty() {
        "does not compile".to_owned()
    } else {
        problems
            .into_iter()
            .map(|(_, message)| message)
            .collect::<Vec<_>>()
            .join("; ")
    };
    JqError::Compile {
        filter: shorten(text),
        line,
        column,
        message,
    }
}

/// The byte offset of `part` in `whole`, when `part` is a slice of it.
fn offset_in(whole: &str, part: &str) -> Option<usize> {
    let start = whole.as_ptr() as usize;
    let at = part.as_ptr() as usize;
    (at >= start && at + part.len() <= start + whole.len()).then(|| at - start)
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn shorten(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_TEXT_IN_ERRORS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The process-wide cache of compiled filters, least recently used evicted first.
#[derive(Default)]
struct FilterCache {
    /// Each filter with the tick of its last use.
    filters: HashMap<String, (Filter, u64)>,
    /// A counter standing in for time, to order uses.
    tick: u64,
}

impl FilterCache {
    fn get(&mut self, text: &str) -> Option<Filter> {
        self.tick += 1;
        let tick = self.tick;
        self.filters.get_mut(text).map(|(filter, used)| {
            *used = tick;
            filter.clone()
        })
    }

    fn insert(&mut self, filter: Filter) -> Filter {
        self.tick += 1;
        if let Some((existing, used)) = self.filters.get_mut(filter.text()) {
            *used = self.tick;
            return existing.clone();
        }
        if self.filters.len() >= CACHE_CAPACITY {
            // A linear scan is fine: it happens only on a miss with a full cache.
            let oldest = self
                .filters
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(text, _)| text.clone());
            if let Some(oldest) = oldest {
                self.filters.remove(&oldest);
            }
        }
        self.filters
            .insert(filter.text().to_owned(), (filter.clone(), self.tick));
        filter
    }
}

static CACHE: LazyLock<Mutex<FilterCache>> = LazyLock::new(Mutex::default);

fn lock_cache() -> std::sync::MutexGuard<'static, FilterCache> {
    // The cache holds no invariant a panicking thread could break halfway.
    CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn to_val(value: &Value) -> Val {
    match value {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Val::Num(Num::from_integral(i))
            } else if let Some(u) = n.as_u64() {
                Val::Num(Num::from_integral(u))
            } else {
                Val::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => Val::from(s.clone()),
        Value::Array(items) => items.iter().map(to_val).collect(),
        Value::Object(map) => Val::obj(
            map.iter()
                .map(|(k, v)| (Val::from(k.clone()), to_val(v)))
                .collect(),
        ),
    }
}

fn from_val(value: &Val) -> Result<Value, String> {
    Ok(match value {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(n) => from_num(n),
        Val::TStr(bytes) | Val::BStr(bytes) => {
            Value::String(String::from_utf8_lossy(bytes).into_owned())
        }
        Val::Arr(items) => Value::Array(items.iter().map(from_val).collect::<Result<_, _>>()?),
        Val::Obj(map) => {
            let mut object = serde_json::Map::with_capacity(map.len());
            for (key, value) in map.iter() {
                let key = match key {
                    Val::TStr(bytes) | Val::BStr(bytes) => {
                        String::from_utf8_lossy(bytes).into_owned()
                    }
                    other => return Err(format!("object key {other} is not a string")),
                };
                object.insert(key, from_val(value)?);
            }
            Value::Object(object)
        }
    })
}

fn from_num(n: &Num) -> Value {
    match n {
        Num::Int(i) => Value::from(*i as i64),
        Num::Float(f) => from_f64(*f),
        // Big integers and decimal literals: exact when they fit, else as jq does,
        // through a double.
        Num::BigInt(_) | Num::Dec(_) => {
            let text = n.to_string();
            if let Ok(i) = text.parse::<i64>() {
                Value::from(i)
            } else if let Ok(u) = text.parse::<u64>() {
                Value::from(u)
            } else {
                from_f64(text.parse::<f64>().unwrap_or(f64::NAN))
            }
        }
    }
}

/// jq prints integral doubles without a fraction (so `.replicas * 1.0` stays an integer
/// field for Kubernetes), NaN as `null` and infinities as the largest double.
fn from_f64(f: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if f.is_nan() {
        Value::Null
    } else if f.is_infinite() {
        Value::from(if f > 0.0 { f64::MAX } else { f64::MIN })
    } else if f.fract() == 0.0 && f.abs() <= EXACT {
        Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web", "tier": "front"}},
            "spec": {"containers": [{"name": "a", "image": "nginx:1"}, {"name": "b", "image": "envoy:2"}]},
            "status": {"phase": "Running"}
        })
    }

    fn one(filter: &str, input: &Value) -> Value {
        compile(filter)
            .and_then(|f| f.run_one(input))
            .unwrap_or_else(|e| panic!("{filter}: {e}"))
    }

    #[test]
    fn compiled_filters_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Filter>();
    }

    #[test]
    fn compile_error_names_position_and_problem() {
        let err = compile(".metadata |\n  map(.name").unwrap_err();
        let JqError::Compile {
            line,
            column,
            message,
            ..
        } = &err
        else {
            panic!("expected a compile error, got {err:?}");
        };
        assert_eq!(*line, 2);
        assert!(*column >= 3, "column {column}");
        assert!(message.contains("expected"), "{message}");
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn compile_error_names_undefined_filter() {
        let err = compile(".a | nosuchfilter(1)").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("undefined filter nosuchfilter"), "{text}");
        assert!(text.contains("column 6"), "{text}");
    }

    #[test]
    fn env_is_not_available() {
        assert!(matches!(compile("env"), Err(JqError::Compile { .. })));
        assert!(matches!(compile("$ENV"), Err(JqError::Compile { .. })));
    }

    #[test]
    fn cache_returns_the_same_compiled_filter() {
        let a = compile(".metadata.name | ascii_downcase").unwrap();
        let b = compile(".metadata.name | ascii_downcase").unwrap();
        assert!(Arc::ptr_eq(&a.inner, &b.inner));
        let c = compile_uncached(".metadata.name | ascii_downcase").unwrap();
        assert!(!Arc::ptr_eq(&a.inner, &c.inner));
    }

    #[test]
    fn cache_is_bounded_and_evicts_least_recently_used() {
        let mut cache = FilterCache::default();
        let first = cache.insert(compile_uncached(".first").unwrap());
        for i in 0..CACHE_CAPACITY - 1 {
            cache.insert(compile_uncached(&format!(".a{i}")).unwrap());
        }
        assert!(cache.get(".first").is_some());
        cache.insert(compile_uncached(".new").unwrap());
        assert_eq!(cache.filters.len(), CACHE_CAPACITY);
        let still = cache.get(".first").expect("recently used filter kept");
        assert!(Arc::ptr_eq(&first.inner, &still.inner));
        assert!(cache.get(".a0").is_none(), "least recently used evicted");
    }

    #[test]
    fn multiple_outputs_in_order() {
        let f = compile(".spec.containers[] | .name").unwrap();
        assert_eq!(f.run(&pod()).unwrap(), vec![json!("a"), json!("b")]);
        assert_eq!(
            compile("empty").unwrap().run(&pod()).unwrap(),
            Vec::<Value>::new()
        );
    }

    #[test]
    fn run_one_names_the_count() {
        let err = compile(".spec.containers[]")
            .unwrap()
            .run_one(&pod())
            .unwrap_err();
        assert!(
            matches!(err, JqError::NotOneOutput { count: 2, .. }),
            "{err:?}"
        );
        let err = compile("empty").unwrap().run_one(&pod()).unwrap_err();
        assert!(
            matches!(err, JqError::NotOneOutput { count: 0, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("0 outputs"), "{err}");
    }

    #[test]
    fn runtime_errors_are_errors() {
        let err = compile(".metadata.name + 1")
            .unwrap()
            .run(&pod())
            .unwrap_err();
        assert!(matches!(err, JqError::Runtime { .. }), "{err:?}");
        let err = compile(r#"error("boom")"#)
            .unwrap()
            .run(&pod())
            .unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        // An error after a first output still fails the run.
        let err = compile(r#"1, error("late")"#)
            .unwrap()
            .run(&pod())
            .unwrap_err();
        assert!(err.to_string().contains("late"), "{err}");
    }

    #[test]
    fn halt_ends_the_run_not_the_process() {
        let err = compile("halt").unwrap().run(&pod()).unwrap_err();
        assert!(err.to_string().contains("halted"), "{err}");
    }

    #[test]
    fn runaway_filters_are_cut_off() {
        let err = compile("repeat(1)").unwrap().run(&Value::Null).unwrap_err();
        assert!(matches!(err, JqError::TooManyOutputs { .. }), "{err:?}");
    }

    #[test]
    fn shell_operator_style_filters() {
        let pod = pod();
        assert_eq!(
            one(".metadata.labels", &pod),
            json!({"app": "web", "tier": "front"})
        );
        assert_eq!(
            one("{name: .metadata.name, labels: .metadata.labels}", &pod),
            json!({"name": "web-1", "labels": {"app": "web", "tier": "front"}})
        );
        assert_eq!(
            one(".spec.containers | map(.image)", &pod),
            json!(["nginx:1", "envoy:2"])
        );
        let relabelled = one(r#".metadata.labels["app"] = "x""#, &pod);
        assert_eq!(relabelled["metadata"]["labels"]["app"], json!("x"));
        assert_eq!(relabelled["spec"], pod["spec"]);
        let without_status = one("del(.status)", &pod);
        assert!(without_status.get("status").is_none());
        assert_eq!(without_status["metadata"], pod["metadata"]);
    }

    #[test]
    fn standard_library_functions() {
        let pod = pod();
        assert_eq!(
            one(".metadata.labels | to_entries | map(.key)", &pod),
            json!(["app", "tier"])
        );
        assert_eq!(one(r#".metadata | has("labels")"#, &pod), json!(true));
        assert_eq!(
            one(
                r#"[.spec.containers[] | select(.image | startswith("nginx")) | .name]"#,
                &pod
            ),
            json!(["a"])
        );
        assert_eq!(
            one(
                r#".metadata.name | split("-") | join("_") | ascii_upcase"#,
                &pod
            ),
            json!("WEB_1")
        );
        assert_eq!(
            one(r#".metadata.name | test("^web-[0-9]+$")"#, &pod),
            json!(true)
        );
        assert_eq!(one(".spec.containers | length", &pod), json!(2));
        assert_eq!(
            one("[.spec.containers[].name] | sort | first", &pod),
            json!("a")
        );
        assert_eq!(one(".metadata.missing // \"none\"", &pod), json!("none"));
        assert_eq!(
            one("keys", &pod),
            json!(["apiVersion", "kind", "metadata", "spec", "status"])
        );
    }

    #[test]
    fn numbers_round_trip_like_jq() {
        let input =
            json!({"replicas": 3, "big": 18446744073709551615u64, "ratio": 0.25, "neg": -7});
        assert_eq!(one(".", &input), input);
        assert_eq!(one(".replicas * 1.0", &input), json!(3));
        assert_eq!(one(".replicas + 1", &input), json!(4));
        assert_eq!(one(".ratio * 2", &input), json!(0.5));
        assert_eq!(one("nan", &input), Value::Null);
    }

    #[test]
    fn non_string_keys_are_not_json() {
        // jaq allows any key type; JSON does not.
        let result = compile("{(1): 2}").map(|f| f.run(&Value::Null));
        match result {
            Ok(Err(JqError::NotJson { .. })) | Ok(Err(JqError::Runtime { .. })) | Err(_) => {}
            other => panic!("expected an error, got {other:?}"),
        }
    }
}
