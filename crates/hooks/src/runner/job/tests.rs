//! Offloaded hook runs: the report's round trip and its refusals, and a run against a
//! mock API server (the exact Job, the input it carries, the report read back).

use super::*;
use operon_cluster::kube::mock::{self, Call};
use operon_data::model::{
    BindingContext, BindingType, LogLevel, ObjectAndFilter, ObjectRef, OwnerReference, PatchSpec,
    RunnerContext, Sample,
};
use serde_json::{Value, json};

fn run() -> HookRun {
    HookRun {
        outcome: Ok(HookOutput::default()),
        patches: vec![PatchOperation::MergePatch(PatchSpec {
            target: ObjectRef {
                api_version: Some("v1".into()),
                kind: "ConfigMap".into(),
                namespace: Some("ops".into()),
                name: "seen".into(),
            },
            patch: r#"{"data":{"pods":"3"}}"#.into(),
            subresource: None,
            ignore_missing_object: false,
        })],
        metrics: vec![MetricOperation::Set(Sample {
            name: "pods_seen".into(),
            value: 3.0,
            labels: vec![("ns".into(), "ops".into())],
            group: Some("g".into()),
        })],
        logs: vec![LogRecord {
            level: LogLevel::Info,
            message: "counted".into(),
            fields: vec![("pods".into(), "3".into())],
        }],
        stdout: "é".repeat(MAX_REPORTED_OUTPUT),
        stderr: String::new(),
        elapsed: Duration::from_millis(12),
    }
}

#[test]
fn a_report_carries_the_run_back_whole() {
    let original = run();
    let report = HookReport::of(&original);
    assert_eq!(report.elapsed_ms, 12);
    // Cut to its last bytes, on a character boundary.
    assert_eq!(report.stdout.len(), MAX_REPORTED_OUTPUT);
    let line = report.to_line().unwrap();
    assert!(!line.contains('\n'));
    let back = HookReport::parse(&format!("{line}\n"))
        .unwrap()
        .into_run(Duration::from_secs(2));
    assert_eq!(back.outcome, Ok(HookOutput::default()));
    assert_eq!(back.patches, original.patches);
    assert_eq!(back.metrics, original.metrics);
    assert_eq!(back.logs, original.logs);
    assert_eq!(back.elapsed, Duration::from_secs(2));

    let failed = HookRun {
        outcome: Err(HookError::Run("hook trapped: unreachable".into())),
        ..run()
    };
    let back = HookReport::parse(&HookReport::of(&failed).to_line().unwrap())
        .unwrap()
        .into_run(Duration::ZERO);
    assert_eq!(
        back.outcome,
        Err(HookError::Run("hook trapped: unreachable".into()))
    );
}

#[test]
fn the_guest_may_use_three_quarters_of_the_containers_memory_limit() {
    assert_eq!(quantity_bytes("512Mi"), Some(512 << 20));
    assert_eq!(quantity_bytes("1.5Gi"), Some(3 << 29));
    assert_eq!(quantity_bytes("2G"), Some(2_000_000_000));
    assert_eq!(quantity_bytes("1048576"), Some(1 << 20));
    assert_eq!(quantity_bytes("1e9"), None);
    assert_eq!(quantity_bytes("100m"), None);
    let with_limit = |memory: &str| WasmJob {
        resources: Some(operon_data::api::JobResources {
            requests: Default::default(),
            limits: [("memory".to_owned(), memory.to_owned())].into(),
        }),
        ..WasmJob::default()
    };
    let engine = 64 << 20;
    assert_eq!(guest_memory(&with_limit("1Gi"), engine), 768 << 20);
    assert_eq!(guest_memory(&with_limit("32Mi"), engine), engine);
    assert_eq!(guest_memory(&with_limit("1e9"), engine), engine);
    assert_eq!(guest_memory(&WasmJob::default(), engine), engine);
}

#[test]
fn reports_that_cannot_be_read_or_sent_say_why() {
    assert!(
        HookReport::parse("  \n")
            .unwrap_err()
            .to_string()
            .contains("printed no report")
    );
    assert!(
        HookReport::parse("Error: cannot fetch")
            .unwrap_err()
            .to_string()
            .contains("is not a hook report")
    );
    let mut other = HookReport::of(&run());
    other.format = 2;
    let line = serde_json::to_string(&other).unwrap();
    assert!(
        HookReport::parse(&line)
            .unwrap_err()
            .to_string()
            .contains("another version of Operon's image")
    );
    let mut huge = run();
    huge.patches = vec![huge.patches[0].clone(); 20_000];
    let e = HookReport::of(&huge).to_line().unwrap_err().to_string();
    assert!(e.contains("20000 patches"), "{e}");
    assert!(e.contains("more than an offloaded run returns"), "{e}");
}

struct Declared;

impl Hook for Declared {
    fn name(&self) -> &str {
        "Hook/ops/counter"
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async { Ok(HookConfig::default()) })
    }

    fn handle(&self, _: HookInput, _: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        unreachable!("an offloaded hook's runs are Jobs")
    }
}

