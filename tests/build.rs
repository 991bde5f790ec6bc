//! Builds the guest crates for `wasm32-wasip2` and writes their paths to `$OUT_DIR/guests.rs`.
//!
//! The guests are built by a nested `cargo build` with its own target directory
//! (`target/guests`): the outer cargo holds the lock on the usual one for the whole build,
//! so sharing it would deadlock. This is the pattern of wasmtime's test-programs.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const TARGET: &str = "wasm32-wasip2";

/// A guest: the constant naming its path, its package, and its wasm file name (libraries
/// get underscores, binaries keep the package name).
const GUESTS: &[(&str, &str, &str)] = &[
    ("TRIVIAL", "fixture-trivial", "fixture_trivial.wasm"),
    ("HOSTILE", "fixture-hostile", "fixture_hostile.wasm"),
    ("ECHO", "fixture-echo", "fixture_echo.wasm"),
    ("COMMAND", "fixture-command", "fixture-command.wasm"),
    ("DISK_PRESSURE", "disk-pressure", "disk_pressure.wasm"),
    ("LOG_TRIAGE", "log-triage", "log_triage.wasm"),
    ("POD_LABELER", "pod-labeler", "pod_labeler.wasm"),
    ("ANNOTATOR", "fixture-annotator", "fixture_annotator.wasm"),
    ("ADMISSION", "fixture-admission", "fixture_admission.wasm"),
    ("NODE_METRICS", "node-metrics", "node_metrics.wasm"),
    ("NODE_COLLECTOR", "node-collector", "node_collector.wasm"),
    ("SNAPSHOT_REPORT", "snapshot-report", "snapshot_report.wasm"),
    ("MUTATING", "fixture-mutating", "fixture_mutating.wasm"),
    (
        "CONVERSION",
        "fixture-conversion",
        "fixture_conversion.wasm",
    ),
    (
        "LEGACY_HOOK",
        "fixture-legacy-hook",
        "fixture_legacy_hook.wasm",
    ),
    (
        "LEGACY_OPERATION",
        "fixture-legacy-operation",
        "fixture_legacy_operation.wasm",
    ),
    (
        "V0_2_OPERATION",
        "fixture-v0-2-operation",
        "fixture_v0_2_operation.wasm",
    ),
    (
        "VALUES_HOOK",
        "fixture-values-hook",
        "fixture_values_hook.wasm",
    ),
    (
        "ENABLED_PROGRAM",
        "fixture-enabled-program",
        "fixture_enabled_program.wasm",
    ),
];

/// Variables the outer cargo sets for this script that would leak into the nested build:
/// host rustflags, its jobserver, a forced target, and clippy posing as rustc (which would
/// also make `cargo clippy` and `cargo build` invalidate each other's guest builds).
const INHERITED: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    "CARGO_BUILD_TARGET",
    "RUSTC_WORKSPACE_WRAPPER",
    "CLIPPY_ARGS",
];

fn main() -> ExitCode {
    match build() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            println!("cargo::error={message}");
            ExitCode::FAILURE
        }
    }
}

fn build() -> Result<(), String> {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("no CARGO_MANIFEST_DIR")?);
    let workspace = manifest_dir
        .parent()
        .ok_or("operon-tests is not inside the workspace")?;
    for input in ["sdk", "wit", "operations", "Cargo.toml", "Cargo.lock"] {
        println!(
            "cargo::rerun-if-changed={}",
            workspace.join(input).display()
        );
    }

    check_target()?;

    let guests_dir = workspace.join("target").join("guests");
    let mut cargo = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .args(["build", "--release", "--target", TARGET, "--manifest-path"])
        .arg(workspace.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &guests_dir);
    for (_, package, _) in GUESTS {
        cargo.args(["--package", package]);
    }
    for variable in INHERITED {
        cargo.env_remove(variable);
    }
    eprintln!("running: {cargo:?}");
    let status = cargo
        .status()
        .map_err(|err| format!("could not run cargo to build the guests: {err}"))?;
    if !status.success() {
        return Err(format!(
            "building the guest crates for {TARGET} failed ({status}); the nested cargo's errors are above"
        ));
    }

    let release = guests_dir.join(TARGET).join("release");
    let mut generated = String::new();
    for (constant, package, file) in GUESTS {
        let path = release.join(file);
        check_component(&path, package)?;
        writeln!(
            generated,
            "pub const {constant}: &str = {:?};",
            path.display().to_string()
        )
        .expect("writing to a String cannot fail");
    }
    writeln!(
        generated,
        "pub const GUESTS_DIR: &str = {:?};",
        guests_dir.display().to_string()
    )
    .expect("writing to a String cannot fail");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or("no OUT_DIR")?);
    fs::write(out_dir.join("guests.rs"), generated)
        .map_err(|err| format!("could not write guests.rs: {err}"))
}

/// Fails early, with the fix, when the standard library for the target is not installed:
/// the nested build's own error about a missing `core` is much less clear.
fn check_target() -> Result<(), String> {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .map_err(|err| format!("could not run {}: {err}", Path::new(&rustc).display()))?;
    let libdir = String::from_utf8_lossy(&output.stdout);
    let installed = output.status.success()
        && fs::read_dir(libdir.trim()).is_ok_and(|mut entries| entries.next().is_some());
    if installed {
        Ok(())
    } else {
        Err(format!(
            "the {TARGET} target is not installed, so the guest crates cannot be built: run `rustup target add {TARGET}`"
        ))
    }
}

/// Checks that `path` is a component, not a core module, so a misconfigured guest fails
/// here rather than as a confusing load error in some test.
fn check_component(path: &Path, package: &str) -> Result<(), String> {
    const COMPONENT_HEADER: &[u8] = b"\0asm\x0d\0\x01\0";
    let bytes = fs::read(path)
        .map_err(|err| format!("{package}: cannot read {}: {err}", path.display()))?;
    if bytes.starts_with(COMPONENT_HEADER) {
        Ok(())
    } else {
        Err(format!(
            "{package}: {} is not a wasm component",
            path.display()
        ))
    }
}
