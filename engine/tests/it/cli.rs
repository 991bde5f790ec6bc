//! The `operon` binary end to end, with no cluster: `op run`, `run`, `validate`, `graph`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn operon(args: &[&str]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(args)
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", cache.path())
        .output()
        .expect("operon runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn guests() -> PathBuf {
    Path::new(operon_tests::DISK_PRESSURE)
        .parent()
        .unwrap()
        .to_owned()
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../operations/examples/node-diagnosis")
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn op_run_prints_the_results_of_an_operation() {
    let out = operon(&[
        "op",
        "run",
        operon_tests::DISK_PRESSURE,
        "--param",
        "df=Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/sda1 100 95 5 95% /\n",
        "--param",
        "threshold=90",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("status   Succeeded"), "{stdout}");
    assert!(stdout.contains("disk.pressure"), "{stdout}");
    assert!(stdout.contains("true"), "{stdout}");
}

#[test]
fn op_run_fails_clearly_when_the_guest_times_out() {
    let out = operon(&[
        "op",
        "run",
        operon_tests::HOSTILE,
        "--param",
        "mode=spin",
        "--timeout",
        "200ms",
        "--output",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("timed out after 200ms"),
        "{}",
        text(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], "Failed");
    assert_eq!(json["error"]["kind"], "timeout");
}

#[test]
fn op_run_refuses_a_hook_with_a_hint() {
    let out = operon(&["op", "run", operon_tests::POD_LABELER]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("operon hook test"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_example_pipeline_succeeds_with_a_record_per_node() {
    let out = operon(&[
        "run",
        example().to_str().unwrap(),
        "--modules",
        guests().to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["status"]["phase"], "Succeeded");
    let nodes = d["status"]["nodes"].as_array().unwrap();
    assert!(nodes.len() >= 3);
    for node in nodes {
        assert!(node["durationMillis"].is_u64());
        assert!(node["startTime"].is_string());
    }
    assert!(!d["status"]["succeededPath"].as_array().unwrap().is_empty());
    // Progress is shown per node while it runs.
    assert!(
        text(&out.stderr).contains("✓ node"),
        "{}",
        text(&out.stderr)
    );
}

const PIPELINE: &str = r#"
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata: {name: count}
spec:
  processor:
    scriptRunner:
      argKeys: [who]
      operationResultKey: count
      script: echo "counted for $1"
---
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata: {name: fail}
spec:
  processor:
    scriptRunner: {script: "echo broken >&2; exit 2"}
---
apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata: {name: set}
spec:
  adjacencyList:
    - {id: 0, to: [1, 3]}
    - {id: 1, operation: count, to: [2]}
    - {id: 2, operation: fail}
    - {id: 3, operation: count}
"#;

#[test]
fn a_rerun_resumes_from_its_checkpoint_without_rerunning_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "pipeline.yaml", PIPELINE);
    let checkpoint = dir.path().join("checkpoint.yaml");
    let args = [
        "run",
        file.to_str().unwrap(),
        "--operation-set",
        "set",
        "--param",
        "who=ops",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
    ];
    let out = operon(&args);
    // Path [1, 2] fails at node 2; path [3] succeeds.
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Succeeded"), "{stdout}");
    assert!(stdout.contains("succeeded path: 3 count"), "{stdout}");
    assert!(stdout.contains("broken"), "{stdout}");
    assert!(stdout.contains("counted for ops"), "{stdout}");
    let stderr = text(&out.stderr);
    for node in ["node 1 count", "node 2 fail", "node 3 count"] {
        assert!(stderr.contains(node), "{node} missing in {stderr}");
    }

    // The checkpoint holds the finished run: nothing runs again.
    let out = operon(&args);
    assert!(out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("resuming"), "{stderr}");
    assert!(!stderr.contains("… node"), "a node ran again: {stderr}");
}

#[test]
fn a_diagnosis_where_every_path_fails_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "p.yaml",
        &PIPELINE
            .replace("{id: 0, to: [1, 3]}", "{id: 0, to: [1]}")
            .replace("    - {id: 3, operation: count}\n", ""),
    );
    let out = operon(&[
        "run",
        file.to_str().unwrap(),
        "--operation-set",
        "set",
        "--param",
        "who=ops",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("Failed"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn validate_reports_every_problem_with_object_and_field() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "bad.yaml",
        r#"
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata: {name: typo}
spec: {processor: {timeoutSeconds: soon, scriptRunner: {script: x}}}
---
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata: {name: two}
spec: {processor: {scriptRunner: {script: x}, httpServer: {port: 80}}}
---
apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata: {name: loop}
spec:
  adjacencyList:
    - {id: 0, to: [1]}
    - {id: 1, operation: two, to: [2]}
    - {id: 2, operation: missing, to: [1, 7]}
---
apiVersion: operon.dev/v1alpha1
kind: Trigger
metadata: {name: t}
spec:
  operationSet: loop
  sourceTemplate:
    prometheusAlertTemplate: {regexp: {alertName: "(unclosed"}}
"#,
    );
    let out = operon(&["validate", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    for expected in [
        "(Operation/typo): spec.processor.timeoutSeconds",
        "Operation/two: spec.processor: set exactly one of",
        "OperationSet/loop: spec.adjacencyList[2].operation",
        "OperationSet/loop: spec.adjacencyList[2].to[1]",
        "cycle",
        "Trigger/t: spec.sourceTemplate.prometheusAlertTemplate.regexp.alertName",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
}

#[test]
fn validate_accepts_the_example() {
    let out = operon(&["validate", example().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("2 paths"));
}

#[test]
fn validate_accepts_the_dead_node_example_with_the_shipped_built_ins() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let example = repo.join("operations/examples/dead-node");
    let builtins = repo.join("deploy/builtins/operations.yaml");
    let out = operon(&[
        "validate",
        example.to_str().unwrap(),
        builtins.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("1 paths") || text(&out.stdout).contains("1 path"));
    // Without the built-ins the pipeline names Operations that do not exist.
    let alone = operon(&["validate", example.to_str().unwrap()]);
    assert!(!alone.status.success());
    assert!(
        text(&alone.stderr).contains("node-status-collector"),
        "{}",
        text(&alone.stderr)
    );
}

#[test]
fn graph_draws_outcomes_from_a_saved_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "pipeline.yaml", PIPELINE);
    let checkpoint = dir.path().join("run.yaml");
    let out = operon(&[
        "run",
        file.to_str().unwrap(),
        "--operation-set",
        "set",
        "--param",
        "who=ops",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let out = operon(&[
        "graph",
        file.to_str().unwrap(),
        "--operation-set",
        "set",
        "--status",
        checkpoint.to_str().unwrap(),
        "--format",
        "mermaid",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let picture = text(&out.stdout);
    assert!(picture.starts_with("flowchart TD"), "{picture}");
    assert!(
        picture.contains("class n2 failed") || picture.contains("n2:::failed"),
        "{picture}"
    );
}

#[test]
fn kubediag_objects_are_converted_with_a_report_and_then_run() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../operations/examples/kubediag/node-check.yaml")
        .display()
        .to_string();
    let refused = operon(&["validate", &example]);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stdout).contains("operon convert kubediag")
            || text(&refused.stderr).contains("operon convert kubediag"),
        "{}{}",
        text(&refused.stdout),
        text(&refused.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("converted");
    let out = operon(&[
        "convert",
        "kubediag",
        &example,
        "--output-dir",
        out_dir.to_str().unwrap(),
    ]);
    let report = text(&out.stderr);
    assert!(out.status.success(), "{report}");
    for expected in [
        "Operation/uptime-collector: dropped metadata.uid",
        "Operation/uptime-collector: note spec.processor.scriptRunner: a non-zero exit",
        "Operation/python-analyzer: dropped spec.processor.function",
        "OperationSet/node-check: changed spec.adjacencyList[1].id: 3 -> 1",
        "OperationSet/node-check: dropped status",
        "Diagnosis/node-check-1: changed apiVersion",
        "still to fix: Operation/python-analyzer: spec.processor",
    ] {
        assert!(report.contains(expected), "{expected:?} not in:\n{report}");
    }

    // Without the function step, what was converted runs as it is.
    let converted = out_dir.join("node-check.yaml");
    let yaml = std::fs::read_to_string(&converted).unwrap();
    assert!(!yaml.contains("kubediag.org"), "{yaml}");
    let runnable: Vec<&str> = yaml
        .split("---\n")
        .filter(|doc| !doc.contains("python-analyzer"))
        .collect();
    let runnable = write(dir.path(), "runnable.yaml", &runnable.join("---\n"));
    let run = operon(&[
        "run",
        runnable.to_str().unwrap(),
        "--diagnosis",
        "node-check-1",
        "-o",
        "json",
    ]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(
        text(&run.stdout).contains("node worker-1 is up"),
        "{}",
        text(&run.stdout)
    );
}

/// `operon` launches its sandboxed runs from the launcher's own binary, built with it
/// and installed beside it: the run's pid 1 is that program, not the engine.
#[test]
fn runs_are_launched_by_the_launchers_own_binary_beside_operon() {
    let beside = Path::new(env!("CARGO_BIN_EXE_operon")).with_file_name("operon-sandbox-exec");
    assert!(beside.exists(), "cargo builds the launcher with operon");
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "pipeline.yaml",
        &one_step_pipeline("init", "cat /proc/1/comm"),
    );
    let run = [
        "run",
        file.to_str().unwrap(),
        "--operation-set",
        "init",
        "--output",
        "json",
    ];
    let out = operon(&run);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["status"]["phase"], "Succeeded", "{d:#}");
    // The kernel keeps the first 15 bytes of the executable's name.
    assert_eq!(
        d["status"]["operationResults"]["operation.init.output"], "operon-sandbox-\n",
        "{d:#}"
    );
}

/// A pipeline of one Operation and its OperationSet, both `name`, whose script's output
/// is the result `name`.
fn one_step_pipeline(name: &str, script: &str) -> String {
    let script: String = script.lines().map(|l| format!("        {l}\n")).collect();
    format!(
        "apiVersion: operon.dev/v1alpha1
kind: Operation
metadata: {{name: {name}}}
spec:
  processor:
    scriptRunner:
      operationResultKey: {name}
      script: |
{script}---
apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata: {{name: {name}}}
spec:
  adjacencyList:
    - {{id: 0, to: [1]}}
    - {{id: 1, operation: {name}}}
"
    )
}

/// A one-step pipeline whose script reads the mount table and the process list.
fn proc_pipeline() -> String {
    one_step_pipeline(
        "look",
        "#!/bin/sh
df -P | head -n 3
echo \"processes: $(ls /proc | grep -c '^[0-9]')\"
cat /proc/loadavg >/dev/null && echo \"loadavg readable\"",
    )
}

/// `operon run ARGS` in a mount namespace whose /proc is masked the way a container
/// runtime masks it (a read-only /proc/sys over it): the kernel then refuses the
/// sandbox a new /proc in a user namespace, as in every pod. `None` where this process
/// may not make a mount namespace (not root), said on stderr.
fn run_under_a_masked_proc(args: &[&str]) -> Option<Output> {
    let probe = Command::new("unshare")
        .args(["--mount", "true"])
        .output()
        .ok()?;
    if !probe.status.success() {
        eprintln!("skipped: cannot make a mount namespace here (not root?)");
        return None;
    }
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind -o ro /proc/sys /proc/sys && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_operon"))
        .args(args)
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", cache.path())
        .output()
        .expect("unshare runs");
    Some(out)
}

#[test]
fn without_a_private_proc_a_run_sees_its_snapshot_and_strict_may_waive_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "pipeline.yaml", &proc_pipeline());
    let file = file.to_str().unwrap();
    let run = ["run", file, "--operation-set", "look", "--output", "json"];
    let Some(out) = run_under_a_masked_proc(&run) else {
        return;
    };
    assert!(out.status.success(), "{}", text(&out.stderr));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["status"]["phase"], "Succeeded", "{d:#}");
    let output = d["status"]["operationResults"]["operation.look.output"]
        .as_str()
        .unwrap();
    // df found the mount table in the snapshot; no process is listed; the machine's
    // figures are there.
    assert!(output.contains("Filesystem"), "{output}");
    assert!(output.contains("processes: 0"), "{output}");
    assert!(output.contains("loadavg readable"), "{output}");

    // --strict refuses without a private /proc, unless it is waived by name.
    let strict = [&run[..], &["--strict"]].concat();
    let refused = run_under_a_masked_proc(&strict).unwrap();
    let d: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    let error = d["status"]["nodes"][0]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("private_proc"), "{d:#}");
    let waived =
        run_under_a_masked_proc(&[&strict[..], &["--strict-except", "private_proc"]].concat())
            .unwrap();
    assert!(waived.status.success(), "{}", text(&waived.stderr));

    // A name that is no protection is refused before anything runs.
    let unknown = operon(&["--strict-except", "private_prok", "validate", file]);
    assert!(!unknown.status.success());
    assert!(
        text(&unknown.stderr).contains("\"private_prok\" is not a script sandbox protection"),
        "{}",
        text(&unknown.stderr)
    );
}

/// A node's filesystem mounted elsewhere (`--node-root`): the example's scripts read the
/// node's kubelet log and disks there, through the paths they declare.
fn fake_node() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let node = tempfile::tempdir().unwrap();
    for dir in ["var/log/pods", "etc"] {
        std::fs::create_dir_all(node.path().join(dir)).unwrap();
    }
    std::fs::write(node.path().join("etc/shadow"), "root:secret\n").unwrap();
    for dir in ["", "var", "var/log", "var/log/pods"] {
        std::fs::set_permissions(
            node.path().join(dir),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    node
}

fn run_on(node: &Path, params: &[&str]) -> serde_json::Value {
    let (example, guests) = (example(), guests());
    let mut args = vec![
        "run",
        example.to_str().unwrap(),
        "--modules",
        guests.to_str().unwrap(),
        "--node-root",
        node.to_str().unwrap(),
        "--output",
        "json",
    ];
    for param in params {
        args.extend(["--param", param]);
    }
    let out = operon(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_example_triages_the_kubelet_log_file_of_the_node_root() {
    let node = fake_node();
    std::fs::write(
        node.path().join("var/log/kubelet.log"),
        "I1126 kubelet.go:2112] SyncLoop (PLEG)\n\
         E1126 kuberuntime_manager.go:862] write /var/lib/kubelet/pods/x: no space left on device\n",
    )
    .unwrap();
    let d = run_on(node.path(), &[]);
    let results = &d["status"]["operationResults"];
    assert_eq!(results["triage.category"], "disk-full", "{d:#}");
    assert!(
        results["operation.report.output"]
            .as_str()
            .unwrap()
            .contains("kubelet log triage: disk-full"),
        "{d:#}"
    );
}

#[test]
fn the_example_triages_the_kubelet_journal_of_the_node_root() {
    // A real journal file, written by systemd's own journal-remote.
    let node = fake_node();
    let machine = node
        .path()
        .join("var/log/journal/0123456789abcdef0123456789abcdef");
    std::fs::create_dir_all(&machine).unwrap();
    operon_tests::write_journal(
        &machine.join("system.journal"),
        "0123456789abcdef0123456789abcdef",
        &[
            (
                "containerd.service",
                "level=error msg=\"no space left on device\"",
            ),
            (
                "kubelet.service",
                "E1126 kubelet.go:1] \"Failed to pull image\" err=\"ErrImagePull: manifest unknown\"",
            ),
        ],
    );
    for path in [
        node.path().join("var/log/journal"),
        machine.clone(),
        machine.join("system.journal"),
    ] {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = if path.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let d = run_on(node.path(), &[]);
    let results = &d["status"]["operationResults"];
    // Only the kubelet unit's lines: containerd's full disk is not the kubelet's.
    assert_eq!(results["triage.category"], "image-pull", "{d:#}");
    assert_eq!(results["triage.lines"], "1", "{d:#}");
}

#[test]
fn without_a_kubelet_log_the_example_checks_the_disks_of_the_node_root() {
    let node = fake_node();
    let d = run_on(node.path(), &["threshold=0"]);
    assert_eq!(d["status"]["phase"], "Succeeded", "{d:#}");
    let results = &d["status"]["operationResults"];
    let failed = results["operation.kubelet-log.output"].as_str().unwrap();
    assert!(failed.contains("no kubelet log on this node"), "{d:#}");
    // The root is a plain directory: the filesystem holding it is the node's /.
    assert_eq!(results["disk.worst_mount"], "/", "{d:#}");
    assert_eq!(results["disk.pressure"], "true", "{d:#}");
    let plan = results["operation.cleanup.output"].as_str().unwrap();
    assert!(plan.contains("candidate: /var/log ("), "{plan}");
    assert!(plan.contains("candidate: /var/log/pods ("), "{plan}");
    assert!(!plan.contains("/var/lib/docker"), "{plan}");
}
