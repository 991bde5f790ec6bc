//! shell-operator hook configurations, YAML and JSON, v0 and v1.
//!
//! Beyond not panicking: every problem names the hook and a reason; a configuration
//! that reads, written out as shell-operator's v1 JSON, reads again and writes out the
//! same; validation answers for every configuration that reads.

use operon_hooks::config::{any_kind, validate};
use operon_hooks::shell_operator::config;

const HOOK: &str = "fuzzed.sh";

/// Checks one input; panics on a finding.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = match config::parse(HOOK, text) {
        Ok(parsed) => parsed,
        Err(problems) => {
            assert!(!problems.is_empty());
            for problem in problems {
                assert_eq!(problem.hook, HOOK);
                assert!(!problem.reason.is_empty(), "{problem:?}");
            }
            return;
        }
    };
    let written = config::to_json(&parsed);
    let again = config::parse(HOOK, &written.to_string())
        .unwrap_or_else(|p| panic!("{written} does not read again: {p:?}"));
    assert_eq!(config::to_json(&again), written, "writing is not stable");
    if let Err(problems) = validate(HOOK, &parsed, &any_kind) {
        for problem in problems {
            assert_eq!(problem.hook, HOOK);
            assert!(!problem.reason.is_empty(), "{problem:?}");
        }
    }
}
