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
//!
//! Assignments, updates and deletions follow jq's path semantics rather than jaq's
//! (`.metadata.labels.x = "y"` creates `labels`, `del` of a missing path is a no-op):
//! `prelude` rewrites the operators into jq's definitions and `paths` implements
//! `setpath`, `delpaths` and the update loop. jq's outputs for a table of filters are in
//! `engine/tests/it/jq_compat.rs`, with the differences that remain.
//!
//! A filter is untrusted input, so every run is bounded (`budget`): by default it may
//! take 1 s ([`Limits::time`]) and 16 MiB of stack for its recursion ([`Limits::stack`];
//! a run that needs more than the calling thread has is run again on a stack of its
//! own), build values nested at most 512 levels and arrays of at most 2^20 elements,
//! call a recursive definition with filter parameters at most 20,000 times, build at
//! most [`DEFAULT_MEMORY`] bytes of values with the operations and natives that grow
//! them ([`Limits::memory`]: `+`, `*`, `/` of strings, interpolation, `[f]`, `{...}`,
//! `tostring`, `tojson`, `implode`, the `@` formats...), and yield at most 100,000
//! outputs; its text may be at most 16 KiB long. [`set_time_limit`] and
//! [`set_memory_limit`] change the time and memory limits of the process
//! (`--jq-timeout`, `--jq-memory`). Over a limit, the run fails with
//! [`JqError::Limit`], which names the filter and the limit, whatever `try` or `?` the
//! filter wraps around the loop; the process is never taken down. From async code,
//! [`Filter::run_in_task`] and [`Filter::run_one_in_task`] keep a long run off the
//! runtime's worker (`runtime`).
//!
//! This crate depends on nothing of Operon: it takes and gives JSON values, and knows
//! nothing of hooks, bindings or patches.

#![warn(unreachable_pub)]
mod budget;
mod field_path;
mod instrument;
mod memory;
mod paths;
mod prelude;
mod runtime;
mod value;

use budget::MAX_DEPTH;
pub use budget::{DEFAULT_MEMORY, Limit, Limits};

use jaq_core::load::parse::Def;
use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Ctx, Vars, data::JustLut};
use jaq_json::Val;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use value::{from_val, to_val};

/// How many compiled filters the process keeps; a hook set rarely has more than a few
/// dozen distinct filters, so this only bounds filters generated on the fly.
const CACHE_CAPACITY: usize = 1024;

/// A filter yielding more values than this is treated as runaway (`repeat`, `range(1e9)`)
/// rather than collected until memory runs out.
const MAX_OUTPUTS: usize = 100_000;

/// Filter text longer than this is shortened in error messages.
const MAX_TEXT_IN_ERRORS: usize = 80;

/// The name under which the user's filter joins the prelude as a definition.
const MAIN: &str = "_operon_main";

/// Native filters that are not offered to hook authors.
const EXCLUDED_NATIVES: &[&str] = &["env"];

/// The longest filter text accepted. Parsing and compiling recurse once per level of
/// nesting, on a stack of `COMPILE_STACK` bytes, which this bounds; a hook's filters
/// are a few hundred bytes.
pub(crate) const MAX_TEXT_BYTES: usize = 16 << 10;

/// The stack a filter is compiled on.
const COMPILE_STACK: usize = 256 << 20;

/// jaq natives kept under another name, so that definitions that check what they build
/// can take their name ([`PRE_DEFS`]).
const RENAMED_NATIVES: &[(&str, &str)] = &[
    ("fromjson", "_jaq_fromjson"),
    ("group_by", "_jaq_group_by"),
    ("key_values", "_jaq_key_values"),
    ("path_value", "_jaq_path_value"),
    // Replaced by the guarded `range` of `budget`.
    ("range", "_jaq_range"),
    // Natives that build a new string or array from their input, charged in
    // `PRE_DEFS` to the memory budget as they produce it.
    ("implode", "_jaq_implode"),
    ("explode", "_jaq_explode"),
    ("ascii_downcase", "_jaq_ascii_downcase"),
    ("ascii_upcase", "_jaq_ascii_upcase"),
    ("escape_html", "_jaq_escape_html"),
    ("unescape_html", "_jaq_unescape_html"),
    ("encode_uri", "_jaq_encode_uri"),
    ("decode_uri", "_jaq_decode_uri"),
    ("encode_base64", "_jaq_encode_base64"),
    ("decode_base64", "_jaq_decode_base64"),
    ("escape_sh", "_jaq_escape_sh"),
    ("strftime", "_jaq_strftime"),
    ("strflocaltime", "_jaq_strflocaltime"),
    ("indices", "_jaq_indices"),
    ("tobytes", "_jaq_tobytes"),
    ("matches", "_jaq_matches"),
    ("split_matches", "_jaq_split_matches"),
    ("split_", "_jaq_split_"),
];