fn input() -> HookInput {
    HookInput {
        context: RunnerContext {
            name: "Hook/ops/counter".into(),
            dry_run: false,
            timeout_ms: 120_000,
            node: None,
            namespace: Some("ops".into()),
            owner: Some(OwnerReference {
                api_version: "operon.dev/v1alpha1".into(),
                kind: "Hook".into(),
                name: "counter".into(),
                uid: "uid-7".into(),
            }),
            cluster: None,
        },
        binding_contexts: vec![BindingContext {
            binding: "pods".into(),
            type_: BindingType::Synchronization,
            group: None,
            watch_event: None,
            object: None,
            objects: vec![ObjectAndFilter {
                object: Some(r#"{"kind":"Pod"}"#.into()),
                filter_result: Some("\"p1\"".into()),
            }],
            snapshots: vec![],
            review: None,
        }],
    }
}

fn hook(client: kube::Client) -> JobHook {
    let target = OffloadTarget {
        image: "ghcr.io/operon-dev/operon:0.1.0".into(),
        module_url: "https://operon-webhooks.operon.svc:443".into(),
        server_name: None,
        ca: tokio::sync::watch::channel(b"-----BEGIN CERTIFICATE-----".to_vec()).1,
        catalog: None,
    };
    let digest = ModuleDigest::of(b"counter");
    let job = WasmJob {
        service_account_name: Some("hook-runner".into()),
        ..WasmJob::default()
    };
    let limits = CallLimits::default();
    let runner = job_runner(
        &target,
        Some(client),
        "Hook/ops/counter",
        &job,
        &digest,
        &limits,
        Platform::default(),
    );
    let owner = JobOwner {
        namespace: "ops".into(),
        name: "counter".into(),
        uid: "uid-7".into(),
    };
    JobHook::new(Arc::new(Declared), runner, owner)
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "7"}, "items": items})
}

/// Answers the runner after it created `job`: its pod succeeded with `message` as its
/// termination message and `log` as its log; returns the requests seen, up to the
/// deletion of the input ConfigMap and, when there is a `log`, its read.
async fn finish(api: &mut mock::MockApi, job: Value, message: &str, log: &str) -> Vec<String> {
    let name = job["metadata"]["name"].as_str().unwrap().to_owned();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{name}-x1"), "namespace": "ops",
                     "labels": {"operon.dev/run": name}},
        "spec": {"containers": [{"name": "step", "image": "i"}]},
        "status": {"phase": "Succeeded", "containerStatuses": [{"name": "step", "image": "i",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "message": message}}}]}});
    let (mut seen, mut held): (Vec<String>, Vec<Call>) = (Vec::new(), Vec::new());
    let (mut deleted, mut read) = (false, log.is_empty());
    while !(deleted && read) {
        let call = api.next().await;
        seen.push(format!("{} {}", call.method, call.uri));
        if call.uri.contains("watch=true") {
            held.push(call);
        } else if call.uri.contains("/jobs?") {
            call.answer(200, list("JobList", vec![job.clone()]));
        } else if call.uri.contains("/pods?") {
            call.answer(200, list("PodList", vec![pod.clone()]));
        } else if call.uri.contains("/log?") {
            assert!(
                call.uri.contains(&format!("/pods/{name}-x1/log?")),
                "{}",
                call.uri
            );
            // The kubelet's tail: the last line (shorter than the runtime's parts).
            let tail = log.trim_end().rsplit('\n').next().unwrap_or("");
            assert!(call.uri.contains("tailLines=1"), "{}", call.uri);
            call.answer_raw(200, format!("{tail}\n").into_bytes());
            read = true;
        } else if call.method == "DELETE" {
            assert!(call.uri.contains("/configmaps/"), "{}", call.uri);
            call.answer(200, json!({"kind": "Status", "status": "Success"}));
            deleted = true;
        } else {
            panic!("unexpected {} {}", call.method, call.uri);
        }
    }
    seen
}

