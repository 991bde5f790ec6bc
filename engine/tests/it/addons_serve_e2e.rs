//! `operon serve --modules-dir` against a real Kubernetes API server: ignored unless
//! run with `--ignored` (CI has no API server), and then failing unless
//! `OPERON_E2E_KUBECONFIG` names a kubeconfig (cluster-admin). Charts are rendered by
//! Helm's engine from `helm-python-sdk` (failing, naming it, when it is missing).
//!
//! The example modules directory (global hooks, a Helm chart module with an `enabled`
//! script and a `beforeHelm` hook, a plain-manifests module whose `enabled` script
//! needs the first and whose `afterHelm` hook patches its ConfigMap), values from a
//! ConfigMap, converged by the leader of `operon serve` in a scratch namespace: the
//! same task order as `operon modules run`, the objects applied with the values the
//! hooks computed, the queue on the debug socket, the module metrics on `/metrics`; a
//! ConfigMap change converges again (the time it took is printed), and disabling the
//! chart's module deletes its objects and, through the other's `enabled` script, the
//! other's. `/readyz` waits for the startup convergence, and a `beforeHelm` hook reads
//! its kubernetes binding's snapshot.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::e2e_support::*;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../operations/addon-modules")
}

fn helm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/addons/helm")
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
    let out = kubectl(kubeconfig, &["-n", ns, "get", kind, name, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// Writes the ConfigMap `addon-operator` of `ns` (server-side apply, as a user would).
fn set_config(kubeconfig: &Path, ns: &str, echo_server: &str, echo_enabled: bool) {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "addon-operator", "namespace": ns},
        "data": {
            "global": "clusterName: e2e\n",
            "echoServer": echo_server,
            "echoServerEnabled": echo_enabled.to_string(),
            "configReporter": format!("namespace: {ns}\n"),
            "configReporterEnabled": "true",
        },
    });
    let mut apply = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "apply",
            "--server-side",
            "--field-manager=e2e-user",
            "-f",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    apply
        .stdin
        .take()
        .unwrap()
        .write_all(config.to_string().as_bytes())
        .unwrap();
    assert!(apply.wait().unwrap().success());
}

/// The module tasks `operon serve` logged as done, in order.
fn tasks_done(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("module task done"))
        .filter_map(|l| {
            let start = l.find("task=")? + "task=".len();
            let rest = &l[start..];
            Some(rest.split_whitespace().next()?.trim_matches('"').to_owned())
        })
        .collect()
}