/// Definitions loaded before jaq's, so that jaq's own definitions use them too: the
/// natives above whose outputs nest deeper than their inputs, with the nesting checked
/// (`fromjson` before jaq's recursive parser sees the text), and those that build a
/// new string or array, with what they built charged to the memory budget (`_grown`,
/// or `_built` for the regular expressions' arrays of match objects) before anything
/// else sees it (`@base64d`, `@html`, `@uri`, `@sh`... are defined on these). A global
/// regular expression (`g`: `gsub`, `scan`, `splits`...) may match at every character
/// and builds all its matches at once, so `_regex_room` first checks that the budget
/// has room for that many.
const PRE_DEFS: &str = r#"
def fromjson: _json_depth | _jaq_fromjson;
def group_by(f): _jaq_group_by(f) | _nest;
def key_values: _jaq_key_values | _nest;
def path_value(f): _jaq_path_value(f) | _nest;
def implode: _jaq_implode | _grown;
def explode: _jaq_explode | _grown;
def ascii_downcase: _jaq_ascii_downcase | _grown;
def ascii_upcase: _jaq_ascii_upcase | _grown;
def escape_html: _jaq_escape_html | _grown;
def unescape_html: _jaq_unescape_html | _grown;
def encode_uri: _jaq_encode_uri | _grown;
def decode_uri: _jaq_decode_uri | _grown;
def encode_base64: _jaq_encode_base64 | _grown;
def decode_base64: _jaq_decode_base64 | _grown;
def escape_sh: _jaq_escape_sh | _grown;
def strftime($format): _jaq_strftime($format) | _grown;
def strflocaltime($format): _jaq_strflocaltime($format) | _grown;
def indices($i): _jaq_indices($i) | _grown;
def tobytes: _jaq_tobytes | _grown;
def matches($re; $flags): _regex_room($flags) | _jaq_matches($re; $flags) | _built;
def split_matches($re; $flags):
  _regex_room($flags) | _jaq_split_matches($re; $flags) | _built;
def split_($re; $flags): _regex_room($flags) | _jaq_split_($re; $flags) | _built;
"#;

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
    /// A run or the filter's text went over one of the limits.
    #[error("jq filter {filter:?} {limit}")]
    Limit {
        /// The filter text (shortened when long).
        filter: String,
        /// The limit, with its value.
        limit: Limit,
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
    /// The fields read, when the filter only reads a chain of them (`field_path`).
    fields: Option<Vec<String>>,
    /// Whether a run from async code outlasted `runtime::ON_WORKER`: later ones then
    /// leave the runtime's worker at once.
    slow: AtomicBool,
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

    /// Runs the filter on `input` within the process's limits ([`configured_limits`])
    /// and returns every output, in order. A runtime error anywhere fails the whole
    /// run, as in `jq`.
    pub fn run(&self, input: &Value) -> Result<Vec<Value>, JqError> {
        self.run_within(input, &configured_limits())
    }

    /// [`Filter::run`] within `limits`.
    pub fn run_within(&self, input: &Value, limits: &Limits) -> Result<Vec<Value>, JqError> {
        if let Some(output) = self
            .inner
            .fields
            .as_deref()
            .and_then(|fields| field_path::read(fields, input))
        {
            return Ok(vec![output]);
        }
        self.run_jaq_within(input, limits)
    }

    /// [`Filter::run_within`] through jaq, whatever the filter.
    fn run_jaq_within(&self, input: &Value, limits: &Limits) -> Result<Vec<Value>, JqError> {
        match budget::within(limits, || self.run_unbounded(input)) {
            Ok(outputs) => outputs,
            Err(limit) => Err(self.limit_error(limit)),
        }
    }

    fn run_unbounded(&self, input: &Value) -> Result<Vec<Value>, JqError> {
        let compiled = &self.inner.compiled;
        let ctx = Ctx::<JustLut<Val>>::new(&compiled.lut, Vars::new([]));
        let input = to_val(input, MAX_DEPTH)
            .ok_or_else(|| self.limit_error(Limit::InputDepth(MAX_DEPTH)))?;
        let mut outputs = Vec::new();
        for output in compiled.id.run((ctx, input)) {
            let value = output.map_err(|exn| self.runtime_error(exn))?;
            if outputs.len() == MAX_OUTPUTS {
                return Err(JqError::TooManyOutputs {
                    filter: self.short_text(),
                    limit: MAX_OUTPUTS,
                });
            }
            outputs.push(
                from_val(&value, MAX_DEPTH).map_err(|reason| JqError::NotJson {
                    filter: self.short_text(),
                    reason,
                })?,
            );
        }
        Ok(outputs)
    }

    /// Runs the filter and requires exactly one output.
    pub fn run_one(&self, input: &Value) -> Result<Value, JqError> {
        self.run_one_within(input, &configured_limits())
    }

    /// [`Filter::run_one`] within `limits`.
    pub fn run_one_within(&self, input: &Value, limits: &Limits) -> Result<Value, JqError> {
        let mut outputs = self.run_within(input, limits)?;
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

    fn limit_error(&self, limit: Limit) -> JqError {
        JqError::Limit {
            filter: self.short_text(),
            limit,
        }
    }
}

/// The time limit set for the process ([`set_time_limit`]), in microseconds; 0 when
/// none was set.
static TIME_LIMIT_MICROS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The memory limit set for the process ([`set_memory_limit`]), in bytes; 0 when none
/// was set.
static MEMORY_LIMIT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the time limit of every later [`Filter::run`] and [`Filter::run_one`] in this
/// process (`operon serve --jq-timeout`, `OPERON_JQ_TIMEOUT`); [`Limits::default`]'s
/// 1 s until then.
pub fn set_time_limit(time: Duration) {
    let micros = u64::try_from(time.as_micros()).unwrap_or(u64::MAX).max(1);
    TIME_LIMIT_MICROS.store(micros, std::sync::atomic::Ordering::Relaxed);
}

/// Sets the memory limit ([`Limits::memory`]) of every later [`Filter::run`] and
/// [`Filter::run_one`] in this process (`operon serve --jq-memory`,
/// `OPERON_JQ_MEMORY`); [`DEFAULT_MEMORY`] until then.
pub fn set_memory_limit(bytes: usize) {
    MEMORY_LIMIT.store(bytes.max(1), std::sync::atomic::Ordering::Relaxed);
}

/// The limits [`Filter::run`] runs within: the defaults, with the process's time and
/// memory limits.
pub fn configured_limits() -> Limits {
    let mut limits = Limits::default();
    match TIME_LIMIT_MICROS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => {}
        micros => limits.time = Duration::from_micros(micros),
    }
    match MEMORY_LIMIT.load(std::sync::atomic::Ordering::Relaxed) {
        0 => {}
        bytes => limits.memory = bytes,
    }
    limits
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
    if text.len() > MAX_TEXT_BYTES {
        return Err(JqError::Limit {
            filter: shorten(text),
            limit: Limit::TextLength(MAX_TEXT_BYTES),
        });
    }
    stacker::grow(COMPILE_STACK, || compile_on_this_stack(text))
}

