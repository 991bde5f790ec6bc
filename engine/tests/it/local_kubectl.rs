//! The real `kubectl` against the local cluster's API server
//! (`operon::cluster::local::LocalApi`): reads with selectors, every kind of write and
//! patch, conflicts, a watch and the `create` generators (protobuf bodies); and a
//! shell-operator-style Secret copier (adapted from shell-operator's
//! `examples/104-secret-copier`) under `operon hook test`, whose copies land in the
//! scenario's objects. kubectl is installed by `.ci/setup`; without it these tests fail
//! saying so rather than pass unseen.

use operon::cluster::local::{LocalApi, LocalCluster};
use serde_json::Value;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

const FIXTURES: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: default}
status: {phase: Active}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
status: {phase: Active}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
status: {phase: Active}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: default, labels: {secret-copier: 'yes'}}
data: {password: cGFzcw==}
---
apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: team-a}
type: kubernetes.io/tls
";

fn kubectl_installed() {
    let found = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "kubectl is not installed (.ci/setup installs kubernetes-client)"
    );
}

/// Runs kubectl against `api` with `stdin`, with a home of its own for its cache.
fn kubectl(api: &LocalApi, home: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", api.kubeconfig())
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

/// kubectl's stdout, asserting it succeeded.
fn ok(api: &LocalApi, home: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(api, home, args, stdin);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn stored(cluster: &LocalCluster, kind: &str, namespace: &str, name: &str) -> Option<Value> {
    cluster.objects().into_iter().find(|o| {
        o["kind"] == kind
            && o["metadata"]["name"] == name
            && o["metadata"]["namespace"].as_str().unwrap_or_default() == namespace
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_writes_patches_and_watches_the_local_cluster() {
    kubectl_installed();
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(FIXTURES, "fixtures").unwrap();
    let api = LocalApi::start(cluster.clone()).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let run = |args: &[&str], stdin: Option<&str>| ok(&api, home, args, stdin);

    // Reads, with label and field selectors.
    let namespaces = run(&["get", "ns", "-o", "name"], None);
    assert_eq!(
        namespaces,
        "namespace/default\nnamespace/team-a\nnamespace/team-b\n"
    );
    assert_eq!(
        run(
            &[
                "get",
                "secret",
                "-A",
                "-l",
                "secret-copier=yes",
                "-o",
                "name"
            ],
            None
        ),
        "secret/creds\n"
    );
    assert_eq!(
        run(
            &[
                "get",
                "secret",
                "-A",
                "--field-selector",
                "type=kubernetes.io/tls",
                "-o",
                "name"
            ],
            None
        ),
        "secret/tls\n"
    );
    let secret: Value =
        serde_json::from_str(&run(&["get", "secret", "creds", "-o", "json"], None)).unwrap();
    assert_eq!(secret["data"]["password"], "cGFzcw==");

    // Create, client-side apply (create then update), label, annotate.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: '1'}\n";
    assert_eq!(
        run(&["create", "-f", "-"], Some(cm)),
        "configmap/app created\n"
    );
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  \
        selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    \
        spec:\n      containers:\n      - {name: app, image: 'nginx:1'}\n      - {name: side, image: busybox}\n";
    assert_eq!(
        run(&["apply", "-f", "-"], Some(deployment)),
        "deployment.apps/web created\n"
    );
    let updated = deployment.replace("nginx:1", "nginx:2");
    assert_eq!(
        run(&["apply", "-f", "-"], Some(&updated)),
        "deployment.apps/web configured\n"
    );
    run(&["label", "cm", "app", "team=x"], None);
    run(&["annotate", "cm", "app", "note=hi"], None);
    let app = stored(&cluster, "ConfigMap", "default", "app").unwrap();
    assert_eq!(app["metadata"]["labels"]["team"], "x");
    assert_eq!(app["metadata"]["annotations"]["note"], "hi");

    // The three patch types.
    run(
        &[
            "patch",
            "deploy",
            "web",
            "--type",
            "strategic",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox:2"}]}}}}"#,
        ],
        None,
    );
    let web = stored(&cluster, "Deployment", "default", "web").unwrap();
    let images: Vec<&str> = web["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["image"].as_str().unwrap())
        .collect();
    assert_eq!(images, ["nginx:2", "busybox:2"]);
    run(
        &[
            "patch",
            "cm",
            "app",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"b":"2"}}"#,
        ],
        None,
    );
    run(
        &[
            "patch",
            "cm",
            "app",
            "--type",
            "json",
            "-p",
            r#"[{"op":"test","path":"/data/a","value":"1"},{"op":"replace","path":"/data/a","value":"3"}]"#,
        ],
        None,
    );
    let failed = kubectl(
        &api,
        home,
        &[
            "patch",
            "cm",
            "app",
            "--type",
            "json",
            "-p",
            r#"[{"op":"test","path":"/data/a","value":"1"}]"#,
        ],
        None,
    );
    assert!(!failed.status.success());
    let app = stored(&cluster, "ConfigMap", "default", "app").unwrap();
    assert_eq!(app["data"], serde_json::json!({"a": "3", "b": "2"}));

    // Server-side apply, a conflict with another manager, and forcing it.
    let ssa = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: '5'}\n";
    let conflict = kubectl(
        &api,
        home,
        &["apply", "--server-side", "-f", "-"],
        Some(ssa),
    );
    assert!(!conflict.status.success());
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    assert!(
        stderr.contains("Apply failed with 1 conflict: conflict with \"kubectl-patch\""),
        "{stderr}"
    );
    run(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(ssa),
    );
    assert_eq!(
        stored(&cluster, "ConfigMap", "default", "app").unwrap()["data"]["a"],
        "5"
    );

    // Replace from a stale read is a conflict.
    let stale = run(&["get", "cm", "app", "-o", "json"], None);
    run(&["label", "cm", "app", "again=1"], None);
    let replaced = kubectl(&api, home, &["replace", "-f", "-"], Some(&stale));
    assert!(!replaced.status.success());
    let stderr = String::from_utf8_lossy(&replaced.stderr);
    assert!(
        stderr.contains(
            "Operation cannot be fulfilled on configmaps \"app\": the object has been modified"
        ),
        "{stderr}"
    );

    // A watch sees what another kubectl writes.
    let watch = Command::new("kubectl")
        .args([
            "get",
            "cm",
            "--watch-only",
            "-o",
            "name",
            "--request-timeout=4s",
        ])
        .env("KUBECONFIG", api.kubeconfig())
        .env("HOME", home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    run(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: watched}\n"),
    );
    run(&["delete", "cm", "watched"], None);
    let watched = watch.wait_with_output().unwrap();
    let lines = String::from_utf8_lossy(&watched.stdout);
    assert_eq!(lines.matches("configmap/watched").count(), 2, "{lines}");

    // Delete, and what is gone is gone from the cluster.
    assert_eq!(
        run(&["delete", "deploy", "web"], None),
        "deployment.apps \"web\" deleted\n"
    );
    assert!(stored(&cluster, "Deployment", "default", "web").is_none());
}

/// shell-operator's Secret copier (example 104, its `add_or_update_secret` hook and
/// `kubectl::replace_or_create`), adapted to a hooks directory of its own.
/// kubectl's generators send protobuf bodies; the local API decodes them and stores
/// what the API server would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_generators_write_the_local_cluster() {
    kubectl_installed();
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(FIXTURES, "fixtures").unwrap();
    let api = LocalApi::start(cluster.clone()).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let run = |args: &[&str]| ok(&api, home, args, None);

    run(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
    ]);
    let config_map = stored(&cluster, "ConfigMap", "default", "settings").unwrap();
    assert_eq!(config_map["data"], serde_json::json!({"mode": "fast"}));
    assert_eq!(
        config_map["metadata"]["managedFields"][0]["manager"],
        "kubectl-create"
    );

    run(&[
        "create",
        "secret",
        "generic",
        "creds2",
        "-n",
        "team-a",
        "--from-literal=password=pass",
    ]);
    let secret = stored(&cluster, "Secret", "team-a", "creds2").unwrap();
    assert_eq!(secret["data"]["password"], "cGFzcw==");

    run(&["create", "namespace", "team-c"]);
    assert!(stored(&cluster, "Namespace", "", "team-c").is_some());

    run(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--port=80",
        "--replicas=2",
    ]);
    let deployment = stored(&cluster, "Deployment", "default", "web").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(deployment["spec"]["selector"]["matchLabels"]["app"], "web");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.27");
    assert_eq!(
        container["ports"],
        serde_json::json!([{"containerPort": 80}])
    );
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["creationTimestamp"],
        Value::Null
    );

    run(&["create", "serviceaccount", "robot", "-n", "team-b"]);
    assert!(stored(&cluster, "ServiceAccount", "team-b", "robot").is_some());

    run(&[
        "create",
        "job",
        "once",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ]);
    let job = stored(&cluster, "Job", "default", "once").unwrap();
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(
        pod["containers"][0]["command"],
        serde_json::json!(["echo", "hi"])
    );
}