fn modules_args<'a>(ex: &'a Path, ns: &'a str) -> Vec<String> {
    vec![
        "--modules-dir".into(),
        ex.join("modules").display().to_string(),
        "--global-hooks-dir".into(),
        ex.join("global-hooks").display().to_string(),
        "--helm-binary".into(),
        helm().display().to_string(),
        "--config-map".into(),
        format!("{ns}/addon-operator"),
    ]
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn serve_converges_modules_and_follows_the_config_map() {
    let kubeconfig = kubeconfig();
    crate::e2e_support::require_helm_python();
    let cluster = connect(&kubeconfig).await;
    let scratch = Scratch::new(&cluster, &kubeconfig, "operon-serve-modules").await;
    let ns = scratch.name.clone();
    let ex = example();
    set_config(&kubeconfig, &ns, "replicas: 2\nmessage: hi\n", true);

    // What `operon modules run` does with the same directory and ConfigMap (a dry run:
    // it changes nothing), for the task order serve must follow.
    let local = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args([
            "modules",
            "run",
            "--once",
            "--dry-run",
            "-n",
            &ns,
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .args(modules_args(&ex, &ns))
        .output()
        .unwrap();
    let local_log = String::from_utf8_lossy(&local.stdout).into_owned();
    assert!(local.status.success(), "{local_log}");
    let local_order: Vec<String> = local_log
        .lines()
        .filter_map(|l| {
            let task = l.split_whitespace().nth(1)?.strip_suffix(':')?;
            l.contains(": ok in ").then(|| task.to_owned())
        })
        .collect();

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("hooks")).unwrap();
    let mut extra = modules_args(&ex, &ns);
    extra.extend([
        "--modules-namespace".into(),
        ns.clone(),
        "--leader-elect".into(),
        "--leader-election-namespace".into(),
        ns.clone(),
        "--no-controllers".into(),
        "--kube-client-qps".into(),
        "0".into(),
    ]);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let served = serve(&kubeconfig, &dir.path().join("hooks"), &extra, "modules");
    let log_path = dir.path().join("modules.log");
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let deployment = eventually(
        "the echo-server Deployment",
        Duration::from_secs(90),
        async || get(&kubeconfig, &ns, "deployment", "echo-server"),
    )
    .await;
    assert_eq!(deployment["spec"]["replicas"], 2, "{}", log());
    // The beforeHelm hook's greeting, from the ConfigMap's message and global values.
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["args"][1],
        "-text=hi from e2e"
    );
    // config-reporter's afterHelm hook patched its ConfigMap with the values it saw.
    let report = eventually(
        "config-reporter's afterHelm patch",
        Duration::from_secs(60),
        async || {
            get(&kubeconfig, &ns, "configmap", "config-reporter")
                .filter(|cm| cm["data"].get("enabledModules").is_some())
        },
    )
    .await;
    assert_eq!(
        report["data"]["enabledModules"],
        "echo-server,config-reporter"
    );
    assert_eq!(report["data"]["clusterName"], "e2e");
    assert_eq!(
        report["data"]["purpose"],
        "plain manifests, applied as written"
    );
    eventually("the afterAll hook", Duration::from_secs(30), async || {
        tasks_done(&log())
            .iter()
            .any(|t| t.starts_with("GlobalHookRun:afterAll"))
            .then_some(())
    })
    .await;
    assert_eq!(tasks_done(&log()), local_order, "{}", log());

    // The module queue on the debug socket, the module metrics on /metrics.
    let queue = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["modules", "queue", "-o", "json", "--debug-unix-socket"])
        .arg(dir.path().join("modules.socket"))
        .output()
        .unwrap();
    assert!(
        queue.status.success(),
        "{}",
        String::from_utf8_lossy(&queue.stderr)
    );
    let queue: Value = serde_json::from_slice(&queue.stdout).unwrap();
    assert_eq!(queue["runningQueue"], true, "{queue}");
    assert_eq!(
        queue["enabledModules"],
        serde_json::json!(["echo-server", "config-reporter"])
    );
    let (status, metrics) = http_get(served.port, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(
        metrics.contains("operon_module_enabled{module=\"echo-server\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("operon_module_run_seconds_count{module=\"config-reporter\"} 1"),
        "{metrics}"
    );

    // A values change converges again.
    let changed = Instant::now();
    set_config(&kubeconfig, &ns, "replicas: 3\nmessage: hi again\n", true);
    eventually(
        "the Deployment with the new values",
        Duration::from_secs(60),
        async || {
            get(&kubeconfig, &ns, "deployment", "echo-server")
                .filter(|d| d["spec"]["replicas"] == 3)
        },
    )
    .await;
    eprintln!(
        "ConfigMap change to the Deployment updated, seen by kubectl polling: {:?}",
        changed.elapsed()
    );

    // Disabling the chart's module deletes what it applied; the other module's enabled
    // script now says false, so its objects go too.
    set_config(&kubeconfig, &ns, "replicas: 3\n", false);
    for (kind, name) in [
        ("deployment", "echo-server"),
        ("service", "echo-server"),
        ("configmap", "operon-module-echo-server"),
        ("configmap", "config-reporter"),
        ("configmap", "operon-module-config-reporter"),
    ] {
        eventually(
            &format!("{kind} {name} deleted"),
            Duration::from_secs(60),
            async || get(&kubeconfig, &ns, kind, name).is_none().then_some(()),
        )
        .await;
    }
    let log = log();
    assert!(log.contains("ModuleDelete:echo-server"), "{log}");
    assert!(
        log.contains("module applied after the ConfigMap change"),
        "{log}"
    );
    drop(served);
}

/// A module with `crds/` and a custom resource of that CRD in its manifests: the CRD
/// goes in (ModuleEnsureCRDs) and is established before the ModuleRun applies the
/// resource; disabling the module deletes the resource and keeps the CRD.
#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn serve_applies_a_modules_crds_before_its_objects() {
    let kubeconfig = kubeconfig();
    let cluster = connect(&kubeconfig).await;
    let scratch = Scratch::new(&cluster, &kubeconfig, "operon-serve-crds").await;
    let ns = scratch.name.clone();
    let group = format!("{ns}.example.com");
    let crd_name = format!("gadgets.{group}");
    let _crd = ClusterScoped {
        kubeconfig: kubeconfig.clone(),
        objects: vec![("customresourcedefinition", crd_name.clone())],
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |path: &str, text: &str| {
        let path = d.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("hooks/.keep", "");
    write("modules/values.yaml", "gadgetsEnabled: true\n");
    write(
        "modules/001-gadgets/crds/gadgets.yaml",
        &format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
             metadata:\n  name: {crd_name}\nspec:\n  group: {group}\n  scope: Namespaced\n\
             \x20 names: {{plural: gadgets, singular: gadget, kind: Gadget}}\n  versions:\n\
             \x20 - name: v1\n    served: true\n    storage: true\n    schema:\n\
             \x20     openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n"
        ),
    );
    write(
        "modules/001-gadgets/manifests/gadget.yaml",
        &format!(
            "apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: first\nspec:\n  size: 3\n"
        ),
    );
    let served = serve(
        &kubeconfig,
        &d.join("hooks"),
        &[
            "--modules-dir",
            d.join("modules").to_str().unwrap(),
            "--modules-namespace",
            &ns,
            "--no-controllers",
        ],
        "crds",
    );
    let log = || std::fs::read_to_string(d.join("crds.log")).unwrap_or_default();
    let gadget = eventually("the Gadget", Duration::from_secs(60), async || {
        get(&kubeconfig, &ns, &format!("gadgets.{group}"), "first")
    })
    .await;
    assert_eq!(gadget["spec"]["size"], 3);
    // The object is applied before its ModuleRun logs that it is done.
    let done = eventually("the ModuleRun", Duration::from_secs(30), async || {
        let done = tasks_done(&log());
        done.iter()
            .any(|t| t.starts_with("ModuleRun"))
            .then_some(done)
    })
    .await;
    assert_eq!(
        done,
        [
            "DiscoverModules",
            "ModuleEnsureCRDs:gadgets",
            "ModuleRun:gadgets"
        ],
        "{}",
        log()
    );

    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "addon-operator", "namespace": ns},
        "data": {"gadgetsEnabled": "false"},
    });
    let mut apply = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    apply
        .stdin
        .take()
        .unwrap()
        .write_all(config.to_string().as_bytes())
        .unwrap();
    assert!(apply.wait().unwrap().success());
    eventually("the Gadget deleted", Duration::from_secs(60), async || {
        get(&kubeconfig, &ns, &format!("gadgets.{group}"), "first")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        kubectl(&kubeconfig, &["get", "crd", &crd_name])
            .status
            .success(),
        "the CRD stays"
    );
    drop(served);
}

