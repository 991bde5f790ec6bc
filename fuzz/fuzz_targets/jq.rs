//! jq filters: compilation and execution. The first line is the filter, the rest the
//! JSON input (`null` when it is not JSON).
//!
//! Beyond not panicking: a compile error names a line and a column inside the filter;
//! a filter runs the same twice (no state leaks between runs); the cached and uncached
//! compilations agree. Runs are bounded by the engine's output limit; libFuzzer's
//! `-timeout` reports a filter that runs too long.

#![no_main]

use libfuzzer_sys::fuzz_target;
use operon::jq::{self, JqError};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (filter, input) = text.split_once('\n').unwrap_or((text, "null"));
    // Filters in hook configurations are short; long generated ones only slow the run.
    if filter.len() > 256 {
        return;
    }
    let input: Value = serde_json::from_str(input).unwrap_or(Value::Null);
    let compiled = match jq::compile_uncached(filter) {
        Ok(compiled) => compiled,
        Err(JqError::Compile { line, column, .. }) => {
            let lines = filter.split('\n').count().max(1);
            assert!(line >= 1 && line <= lines, "line {line} of {lines}");
            assert!(column >= 1, "column {column}");
            assert!(jq::compile(filter).is_err());
            return;
        }
        Err(other) => panic!("compiling gave a non-compile error: {other}"),
    };
    let first = compiled.run(&input);
    let second = compiled.run(&input);
    assert_eq!(first, second, "two runs of {filter:?} differ");
    let cached = jq::compile(filter).expect("compiles like the uncached filter");
    assert_eq!(cached.run(&input), first);
});