const COPIER: &str = r#"#!/usr/bin/env bash
set -euo pipefail
if [[ "${1:-}" == "--config" ]]; then
  cat <<EOF
{"configVersion": "v1",
 "kubernetes": [{"apiVersion": "v1", "kind": "Secret",
   "executeHookOnEvent": ["Added", "Modified"],
   "labelSelector": {"matchLabels": {"secret-copier": "yes"}},
   "namespace": {"nameSelector": {"matchNames": ["default"]}}}]}
EOF
  exit 0
fi

replace_or_create() {
  object=$(cat)
  if ! kubectl get -f - <<< "$object" >/dev/null 2>/dev/null; then
    kubectl create -f - <<< "$object" >/dev/null
  else
    kubectl replace --force -f - <<< "$object" >/dev/null
  fi
}

if [[ $(jq -r '.[0].type' "$BINDING_CONTEXT_PATH") == "Synchronization" ]]; then
  secrets=$(jq -r '.[0].objects[].object.metadata.name' "$BINDING_CONTEXT_PATH")
else
  secrets=$(jq -r '.[] | .object.metadata.name' "$BINDING_CONTEXT_PATH")
fi
for secret in $secrets; do
  for namespace in $(kubectl get namespace -o json |
                     jq -r '.items[] | select((.metadata.name == "default" | not) and .status.phase == "Active") | .metadata.name'); do
    kubectl -n default get secret "$secret" -o json |
      jq -r ".metadata.namespace=\"${namespace}\" |
             .metadata |= with_entries(select([.key] | inside([\"name\", \"namespace\", \"labels\"])))" |
      replace_or_create
  done
done
"#;

#[test]
fn a_secret_copier_hook_copies_with_kubectl_under_hook_test() {
    use std::os::unix::fs::PermissionsExt as _;
    kubectl_installed();
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("copy_secrets.sh");
    std::fs::write(&hook, COPIER).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let objects = dir.path().join("objects.yaml");
    std::fs::write(&objects, FIXTURES).unwrap();
    let added = dir.path().join("added.yaml");
    std::fs::write(
        &added,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: registry, namespace: default, labels: {secret-copier: 'yes'}}\ndata: {auth: eA==}\n",
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["hook", "test"])
        .arg(&hook)
        .arg("--objects")
        .arg(&objects)
        .arg("--event")
        .arg(format!("added:{}", added.display()))
        .args(["-o", "json"])
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{report:#}");
    let secrets: Vec<(String, String)> = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "Secret")
        .map(|o| {
            (
                o["metadata"]["namespace"].as_str().unwrap().to_owned(),
                o["metadata"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for namespace in ["team-a", "team-b"] {
        for name in ["creds", "registry"] {
            assert!(
                secrets.contains(&(namespace.to_owned(), name.to_owned())),
                "{namespace}/{name} missing from {secrets:?}"
            );
        }
    }
    let copy = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| {
            o["kind"] == "Secret"
                && o["metadata"]["namespace"] == "team-b"
                && o["metadata"]["name"] == "registry"
        })
        .unwrap();
    assert_eq!(copy["data"]["auth"], "eA==");
    assert_eq!(copy["metadata"]["labels"]["secret-copier"], "yes");
}
