//! jq filters: compilation and execution. The first line is the filter, the rest the
//! JSON input (`null` when it is not JSON).
//!
//! Each run is bounded by the engine's run limits (`operon_jq::Limits`) with a time
//! limit of 100 ms and a memory budget of 64 MiB, so a filter that loops or recurses
//! forever, or builds values without end, ends as `JqError::Limit` instead of a
//! libFuzzer timeout, an out-of-memory report or a crash. A memory limit reported is
//! the run's own budget, and the run that reached it stopped within it. Beyond not panicking: a
//! compile error names a line and a column inside the filter; a limit error names the
//! filter; a filter runs the same twice (no state leaks between runs, in particular
//! none from a run stopped at a limit); the cached and uncached compilations agree.

use operon_jq::{JqError, Limit, Limits};
use serde_json::Value;
use std::time::Duration;

/// The memory budget of a run here: low enough that runs within it stay far below
/// libFuzzer's RSS limit.
const MEMORY: usize = 64 << 20;

/// Checks one input; panics on a finding.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (filter, input) = text.split_once('\n').unwrap_or((text, "null"));
    // Filters in hook configurations are short; long generated ones only slow the run.
    if filter.len() > 256 {
        return;
    }
    let input: Value = serde_json::from_str(input).unwrap_or(Value::Null);
    let compiled = match operon_jq::compile_uncached(filter) {
        Ok(compiled) => compiled,
        Err(JqError::Compile { line, column, .. }) => {
            let lines = filter.split('\n').count().max(1);
            assert!(line >= 1 && line <= lines, "line {line} of {lines}");
            assert!(column >= 1, "column {column}");
            assert!(operon_jq::compile(filter).is_err());
            return;
        }
        Err(other) => panic!("compiling gave a non-compile error: {other}"),
    };
    let limits = Limits {
        time: Duration::from_millis(100),
        memory: MEMORY,
        ..Limits::default()
    };
    let timed_out = |result: &Result<Vec<Value>, JqError>| {
        matches!(
            result,
            Err(JqError::Limit {
                limit: Limit::Time(_),
                ..
            })
        )
    };
    let first = compiled.run_within(&input, &limits);
    if let Err(JqError::Limit { filter: named, .. }) = &first {
        assert!(
            filter.trim().starts_with(named.trim_end_matches('…')),
            "the limit error names {named:?}, not the filter {filter:?}"
        );
    }
    if let Err(JqError::Limit {
        limit: Limit::Memory(bytes),
        ..
    }) = &first
    {
        assert_eq!(*bytes, MEMORY, "the memory limit reported is the run's");
    }
    let second = compiled.run_within(&input, &limits);
    // How far a run gets before its time limit depends on the machine's load.
    if !timed_out(&first) && !timed_out(&second) {
        assert_eq!(first, second, "two runs of {filter:?} differ");
        let cached = operon_jq::compile(filter).expect("compiles like the uncached filter");
        let third = cached.run_within(&input, &limits);
        if !timed_out(&third) {
            assert_eq!(third, first);
        }
    }
}
