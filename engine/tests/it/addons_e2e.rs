//! `operon modules run` against a real Kubernetes API server: ignored unless run with
//! `--ignored` (CI has no API server), and then failing unless `OPERON_E2E_KUBECONFIG`
//! names a kubeconfig (cluster-admin). Charts are rendered by Helm's engine from
//! `helm-python-sdk` (failing, naming it, when it is missing).
//!
//! The example modules directory in a scratch namespace, with values from a ConfigMap:
//! the chart's objects are applied by server-side apply (field manager `operon`) with a
//! release record; a later run with the Service disabled deletes it; disabling the
//! module deletes everything it applied.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::e2e_support::*;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../operations/addon-modules")
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs")
}

fn get(kubeconfig: &Path, ns: &str, kind: &str, name: &str) -> Option<Value> {
    let out = kubectl(
        kubeconfig,
        &[
            "-n",
            ns,
            "get",
            kind,
            name,
            "-o",
            "json",
            "--show-managed-fields",
        ],
    );
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

fn set_config(kubeconfig: &Path, ns: &str, echo_server: &str, enabled: &str) {
    let out = kubectl(
        kubeconfig,
        &[
            "-n",
            ns,
            "create",
            "configmap",
            "addon-operator",
            "--from-literal=global=clusterName: e2e\n",
            &format!("--from-literal=echoServer={echo_server}"),
            &format!("--from-literal=echoServerEnabled={enabled}"),
            // config-reporter patches a fixed namespace; it stays off here.
            "--from-literal=configReporterEnabled=false",
            "--dry-run=client",
            "-o",
            "yaml",
        ],
    );
    assert!(out.status.success());
    let mut apply = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    apply.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    assert!(apply.wait().unwrap().success());
}

fn run_once(kubeconfig: &Path, ns: &str) -> String {
    let ex = example();
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["modules", "run", "--once", "-n", ns, "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--modules-dir")
        .arg(ex.join("modules"))
        .arg("--global-hooks-dir")
        .arg(ex.join("global-hooks"))
        .arg("--helm-binary")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/addons/helm"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn modules_converge_against_an_api_server() {
    let kubeconfig = kubeconfig();
    crate::e2e_support::require_helm_python();
    let cluster = connect(&kubeconfig).await;
    let scratch = Scratch::new(&cluster, &kubeconfig, "operon-modules").await;
    let ns = scratch.name.as_str();

    set_config(&kubeconfig, ns, "replicas: 2\nmessage: hi\n", "true");
    let log = run_once(&kubeconfig, ns);
    assert!(log.contains("ModuleRun:echo-server: ok"), "{log}");
    assert!(
        log.contains("config-reporter: disabled by the ConfigMap"),
        "{log}"
    );
    let deployment = get(&kubeconfig, ns, "deployment", "echo-server").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["args"][1],
        "-text=hi from e2e"
    );
    let managers: Vec<(String, String)> = deployment["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["manager"].as_str().unwrap().to_owned(),
                m["operation"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("operon".to_owned(), "Apply".to_owned())),
        "{managers:?}"
    );
    assert!(get(&kubeconfig, ns, "service", "echo-server").is_some());
    let record = get(&kubeconfig, ns, "configmap", "operon-module-echo-server").unwrap();
    assert!(
        record["data"]["objects"]
            .as_str()
            .unwrap()
            .contains("Service")
    );

    // A new process: the release record tells it the Service was applied before.
    set_config(
        &kubeconfig,
        ns,
        "replicas: 3\nmessage: hi\nservice:\n  enabled: false\n",
        "true",
    );
    let log = run_once(&kubeconfig, ns);
    assert!(
        log.contains(&format!("deleted Service {ns}/echo-server")),
        "{log}"
    );
    assert_eq!(
        get(&kubeconfig, ns, "deployment", "echo-server").unwrap()["spec"]["replicas"],
        3
    );

    // Disabled: everything it applied goes, and its record.
    set_config(&kubeconfig, ns, "replicas: 3\n", "false");
    let log = run_once(&kubeconfig, ns);
    assert!(log.contains("ModuleDelete:echo-server: ok"), "{log}");
    for (kind, name) in [
        ("deployment", "echo-server"),
        ("configmap", "operon-module-echo-server"),
    ] {
        eventually(
            &format!("{kind} {name} deleted"),
            std::time::Duration::from_secs(20),
            async || get(&kubeconfig, ns, kind, name).is_none().then_some(()),
        )
        .await;
    }
}
