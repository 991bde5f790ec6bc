//! The node-diagnosis example reading the node itself: `deploy/node-access` added to the
//! install, a kubelet journal written on the node, and the example's Diagnosis placed on
//! the node twice: once triaging that journal, once (without it) checking the node's
//! own filesystems.

use super::{finished_diagnosis, relative, repo};
use crate::e2e_support::{kubectl, try_kubectl};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The journal file the test writes on the node, removed again when dropped.
struct Journal {
    file: PathBuf,
    /// The machine's journal directory, when the test created it.
    created_dir: Option<PathBuf>,
}

impl Drop for Journal {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
        if let Some(dir) = &self.created_dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A journal holding the kubelet's lines (and one of containerd's, which the example
/// must not read as the kubelet's) where journald keeps them on this node, readable by
/// group adm as journald's files are.
fn write_journal() -> Journal {
    let machine = std::fs::read_to_string("/etc/machine-id")
        .expect("the node has /etc/machine-id")
        .trim()
        .to_owned();
    let dir = Path::new("/var/log/journal").join(&machine);
    let created_dir = (!dir.exists()).then(|| dir.clone());
    std::fs::create_dir_all(&dir).unwrap();
    let journal = Journal {
        file: dir.join("operon-e2e.journal"),
        created_dir,
    };
    operon_tests::write_journal(
        &journal.file,
        &machine,
        &[
            (
                "containerd.service",
                "level=error msg=\"no space left on device\"",
            ),
            (
                "kubelet.service",
                "E1126 pod_workers.go:1298] \"Error syncing pod\" err=\"failed to \\\"StartContainer\\\": ImagePullBackOff\"",
            ),
            (
                "kubelet.service",
                "I1126 kubelet.go:2112] \"SyncLoop (PLEG): event for pod\"",
            ),
        ],
    );
    // As journald leaves its files: root's, readable by the journal's reader groups.
    let chown = Command::new("chown")
        .args(["root:4"])
        .arg(&journal.file)
        .status()
        .unwrap();
    assert!(chown.success());
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&journal.file, std::fs::Permissions::from_mode(0o640)).unwrap();
    journal
}

/// Creates the example's Diagnosis on `node_name` and returns its finished status.
pub fn diagnose(
    config: &Path,
    dir: &Path,
    namespace: &str,
    name: &str,
    node_name: &str,
    threshold: &str,
) -> Value {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &file,
        format!(
            "apiVersion: operon.dev/v1alpha1\nkind: Diagnosis\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  operationSet: node-diagnosis\n  nodeName: {node_name}\n  parameters:\n    threshold: \"{threshold}\"\n"
        ),
    )
    .unwrap();
    let started = Instant::now();
    kubectl(config, &["create", "-f", file.to_str().unwrap()]);
    let status = finished_diagnosis(config, namespace, name, Duration::from_secs(240));
    eprintln!("{name} through the agent: {:?}", started.elapsed());
    status
}

/// The ids of the nodes of the path that succeeded.
fn path(status: &Value) -> Vec<i64> {
    status["succeededPath"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|node| node["id"].as_i64())
        .collect()
}

fn result<'a>(status: &'a Value, key: &str) -> &'a str {
    status["operationResults"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no result {key}: {status:#}"))
}

/// Adds deploy/node-access to the install in `dir` (the test's overlay), waits for the
/// agents to roll, and runs the example against the node's journal and filesystems.
pub fn node_diagnosis_reads_the_node(config: &Path, dir: &Path, namespace: &str, node_name: &str) {
    let component = relative(
        &dir.canonicalize().unwrap(),
        &repo().join("deploy/node-access").canonicalize().unwrap(),
    );
    let kustomization = dir.join("kustomization.yaml");
    let mut text = std::fs::read_to_string(&kustomization).unwrap();
    text.push_str(&format!("components:\n- {}\n", component.display()));
    std::fs::write(&kustomization, text).unwrap();
    let started = Instant::now();
    let (ok, out, err) = try_kubectl(
        config,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-k",
            dir.to_str().unwrap(),
        ],
    );
    assert!(ok, "applying deploy/node-access: {out}{err}");
    kubectl(
        config,
        &[
            "-n",
            "operon",
            "rollout",
            "status",
            "daemonset/operon-agent",
            "--timeout=180s",
        ],
    );
    eprintln!(
        "deploy/node-access applied, agents rolled: {:?}",
        started.elapsed()
    );
    let labels = kubectl(
        config,
        &[
            "get",
            "namespace",
            "operon",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    );
    assert!(
        labels.contains(r#""pod-security.kubernetes.io/enforce":"privileged""#),
        "{labels}"
    );

    // The kubelet's journal, read through the declared paths with journalctl.
    let journal = write_journal();
    let status = diagnose(config, dir, namespace, "node-logs", node_name, "99");
    assert_eq!(status["phase"], "Succeeded", "{status:#}");
    assert_eq!(path(&status), [1, 3, 5], "{status:#}");
    let log = result(&status, "operation.kubelet-log.output");
    assert!(log.contains("ImagePullBackOff"), "{log}");
    assert!(
        !log.contains("no space left"),
        "only the kubelet's unit: {log}"
    );
    assert_eq!(
        result(&status, "triage.category"),
        "image-pull",
        "{status:#}"
    );
    assert!(
        result(&status, "operation.report.output").contains("kubelet log triage: image-pull"),
        "{status:#}"
    );
    drop(journal);

    // Without a kubelet log, the node's own filesystems: its / is the device this
    // machine's / is on, not the pod's overlay.
    let root_device = {
        let out = Command::new("df").args(["-P", "/"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .nth(1)
            .and_then(|line| line.split_whitespace().next())
            .expect("df -P / names a device")
            .to_owned()
    };
    let status = diagnose(config, dir, namespace, "node-disks", node_name, "0");
    assert_eq!(status["phase"], "Succeeded", "{status:#}");
    assert_eq!(path(&status), [2, 4, 6], "{status:#}");
    let failed = &status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["operation"] == "collect-kubelet-log")
        .expect("a record of collect-kubelet-log")["error"];
    eprintln!("collect-kubelet-log without a journal: {failed}");
    let df = result(&status, "operation.df.output");
    assert!(
        df.lines()
            .any(|line| line.starts_with(&format!("{root_device} ")) && line.ends_with(" /")),
        "the node's / ({root_device}) among its filesystems:\n{df}"
    );
    assert!(
        !df.lines().skip(1).any(|line| line
            .split_whitespace()
            .last()
            .is_some_and(|m| m.starts_with("/host"))),
        "mounts are named by their node paths:\n{df}"
    );
    // The agent counts what it ran on its /metrics (health port 9116): the agent of the
    // node the Diagnosis was about, when there are several.
    let agent = super::agent_pod_on(config, node_name, ".status.podIP");
    let (_, agent_metrics) = crate::e2e_support::http_get_at(&agent, 9116, "/metrics")
        .expect("the agent serves /metrics");
    assert!(
        agent_metrics.contains("operon_diagnoses_total{phase=\"Succeeded\",role=\"agent\"}"),
        "{agent_metrics}"
    );
    let plan = result(&status, "operation.cleanup.output");
    eprintln!("disk-cleanup-plan on the node:\n{plan}");
    assert!(plan.contains("% full;"), "{plan}");
}
