//! shell-operator compatibility: the bash hooks in `operations/fixtures/shell-hooks`,
//! run through [`ScriptHook`] in the script sandbox, give the typed configuration,
//! patches, metrics and responses a wasm hook gives.
//!
//! Every case goes through `&dyn Hook`, so comparing a hook with its wasm twin (as
//! `operon hook test` will) is one more `Hook` in the same case.

use operon::hooks::ScriptHook;
use operon::hooks::context::{event, object_and_filter, on_startup, schedule, validating};
use operon::hooks::{Hook, HookRun};
use operon::model::{BindingContext, Snapshot};
use operon::model::{HookInput, RunnerContext, WatchEvent};
use operon::model::{MetricOperation, Observation, Sample};
use operon::model::{ObjectRef, PatchOperation};
use operon::script::{ScriptSandbox, ScriptSandboxConfig};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn hooks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../operations/fixtures/shell-hooks")
}

/// A strict sandbox with its own runs directory, so a test can see it emptied.
fn sandbox(runs: &Path) -> ScriptSandbox {
    let launcher = crate::launcher();
    let mut config = ScriptSandboxConfig::new(launcher);
    config.runs_dir = runs.to_owned();
    config.strict = true;
    ScriptSandbox::new(config).unwrap()
}

fn hook(sandbox: &ScriptSandbox, name: &str) -> ScriptHook {
    let dir = hooks_dir();
    ScriptHook::new(sandbox.clone(), &dir, &dir.join(name))
}

fn input(contexts: Vec<BindingContext>) -> HookInput {
    HookInput {
        context: RunnerContext::new("hook-compat", Duration::from_secs(10)),
        binding_contexts: contexts,
    }
}

async fn handle(hook: &dyn Hook, contexts: Vec<BindingContext>) -> HookRun {
    let (run, _) = hook.handle(input(contexts), Duration::from_secs(20)).await;
    assert!(
        run.outcome.is_ok(),
        "{}: {:?}\nstdout: {}\nstderr: {}",
        hook.name(),
        run.outcome,
        run.stdout,
        run.stderr
    );
    run
}

fn sample(name: &str, value: f64, labels: &[(&str, &str)], group: Option<&str>) -> Sample {
    Sample {
        name: name.to_owned(),
        value,
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        group: group.map(str::to_owned),
    }
}

fn pod(namespace: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": namespace, "name": name, "labels": labels},
    })
}

#[test]
fn discovery_finds_the_executable_hooks_in_order() {
    let names: Vec<String> = operon::hooks::discover(&hooks_dir())
        .unwrap()
        .iter()
        .map(|p| p.strip_prefix(hooks_dir()).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "001-startup.sh",
            "admission.sh",
            "conversion.sh",
            "legacy-v0.sh",
            "metrics-groups.sh",
            "mutating.sh",
            "patch-stream.sh",
            "pod-labeler.sh",
            "rollout.sh",
            "schedule.sh",
            "validating.sh"
        ]
    );
}

