//! The node agent's built-ins with no cluster: the wasm half (`node-collector`, reading a
//! `/proc` granted read-only through `wasm.readOnlyPaths`) run by `operon run`, the same
//! module with no grant seeing no files, and an address-less `/processor/` step off a
//! node failing with where it runs.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn guests() -> PathBuf {
    Path::new(operon_tests::NODE_COLLECTOR)
        .parent()
        .unwrap()
        .to_owned()
}

/// One Operation (`processor`, as YAML flow) in a one-node OperationSet and a Diagnosis
/// of it, written to a fresh directory.
fn pipeline(processor: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {{name: collect}}\n\
         spec:\n  processor: {processor}\n---\n\
         apiVersion: operon.dev/v1alpha1\nkind: OperationSet\nmetadata: {{name: node}}\n\
         spec:\n  adjacencyList:\n  - id: 0\n    to: [1]\n  - id: 1\n    operation: collect\n---\n\
         apiVersion: operon.dev/v1alpha1\nkind: Diagnosis\nmetadata: {{name: d1, namespace: ops}}\n\
         spec: {{operationSet: node}}\n"
    );
    std::fs::write(dir.path().join("pipeline.yaml"), text).unwrap();
    dir
}

/// Runs `operon run DIR --output json`; returns the Diagnosis, stderr and the pid the
/// run had.
fn run(dir: &Path) -> (Value, String, u32) {
    let home = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["run", dir.to_str().unwrap(), "--modules"])
        .arg(guests())
        .args(["--output", "json"])
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("operon runs");
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let diagnosis = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON on stdout ({e}); stderr: {stderr}"));
    (diagnosis, stderr, pid)
}

/// Whether /proc shows this process under the pid it knows itself by.
fn same_pid_namespace() -> bool {
    std::fs::read_link("/proc/self")
        .is_ok_and(|link| link.to_str() == Some(&std::process::id().to_string()))
}

#[test]
fn the_process_list_reads_a_proc_granted_read_only() {
    let dir = pipeline(
        "{wasm: {module: node_collector, config: {collect: processes}, readOnlyPaths: [/proc]}}",
    );
    let (d, stderr, pid) = run(dir.path());
    assert_eq!(d["status"]["phase"], "Succeeded", "{stderr}");
    let list: Value = serde_json::from_str(
        d["status"]["operationResults"]["collector.system.process.list"]
            .as_str()
            .expect("the process list"),
    )
    .unwrap();
    let processes = list.as_array().unwrap();
    assert!(!processes.is_empty());
    for p in processes {
        assert!(p["pid"].as_u64().is_some() && p["name"].is_string(), "{p}");
        assert!(
            p["memoryInfo"].is_object() && p["command"].is_array(),
            "{p}"
        );
    }
    // The run's command line names its own fresh directory, so it finds the run even
    // where /proc belongs to another PID namespace than the test's (some CI sandboxes
    // mount the host's): there the pids differ, and only the match by pid is skipped.
    let ours = |p: &&Value| {
        p["command"]
            .as_array()
            .is_some_and(|c| c.iter().any(|a| a == dir.path().to_str().unwrap()))
    };
    let same_namespace = same_pid_namespace();
    let Some(me) = processes.iter().find(ours) else {
        let named: Vec<&Value> = processes
            .iter()
            .filter(|p| p["name"].as_str().is_some_and(|n| n.contains("operon")))
            .collect();
        let seen = format!(
            "the run (pid {pid}) is not in the {} processes listed; those named operon: \
             {named:?}; output: {}",
            processes.len(),
            d["status"]
        );
        // A /proc of a namespace this test is not in cannot show the run: only the
        // list itself can be checked there.
        assert!(!same_namespace, "{seen}");
        eprintln!("note: /proc is another PID namespace's; {seen}");
        return;
    };
    if same_namespace {
        assert_eq!(me["pid"], pid, "{me}");
    }
    assert!(
        me["command"][0].as_str().unwrap().ends_with("operon"),
        "{me}"
    );
    assert_eq!(me["command"][1], "run");
    assert!(me["memoryInfo"]["rss"].as_u64().unwrap() > 0);
}

#[test]
fn the_mount_list_reads_a_proc_granted_read_only() {
    let dir = pipeline(
        "{wasm: {module: node_collector, config: {collect: mounts}, readOnlyPaths: [/proc]}}",
    );
    let (d, stderr, _) = run(dir.path());
    assert_eq!(d["status"]["phase"], "Succeeded", "{stderr}");
    let mounts: Value = serde_json::from_str(
        d["status"]["operationResults"]["collector.system.mountinfo"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(
        mounts
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["Mountpoint"] == "/"),
        "{mounts}"
    );
}

#[test]
fn without_a_grant_the_guest_sees_no_files() {
    let dir = pipeline("{wasm: {module: node_collector, config: {collect: processes}}}");
    let (d, stderr, _) = run(dir.path());
    assert_eq!(d["status"]["phase"], "Failed", "{stderr}");
    let text = d["status"].to_string();
    assert!(text.contains("cannot read /proc/stat"), "{text}");
}

#[test]
fn a_missing_granted_directory_fails_the_run_by_name() {
    let dir = pipeline(
        "{wasm: {module: node_collector, config: {collect: processes}, readOnlyPaths: [/no/such/dir]}}",
    );
    let (d, stderr, _) = run(dir.path());
    assert_eq!(d["status"]["phase"], "Failed", "{stderr}");
    let text = d["status"].to_string();
    assert!(
        text.contains("wasm.readOnlyPaths: /no/such/dir is not a directory on this node"),
        "{text}"
    );
}

#[test]
fn a_built_in_step_off_a_node_says_where_it_runs() {
    let dir = pipeline("{httpServer: {path: /processor/podListCollector}}");
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["run", dir.path().to_str().unwrap()])
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Operation/collect (")
            && stderr.contains(
                "spec.processor: httpServer path /processor/podListCollector with no address is a \
             built-in of the node agent; run the Diagnosis on a node"
            ),
        "{stderr}"
    );
}
