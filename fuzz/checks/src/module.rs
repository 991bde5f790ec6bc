//! Module bytes as a component: what `Sandbox::load_hook` and `Sandbox::load_operation`
//! check before anything runs (the wasm header, the component's validity, its world).
//!
//! Beyond not panicking: a refusal names the module.

use operon_sandbox::{Sandbox, SandboxConfig};
use std::sync::LazyLock;

static SANDBOX: LazyLock<Sandbox> = LazyLock::new(|| {
    let config = SandboxConfig {
        max_concurrent_calls: 2,
        ..SandboxConfig::default()
    };
    Sandbox::new(config).expect("a sandbox")
});

/// Checks one input; panics on a finding.
pub fn check(data: &[u8]) {
    let as_hook = data.first().is_some_and(|b| b & 1 == 1);
    let error = if as_hook {
        SANDBOX
            .load_hook("fuzzed", data)
            .err()
            .map(|e| e.to_string())
    } else {
        SANDBOX
            .load_operation("fuzzed", data)
            .err()
            .map(|e| e.to_string())
    };
    if let Some(error) = error {
        assert!(
            error.contains("fuzzed"),
            "the error does not name the module: {error}"
        );
    }
}
