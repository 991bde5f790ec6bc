//! What one run of a filter may spend: time, stack, value nesting and array length.
//!
//! jaq has no fuel: `last(range(1e18))` runs until the process is killed, and
//! `def f: [f]; f` recurses until the stack overflows, which aborts the whole process.
//! Every loop of jq passes through a recursive definition, a `reduce` or `foreach`, or a
//! generator native (`range`), so [`super::instrument`] puts a call of [`GUARD`] at the
//! start of every definition's body, of every `reduce`/`foreach` update and at every
//! [`GUARD_EVERY`] levels of a deeply nested filter, and `range` checks on every value.
//! The guard checks the run's deadline and how much stack is left, and stops the run
//! with jaq's uncatchable `halt` (a `try` cannot swallow it), recording which limit
//! was hit so that the run reports it by name.
//!
//! A definition with filter parameters that calls itself gets a guard that also counts
//! its calls ([`MAX_CLOSURE_CALLS`]): each call's closure holds its caller's, so even a
//! tail-recursive loop of it, which takes no stack, builds a chain that is freed
//! recursively at the end of the run.
//!
//! Values nested deeper than [`MAX_DEPTH`] are refused where they are built (arrays,
//! objects, assignments, `fromjson` and the natives that wrap their input), because
//! dropping, comparing or printing such a value recurses once per level, in code no
//! guard reaches. Arrays are collected by [`COLLECT`], which also bounds their length.
//!
//! The state is per thread: a run never leaves the thread that started it.

use super::paths::MAX_ARRAY_INDEX;
use jaq_core::box_iter::box_once;
use jaq_core::data::JustLut;
use jaq_core::native::{Fun, v};
use jaq_core::{Bind, Exn, Native, ValX};
use jaq_json::Val;
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The native called at every guarded point; the identity when within the limits.
pub(super) const GUARD: &str = "_guard";
/// The guard of definitions with filter parameters that call themselves, which also
/// counts their calls (see [`MAX_CLOSURE_CALLS`]).
pub(super) const CLOSURE_GUARD: &str = "_guard_closure";
/// The native that checks a value's nesting after it is built (objects).
pub(super) const NEST: &str = "_nest";
/// The native that builds an array (`[f]`) within the length and nesting limits.
pub(super) const COLLECT: &str = "_collect";

/// A guard call at least every this many levels of a filter's syntax tree, so that the
/// stack a deeply nested filter takes between two guards stays small.
pub(super) const GUARD_EVERY: usize = 16;

/// The deepest nesting of arrays and objects a filter may build or be given. Kubernetes
/// objects are a few dozen levels deep (Operon reads YAML up to 64); a value this deep
/// can still be dropped, compared and printed on any thread's stack.
pub(crate) const MAX_DEPTH: usize = 512;

/// The longest array a filter may build (`[range(1e9)]` would otherwise fill memory
/// before the time limit); the same bound as an index an assignment may pad to.
pub(crate) const MAX_ARRAY_LENGTH: usize = MAX_ARRAY_INDEX;

/// How many calls of a definition with filter parameters that calls itself a run may
/// make. Each call binds a closure over its caller's, so even a tail-recursive loop of
/// them builds a chain as long as the loop, which is freed recursively at the end.
pub(crate) const MAX_CLOSURE_CALLS: u32 = 20_000;

/// Closure calls a run makes on a thread's own stack before it is run again on a stack
/// of its own, where freeing [`MAX_CLOSURE_CALLS`] of them fits.
const CLOSURE_CALLS_ON_THREAD: u32 = 1_000;

/// Stack kept free below the limit: what runs between two guards (a native, a drop or
/// comparison of a value up to [`MAX_DEPTH`] deep, [`GUARD_EVERY`] levels of syntax)
/// must fit in it.
pub(super) const RED_ZONE: usize = 1 << 20;

/// How often the clock is read: every this many guard calls.
const CLOCK_EVERY: u32 = 64;

/// The exit code of the `halt` that ends a run over a limit; the limit itself is read
/// from the thread's state, so a filter calling `halt` with the same code is not
/// mistaken for one.
const HALT_CODE: i32 = -0x6a71;

/// The default of [`Limits::memory`]: far above what a hook's filter builds from the
/// objects it is given (a few times their size), far below a process's memory.
pub const DEFAULT_MEMORY: usize = 256 << 20;

/// The limits of one run of a filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time one run may take.
    pub time: Duration,
    /// Stack the evaluation may use. Recursion of jq definitions takes stack (a few
    /// kilobytes per level in an optimised build, more in a debug one).
    pub stack: usize,
    /// Bytes of values a run may build with the operations and natives that grow
    /// values (see `memory`: `+`, `*`, interpolation, `[f]`, `tostring`, `implode`...),
    /// added up over the run.
    pub memory: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            time: Duration::from_secs(1),
            stack: 16 << 20,
            memory: DEFAULT_MEMORY,
        }
    }
}