/// Waits until every run directory under `runs` is gone: the sandbox removes them on a
/// thread of its own once their runs are dropped.
async fn runs_removed(runs: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left: Vec<_> = std::fs::read_dir(runs)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run directories left behind: {left:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn configurations_come_from_config_in_yaml_and_json() {
    let runs = tempfile::tempdir().unwrap();
    let sandbox = sandbox(runs.path());

    let config = hook(&sandbox, "001-startup.sh").configure().await.unwrap();
    assert_eq!(config.on_startup, Some(10));

    let config = hook(&sandbox, "schedule.sh").configure().await.unwrap();
    let binding = &config.schedule[0];
    assert_eq!(
        (
            binding.name.as_str(),
            binding.crontab.as_str(),
            binding.allow_failure
        ),
        ("every-5-min", "*/5 * * * *", true)
    );
    assert_eq!(binding.queue.as_deref(), Some("cron"));

    let config = hook(&sandbox, "pod-labeler.sh").configure().await.unwrap();
    let pods = &config.kubernetes[0];
    assert_eq!((pods.name.as_str(), pods.kind.as_str()), ("pods", "Pod"));
    assert_eq!(pods.jq_filter.as_deref(), Some(".metadata.labels"));
    assert_eq!(
        pods.execute_hook_on_event,
        Some(vec![WatchEvent::Added, WatchEvent::Modified])
    );
    assert_eq!(config.schedule[0].include_snapshots_from, ["pods"]);

    let config = hook(&sandbox, "validating.sh").configure().await.unwrap();
    let webhook = &config.kubernetes_validating[0];
    assert_eq!(webhook.name, "private-repo-policy.example.com");
    assert_eq!(webhook.rules[0].resources, ["crontabs"]);
    assert_eq!(webhook.rules[0].operations, ["CREATE"]);

    // Nothing of the runs is left behind.
    runs_removed(runs.path()).await;
}

#[tokio::test]
async fn on_startup_counts_and_logs() {
    let runs = tempfile::tempdir().unwrap();
    let sandbox = sandbox(runs.path());
    let run = handle(&hook(&sandbox, "001-startup.sh"), vec![on_startup()]).await;
    assert_eq!(run.stdout, "started: binding=onStartup contexts=1\n");
    assert_eq!(
        run.metrics,
        [MetricOperation::Add(sample(
            "startup_runs_total",
            1.0,
            &[("binding", "onStartup")],
            None
        ))]
    );
    assert!(run.patches.is_empty());
    assert_eq!(
        run.outcome.unwrap(),
        operon::model::HookOutput {
            validating: None,
            conversion: None
        }
    );
    runs_removed(runs.path()).await;
}

#[tokio::test]
async fn schedule_sees_combined_contexts() {
    let runs = tempfile::tempdir().unwrap();
    let sandbox = sandbox(runs.path());
    let contexts = vec![
        schedule("every-5-min", Vec::new()),
        schedule("every-5-min", Vec::new()),
    ];
    let run = handle(&hook(&sandbox, "schedule.sh"), contexts).await;
    assert_eq!(
        run.metrics,
        [MetricOperation::Set(sample(
            "schedule_contexts",
            2.0,
            &[("binding", "every-5-min"), ("type", "Schedule")],
            None
        ))]
    );
}

#[tokio::test]
async fn the_pod_labeler_patches_unlabelled_pods_from_events_and_snapshots() {
    let runs = tempfile::tempdir().unwrap();
    let sandbox = sandbox(runs.path());
    let unlabelled = pod("default", "web-1", json!({"app": "web"}));
    let labelled = pod("default", "web-2", json!({"operon.dev/seen": "true"}));
    let in_snapshot = pod("kube-system", "dns-1", json!({"k8s-app": "dns"}));
    let labels = |p: &Value| vec![p["metadata"]["labels"].clone()];
    let item = |p: &Value| object_and_filter(p, Some(&labels(p)), true);
    let contexts = vec![
        event("pods", WatchEvent::Added, item(&unlabelled), Vec::new()),
        event("pods", WatchEvent::Modified, item(&labelled), Vec::new()),
        schedule(
            "resync",
            vec![Snapshot {
                binding: "pods".to_owned(),
                objects: vec![item(&in_snapshot), item(&labelled)],
            }],
        ),
    ];
    let run = handle(&hook(&sandbox, "pod-labeler.sh"), contexts).await;
    let merge = |namespace: &str, name: &str| {
        PatchOperation::MergePatch(operon::model::PatchSpec {
            target: ObjectRef {
                api_version: None,
                kind: "Pod".to_owned(),
                namespace: Some(namespace.to_owned()),
                name: name.to_owned(),
            },
            patch: r#"{"metadata":{"labels":{"operon.dev/seen":"true"}}}"#.to_owned(),
            subresource: None,
            ignore_missing_object: true,
        })
    };
    assert_eq!(
        run.patches,
        [merge("default", "web-1"), merge("kube-system", "dns-1")]
    );
    let counted = |ns: &str| {
        MetricOperation::Add(sample(
            "pods_labelled_total",
            1.0,
            &[("namespace", ns)],
            None,
        ))
    };
    assert_eq!(run.metrics, [counted("default"), counted("kube-system")]);
    assert_eq!(run.stdout, "labelled 2 pods\n");
}

#[tokio::test]
async fn a_patch_stream_mixing_json_and_yaml_becomes_typed_operations() {
    let runs = tempfile::tempdir().unwrap();
    let sandbox = sandbox(runs.path());
    let run = handle(&hook(&sandbox, "patch-stream.sh"), vec![on_startup()]).await;
    let ops = &run.patches;
    assert_eq!(ops.len(), 6, "{ops:?}");
    let PatchOperation::CreateOrUpdate(spec) = &ops[0] else {
        panic!("{:?}", ops[0])
    };
    let object: Value = serde_json::from_str(&spec.object).unwrap();
    assert_eq!(object["data"]["ready"], "true");
    let PatchOperation::Create(spec) = &ops[1] else {
        panic!("{:?}", ops[1])
    };
    let object: Value = serde_json::from_str(&spec.object).unwrap();
    assert_eq!(object["metadata"]["name"], "created-from-yaml-string");
    let PatchOperation::JqPatch(spec) = &ops[2] else {
        panic!("{:?}", ops[2])
    };
    assert_eq!(spec.jq_filter, ".spec.replicas = 2");
    assert_eq!(spec.target.name, "nginx");
    let PatchOperation::JsonPatch(spec) = &ops[3] else {
        panic!("{:?}", ops[3])
    };
    assert_eq!(
        spec.patch,
        r#"[{"op":"replace","path":"/spec/paused","value":false}]"#
    );
    let PatchOperation::MergePatch(spec) = &ops[4] else {
        panic!("{:?}", ops[4])
    };
    assert_eq!(spec.patch, r#"{"status":{"observedGeneration":3}}"#);
    assert_eq!(spec.subresource.as_deref(), Some("status"));
    assert_eq!(spec.target.api_version.as_deref(), Some("apps/v1"));
    assert!(spec.ignore_missing_object);
    assert_eq!(
        ops[5],
        PatchOperation::DeleteNonCascading(ObjectRef {
            api_version: None,
            kind: "ConfigMap".to_owned(),
            namespace: Some("default".to_owned()),
            name: "obsolete".to_owned(),
        })
    );
}

#[tokio::test]
async fn metrics_with_groups_shortcuts_and_expiry() {
    let runs = tempfile::tempdir().unwrap();
    let sandbox = sandbox(runs.path());
    let run = handle(
        &hook(&sandbox, "metrics-groups.sh"),
        vec![operon::hooks::context::group(
            "metrics",
            "reports",
            Vec::new(),
        )],
    )
    .await;
    assert_eq!(
        run.metrics,
        [
            MetricOperation::Add(sample(
                "hook_metric",
                1.0,
                &[("kind", "pod")],
                Some("hook1")
            )),
            MetricOperation::Set(sample(
                "hook1_special_metric",
                12.0,
                &[("label1", "value1")],
                Some("hook1")
            )),
            MetricOperation::Set(sample(
                "common_metric",
                100.0,
                &[("source", "source1")],
                None
            )),
            MetricOperation::Observe(Observation {
                name: "hook_latency_seconds".to_owned(),
                value: 0.25,
                buckets: vec![0.1, 0.5, 1.0],
                labels: Vec::new(),
                group: None,
            }),
            MetricOperation::ExpireGroup("hook2".to_owned()),
        ]
    );
}

#[tokio::test]
async fn the_validating_hook_answers_admission_reviews() {
    let runs = tempfile::tempdir().unwrap();
    let sandbox = sandbox(runs.path());
    let hook = hook(&sandbox, "validating.sh");
    let review = |image: &str| {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "operation": "CREATE",
                "object": {"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                           "spec": {"image": image}},
            },
        })
    };
    let answer = |image: &'static str| {
        let hook = hook.clone();
        async move {
            let context = validating(
                "private-repo-policy.example.com",
                review(image).to_string(),
                Vec::new(),
            );
            handle(&hook, vec![context])
                .await
                .outcome
                .unwrap()
                .validating
                .expect("a validating response")
        }
    };
    let allowed = answer("registry.example.com/cron:1.0").await;
    assert!(allowed.allowed);
    assert!(allowed.warnings.is_empty() && allowed.message.is_none());

    let warned = answer("registry.example.com/cron:latest").await;
    assert!(warned.allowed);
    assert_eq!(warned.warnings, ["the latest tag is not reproducible"]);

    let denied = answer("docker.io/evil:1").await;
    assert!(!denied.allowed);
    assert_eq!(
        denied.message.as_deref(),
        Some("only images from registry.example.com are allowed, got docker.io/evil:1")
    );
}

