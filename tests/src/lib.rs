//! Operon's integration tests and benchmarks against real guests.
//!
//! The build script compiles every guest crate of the workspace for `wasm32-wasip2` (in
//! release mode, into `target/guests`) whenever the SDK, the WIT contract or the
//! operations change. This library says where the resulting components are (each
//! constant is the absolute path of one component, ready for the engine to load), and
//! holds what the suites and benchmarks share.

pub mod alertmanager;
pub mod bench;
pub mod pki;
pub mod registry;
pub mod sdk_guests;
pub mod signing;

use std::path::{Path, PathBuf};

mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// `fixture-trivial`: an operation that returns `ok=true` at once, for per-call benchmarks.
pub const TRIVIAL: &str = guests::TRIVIAL;

/// `fixture-hostile`: an operation that misbehaves as its parameter `mode` says (`spin`,
/// `allocate`, `recurse`, `panic`, `flood-stdout`, `enormous-result`, `log-loop`,
/// `patch-loop`, `sleep`), or returns `mode=ok` for `ok`, or fails naming an unknown mode.
pub const HOSTILE: &str = guests::HOSTILE;

/// `fixture-echo`: an operation that returns each parameter as a result, the args joined
/// with spaces as `args`, and the context as `context.name`, `context.dry-run`,
/// `context.timeout-ms`, `context.node`, `context.namespace` and `context.owner`
/// (`kind/name`; the optional ones only when set), and writes a line to stdout and stderr.
pub const ECHO: &str = guests::ECHO;

/// `fixture-command`: a plain `wasi:cli/command` program built without the SDK, which the
/// engine must refuse as an operation or a hook.
pub const COMMAND: &str = guests::COMMAND;

/// `disk-pressure`: the example operation that reads `df -P` output (parameter `df`) and
/// reports filesystems at or over `threshold` percent.
pub const DISK_PRESSURE: &str = guests::DISK_PRESSURE;

/// `log-triage`: the example operation that classifies known failure signatures in the
/// container log given as parameter `log`.
pub const LOG_TRIAGE: &str = guests::LOG_TRIAGE;

/// `pod-labeler`: the example hook that labels pods with `operon.dev/seen` (a `hook` world
/// component, so the engine must refuse it as an operation).
pub const POD_LABELER: &str = guests::POD_LABELER;

/// `fixture-annotator`: the events-per-second benchmark's hook (one merge patch and one
/// metric per pod event).
pub const ANNOTATOR: &str = guests::ANNOTATOR;

/// `fixture-admission`: the webhook latency benchmark's validating hook (pods only from
/// `registry.example.com/`); `operations/fixtures/shell-hooks/admission.sh` is its twin.
pub const ADMISSION: &str = guests::ADMISSION;

/// `node-metrics`: the example hook that exports node readiness and allocatable cpu and
/// memory as gauges of the metric group `node-metrics`, on its `every-minute` schedule over
/// the snapshot of its snapshot-only `nodes` binding.
pub const NODE_METRICS: &str = guests::NODE_METRICS;

/// `node-collector`: the node agent's built-in process and mount lists, read from a
/// `/proc` granted read-only (`collect`: `processes` or `mounts`).
pub const NODE_COLLECTOR: &str = guests::NODE_COLLECTOR;

/// `snapshot-report`: the example hook whose `deployments` and `pods` bindings form the
/// group `workloads`; on each `Group` context it annotates Deployments with fewer running
/// pods than replicas (`operon.dev/unavailable-pods`) and sets
/// `operon_workload_available_ratio`.
pub const SNAPSHOT_REPORT: &str = guests::SNAPSHOT_REPORT;

/// `fixture-mutating`: the example mutating webhook hook (binding `defaults.operon.dev` on
/// pod CREATE), answering with a JSON Patch that labels the pod `operon.dev/mutated` and
/// gives containers without one a 256Mi memory limit;
/// `operations/fixtures/shell-hooks/mutating.sh` is its twin.
pub const MUTATING: &str = guests::MUTATING;

/// `fixture-conversion`: the example conversion webhook hook (binding `alpha-v1` for
/// `crontabs.stable.example.com`), converting CronTabs between `stable.example.com/v1alpha1`
/// (`spec.cron` as a list of 5 fields, `spec.imageName`) and `stable.example.com/v1`
/// (`spec.cronSpec` as one string, `spec.image`) both ways, and failing the review naming
/// an object it cannot convert; `operations/fixtures/shell-hooks/conversion.sh` is its twin.
pub const CONVERSION: &str = guests::CONVERSION;

