//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): `operon serve`
//! registers its admission webhook for Operon's own kinds (`resources.operon.dev`) by
//! URL with a test CA, and the API server refuses through it, at `kubectl apply`, a
//! Hook with every problem that shows without its module (its module reference,
//! permissions, overrides and Job settings), each field named; a valid Hook is stored,
//! and an update that makes it invalid is refused, leaving the stored Hook as it was.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::e2e_support::*;

/// `kubectl apply -f -` of `manifest` in `namespace`: whether it succeeded, and what
/// kubectl printed (standard output, then standard error).
fn apply(kubeconfig: &Path, namespace: &str, manifest: &str) -> (bool, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", namespace, "apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// The fields of a refusal's problems, in order (`- FIELD: REASON` lines), after
/// checking that `resources.operon.dev` refused `object` with `count` problems.
fn refused_fields(refusal: &str, object: &str, count: usize) -> Vec<String> {
    let denied = "admission webhook \"resources.operon.dev\" denied the request: ";
    let heading = match count {
        1 => format!("{denied}{object} is invalid:"),
        n => format!("{denied}{object} has {n} problems:"),
    };
    assert!(refusal.contains(&heading), "{heading:?} in {refusal}");
    let fields: Vec<String> = refusal
        .lines()
        .filter_map(|line| line.strip_prefix("- "))
        .map(|problem| problem.split(": ").next().unwrap().to_owned())
        .collect();
    assert_eq!(fields.len(), count, "{refusal}");
    fields
}

/// A Hook with a problem in each part checked without its module.
fn broken_hook(name: &str) -> String {
    format!(
        r#"apiVersion: operon.dev/v1alpha1
kind: Hook
metadata:
  name: {name}
spec:
  module: hooks/labeler.wasm
  permissions:
    watch:
    - {{apiVersion: apps/v1/x, kind: Deployment}}
    - {{apiVersion: v1, kind: " ", namespaces: [""]}}
    patch:
    - {{apiVersion: /v1, kind: ConfigMap, operations: [MergePatch]}}
  overrides:
    timeout: soon
    executionMinInterval: "-1s"
    schedule:
    - {{name: tick, crontab: "61 * * * *"}}
    kubernetes:
    - {{name: ""}}
"#
    )
}

/// A Hook running as Jobs (`runOn: Job`) with the given `timeout` override.
fn job_hook(name: &str, module: &str, run_on: &str, timeout: &str, job: &str) -> String {
    format!(
        r#"apiVersion: operon.dev/v1alpha1
kind: Hook
metadata:
  name: {name}
spec:
  module: {module}
  runOn: {run_on}
  job: {job}
  permissions:
    watch:
    - {{apiVersion: v1, kind: Pod}}
    patch:
    - {{apiVersion: v1, kind: ConfigMap, operations: [MergePatch, Delete]}}
  overrides:
    timeout: {timeout}
    schedule:
    - {{name: tick, crontab: "*/5 * * * *"}}
"#
    )
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn hooks_are_refused_at_admission_with_every_problem_named() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-hook-admission").await;
    let ns = scratch.name.as_str();
    let run = format!("{:08x}", getrandom_u32());
    let configuration = format!("operon-e2e-hook-admission-{run}");
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("validatingwebhookconfiguration", configuration.clone()),
            ("mutatingwebhookconfiguration", configuration.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;

    // The admission server on a local port with a certificate of a test CA, which the
    // leader registers as caBundle with its URL.
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let (ca, cert, key) = certificates(dir.path());
    let port = free_port();
    let port_text = port.to_string();
    let url = format!("https://127.0.0.1:{port}");
    let store = dir.path().join("store");
    let mut flags: Vec<&str> = vec![
        "--leader-election-namespace",
        ns,
        "--validating-webhook-listen-address",
        "127.0.0.1",
        "--validating-webhook-listen-port",
        &port_text,
        "--validating-webhook-url-base",
        &url,
        "--validating-webhook-configuration-name",
        &configuration,
        "--mutating-webhook-configuration-name",
        &configuration,
    ];
    let files = [
        ("--validating-webhook-server-cert", cert.to_str().unwrap()),
        ("--validating-webhook-server-key", key.to_str().unwrap()),
        ("--validating-webhook-ca", ca.to_str().unwrap()),
        ("--module-store", store.to_str().unwrap()),
    ];
    for (flag, file) in files {
        flags.extend([flag, file]);
    }
    let server = serve(&path, &hooks, &flags, "hook-admission");
    eventually("operon serve ready", Duration::from_secs(60), async || {
        http_get(server.port, "/readyz").filter(|(code, _)| *code == 200)
    })
    .await;

    // Every problem of the broken Hook, once the registration reaches the API server's
    // webhook cache (asynchronously: a Hook stored before that is removed again).
    let broken = format!("broken-{run}");
    let refusal = eventually(
        "the refusal",
        Duration::from_secs(60),
        async || match apply(&path, ns, &broken_hook(&broken)) {
            (false, text) if text.contains("resources.operon.dev") => Some(text),
            (true, _) => {
                kubectl(&path, &["-n", ns, "delete", "hook", &broken]);
                None
            }
            (false, _) => None,
        },
    )
    .await;
    eprintln!("{refusal}");
    let fields = refused_fields(&refusal, &format!("Hook/{broken}"), 9);
    assert_eq!(
        fields,
        [
            "spec.module",
            "spec.permissions.watch[0].apiVersion",
            "spec.permissions.watch[1].kind",
            "spec.permissions.watch[1].namespaces[0]",
            "spec.permissions.patch[0].apiVersion",
            "spec.overrides.timeout",
            "spec.overrides.executionMinInterval",
            "spec.overrides.schedule[0].crontab",
            "spec.overrides.kubernetes[0].name",
        ],
        "{refusal}"
    );
    for reason in [
        "\"hooks/labeler.wasm\" is a path",
        "apiVersion \"apps/v1/x\" is not of the form",
        "\"soon\" is not a duration",
        "\"61 * * * *\": minute \"61\": 61 is outside 0-59",
        "empty: name the kubernetes binding it overrides",
    ] {
        assert!(refusal.contains(reason), "{reason:?} in {refusal}");
    }

    // Job settings: `spec.job` without `runOn: Job`, and the settings a Hook's Jobs
    // cannot have.
    let sandboxed = format!("sandboxed-{run}");
    let manifest = job_hook(
        &sandboxed,
        "labeler",
        "Sandbox",
        "30s",
        "{ttlSecondsAfterFinished: 60}",
    );
    let (stored, refusal) = apply(&path, ns, &manifest);
    assert!(!stored, "{refusal}");
    let fields = refused_fields(&refusal, &format!("Hook/{sandboxed}"), 1);
    assert_eq!(fields, ["spec.job"], "{refusal}");
    assert!(
        refusal.contains("is only used with runOn: Job"),
        "{refusal}"
    );
    let pinned = format!("pinned-{run}");
    let job = "{onDiagnosisNode: true, imagePullPolicy: Sometimes, ttlSecondsAfterFinished: -5}";
    let (stored, refusal) = apply(&path, ns, &job_hook(&pinned, "labeler", "Job", "30s", job));
    assert!(!stored, "{refusal}");
    let fields = refused_fields(&refusal, &format!("Hook/{pinned}"), 3);
    assert_eq!(
        fields,
        [
            "spec.job.onDiagnosisNode",
            "spec.job.imagePullPolicy",
            "spec.job.ttlSecondsAfterFinished",
        ],
        "{refusal}"
    );
    assert!(refusal.contains("use nodeSelector"), "{refusal}");
    for refused in [&broken, &sandboxed, &pinned] {
        let found = kubectl(
            &path,
            &["-n", ns, "get", "hooks", "--ignore-not-found", refused],
        );
        assert!(found.trim().is_empty(), "{refused} was stored: {found}");
    }

    // A valid Hook is stored, whether or not its module exists yet.
    let fine = format!("fine-{run}");
    let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
    let job = "{serviceAccountName: hooks, nodeSelector: {kubernetes.io/os: linux}, ttlSecondsAfterFinished: 60}";
    let (stored, text) = apply(&path, ns, &job_hook(&fine, &digest, "Job", "30s", job));
    assert!(stored, "{text}");
    assert!(
        text.contains(&format!("hook.operon.dev/{fine} created")),
        "{text}"
    );

    // An update that makes it invalid is refused and changes nothing.
    let (stored, refusal) = apply(
        &path,
        ns,
        &job_hook(&fine, "Labeler", "Sandbox", "soon", job),
    );
    assert!(!stored, "{refusal}");
    assert!(refusal.contains("error when applying patch"), "{refusal}");
    let fields = refused_fields(&refusal, &format!("Hook/{fine}"), 3);
    assert_eq!(
        fields,
        ["spec.module", "spec.overrides.timeout", "spec.job"],
        "{refusal}"
    );
    assert!(
        refusal.contains("\"Labeler\" is not a Module name"),
        "{refusal}"
    );
    let kept = kubectl(
        &path,
        &[
            "-n",
            ns,
            "get",
            "hook",
            &fine,
            "-o",
            "jsonpath={.spec.module} {.spec.runOn} {.spec.overrides.timeout}",
        ],
    );
    assert_eq!(kept, format!("{digest} Job 30s"));

    // A valid update still goes through.
    let (stored, text) = apply(&path, ns, &job_hook(&fine, &digest, "Job", "1m", job));
    assert!(stored, "{text}");
    let timeout = kubectl(
        &path,
        &[
            "-n",
            ns,
            "get",
            "hook",
            &fine,
            "-o",
            "jsonpath={.spec.overrides.timeout}",
        ],
    );
    assert_eq!(timeout, "1m");
    drop(server);
}
