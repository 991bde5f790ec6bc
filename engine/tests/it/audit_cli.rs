//! `operon audit` end to end on `operations/examples/audit`: objects from files (the
//! reports printed as a table, YAML or JSON), and a cluster, the in-memory one behind
//! its local API server (the reports written, stale ones deleted on the next audit;
//! `--dry-run` writes nothing; a cluster without the report CRDs is refused).

use operon::cluster::Cluster as _;
use operon::cluster::local::{LocalApi, LocalCluster};
use operon::model::{ObjectRef, PatchOperation};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn hooks() -> String {
    repo("operations/examples/audit/hooks")
        .display()
        .to_string()
}

fn objects() -> String {
    repo("operations/examples/audit/objects.yaml")
        .display()
        .to_string()
}

fn operon(args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_operon"))
        .arg("audit")
        .args(args)
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .output()
        .expect("operon runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "operon audit failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn objects_from_files_are_audited_into_a_table() {
    let out = stdout(&operon(&["--hooks-dir", &hooks(), "--objects", &objects()]));
    let expected = "\
NAMESPACE  KIND       NAME     PASS  FAIL  WARN  ERROR  SKIP
           Namespace  sandbox  0     1     0     0      0
           Namespace  shop     1     0     0     0      0
sandbox    Pod        scratch  0     0     1     0      0
shop       Pod        cache    0     1     1     0      0
shop       Pod        web      2     0     0     0      0

fail Namespace sandbox: policies.sh namespace-owner.example.com (Deny): namespace sandbox names no owner (label owner)
fail Pod shop/cache: policies.sh pinned-images.example.com (Deny): image redis:latest is not pinned: use a version tag
warn Pod sandbox/scratch: policies.sh pinned-images.example.com (Deny): image busybox has no tag: it means latest
warn Pod shop/cache: policies.sh team-label.example.com (DryRun): the pod names no team (label team)

not audited: policies.sh no-exec.example.com: rules[0]: its operations [\"CONNECT\"] do not include CREATE, the operation an audit reviews

5 objects, 7 reviews: 3 pass, 2 fail, 2 warn, 0 error, 0 skip
";
    assert_eq!(out, expected);
}

#[test]
fn objects_from_files_are_audited_into_reports() {
    let list: Value = serde_json::from_str(&stdout(&operon(&[
        "--hooks-dir",
        &hooks(),
        "--objects",
        &objects(),
        "-o",
        "json",
    ])))
    .unwrap();
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    let cache = items
        .iter()
        .find(|r| r["scope"]["name"] == "cache")
        .unwrap();
    assert_eq!(cache["kind"], "PolicyReport");
    assert_eq!(cache["metadata"]["namespace"], "shop");
    let results: Vec<(&str, &str, bool)> = cache["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().unwrap(),
                r["result"].as_str().unwrap(),
                r["scored"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            ("pinned-images.example.com", "fail", true),
            ("team-label.example.com", "warn", false)
        ]
    );
    let yaml = stdout(&operon(&[
        "--hooks-dir",
        &hooks(),
        "--objects",
        &objects(),
        "-o",
        "yaml",
    ]));
    let from_yaml: Value = yaml_serde::from_str(&yaml).unwrap();
    assert_eq!(from_yaml["items"].as_array().unwrap().len(), 5);
}

#[test]
fn bad_flags_are_refused_naming_them() {
    let out = operon(&[
        "--hooks-dir",
        &hooks(),
        "--objects",
        &objects(),
        "--rate",
        "0",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid value '0' for '--rate <RATE>'")
            && err.contains("is not a number of reviews per second above 0"),
        "{err}"
    );
    let out = operon(&[
        "--hooks-dir",
        &hooks(),
        "--objects",
        &objects(),
        "--kubeconfig",
        "/nowhere",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be used with"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["serve", "--audit-interval", "0s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "invalid value '0s' for '--audit-interval <AUDIT_INTERVAL>': \"0s\" is no pause"
        ),
        "{err}"
    );
    let empty = tempfile::tempdir().unwrap();
    let out = operon(&[
        "--hooks-dir",
        &empty.path().display().to_string(),
        "--objects",
        &objects(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing to audit"), "{err}");
}

/// The example's objects in the in-memory cluster (with the report CRDs when
/// `crds`), served by its local API.
async fn served(crds: bool) -> (Arc<LocalCluster>, LocalApi) {
    let cluster = Arc::new(LocalCluster::new());
    if crds {
        cluster
            .load_file(repo("deploy/crds/wgpolicyk8s.io.yaml"))
            .unwrap();
    }
    cluster.load_file(objects()).unwrap();
    let api = LocalApi::start(cluster.clone()).await.unwrap();
    (cluster, api)
}

/// `operon audit` against `api`, run off the runtime that serves it.
async fn audit_cluster(api: &LocalApi, extra: &[&str]) -> Output {
    let mut args = vec![
        "--hooks-dir".to_owned(),
        hooks(),
        "--kubeconfig".to_owned(),
        api.kubeconfig().display().to_string(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        operon(&args)
    })
    .await
    .unwrap()
}

/// The reports in `cluster`, as `KIND NAMESPACE/NAME pass fail warn`, sorted.
fn reports(cluster: &LocalCluster) -> Vec<String> {
    let mut found: Vec<String> = cluster
        .objects()
        .into_iter()
        .filter(|o| o["apiVersion"] == "wgpolicyk8s.io/v1alpha2")
        .map(|o| {
            let scope = &o["scope"];
            let summary = &o["summary"];
            format!(
                "{} {}/{} {} {} {}",
                o["kind"].as_str().unwrap(),
                scope["namespace"].as_str().unwrap_or(""),
                scope["name"].as_str().unwrap(),
                summary["pass"],
                summary["fail"],
                summary["warn"]
            )
        })
        .collect();
    found.sort();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clusters_objects_are_audited_into_written_reports() {
    let (cluster, api) = served(true).await;

    let dry = stdout(&audit_cluster(&api, &["--dry-run"]).await);
    assert!(dry.ends_with("(dry run: no report written)\n"), "{dry}");
    assert!(reports(&cluster).is_empty());

    let out = stdout(&audit_cluster(&api, &[]).await);
    assert!(
        out.contains("5 objects, 7 reviews: 3 pass, 2 fail, 2 warn, 0 error, 0 skip\n"),
        "{out}"
    );
    assert!(
        out.ends_with("reports: 5 written, 0 unchanged, 0 stale deleted\n"),
        "{out}"
    );
    assert_eq!(
        reports(&cluster),
        [
            "ClusterPolicyReport /sandbox 0 1 0",
            "ClusterPolicyReport /shop 1 0 0",
            "PolicyReport sandbox/scratch 0 0 1",
            "PolicyReport shop/cache 0 1 1",
            "PolicyReport shop/web 2 0 0",
        ]
    );

    cluster
        .apply(&PatchOperation::Delete(ObjectRef {
            api_version: Some("v1".into()),
            kind: "Pod".into(),
            namespace: Some("shop".into()),
            name: "cache".into(),
        }))
        .await
        .unwrap();
    let out = stdout(&audit_cluster(&api, &[]).await);
    assert!(
        out.ends_with("reports: 0 written, 4 unchanged, 1 stale deleted\n"),
        "{out}"
    );
    assert!(!reports(&cluster).iter().any(|r| r.contains("cache")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_the_report_crds_is_refused() {
    let (cluster, api) = served(false).await;
    let out = audit_cluster(&api, &[]).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "the PolicyReport and ClusterPolicyReport CRDs (wgpolicyk8s.io/v1alpha2) are not installed: kubectl apply -f deploy/crds/wgpolicyk8s.io.yaml"
        ),
        "{err}"
    );
    // What it would find is still there to see.
    let dry = stdout(&audit_cluster(&api, &["-o", "json"]).await);
    let list: Value = serde_json::from_str(&dry).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 5);
    assert!(reports(&cluster).is_empty());
}