/// `fixture-legacy-hook`: a hook built against `operon:engine@0.1.0` without the SDK. Its
/// `pods` binding annotates each reported pod with `operon.dev/contract: 0.1.0` (a merge
/// patch), logs `annotated` and adds 1 to `legacy_hook_pods_total`; its validating
/// binding `legacy.operon.dev` admits only pods with an `app` label.
pub const LEGACY_HOOK: &str = guests::LEGACY_HOOK;

/// `fixture-legacy-operation`: an operation built against `operon:engine@0.1.0` without
/// the SDK; it logs `legacy run` and returns `contract=0.1.0` and
/// `greeting=hello, NAME` for its parameter `name`.
pub const LEGACY_OPERATION: &str = guests::LEGACY_OPERATION;

/// `fixture-v0-2-operation`: an operation built against `operon:engine@0.2.0` without the
/// SDK; it logs `0.2.0 run` and returns `contract=0.2.0`, `context.name` and
/// `context.namespace`.
pub const V0_2_OPERATION: &str = guests::V0_2_OPERATION;

/// `fixture-values-hook`: an addon module hook of `operon:engine@0.3.0` (beforeHelm,
/// order 10) that reads its values and patches
/// `/<section>/internal/wasmReplicas` (twice `replicas`) and `wasmRuns` through the
/// `values` interface; with `patchConfig: true` it also sets `/<section>/wasmSeen` in
/// the config values. Its validating message is the values it saw.
pub const VALUES_HOOK: &str = guests::VALUES_HOOK;

/// `fixture-enabled-program`: an addon module's `enabled` program of
/// `operon:engine@0.3.0` (the `module-enabled` world). It disables the module when its
/// section's `requires` is missing from `global.enabledModules` (`needs <name>, which
/// is not enabled`) or the config section has `off: true` (`switched off in the
/// config`); `fail: true` fails it (`asked to fail`), `patch: true` makes it submit a
/// values patch.
pub const ENABLED_PROGRAM: &str = guests::ENABLED_PROGRAM;

/// A directory for the engine's compiled-module cache that outlives one test run, so each
/// guest is compiled once rather than once per test; created if missing.
///
/// # Panics
///
/// If the directory cannot be created.
pub fn test_cache_dir() -> PathBuf {
    let dir = PathBuf::from(guests::GUESTS_DIR).join("compiled-cache");
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|err| panic!("cannot create {}: {err}", dir.display()));
    dir
}

/// Removes every `keys` entry from the objects of `value`, at any depth: what differs
/// between two runs of one scenario by nature (uids, timings...), before comparing them.
pub fn without_keys(value: &mut serde_json::Value, keys: &[&str]) {
    match value {
        serde_json::Value::Object(map) => {
            for key in keys {
                map.remove(*key);
            }
            map.values_mut().for_each(|v| without_keys(v, keys));
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| without_keys(v, keys)),
        _ => {}
    }
}

/// Writes a real systemd journal file at `file` (its directory must exist) holding one
/// entry per `(unit, message)`, one microsecond apart from now, as `journalctl -u UNIT`
/// reads them: systemd's own `systemd-journal-remote` converts them from the journal
/// export format. Panics naming the package when it is not installed (`.ci/setup`
/// installs it).
pub fn write_journal(file: &Path, machine_id: &str, entries: &[(&str, &str)]) {
    use std::io::Write as _;
    let remote = Path::new("/lib/systemd/systemd-journal-remote");
    assert!(
        remote.exists(),
        "{} is missing: install systemd-journal-remote (.ci/setup does)",
        remote.display()
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    let mut export = String::new();
    for (i, (unit, message)) in entries.iter().enumerate() {
        export.push_str(&format!(
            "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n\
             _BOOT_ID=5b6cd1e1c2f04c3c9a0b6fb8a1d1e0c1\n_MACHINE_ID={machine_id}\n\
             _HOSTNAME=node\n_SYSTEMD_UNIT={unit}\nMESSAGE={message}\n\n",
            now + i as u128,
            i + 1
        ));
    }
    let mut child = std::process::Command::new(remote)
        .arg(format!("--output={}", file.display()))
        .args(["--split-mode=none", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("systemd-journal-remote starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(export.as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "systemd-journal-remote failed"
    );
}
