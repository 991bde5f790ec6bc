//! The `module-enabled` world (`operon:engine@0.3.0`): an addon module's `enabled`
//! program as a component (`operations/fixtures/enabled-program`), called by the sandbox
//! with read-only values. Its decision and reason come back, a values patch fails the
//! call, and components of the other worlds are told apart from it.

use crate::common::{block_on, limits};
use operon::sandbox::{HookValues, LoadError, Sandbox, SandboxConfig};
use serde_json::{Value, json};

fn sandbox() -> Sandbox {
    Sandbox::new(SandboxConfig {
        max_concurrent_calls: 2,
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .expect("engine")
}

fn run(
    sandbox: &Sandbox,
    values: Value,
    config: Value,
) -> operon::sandbox::CallReport<(bool, Option<String>)> {
    let module = sandbox
        .load_enabled_file(operon_tests::ENABLED_PROGRAM.as_ref())
        .expect("the program loads");
    let given = HookValues {
        values: values.to_string(),
        config_values: config.to_string(),
    };
    block_on(sandbox.run_enabled(&module, "my-module/enabled", given, &limits()))
}

#[test]
fn the_program_decides_from_the_values_it_reads() {
    let sandbox = sandbox();
    let enabled = json!({"global": {"enabledModules": ["base"]}, "myModule": {"requires": "base"}});
    let report = run(&sandbox, enabled, json!({"global": {}}));
    assert_eq!(report.outcome.unwrap(), (true, None));
    assert_eq!(report.logs[0].message, "decided");
    assert_eq!(
        report.logs[0].fields,
        [
            ("section".to_owned(), "myModule".to_owned()),
            ("enabled".to_owned(), "true".to_owned())
        ]
    );

    let missing = json!({"global": {"enabledModules": []}, "myModule": {"requires": "base"}});
    let report = run(&sandbox, missing, json!({"global": {}}));
    assert_eq!(
        report.outcome.unwrap(),
        (false, Some("needs base, which is not enabled".to_owned()))
    );

    // The config values are the config's, not the values'.
    let report = run(
        &sandbox,
        json!({"global": {}, "myModule": {}}),
        json!({"global": {}, "myModule": {"off": true}}),
    );
    assert_eq!(
        report.outcome.unwrap(),
        (false, Some("switched off in the config".to_owned()))
    );
}

#[test]
fn an_error_or_a_values_patch_fails_the_call() {
    let sandbox = sandbox();
    let report = run(
        &sandbox,
        json!({"global": {}, "myModule": {"fail": true}}),
        json!({}),
    );
    assert_eq!(report.outcome.unwrap_err().to_string(), "asked to fail");

    let report = run(
        &sandbox,
        json!({"global": {}, "myModule": {"patch": true}}),
        json!({}),
    );
    let err = report.outcome.unwrap_err().to_string();
    assert!(err.contains("may not patch values"), "{err}");
}

#[test]
fn other_worlds_are_not_enabled_programs_and_back() {
    let sandbox = sandbox();
    let err = sandbox
        .load_enabled_file(operon_tests::VALUES_HOOK.as_ref())
        .unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::MissingExport {
                world: "module-enabled",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("enabled"), "{err}");

    let err = sandbox
        .load_hook_file(operon_tests::ENABLED_PROGRAM.as_ref())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("module-enabled") && err.contains("`enabled` program"),
        "{err}"
    );
}