/// A limit a filter reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// It ran longer than this.
    Time(Duration),
    /// Its recursion needed more stack than this many bytes.
    Stack(usize),
    /// It built a value nested deeper than this many levels.
    Depth(usize),
    /// It built an array longer than this.
    ArrayLength(usize),
    /// Its input is nested deeper than this many levels.
    InputDepth(usize),
    /// Its text is longer than this many bytes.
    TextLength(usize),
    /// It called definitions with filter parameters recursively more than this.
    ClosureCalls(u32),
    /// It built values of more than this many bytes in all.
    Memory(usize),
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Time(time) => write!(f, "ran longer than its time limit of {time:?}"),
            Limit::Stack(bytes) => write!(
                f,
                "recursed deeper than its stack limit of {} MiB allows",
                bytes >> 20
            ),
            Limit::Depth(levels) => write!(
                f,
                "built a value nested deeper than the limit of {levels} levels"
            ),
            Limit::ArrayLength(length) => write!(
                f,
                "built an array longer than the limit of {length} elements"
            ),
            Limit::InputDepth(levels) => write!(
                f,
                "was given a value nested deeper than the limit of {levels} levels"
            ),
            Limit::TextLength(bytes) => write!(f, "is longer than the limit of {bytes} bytes"),
            Limit::ClosureCalls(calls) => write!(
                f,
                "called a recursive definition with filter parameters more than the limit of {calls} times"
            ),
            Limit::Memory(bytes) if bytes % (1 << 20) == 0 => write!(
                f,
                "built values of more than its memory limit of {} MiB",
                bytes >> 20
            ),
            Limit::Memory(bytes) => write!(
                f,
                "built values of more than its memory limit of {bytes} bytes"
            ),
        }
    }
}

thread_local! {
    static STATE: State = const { State::idle() };
}

/// The budget of the run on this thread.
struct State {
    /// When the run must end; `None` when no run is under way.
    deadline: Cell<Option<Instant>>,
    /// The time limit, for the report.
    time: Cell<Duration>,
    /// Remaining stack, in bytes, below which the run stops.
    floor: Cell<usize>,
    /// Whether [`State::floor`] is the stack budget (else the end of a thread's stack
    /// that has less room than the budget: the run is tried again on a stack of its own).
    floor_is_budget: Cell<bool>,
    /// The stack budget, for the report.
    stack: Cell<usize>,
    /// Calls of recursive definitions with filter parameters so far.
    closure_calls: Cell<u32>,
    /// Bytes the run may still build ([`Limits::memory`]).
    memory_left: Cell<usize>,
    /// The memory budget, for the report.
    memory: Cell<usize>,
    /// Guard calls left before the clock is read again.
    countdown: Cell<u32>,
    /// The limit reached, once one is; every later guard fails too.
    tripped: Cell<Option<Limit>>,
}

impl State {
    const fn idle() -> Self {
        Self {
            deadline: Cell::new(None),
            time: Cell::new(Duration::ZERO),
            floor: Cell::new(0),
            floor_is_budget: Cell::new(true),
            stack: Cell::new(0),
            closure_calls: Cell::new(0),
            memory_left: Cell::new(usize::MAX),
            memory: Cell::new(usize::MAX),
            countdown: Cell::new(0),
            tripped: Cell::new(None),
        }
    }
}

/// How a run on this thread's stack ended, with respect to the limits.
pub(super) enum Outcome<T> {
    /// Within the limits (the result may still be a jq error).
    Done(T),
    /// Over a limit.
    Over(Limit),
    /// Out of this thread's stack before the budget: try again on a stack of its own.
    NeedsStack,
}

/// Runs `run` within `limits`, on this thread's stack when it has room for the whole
/// stack budget, else on a stack of its own when the run needs more than it has.
pub(super) fn within<T>(limits: &Limits, run: impl Fn() -> T) -> Result<T, Limit> {
    let deadline = Instant::now() + limits.time;
    match attempt(limits, deadline, &run) {
        Outcome::Done(value) => Ok(value),
        Outcome::Over(limit) => Err(limit),
        Outcome::NeedsStack => {
            // Filters are pure, so running one again gives the same outputs; the
            // deadline stays the first attempt's.
            match stacker::grow(limits.stack + 2 * RED_ZONE, || {
                attempt(limits, deadline, &run)
            }) {
                Outcome::Done(value) => Ok(value),
                Outcome::Over(limit) => Err(limit),
                Outcome::NeedsStack => Err(Limit::Stack(limits.stack)),
            }
        }
    }
}

