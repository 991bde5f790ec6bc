//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): audits of existing
//! objects into PolicyReports. The report CRDs of `deploy/crds/wgpolicyk8s.io.yaml` are
//! applied (and left, as a cluster may use them), ConfigMaps created in a scratch
//! namespace before any hook exists; then `operon audit` writes one PolicyReport per
//! ConfigMap, which `kubectl get policyreports` shows with its counts, and a second
//! audit after a ConfigMap is deleted leaves its report gone; `operon serve
//! --audit-interval` writes the same reports on its own.

use crate::e2e_support::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A hooks directory with one validating hook: ConfigMaps labelled
/// `operon-e2e-audit=<label>` with `data.verdict: deny` are denied.
fn hooks(dir: &Path, label: &str) -> PathBuf {
    let hooks = dir.join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let script = format!(
        r#"#!/usr/bin/env bash
set -euo pipefail
if [[ "${{1:-}}" == "--config" ]]; then
  cat <<CONFIG
configVersion: v1
kubernetesValidating:
- name: verdicts.e2e.operon.dev
  labelSelector:
    matchLabels: {{operon-e2e-audit: "{label}"}}
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["configmaps"]
    scope: Namespaced
CONFIG
  exit 0
fi
verdict=$(jq -r '.[0].review.request.object.data.verdict // ""' "$BINDING_CONTEXT_PATH")
if [[ "$verdict" == "deny" ]]; then
  echo '{{"allowed": false, "message": "this ConfigMap says deny"}}' > "$VALIDATING_RESPONSE_PATH"
else
  echo '{{"allowed": true}}' > "$VALIDATING_RESPONSE_PATH"
fi
"#
    );
    let path = hooks.join("verdicts.sh");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    hooks
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// Applies the report CRDs and waits until both are served.
fn apply_report_crds(kubeconfig: &Path) {
    let crds = repo("deploy/crds/wgpolicyk8s.io.yaml");
    kubectl(kubeconfig, &["apply", "-f", crds.to_str().unwrap()]);
    kubectl(
        kubeconfig,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/policyreports.wgpolicyk8s.io",
            "crd/clusterpolicyreports.wgpolicyk8s.io",
        ],
    );
}

/// Two labelled ConfigMaps in `namespace`: `fine` and `bad` (which the hook denies).
fn config_maps(kubeconfig: &Path, namespace: &str, label: &str) {
    for (name, verdict) in [("fine", "allow"), ("bad", "deny")] {
        kubectl(
            kubeconfig,
            &[
                "-n",
                namespace,
                "create",
                "configmap",
                name,
                &format!("--from-literal=verdict={verdict}"),
            ],
        );
        kubectl(
            kubeconfig,
            &[
                "-n",
                namespace,
                "label",
                "configmap",
                name,
                &format!("operon-e2e-audit={label}"),
            ],
        );
    }
}

/// The PolicyReports of `namespace`: (object name, pass, fail).
fn reports(kubeconfig: &Path, namespace: &str) -> Vec<(String, u64, u64)> {
    let text = kubectl(
        kubeconfig,
        &["-n", namespace, "get", "policyreports", "-o", "json"],
    );
    let list: Value = serde_json::from_str(&text).unwrap();
    let mut found: Vec<(String, u64, u64)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["scope"]["name"].as_str().unwrap().to_owned(),
                r["summary"]["pass"].as_u64().unwrap(),
                r["summary"]["fail"].as_u64().unwrap(),
            )
        })
        .collect();
    found.sort();
    found
}

