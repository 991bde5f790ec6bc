//! The example hook and operation written in Rust, Python and TypeScript give identical
//! results through `operon hook test` and `operon op run`: the pod labeler
//! (`operations/pod-labeler`, `pod-labeler-py`, `pod-labeler-ts`) on the scenario of the
//! bash twin test, and the disk-pressure operation (`operations/disk-pressure`,
//! `disk-pressure-py`, `disk-pressure-ts`) on successful and failing inputs. Patches,
//! metrics, logs, results, output text and errors must all match.
//!
//! The Python guests are built with `sdk/python/build.sh` (componentize-py) and the
//! TypeScript ones with `sdk/js/build.sh` (jco and componentize-js from `sdk/js`'s
//! lockfile). When those tools are not installed the tests say so and pass without
//! checking anything; `.ci/setup` installs them, so CI runs everything. The SDKs' own type
//! checks (`mypy --strict`, `tsc`) run here too. Built components are reused across runs
//! ([`operon_tests::sdk_guests`]).

use crate::common::block_on;
use operon::model::{BindingContext, BindingType, HookInput, RunnerContext};
use operon::sandbox::{CallLimits, HookValues, Sandbox, SandboxConfig};
use operon_tests::sdk_guests::{
    Language, python_disk_pressure, python_pod_labeler, python_values_hook, repo,
    typescript_disk_pressure, typescript_pod_labeler, typescript_values_hook,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `operon` binary cargo built beside this test (`target/<profile>/operon`); `cargo
/// test --workspace` builds it for the engine's own CLI tests.
fn operon() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let binary = exe.parent()?.parent()?.join("operon");
    binary.is_file().then_some(binary)
}

/// Runs `operon ARGS... -o json` and gives its exit success and report.
fn run_operon(args: &[&str]) -> (bool, Value) {
    let operon = operon().expect("checked by the caller");
    let home = tempfile::tempdir().unwrap();
    let out: Output = Command::new(operon)
        .args(args)
        .args(["-o", "json"])
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home.path())
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "operon {args:?} printed no JSON report ({err}): {}",
            text(&out.stderr)
        )
    });
    (out.status.success(), report)
}

/// Drops what differs between two runs of the same scenario by nature (uids, creation
/// times, timings, the module's path and digest, captured stdout/stderr): everything else,
/// logs included, must be equal.
fn comparable(mut value: Value) -> Value {
    let keys = [
        "uid",
        "creationTimestamp",
        "elapsedMs",
        "stdout",
        "stderr",
        "hook",
        "module",
        "digest",
    ];
    operon_tests::without_keys(&mut value, &keys);
    // The run's name in its runner context is made from the module's file name.
    if let Some(context) = value.get_mut("context").and_then(Value::as_object_mut) {
        context.remove("name");
    }
    value
}

/// Whether the test can run at all; says why not otherwise.
fn operon_available() -> bool {
    if operon().is_none() {
        eprintln!(
            "skipping: the operon binary is not built beside this test \
             (cargo build -p operon-engine, or cargo test --workspace)"
        );
        return false;
    }
    true
}

fn hook_test(hook: &Path) -> (bool, Value) {
    let examples = repo().join("operations/examples/hooks");
    run_operon(&[
        "hook",
        "test",
        hook.to_str().unwrap(),
        "--objects",
        examples.join("pods.yaml").to_str().unwrap(),
        "--event",
        &format!("added:{}", examples.join("new-pod.yaml").display()),
        "--schedule",
        "resync",
    ])
}

#[test]
fn the_pod_labeler_in_rust_python_and_typescript_behaves_identically() {
    if !operon_available() {
        return;
    }
    let (ok, rust) = hook_test(Path::new(operon_tests::POD_LABELER));
    assert!(ok, "{rust:#}");
    assert_eq!(rust["runs"].as_array().unwrap().len(), 5);
    assert_eq!(rust["runs"][0]["patches"][0]["name"], "web-1");
    let rust = comparable(rust);
    for (language, component) in [
        ("Python", python_pod_labeler()),
        ("TypeScript", typescript_pod_labeler()),
    ] {
        let Some(component) = component else { continue };
        let (ok, report) = hook_test(component);
        assert!(ok, "{language}: {report:#}");
        assert_eq!(comparable(report), rust, "{language} differs from Rust");
    }
}

/// `df -P` output with a mount point containing a space and a pseudo filesystem.
const DF: &str = "\
Filesystem     1024-blocks      Used Available Capacity Mounted on
/dev/sda1         41152812  36000000   3000000      93% /
tmpfs              8192000         0   8192000       0% /dev/shm
//server/share        1000       900       100      90% /mnt/My Share
proc                     -         -         -        - /proc
";

#[test]
fn disk_pressure_in_rust_python_and_typescript_gives_identical_results() {
    if !operon_available() {
        return;
    }
    let df = format!("df={DF}");
    let cases: Vec<Vec<&str>> = vec![
        vec![
            "--param",
            &df,
            "--param",
            "threshold=90",
            "--node",
            "worker-1",
        ],
        vec!["--param", &df],
        vec!["--param", "threshold= 95% ", "--result", &df],
        vec![
            "--param",
            "input-key=operation.df.output",
            "--result",
            "operation.df.output=/dev/vda1 10 9 1 90% /\r\n",
        ],
        // Failures: the messages must match too.
        vec!["--param", &df, "--param", "threshold=101"],
        vec![
            "--param",
            "df=/dev/sda1 100 50 50 50% /\nsomething went wrong\n",
        ],
        vec![
            "--param",
            "df=Filesystem 1024-blocks Used Available Capacity Mounted on\n",
        ],
        vec!["--param", "threshold=80"],
    ];
    let python = python_disk_pressure();
    let typescript = typescript_disk_pressure();
    for case in &cases {
        let run = |component: &Path| {
            let mut args = vec!["op", "run", component.to_str().unwrap()];
            args.extend(case);
            run_operon(&args)
        };
        let (rust_ok, rust) = run(Path::new(operon_tests::DISK_PRESSURE));
        let rust = comparable(rust);
        for (language, component) in [("Python", python), ("TypeScript", typescript)] {
            let Some(component) = component else { continue };
            let (ok, report) = run(component);
            assert_eq!(ok, rust_ok, "{language} on {case:?}: {report:#}");
            assert_eq!(
                comparable(report),
                rust,
                "{language} differs from Rust on {case:?}"
            );
        }
    }
}