fn attempt<T>(limits: &Limits, deadline: Instant, run: &impl Fn() -> T) -> Outcome<T> {
    let remaining = stacker::remaining_stack().unwrap_or(0);
    let (floor, floor_is_budget) = match remaining.checked_sub(limits.stack) {
        Some(floor) if floor >= RED_ZONE => (floor, true),
        _ => (RED_ZONE, false),
    };
    // A run inside a run (a native calling back into the engine) keeps the outer budget
    // afterwards.
    let saved = STATE.with(|s| {
        (
            s.deadline.replace(Some(deadline)),
            s.time.replace(limits.time),
            s.floor.replace(floor),
            s.floor_is_budget.replace(floor_is_budget),
            s.stack.replace(limits.stack),
            s.closure_calls.replace(0),
            s.memory_left.replace(limits.memory),
            s.memory.replace(limits.memory),
            s.countdown.replace(0),
            s.tripped.replace(None),
        )
    });
    let result = run();
    STATE.with(|s| {
        let tripped = s.tripped.get();
        let is_budget = s.floor_is_budget.get();
        s.deadline.set(saved.0);
        s.time.set(saved.1);
        s.floor.set(saved.2);
        s.floor_is_budget.set(saved.3);
        s.stack.set(saved.4);
        s.closure_calls.set(saved.5);
        s.memory_left.set(saved.6);
        s.memory.set(saved.7);
        s.countdown.set(saved.8);
        s.tripped.set(saved.9);
        match tripped {
            None => Outcome::Done(result),
            Some(Limit::Stack(_)) if !is_budget => Outcome::NeedsStack,
            Some(limit) => Outcome::Over(limit),
        }
    })
}

/// Whether the run on this thread has reached a limit (then it must stop).
pub(super) fn check() -> bool {
    STATE.with(|s| {
        if s.tripped.get().is_some() {
            return false;
        }
        let Some(deadline) = s.deadline.get() else {
            return true;
        };
        if stacker::remaining_stack().is_some_and(|left| left < s.floor.get()) {
            s.tripped.set(Some(Limit::Stack(s.stack.get())));
            return false;
        }
        let countdown = s.countdown.get();
        if countdown > 0 {
            s.countdown.set(countdown - 1);
            return true;
        }
        s.countdown.set(CLOCK_EVERY);
        if Instant::now() >= deadline {
            s.tripped.set(Some(Limit::Time(s.time.get())));
            return false;
        }
        true
    })
}

/// [`check`], counting a call of a recursive definition with filter parameters.
fn check_closure_call() -> bool {
    if !check() {
        return false;
    }
    STATE.with(|s| {
        if s.deadline.get().is_none() {
            return true;
        }
        let calls = s.closure_calls.get() + 1;
        s.closure_calls.set(calls);
        let limit = if calls > MAX_CLOSURE_CALLS {
            Limit::ClosureCalls(MAX_CLOSURE_CALLS)
        } else if calls > CLOSURE_CALLS_ON_THREAD && !s.floor_is_budget.get() {
            // Not a limit: `attempt` runs it again on a stack of its own.
            Limit::Stack(s.stack.get())
        } else {
            return true;
        };
        s.tripped.set(Some(limit));
        false
    })
}

/// Takes `bytes` from the run's memory budget; the limit when that is more than is
/// left. Outside a run (a filter's natives called by a unit test) nothing is counted.
pub(super) fn charge(bytes: usize) -> Option<Limit> {
    STATE.with(|s| {
        let left = s.memory_left.get();
        match left.checked_sub(bytes) {
            Some(left) => {
                s.memory_left.set(left);
                None
            }
            None => Some(Limit::Memory(s.memory.get())),
        }
    })
}

/// Bytes the run may still build.
pub(super) fn memory_left() -> usize {
    STATE.with(|s| s.memory_left.get())
}

/// The run's memory budget.
pub(super) fn memory_limit() -> usize {
    STATE.with(|s| s.memory.get())
}

/// Records that the run reached `limit` and returns the exception that ends it.
pub(super) fn trip<'a>(limit: Limit) -> Exn<'a, Val> {
    STATE.with(|s| {
        if s.tripped.get().is_none() {
            s.tripped.set(Some(limit));
        }
    });
    Exn::halt(HALT_CODE)
}

/// The exception that ends a run whose guard failed.
fn stop<'a>() -> Exn<'a, Val> {
    Exn::halt(HALT_CODE)
}

/// Whether `value` nests deeper than `max` levels (a scalar is 0, `[]` and `[1]` 1).
/// Iterative: it is what keeps recursion over values bounded.
pub(super) fn deeper_than(value: &Val, max: usize) -> bool {
    let mut pending: Vec<(&Val, usize)> = vec![(value, 0)];
    while let Some((value, depth)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Val>> = match value {
            Val::Arr(items) if !items.is_empty() => Box::new(items.iter()),
            Val::Obj(fields) if !fields.is_empty() => Box::new(fields.values()),
            _ => continue,
        };
        if depth + 1 > max {
            return true;
        }
        pending.extend(
            children
                .filter(|child| matches!(child, Val::Arr(_) | Val::Obj(_)))
                .map(|child| (child, depth + 1)),
        );
    }
    false
}