/// `/readyz` answers 503 naming the ModuleRun that keeps failing (a manifest of a kind
/// the API server does not serve) and 200 once the fixed manifest is applied; the
/// module's `beforeHelm` hook reads the snapshot of its kubernetes binding (the
/// labelled ConfigMaps, by namespace then name), as addon-operator gives it.
#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn serve_is_ready_after_the_startup_convergence_and_before_helm_reads_snapshots() {
    let kubeconfig = kubeconfig();
    let cluster = connect(&kubeconfig).await;
    let scratch = Scratch::new(&cluster, &kubeconfig, "operon-serve-ready").await;
    let ns = scratch.name.clone();
    for name in ["backend-b", "backend-a", "other"] {
        let role = if name == "other" { "other" } else { "backend" };
        let cm = kubectl(
            &kubeconfig,
            &["-n", &ns, "create", "configmap", name, "--from-literal=x=1"],
        );
        assert!(cm.status.success(), "{cm:?}");
        let label = kubectl(
            &kubeconfig,
            &[
                "-n",
                &ns,
                "label",
                "configmap",
                name,
                &format!("role={role}"),
            ],
        );
        assert!(label.status.success(), "{label:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |path: &str, text: &str| {
        let path = d.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        let mode = if path.extension().is_some_and(|e| e == "sh") {
            0o755
        } else {
            0o644
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    write("hooks/.keep", "");
    write("modules/values.yaml", "webEnabled: true\n");
    write(
        "modules/001-web/hooks/backends.sh",
        &format!(
            r#"#!/bin/bash
if [ "$1" = --config ]; then
  echo '{{"configVersion":"v1","beforeHelm":1,"kubernetes":[{{"name":"backends","kind":"ConfigMap",
    "namespace":{{"nameSelector":{{"matchNames":["{ns}"]}}}},
    "labelSelector":{{"matchLabels":{{"role":"backend"}}}},
    "jqFilter":".metadata.name","keepFullObjectsInMemory":false}}]}}'
  exit 0