fn audit(kubeconfig: &Path, hooks: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .arg("audit")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--hooks-dir")
        .arg(hooks)
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "operon audit: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: set OPERON_E2E_KUBECONFIG"]
async fn operon_audit_writes_policy_reports_that_kubectl_counts() {
    let kubeconfig = kubeconfig();
    apply_report_crds(&kubeconfig);
    let cluster = connect(&kubeconfig).await;
    let scratch = Scratch::new(&cluster, &kubeconfig, "audit").await;
    let ns = scratch.name.as_str();
    config_maps(&kubeconfig, ns, ns);
    let dir = tempfile::tempdir().unwrap();
    let hooks = hooks(dir.path(), ns);

    let out = audit(&kubeconfig, &hooks);
    assert!(
        out.contains("2 objects, 2 reviews: 1 pass, 1 fail, 0 warn, 0 error, 0 skip"),
        "{out}"
    );
    assert!(out.contains("reports: 2 written"), "{out}");
    assert_eq!(
        reports(&kubeconfig, ns),
        [("bad".to_owned(), 0, 1), ("fine".to_owned(), 1, 0)]
    );
    // The API server prints the counts from the CRD's printer columns.
    let table = kubectl(&kubeconfig, &["get", "policyreports", "-A"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAMESPACE",
            "NAME",
            "PASS",
            "FAIL",
            "WARN",
            "ERROR",
            "SKIP",
            "AGE"
        ],
        "{table}"
    );
    let bad_row = table
        .lines()
        .find(|l| l.starts_with(ns) && l.split_whitespace().nth(3) == Some("1"))
        .unwrap_or_else(|| panic!("a row of {ns} with one failure in {table}"));
    assert_eq!(bad_row.split_whitespace().nth(2), Some("0"), "{table}");
    // The report is written by operon, with server-side apply.
    let written = kubectl(
        &kubeconfig,
        &[
            "-n",
            ns,
            "get",
            "policyreports",
            "-o",
            "json",
            "--show-managed-fields",
        ],
    );
    let written: Value = serde_json::from_str(&written).unwrap();
    let managed = &written["items"][0]["metadata"]["managedFields"][0];
    assert_eq!(managed["manager"], "operon");
    assert_eq!(managed["operation"], "Apply");

    // Unchanged: nothing written again. Deleted: its report goes.
    let out = audit(&kubeconfig, &hooks);
    assert!(out.contains("reports: 0 written, 2 unchanged"), "{out}");
    kubectl(&kubeconfig, &["-n", ns, "delete", "configmap", "bad"]);
    audit(&kubeconfig, &hooks);
    assert_eq!(reports(&kubeconfig, ns), [("fine".to_owned(), 1, 0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: set OPERON_E2E_KUBECONFIG"]
async fn operon_serve_audits_on_its_interval() {
    let kubeconfig = kubeconfig();
    apply_report_crds(&kubeconfig);
    let cluster = connect(&kubeconfig).await;
    let scratch = Scratch::new(&cluster, &kubeconfig, "audit-serve").await;
    let ns = scratch.name.clone();
    config_maps(&kubeconfig, &ns, &ns);
    let dir = tempfile::tempdir().unwrap();
    let hooks = hooks(dir.path(), &ns);
    let (_ca, cert, key) = certificates(dir.path());
    let webhook_port = free_port().to_string();
    let _serve = serve(
        &kubeconfig,
        &hooks,
        &[
            "--validating-webhook-server-cert",
            cert.to_str().unwrap(),
            "--validating-webhook-server-key",
            key.to_str().unwrap(),
            "--validating-webhook-listen-address",
            "127.0.0.1",
            "--validating-webhook-listen-port",
            &webhook_port,
            "--no-controllers",
            "--audit-interval",
            "2s",
        ],
        "audit-serve",
    );
    let found = eventually("the audit's reports", Duration::from_secs(60), async || {
        let found = reports(&kubeconfig, &ns);
        (found.len() == 2).then_some(found)
    })
    .await;
    assert_eq!(found, [("bad".to_owned(), 0, 1), ("fine".to_owned(), 1, 0)]);
    kubectl(&kubeconfig, &["-n", &ns, "delete", "configmap", "bad"]);
    eventually(
        "the deleted ConfigMap's report gone",
        Duration::from_secs(60),
        async || (reports(&kubeconfig, &ns).len() == 1).then_some(()),
    )
    .await;
}