/// A hooks directory of one hook with `body` as its handler.
fn one_hook(body: &str) -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("hook.sh");
    std::fs::write(
        &path,
        format!("#!/usr/bin/env bash\nif [[ \"$1\" == --config ]]; then echo '{{\"configVersion\":\"v1\",\"onStartup\":1}}'; exit 0; fi\n{body}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, path)
}

#[tokio::test]
async fn malformed_files_fail_the_run_naming_file_line_and_reason() {
    let runs = tempfile::tempdir().unwrap();
    let sandbox = sandbox(runs.path());
    let (dir, path) = one_hook(
        "echo '{\"operation\":\"Delete\",\"kind\":\"Pod\",\"name\":\"a\"}' >> $KUBERNETES_PATCH_PATH\n\
         echo '{\"operation\":\"Teleport\",\"kind\":\"Pod\",\"name\":\"b\"}' >> $KUBERNETES_PATCH_PATH",
    );
    let hook = ScriptHook::new(sandbox.clone(), dir.path(), &path);
    let (run, _) = hook
        .handle(input(vec![on_startup()]), Duration::from_secs(20))
        .await;
    let err = run.outcome.unwrap_err().to_string();
    assert!(
        err.contains("KUBERNETES_PATCH_PATH (kubernetes-patch), line 2")
            && err.contains("Teleport"),
        "{err}"
    );
    assert!(run.patches.is_empty());

    let (dir, path) = one_hook("echo 'not json' > $METRICS_PATH");
    let hook = ScriptHook::new(sandbox.clone(), dir.path(), &path);
    let err = hook
        .handle(input(vec![on_startup()]), Duration::from_secs(20))
        .await
        .0
        .outcome
        .unwrap_err()
        .to_string();
    assert!(err.contains("METRICS_PATH (metrics.json), line 1"), "{err}");
    runs_removed(runs.path()).await;
}

#[tokio::test]
async fn failing_and_hanging_hooks_fail_their_runs() {
    let runs = tempfile::tempdir().unwrap();
    let sandbox = sandbox(runs.path());
    let (dir, path) = one_hook(
        "echo '{\"name\":\"m\",\"add\":1}' >> $METRICS_PATH; echo 'cannot reach the API' >&2; exit 3",
    );
    let hook = ScriptHook::new(sandbox.clone(), dir.path(), &path);
    let (run, _) = hook
        .handle(input(vec![on_startup()]), Duration::from_secs(20))
        .await;
    let err = run.outcome.unwrap_err().to_string();
    assert!(
        err.contains("exit code 3") && err.contains("cannot reach the API"),
        "{err}"
    );
    // What the failed run tried is still shown, never applied.
    assert_eq!(run.metrics.len(), 1);

    let (dir, path) = one_hook("sleep 60");
    let hook = ScriptHook::new(sandbox.clone(), dir.path(), &path);
    let (run, _) = hook
        .handle(input(vec![on_startup()]), Duration::from_millis(500))
        .await;
    let err = run.outcome.unwrap_err().to_string();
    assert!(err.contains("timed out"), "{err}");
}

/// Cluster access is off by default: the hook reads no credentials and reaches no
/// server, and a kubectl failure says why. Granted, the hook reads the ServiceAccount
/// files, sees the in-cluster variables and reaches a server on the network.
#[tokio::test]
async fn cluster_access_is_an_opt_in_that_gives_network_and_credentials() {
    use operon::hooks::runner::{AccessScope, ClusterAccess};
    use std::io::{Read as _, Write as _};

    let runs = tempfile::tempdir().unwrap();
    let sandbox = sandbox(runs.path());
    let credentials = tempfile::tempdir().unwrap();
    for (file, body) in [
        ("token", "secret-token"),
        ("ca.crt", "ca"),
        ("namespace", "ops"),
    ] {
        std::fs::write(credentials.path().join(file), body).unwrap();
    }
    // A stand-in API server: answers one connection with a line.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = [0u8; 64];
        let n = stream.read(&mut request).unwrap();
        stream.write_all(b"pong\n").unwrap();
        String::from_utf8_lossy(&request[..n]).into_owned()
    });
    let token = credentials.path().join("token");
    let body = format!(
        "set -e\n\
         cat {token} || {{ echo 'The connection to the server localhost:8080 was refused' >&2; exit 1; }}\n\
         echo \"server $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT\"\n\
         exec 3<>/dev/tcp/127.0.0.1/{port}; echo ping >&3; read -r answer <&3; echo \"$answer\"",
        token = token.display()
    );
    let (dir, path) = one_hook(&body);

    let denied = ScriptHook::new(sandbox.clone(), dir.path(), &path);
    let (run, _) = denied
        .handle(input(vec![on_startup()]), Duration::from_secs(20))
        .await;
    let err = run.outcome.unwrap_err().to_string();
    assert!(
        err.contains("tried to reach a Kubernetes API server")
            && err.contains("--hook-cluster-access"),
        "{err}"
    );
    assert!(!run.stdout.contains("secret-token"), "{}", run.stdout);

    let access = ClusterAccess::new(
        "hook.sh".parse::<AccessScope>().unwrap(),
        credentials.path(),
        vec![
            ("KUBERNETES_SERVICE_HOST".to_owned(), "127.0.0.1".to_owned()),
            ("KUBERNETES_SERVICE_PORT".to_owned(), port.to_string()),
        ],
    )
    .unwrap();
    assert!(access.grants("hook.sh"));
    let mut settings = denied.settings().clone();
    settings.grant_cluster_access(&access);
    assert!(settings.network && settings.cluster_access);
    assert_eq!(settings.read_only, [credentials.path().to_owned()]);
    let granted = ScriptHook::new(sandbox.clone(), dir.path(), &path).with_settings(settings);
    let run = handle(&granted, vec![on_startup()]).await;
    assert!(run.stdout.contains("secret-token"), "{}", run.stdout);
    assert!(
        run.stdout.contains(&format!("server 127.0.0.1:{port}")),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("pong"), "{}", run.stdout);
    assert_eq!(server.join().unwrap(), "ping\n");
}