fi
if [ "$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")" = beforeHelm ]; then
  jq -c '{{operation: "CreateOrUpdate", object: {{apiVersion: "v1", kind: "ConfigMap",
    metadata: {{name: "seen-before-helm", namespace: "{ns}"}}, data: {{contexts: tojson}}}}}}' \
    "$BINDING_CONTEXT_PATH" > "$KUBERNETES_PATCH_PATH"
fi
"#
        ),
    );
    let manifest = "modules/001-web/manifests/app.yaml";
    write(
        manifest,
        "apiVersion: unserved.example.com/v1\nkind: Widget\nmetadata:\n  name: app\n",
    );
    let served = serve(
        &kubeconfig,
        &d.join("hooks"),
        &[
            "--modules-dir",
            d.join("modules").to_str().unwrap(),
            "--modules-namespace",
            &ns,
            "--no-controllers",
        ],
        "ready",
    );
    let log = || std::fs::read_to_string(d.join("ready.log")).unwrap_or_default();
    let (status, body) = eventually(
        "a failed ModuleRun on /readyz",
        Duration::from_secs(60),
        async || http_get(served.port, "/readyz").filter(|(_, body)| body.contains("(failed")),
    )
    .await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.starts_with(
            "waiting for the modules' startup convergence: ModuleRun:web (failed 1 time"
        ),
        "{body}"
    );
    write(
        manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: b\n",
    );
    eventually("/readyz ready", Duration::from_secs(60), async || {
        http_get(served.port, "/readyz").filter(|(status, _)| *status == 200)
    })
    .await;
    assert!(
        get(&kubeconfig, &ns, "configmap", "app").is_some(),
        "{}",
        log()
    );
    let seen = get(&kubeconfig, &ns, "configmap", "seen-before-helm").expect("the hook ran");
    let contexts: Value = serde_json::from_str(seen["data"]["contexts"].as_str().unwrap()).unwrap();
    assert_eq!(
        contexts,
        serde_json::json!([{"binding": "beforeHelm", "snapshots": {"backends": [
            {"filterResult": "backend-a"}, {"filterResult": "backend-b"}]}}])
    );
    drop(served);
}