#[test]
fn the_python_sdk_and_examples_type_check() {
    if let Some(why) = Language::Python.missing() {
        eprintln!("skipping the Python type check: {why}");
        return;
    }
    let mypy = Command::new("python3")
        .args(["-m", "mypy", "--version"])
        .output();
    if !mypy.is_ok_and(|out| out.status.success()) {
        eprintln!("skipping the Python type check: mypy is not installed (pip install mypy)");
        return;
    }
    let out = Command::new(repo().join("sdk/python/check.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn the_typescript_sdk_and_examples_type_check() {
    if let Some(why) = Language::TypeScript.missing() {
        eprintln!("skipping the TypeScript type check: {why}");
        return;
    }
    let out = Command::new("npm")
        .args(["run", "--silent", "check"])
        .current_dir(repo().join("sdk/js"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Room for an interpreter (CPython, StarlingMonkey) in the guest.
fn limits() -> CallLimits {
    CallLimits {
        timeout: std::time::Duration::from_secs(30),
        memory_bytes: 512 << 20,
        ..crate::common::limits()
    }
}

/// What a run of a values hook gives, comparable across languages: the lifecycle
/// bindings it declares, then per values document the values it saw, its values and
/// config values patches and its logs (or the error), and the error outside a module.
fn values_hook_runs(sandbox: &Sandbox, path: &Path) -> Value {
    let module = sandbox.load_hook_file(path).expect("hook loads");
    let configured = block_on(sandbox.configure_addon_hook(&module, "configure", &limits()));
    let (_, lifecycle) = configured.outcome.expect("configure succeeds");
    let input = HookInput {
        context: RunnerContext::new("values", std::time::Duration::from_secs(10)),
        binding_contexts: vec![BindingContext {
            binding: "beforeHelm".to_owned(),
            type_: BindingType::OnStartup,
            group: None,
            watch_event: None,
            object: None,
            objects: vec![],
            snapshots: vec![],
            review: None,
        }],
    };
    let documents = [
        (
            json!({"global": {}, "echo": {"replicas": 3, "patchConfig": true}}),
            json!({"global": {}}),
        ),
        (
            json!({"global": {"x": 1}, "myModule": {"internal": {"wasmRuns": 4}}}),
            json!({"global": {}, "myModule": {"a": true}}),
        ),
        (json!({"global": {"replicas": 2}}), json!({"global": {}})),
    ];
    let mut runs = Vec::new();
    for (values, config_values) in documents {
        let values = HookValues {
            values: values.to_string(),
            config_values: config_values.to_string(),
        };
        let report =
            block_on(sandbox.handle_hook_with_values(&module, &input, Some(values), &limits()));
        let output = report.outcome.expect("handle succeeds");
        let message = output
            .validating
            .and_then(|v| v.message)
            .unwrap_or_default();
        let seen: Value = serde_json::from_str(&message).expect("the values seen, as JSON");
        runs.push(json!({
            "seen": seen,
            "values": serde_json::to_value(&report.values_patches.values).unwrap(),
            "configValues": serde_json::to_value(&report.values_patches.config_values).unwrap(),
            "logs": report.logs.iter().map(|l| json!([
                format!("{:?}", l.level), l.message, l.fields,
            ])).collect::<Vec<_>>(),
        }));
    }
    let outside = block_on(sandbox.handle_hook(&module, &input, &limits()));
    let outside = outside
        .outcome
        .expect_err("no values outside an addon module");
    json!({"lifecycle": lifecycle, "runs": runs, "outside": outside.to_string()})
}

#[test]
fn the_values_helpers_in_rust_python_and_typescript_behave_identically() {
    let sandbox = Sandbox::new(SandboxConfig {
        max_concurrent_calls: 2,
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .expect("engine");
    let rust = values_hook_runs(&sandbox, Path::new(operon_tests::VALUES_HOOK));
    assert_eq!(rust["lifecycle"], json!([["beforeHelm", 10.0]]));
    assert_eq!(
        rust["runs"][1]["values"],
        json!([
            {"op": "add", "path": "/myModule/internal/wasmReplicas", "value": 2},
            {"op": "add", "path": "/myModule/internal/wasmRuns", "value": 5},
        ])
    );
    assert_eq!(
        rust["runs"][0]["configValues"],
        json!([
            {"op": "add", "path": "/echo", "value": {}},
            {"op": "add", "path": "/echo/wasmSeen", "value": true},
        ])
    );
    assert!(
        rust["outside"].as_str().unwrap().contains("addon modules"),
        "{rust:#}"
    );
    for (language, component) in [
        ("Python", python_values_hook()),
        ("TypeScript", typescript_values_hook()),
    ] {
        let Some(component) = component else { continue };
        let runs = values_hook_runs(&sandbox, component);
        assert_eq!(runs, rust, "{language} differs from Rust");
    }
}
