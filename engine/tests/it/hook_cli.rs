//! `operon hook test` and `operon hook run` end to end on the example hooks.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn operon(args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(args)
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home.path())
        .output()
        .expect("operon runs")
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../operations/examples/hooks")
        .join(name)
        .display()
        .to_string()
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn pod_labeler_labels_pods_on_synchronization_and_events() {
    let out = operon(&[
        "hook",
        "test",
        operon_tests::POD_LABELER,
        "--objects",
        &fixture("pods.yaml"),
        "--event",
        &format!("added:{}", fixture("new-pod.yaml")),
        "--schedule",
        "resync",
        "-o",
        "json",
    ]);
    let d = json(&out);
    // The configuration in shell-operator's own v1 spelling, nothing unset shown.
    let config = &d["configuration"];
    assert_eq!(config["configVersion"], "v1");
    assert_eq!(config["kubernetes"][0]["jqFilter"], ".metadata.labels");
    assert_eq!(config["schedule"][0]["includeSnapshotsFrom"][0], "pods");
    assert!(!config.to_string().contains("null"), "{config}");
    let runs = d["runs"].as_array().unwrap();
    assert_eq!(runs[0]["bindingContexts"][0]["type"], "Synchronization");
    assert_eq!(
        runs[0]["bindingContexts"][0]["objects"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(runs[0]["patches"][0]["operation"], "MergePatch");
    assert_eq!(runs[0]["patches"][0]["name"], "web-1");
    assert_eq!(runs[0]["metrics"][0]["name"], "pods_labelled_total");
    let event = runs
        .iter()
        .find(|r| r["bindingContexts"][0]["watchEvent"] == "Added")
        .expect("an Added event run");
    assert_eq!(event["patches"][0]["name"], "web-2");
    assert_eq!(
        runs.last().unwrap()["bindingContexts"][0]["type"],
        "Schedule"
    );
    assert!(runs.iter().all(|r| r["status"] == "Succeeded"));
    for object in d["objects"].as_array().unwrap() {
        assert_eq!(object["metadata"]["labels"]["operon.dev/seen"], "true");
    }
}

#[test]
fn node_metrics_emits_grouped_gauges_on_schedule() {
    let out = operon(&[
        "hook",
        "test",
        operon_tests::NODE_METRICS,
        "--objects",
        &fixture("nodes.yaml"),
        "--schedule",
        "every-minute",
        "-o",
        "json",
    ]);
    let d = json(&out);
    let runs = d["runs"].as_array().unwrap();
    assert_eq!(
        runs.len(),
        1,
        "snapshot-only binding: only the schedule runs"
    );
    let context = &runs[0]["bindingContexts"][0];
    assert_eq!(context["type"], "Schedule");
    assert_eq!(context["snapshots"]["nodes"].as_array().unwrap().len(), 2);
    assert!(context["snapshots"]["nodes"][0].get("object").is_none());
    let metrics = runs[0]["metrics"].as_array().unwrap();
    assert_eq!(metrics[0]["action"], "expire");
    assert!(
        metrics
            .iter()
            .any(|m| m["name"] == "nodes_ready" && m["value"] == 1.0)
    );
}

#[test]
fn snapshot_report_gets_group_contexts_and_annotates_short_deployments() {
    let out = operon(&[
        "hook",
        "test",
        operon_tests::SNAPSHOT_REPORT,
        "--objects",
        &fixture("workloads.yaml"),
        "-o",
        "json",
    ]);
    let d = json(&out);
    let first = &d["runs"][0];
    // Both bindings' grouped Synchronizations combine into one run, compacted to the
    // last context (shell-operator's combineBindingContextForHook): it names the last
    // binding to synchronize, the group beside it.
    assert_eq!(first["bindingContexts"].as_array().unwrap().len(), 1);
    assert_eq!(first["bindingContexts"][0]["type"], "Group");
    assert_eq!(first["bindingContexts"][0]["binding"], "pods");
    assert_eq!(first["bindingContexts"][0]["groupName"], "workloads");
    let snapshots = first["bindingContexts"][0]["snapshots"]
        .as_object()
        .unwrap();
    assert!(snapshots.contains_key("deployments") && snapshots.contains_key("pods"));
    let deployment = d["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap();
    assert_eq!(
        deployment["metadata"]["annotations"]["operon.dev/unavailable-pods"],
        "1"
    );
}

#[test]
fn an_operation_or_a_bad_fixture_is_refused_clearly() {
    let out = operon(&["hook", "test", operon_tests::TRIVIAL]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("operon op run"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: v1\nkind: Pod\nmetadata: {}\n").unwrap();
    let out = operon(&[
        "hook",
        "test",
        operon_tests::POD_LABELER,
        "--objects",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.yaml"), "{stderr}");
    assert!(stderr.contains("metadata.name"), "{stderr}");
}

#[test]
fn hook_run_drives_the_full_loop_for_a_while() {
    let dir = tempfile::tempdir().unwrap();
    let hooks: PathBuf = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    std::fs::copy(operon_tests::POD_LABELER, hooks.join("pod-labeler.wasm")).unwrap();
    let out = operon(&[
        "hook",
        "run",
        hooks.to_str().unwrap(),
        "--objects",
        &fixture("pods.yaml"),
        "--for",
        "1s",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("pod-labeler.wasm [main] Succeeded"),
        "{stdout}"
    );
    assert!(stdout.contains("operon_hook_run_success_total"), "{stdout}");
    assert!(stdout.contains("pods_labelled_total"), "{stdout}");
}

#[test]
fn a_validating_hook_answers_an_admission_review() {
    let hook = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../operations/fixtures/shell-hooks/validating.sh")
        .display()
        .to_string();
    let out = operon(&[
        "hook",
        "test",
        &hook,
        "--review",
        &format!(
            "private-repo-policy.example.com:{}",
            fixture("admission-review.yaml")
        ),
        "-o",
        "json",
    ]);
    let d = json(&out);
    let run = &d["runs"][0];
    assert_eq!(run["bindingContexts"][0]["type"], "Validating");
    assert_eq!(
        run["bindingContexts"][0]["review"]["request"]["operation"],
        "CREATE"
    );
    assert_eq!(run["validating"]["allowed"], false);
    assert!(
        run["validating"]["message"]
            .as_str()
            .unwrap()
            .contains("registry.example.com")
    );
}

/// A hook in shell-operator's legacy format gets what shell-operator gives it: v0
/// binding contexts, no Synchronization run, one run per event (never merged).
#[test]
fn a_v0_hook_gets_v0_contexts_and_no_synchronization() {
    let hook = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../operations/fixtures/shell-hooks/legacy-v0.sh")
        .display()
        .to_string();
    let new_pod = fixture("new-pod.yaml");
    let out = operon(&[
        "hook",
        "test",
        &hook,
        "--objects",
        &fixture("pods.yaml"),
        "--event",
        &format!("added:{new_pod}"),
        "--event",
        &format!("modified:{new_pod}"),
        "--schedule",
        "hourly",
        "-o",
        "json",
    ]);
    let d = json(&out);
    let runs = d["runs"].as_array().unwrap();
    let contexts: Vec<&Value> = runs.iter().map(|r| &r["bindingContexts"]).collect();
    let pod_event = |event: &str| {
        serde_json::json!([{
            "binding": "pods",
            "resourceEvent": event,
            "resourceNamespace": "default",
            "resourceKind": "Pod",
            "resourceName": "web-2",
        }])
    };
    assert_eq!(contexts[0], &serde_json::json!([{"binding": "onStartup"}]));
    // No Synchronization run for the two listed pods; each event is a run of its own.
    assert_eq!(contexts[1], &pod_event("add"));
    assert_eq!(contexts[2], &pod_event("update"));
    assert_eq!(
        runs.last().unwrap()["bindingContexts"],
        serde_json::json!([{"binding": "hourly"}])
    );
    assert!(runs.iter().all(|r| r["status"] == "Succeeded"), "{runs:?}");
    let web2 = d["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["metadata"]["name"] == "web-2")
        .unwrap();
    assert_eq!(
        web2["metadata"]["labels"]["operon.dev/legacy-event"],
        "update"
    );
    // The configuration is shown in the v1 spelling, with what v0 means made explicit.
    let config = &d["configuration"];
    assert_eq!(
        config["kubernetes"][0]["executeHookOnSynchronization"],
        false
    );
}

/// A validating shell hook that writes no response, in a hooks directory whose parent
/// only its owner may enter (`/home/alice/hooks` with `/home/alice` at 0700): `operon
/// hook test` runs it as `operon serve` does, and its review gets the denial the
/// server sends, code 500.
#[test]
fn a_silent_validating_hook_under_a_private_directory_is_denied_as_the_server_denies() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let hooks = home.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    std::fs::set_permissions(&hooks, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hook = hooks.join("silent.sh");
    std::fs::write(
        &hook,
        "#!/usr/bin/env bash\n\
         if [[ \"${1:-}\" == --config ]]; then\n\
         printf 'configVersion: v1\\nkubernetesValidating:\\n- name: silent.example.com\\n  rules:\\n  - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}\\n'\n\
         exit 0\nfi\necho looked at it\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let review = hooks.join("review.yaml");
    std::fs::write(
        &review,
        "apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\nrequest:\n  uid: 705ab4f5-6393-11e8-b7cc-42010a800002\n  kind: {group: \"\", version: v1, kind: ConfigMap}\n  resource: {group: \"\", version: v1, resource: configmaps}\n  operation: CREATE\n  namespace: default\n  name: c\n  object: {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}}\n",
    )
    .unwrap();
    let out = operon(&[
        "hook",
        "test",
        hook.to_str().unwrap(),
        "--review",
        &format!("silent.example.com:{}", review.display()),
        "-o",
        "json",
    ]);
    let report = json(&out);
    let answer = &report["reviews"][0]["answer"]["response"];
    assert_eq!(answer["allowed"], false, "{report:#}");
    assert_eq!(answer["status"]["code"], 500, "{report:#}");
    assert_eq!(
        answer["status"]["message"],
        "hook silent.sh gave no answer for binding silent.example.com"
    );
    assert_eq!(answer["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(report["runs"][0]["stdout"], "looked at it\n", "{report:#}");
}
