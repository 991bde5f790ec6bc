//! What the addon-module suites share: the script sandbox, whose launcher half runs in
//! the test binary itself (each suite keeps its own `sandbox_launcher_entry` test, the
//! name the launcher is started with).

use operon::script::{Launcher, ScriptSandbox, ScriptSandboxConfig};

/// A script sandbox whose launcher is this test binary's `sandbox_launcher_entry`.
pub fn sandbox() -> ScriptSandbox {
    let launcher = Launcher {
        program: std::env::current_exe().unwrap(),
        args: [
            "--exact",
            "sandbox_launcher_entry",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ]
        .map(str::to_owned)
        .to_vec(),
    };
    ScriptSandbox::new(ScriptSandboxConfig::new(launcher)).unwrap()
}