#[tokio::test]
async fn each_run_is_a_job_of_the_hook_and_its_report_comes_back() {
    let (client, mut api) = mock::pair();
    let hook = Arc::new(hook(client));
    let task = tokio::spawn({
        let hook = hook.clone();
        async move { hook.handle(input(), Duration::from_secs(120)).await }
    });
    let get = api.next().await;
    assert_eq!(get.method, "GET");
    let name = get.uri.rsplit('/').next().unwrap().to_owned();
    assert!(name.starts_with("counter-run-"), "{name}");
    get.fail(404, "NotFound", "not found");

    let map = api.next().await;
    assert_eq!(
        map.uri,
        "/api/v1/namespaces/ops/configmaps?&fieldManager=operon"
    );
    let body = map.json();
    let sent: HookInput = serde_json::from_str(body["data"][INPUT_FILE].as_str().unwrap()).unwrap();
    assert_eq!(sent, input());
    assert_eq!(body["data"][CA_FILE], "-----BEGIN CERTIFICATE-----");
    map.answer(201, body);

    let job = api.next().await;
    let body = job.json();
    assert_eq!(
        body["metadata"]["ownerReferences"],
        json!([{"apiVersion": "operon.dev/v1alpha1", "kind": "Hook", "name": "counter",
                "uid": "uid-7", "blockOwnerDeletion": false, "controller": false}])
    );
    assert_eq!(
        body["metadata"]["annotations"]["operon.dev/hook"],
        "Hook/ops/counter"
    );
    assert!(
        body["metadata"]["labels"]
            .get("operon.dev/diagnosis")
            .is_none()
    );
    assert_eq!(body["metadata"]["labels"]["operon.dev/hook-uid"], "uid-7");
    assert_eq!(
        body["spec"]["template"]["metadata"]["labels"]["operon.dev/hook-uid"],
        "uid-7"
    );
    let pod_spec = &body["spec"]["template"]["spec"];
    assert_eq!(pod_spec["serviceAccountName"], "hook-runner");
    assert_eq!(body["spec"]["activeDeadlineSeconds"], 120);
    let container = &pod_spec["containers"][0];
    assert_eq!(container["image"], "ghcr.io/operon-dev/operon:0.1.0");
    assert_eq!(container["command"], json!(["operon"]));
    let digest = ModuleDigest::of(b"counter").to_string();
    assert_eq!(
        container["args"],
        json!([
            "hook",
            "handle",
            "--digest",
            digest,
            "--module-url",
            "https://operon-webhooks.operon.svc:443",
            "--module-ca",
            "/var/run/operon/module-ca.crt",
            "--token-file",
            "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "--input-file",
            "/var/run/operon/hook-input.json",
            "--result-file",
            "/dev/termination-log",
            "--memory",
            "67108864",
            "--no-cache"
        ])
    );
    job.answer(201, body.clone());

    // The report outgrows a termination message (the run's stdout alone is 64 KiB):
    // the message says so and the report is the log's last line.
    let report = HookReport::of(&run()).to_line().unwrap();
    let log = format!("WARN something the container logged\n{report}\n");
    let seen = finish(&mut api, body, "report in the log: hook ran", &log).await;
    assert_eq!(seen.iter().filter(|s| s.contains("/log?")).count(), 1);
    let (run, back) = task.await.unwrap();
    assert_eq!(back, input());
    assert_eq!(run.outcome, Ok(HookOutput::default()));
    assert_eq!(run.patches, self::run().patches);
    assert_eq!(run.metrics, self::run().metrics);

    // The next run is another Job; a report that fits is the termination message, and
    // the log is not read.
    let task = tokio::spawn({
        let hook = hook.clone();
        async move { hook.handle(input(), Duration::from_secs(120)).await }
    });
    let get = api.next().await;
    let second = get.uri.rsplit('/').next().unwrap().to_owned();
    assert_ne!(second, name);
    get.fail(404, "NotFound", "not found");
    let map = api.next().await;
    let created = map.json();
    map.answer(201, created);
    let job = api.next().await;
    let body = job.json();
    job.answer(201, body.clone());
    let small = HookReport::of(&HookRun {
        stdout: String::new(),
        ..self::run()
    })
    .to_line()
    .unwrap();
    assert!(small.len() < 4096);
    let seen = finish(&mut api, body, &small, "").await;
    assert!(!seen.iter().any(|s| s.contains("/log?")), "{seen:?}");
    let (run, _) = task.await.unwrap();
    assert_eq!(run.patches, self::run().patches);

    // A run whose Job cannot be made fails with the API server's word.
    let task = tokio::spawn({
        let hook = hook.clone();
        async move { hook.handle(input(), Duration::from_secs(120)).await }
    });
    api.next()
        .await
        .fail(403, "Forbidden", "jobs.batch is forbidden");
    let (run, _) = task.await.unwrap();
    let error = run.outcome.unwrap_err();
    let text = error.to_string();
    assert!(text.contains("reading Job ops/"), "{text}");
    assert!(text.contains("forbidden"), "{text}");
    // The runner's error is kept, not only its words.
    let source = std::error::Error::source(&error).unwrap();
    assert!(matches!(
        source.downcast_ref::<JobHookError>(),
        Some(JobHookError::Job(_))
    ));
}

#[test]
fn a_report_that_cannot_be_read_keeps_why() {
    let source = HookReport::parse("Error: cannot fetch").unwrap_err();
    let error = HookError::from(JobHookError::Report {
        job: "ops/run-1".into(),
        pod: "run-1-x".into(),
        source,
    });
    assert!(
        error.to_string().starts_with(
            "Job ops/run-1 (pod run-1-x): the last line of the log is not a hook report ("
        ),
        "{error}"
    );
    let chain: Vec<&dyn std::error::Error> =
        std::iter::successors(std::error::Error::source(&error), |e| e.source()).collect();
    assert!(chain[0].is::<JobHookError>());
    assert!(matches!(
        chain[1].downcast_ref::<ReportError>(),
        Some(ReportError::NotAReport { .. })
    ));
    assert!(chain[2].is::<serde_json::Error>());
}