/// The greatest nesting of arrays and objects in JSON text, strings skipped.
fn text_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn nested<'a>(value: Val) -> ValX<'a, Val> {
    if deeper_than(&value, MAX_DEPTH) {
        return Err(trip(Limit::Depth(MAX_DEPTH)));
    }
    if let Val::Obj(fields) = &value
        && let Some(limit) = charge(super::memory::items_size(fields.values()))
    {
        return Err(trip(limit));
    }
    Ok(value)
}

/// `range($from; $upto; $by)` as jaq's, checking the guard on every value.
fn range<'a>(from: Val, upto: Val, by: Val) -> impl Iterator<Item = ValX<'a, Val>> + 'a {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let direction = by.partial_cmp(&Val::from(0isize)).unwrap_or(Equal);
    let mut next = Some(Ok(from));
    std::iter::from_fn(move || match next.take()? {
        Ok(at) => {
            let more = match direction {
                Greater => at < upto,
                Less => at > upto,
                Equal => at != upto,
            };
            if !more {
                return None;
            }
            if !check() {
                return Some(Err(stop()));
            }
            next = Some((at.clone() + by.clone()).map_err(Exn::from));
            Some(Ok(at))
        }
        Err(e) => Some(Err(e)),
    })
}

/// The natives behind the limits: the guard (the identity for runs, paths and
/// updates), `_nest` (the identity on values within [`MAX_DEPTH`]), `_collect(f)`
/// (`[f]` within the limits), `_json_depth` (a string whose JSON nests within
/// [`MAX_DEPTH`], checked before jaq's recursive parser sees it) and `range/3`, which
/// replaces jaq's.
pub(super) fn funs() -> [Fun<JustLut<Val>>; 6] {
    [
        (
            CLOSURE_GUARD,
            v(0),
            Native::new(|cv| {
                box_once(if check_closure_call() {
                    Ok(cv.1)
                } else {
                    Err(stop())
                })
            })
            .with_paths(|cv| {
                box_once(if check_closure_call() {
                    Ok(cv.1)
                } else {
                    Err(stop())
                })
            })
            .with_update(|cv, f| {
                if check_closure_call() {
                    f(cv.1)
                } else {
                    box_once(Err(stop()))
                }
            }),
        ),
        (
            GUARD,
            v(0),
            Native::new(|cv| box_once(if check() { Ok(cv.1) } else { Err(stop()) }))
                .with_paths(|cv| box_once(if check() { Ok(cv.1) } else { Err(stop()) }))
                .with_update(|cv, f| {
                    if check() {
                        f(cv.1)
                    } else {
                        box_once(Err(stop()))
                    }
                }),
        ),
        (NEST, v(0), Native::new(|cv| box_once(nested(cv.1)))),
        (
            COLLECT,
            Box::new([Bind::Fun(())]),
            Native::new(|mut cv| {
                let (f, f_ctx) = cv.0.pop_fun();
                let mut items = Vec::new();
                for item in f.run((f_ctx, cv.1)) {
                    let item = match item {
                        Ok(item) => item,
                        Err(e) => return box_once(Err(e)),
                    };
                    if items.len() == MAX_ARRAY_LENGTH {
                        return box_once(Err(trip(Limit::ArrayLength(MAX_ARRAY_LENGTH))));
                    }
                    if deeper_than(&item, MAX_DEPTH - 1) {
                        return box_once(Err(trip(Limit::Depth(MAX_DEPTH))));
                    }
                    // Charged as gathered, so that copies of a large value do not
                    // pile up before the array is done.
                    let bytes = super::memory::VAL_BYTES + super::memory::top_size(&item);
                    if let Some(limit) = charge(bytes) {
                        return box_once(Err(trip(limit)));
                    }
                    items.push(item);
                }
                box_once(Ok(Val::Arr(Rc::new(items))))
            }),
        ),
        (
            "_json_depth",
            v(0),
            Native::new(|cv| {
                let deep = match &cv.1 {
                    Val::TStr(text) | Val::BStr(text) => text_depth(text) > MAX_DEPTH,
                    _ => false,
                };
                box_once(if deep {
                    Err(trip(Limit::Depth(MAX_DEPTH)))
                } else {
                    Ok(cv.1)
                })
            }),
        ),
        (
            "range",
            v(3),
            Native::new(|mut cv| {
                let by = cv.0.pop_var();
                let upto = cv.0.pop_var();
                let from = cv.0.pop_var();
                Box::new(range(from, upto, by))
            }),
        ),
    ]
}

#[cfg(test)]
mod tests;