fn compile_on_this_stack(text: &str) -> Result<Filter, JqError> {
    // jaq keeps the modules it loads to itself, so the text is loaded once on its own,
    // which reports syntax errors at their positions, then parsed again as a term whose
    // assignments are rewritten (see `prelude`); the result joins the prelude as a
    // definition, and the program is a call of it.
    let arena = Arena::default();
    let main_file = |code| File { code, path: () };
    Loader::new([])
        .load(&arena, main_file(text))
        .map_err(|errors| load_error(text, errors))?;
    let term = jaq_core::load::parse(text, |parser| parser.term()).ok_or_else(|| {
        compile_error(
            text,
            vec![(text, "module directives are not supported".to_owned())],
        )
    })?;
    let main = instrument::def(Def {
        name: MAIN,
        args: Vec::new(),
        body: prelude::rewrite(term),
    });
    let parse_defs = |text| {
        jaq_core::load::parse(text, |parser| parser.defs())
            .expect("the prelude's definitions parse (a unit test compiles them)")
    };
    let defs = parse_defs(PRE_DEFS)
        .into_iter()
        .chain(jaq_core::defs())
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .chain(
            parse_defs(prelude::DEFS)
                .into_iter()
                .map(prelude::rewrite_def),
        )
        .map(instrument::def)
        .map(borrowed)
        .chain([main]);
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(|(name, ..)| !EXCLUDED_NATIVES.contains(name))
        .map(|(name, args, native)| {
            let renamed = RENAMED_NATIVES.iter().find(|(jaq, _)| *jaq == name);
            (renamed.map_or(name, |(_, ours)| ours), args, native)
        })
        .chain(paths::funs())
        .chain(value::funs())
        .chain(budget::funs())
        .chain(memory::funs());
    let modules = Loader::new(defs)
        .load(&arena, main_file(MAIN))
        .map_err(|errors| load_error(text, errors))?;
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
            fields: field_path::parse(text),
            slow: AtomicBool::new(false),
        }),
    })
}

/// A definition of the prelude, as one among definitions from the user's text.
fn borrowed<'s>(def: Def<&'static str>) -> Def<&'s str> {
    def
}

/// The error for what stopped `text` from loading.
fn load_error(text: &str, errors: jaq_core::load::Errors<&str, ()>) -> JqError {
    let mut problems = Vec::new();
    for (_, error) in errors {
        match error {
            jaq_core::load::Error::Io(items) => {
                for (path, message) in items {
                    problems.push((path, format!("cannot load module {path:?}: {message}")));
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

#[cfg(test)]
mod tests;
