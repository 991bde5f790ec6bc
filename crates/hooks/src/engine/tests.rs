//! Engine behaviour with scripted in-process hooks: synchronization before events,
//! snapshot-only bindings, jq change detection, groups, patches only on success,
//! allowFailure, retries with backoff and rate limits on a paused clock.

use super::*;
use crate::config;
use crate::runner::HookError;
use futures::future::BoxFuture;
use operon_cluster::local::LocalCluster;
use operon_cluster::{Event, Identity, namespace_and_name};
use operon_data::model::{
    ConfigVersion, HookConfig, HookOutput, HookSettings, KubernetesBindingConfig,
};
use operon_data::model::{ObjectRef, PatchOperation, PatchSpec};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A hook whose configuration is given and whose runs label every Event object,
/// failing the first `fail_first` runs.
struct Scripted {
    config: HookConfig,
    fail_first: usize,
    /// Runs with more binding contexts than this fail on a per-run limit.
    max_contexts: usize,
    /// Submitted by every run, besides the labels of unlabelled Event objects.
    patches: Vec<PatchOperation>,
    /// Submitted by every run.
    metrics: Vec<operon_data::model::MetricOperation>,
    runs: AtomicUsize,
    seen: Mutex<Vec<Vec<BindingContext>>>,
    /// The runner context of every run.
    contexts: Mutex<Vec<operon_data::model::RunnerContext>>,
}

impl Scripted {
    fn new(config: HookConfig) -> Self {
        Self {
            config,
            fail_first: 0,
            max_contexts: usize::MAX,
            patches: Vec::new(),
            metrics: Vec::new(),
            runs: AtomicUsize::new(0),
            seen: Mutex::default(),
            contexts: Mutex::default(),
        }
    }
}

fn label_patch(object: &Value) -> PatchOperation {
    let (namespace, name) = namespace_and_name(object);
    let (namespace, name) = (namespace.to_owned(), name.to_owned());
    PatchOperation::MergePatch(PatchSpec {
        target: ObjectRef {
            api_version: None,
            kind: "Pod".to_owned(),
            namespace: Some(namespace),
            name,
        },
        patch: r#"{"metadata":{"labels":{"seen":"yes"}}}"#.to_owned(),
        subresource: None,
        ignore_missing_object: false,
    })
}

impl Hook for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async move { Ok(self.config.clone()) })
    }

    fn handle(&self, input: HookInput, _timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let n = self.runs.fetch_add(1, Ordering::SeqCst);
            self.seen
                .lock()
                .unwrap()
                .push(input.binding_contexts.clone());
            self.contexts.lock().unwrap().push(input.context.clone());
            let patches = input
                .binding_contexts
                .iter()
                .filter_map(|c| c.object.as_ref()?.object.as_ref())
                .filter_map(|o| serde_json::from_str::<Value>(o).ok())
                .filter(|o| o.pointer("/metadata/labels/seen").is_none())
                .map(|o| label_patch(&o))
                .chain(self.patches.iter().cloned())
                .collect();
            let run = HookRun {
                outcome: if n < self.fail_first {
                    Err(HookError::Run("failing on purpose".to_owned()))
                } else if input.binding_contexts.len() > self.max_contexts {
                    // A wasm call's output bound, which a smaller batch may stay within.
                    Err(HookError::Call(operon_sandbox::CallError::OutputTooLarge {
                        what: operon_sandbox::OutputKind::Patches,
                        detail: format!("{} binding contexts", input.binding_contexts.len()),
                    }))
                } else {
                    Ok(HookOutput {
                        validating: None,
                        conversion: None,
                    })
                },
                patches,
                metrics: self.metrics.clone(),
                logs: vec![],
                stdout: String::new(),
                stderr: String::new(),
                elapsed: Duration::from_millis(1),
            };
            (run, input)
        })
    }
}

fn pods_binding(name: &str) -> KubernetesBindingConfig {
    KubernetesBindingConfig {
        name: name.to_owned(),
        kind: "Pod".to_owned(),
        ..KubernetesBindingConfig::default()
    }
}

fn hook_config(kubernetes: Vec<KubernetesBindingConfig>) -> HookConfig {
    HookConfig {
        version: ConfigVersion::V1,
        on_startup: None,
        schedule: vec![],
        kubernetes,
        kubernetes_validating: vec![],
        kubernetes_mutating: vec![],
        kubernetes_conversion: vec![],
        settings: None,
    }
}

const PODS: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: ns}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: ns}\n";

fn pod(name: &str, labels: &str) -> Value {
    serde_json::from_str(&format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ns","labels":{labels}}}}}"#
    ))
    .unwrap()
}

async fn engine(hook: Arc<Scripted>) -> (Arc<Engine>, Arc<LocalCluster>) {
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(PODS, "fixtures").unwrap();
    let config = config::validate("scripted", &hook.config, &config::any_kind).unwrap();
    let loaded = LoadedHook { hook, config };
    let metrics = Arc::new(Metrics::new().unwrap());
    let engine = Arc::new(Engine::new(vec![loaded], cluster.clone(), metrics));
    engine.start().await.unwrap();
    (engine, cluster)
}

async fn drain(engine: &Engine) -> Vec<RunRecord> {
    let mut records = Vec::new();
    engine.drain(|r| records.push(r.clone())).await;
    records
}

fn types(record: &RunRecord) -> Vec<(String, BindingType)> {
    record
        .contexts
        .iter()
        .map(|c| (c.binding.clone(), c.type_))
        .collect()
}

#[tokio::test]
async fn synchronization_runs_first_then_events_and_patches_are_applied() {
    let hook = Arc::new(Scripted::new(hook_config(vec![pods_binding("pods")])));
    let (engine, cluster) = engine(hook.clone()).await;
    let records = drain(&engine).await;
    assert_eq!(
        types(&records[0]),
        [("pods".to_owned(), BindingType::Synchronization)]
    );
    assert_eq!(records[0].contexts[0].objects.len(), 2);
    cluster
        .apply_watch_event(WatchEvent::Added, pod("c", "{}"))
        .unwrap();
    let records = drain(&engine).await;
    // The Added event labels c; the label change is a Modified event, which runs again.
    assert_eq!(
        types(&records[0]),
        [("pods".to_owned(), BindingType::Event)]
    );
    assert_eq!(records[0].run.patches.len(), 1);
    let labelled = cluster
        .objects()
        .into_iter()
        .find(|o| namespace_and_name(o).1 == "c")
        .unwrap();
    assert_eq!(
        labelled.pointer("/metadata/labels/seen"),
        Some(&Value::from("yes"))
    );
}

#[tokio::test]
async fn unchanged_filter_results_do_not_run_the_hook() {
    let mut binding = pods_binding("pods");
    binding.jq_filter = Some(".metadata.labels.app".to_owned());
    let hook = Arc::new(Scripted::new(hook_config(vec![binding])));
    let (engine, cluster) = engine(hook.clone()).await;
    drain(&engine).await;
    cluster
        .apply_watch_event(WatchEvent::Modified, pod("a", r#"{"other":"x"}"#))
        .unwrap();
    assert!(
        drain(&engine).await.is_empty(),
        "filter result null → null: no run"
    );
    cluster
        .apply_watch_event(
            WatchEvent::Modified,
            pod("a", r#"{"app":"web","seen":"yes"}"#),
        )
        .unwrap();
    let records = drain(&engine).await;
    assert_eq!(records.len(), 1);
    let object = records[0].contexts[0].object.as_ref().unwrap();
    assert_eq!(object.filter_result.as_deref(), Some("\"web\""));
    cluster
        .apply_watch_event(WatchEvent::Deleted, pod("a", "{}"))
        .unwrap();
    assert_eq!(drain(&engine).await.len(), 1, "Deleted always fires");
}

#[tokio::test]
async fn snapshot_only_bindings_never_run_but_feed_other_contexts() {
    let mut nodes = pods_binding("all-pods");
    nodes.execute_hook_on_event = Some(vec![]);
    nodes.execute_hook_on_synchronization = Some(false);
    nodes.keep_full_objects_in_memory = Some(false);
    nodes.jq_filter = Some(".metadata.name".to_owned());
    let mut main = pods_binding("pods");
    main.include_snapshots_from = vec!["all-pods".to_owned()];
    main.execute_hook_on_synchronization = Some(false);
    let hook = Arc::new(Scripted::new(hook_config(vec![nodes, main])));
    let (engine, cluster) = engine(hook.clone()).await;
    assert!(drain(&engine).await.is_empty());
    cluster
        .apply_watch_event(WatchEvent::Added, pod("c", r#"{"seen":"yes"}"#))
        .unwrap();
    let records = drain(&engine).await;
    assert_eq!(records.len(), 1, "only the pods binding runs");
    let snapshot = &records[0].contexts[0].snapshots[0];
    assert_eq!(snapshot.binding, "all-pods");
    let names: Vec<_> = snapshot
        .objects
        .iter()
        .map(|o| o.filter_result.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["\"a\"", "\"b\"", "\"c\""]);
    assert!(
        snapshot.objects.iter().all(|o| o.object.is_none()),
        "full objects dropped"
    );
}

#[tokio::test]
async fn grouped_bindings_get_group_contexts_with_every_snapshot() {
    let mut one = pods_binding("one");
    one.group = Some("g".to_owned());
    let mut two = pods_binding("two");
    two.group = Some("g".to_owned());
    let hook = Arc::new(Scripted::new(hook_config(vec![one, two])));
    let (engine, cluster) = engine(hook.clone()).await;
    drain(&engine).await;
    cluster
        .apply_watch_event(WatchEvent::Added, pod("c", r#"{"seen":"yes"}"#))
        .unwrap();
    let records = drain(&engine).await;
    // Both bindings saw the event; the two tasks merged and compacted to one context,
    // the last one: it names the binding that fired and the group, as shell-operator's.
    assert_eq!(records.len(), 1);
    assert_eq!(types(&records[0]), [("two".to_owned(), BindingType::Group)]);
    assert_eq!(records[0].contexts[0].group.as_deref(), Some("g"));
    let snapshots: Vec<_> = records[0].contexts[0]
        .snapshots
        .iter()
        .map(|s| s.binding.clone())
        .collect();
    assert_eq!(snapshots, ["one", "two"]);
}

#[tokio::test]
async fn a_failed_run_applies_nothing() {
    let mut hook = Scripted::new(hook_config(vec![pods_binding("pods")]));
    hook.fail_first = 100;
    let (engine, cluster) = engine(Arc::new(hook)).await;
    drain(&engine).await;
    cluster
        .apply_watch_event(WatchEvent::Added, pod("c", "{}"))
        .unwrap();
    let records = drain(&engine).await;
    assert!(records[0].failed);
    assert_eq!(records[0].run.patches.len(), 1, "reported");
    assert!(
        cluster
            .objects()
            .iter()
            .all(|o| o.pointer("/metadata/labels/seen").is_none()),
        "not applied"
    );
}

#[tokio::test]
async fn a_failing_patch_fails_the_run() {
    let mut hook = Scripted::new(hook_config(vec![pods_binding("pods")]));
    hook.patches = vec![label_patch(&pod("missing", "{}"))];
    let (engine, _cluster) = engine(Arc::new(hook)).await;
    let records = drain(&engine).await;
    assert!(records[0].failed);
    assert!(
        records[0]
            .apply_error
            .as_ref()
            .unwrap()
            .to_string()
            .contains("patch operation 1 of 1")
    );
}

#[tokio::test]
async fn allowed_failures_are_counted_and_dropped() {
    let mut binding = pods_binding("pods");
    binding.allow_failure = true;
    let mut hook = Scripted::new(hook_config(vec![binding]));
    hook.fail_first = 1;
    let (engine, _cluster) = engine(Arc::new(hook)).await;
    let records = drain(&engine).await;
    assert!(records[0].failed && records[0].allowed_failure);
    assert!(records[0].retry_in.is_none());
    assert!(!engine.has_tasks());
    let text = engine.metrics.render();
    assert!(text.contains("operon_hook_run_allowed_errors_total{binding=\"pods\",hook=\"scripted\",queue=\"main\"} 1"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn failed_synchronization_is_retried_with_backoff_and_holds_events() {
    let mut hook = Scripted::new(hook_config(vec![pods_binding("pods")]));
    hook.fail_first = 3;
    let hook = Arc::new(hook);
    let (engine, cluster) = engine(hook.clone()).await;
    cluster
        .apply_watch_event(WatchEvent::Added, pod("c", "{}"))
        .unwrap();
    let records = Arc::new(Mutex::new(Vec::<RunRecord>::new()));
    let sink = records.clone();
    let started = Instant::now();
    engine
        .run_for(Duration::from_secs(60), move |r| {
            sink.lock().unwrap().push(r.clone())
        })
        .await;
    let records = records.lock().unwrap();
    let retries: Vec<u64> = records
        .iter()
        .filter_map(|r| r.retry_in)
        .map(|d| d.as_secs())
        .collect();
    assert_eq!(
        retries,
        [5, 6, 7],
        "5 s, then 5 + 2^(n-2) s (+ < 1 s jitter)"
    );
    // The event waited for the Synchronization run to succeed.
    let first_event = records
        .iter()
        .position(|r| r.contexts.iter().any(|c| c.type_ == BindingType::Event))
        .unwrap();
    assert_eq!(
        types(&records[first_event - 1])[0].1,
        BindingType::Synchronization
    );
    assert!(!records[first_event - 1].failed);
    assert!(
        started.elapsed() >= Duration::from_secs(60),
        "virtual time, no real sleep"
    );
}

#[tokio::test(start_paused = true)]
async fn a_batch_over_a_per_run_limit_is_halved_until_it_fits() {
    let mut hook = Scripted::new(hook_config(vec![pods_binding("pods")]));
    hook.max_contexts = 2;
    let (engine, cluster) = engine(Arc::new(hook)).await;
    drain(&engine).await;
    // Five events combine into one task of five contexts, over the limit.
    for name in ["c", "d", "e", "f", "g"] {
        cluster
            .apply_watch_event(WatchEvent::Added, pod(name, "{}"))
            .unwrap();
    }
    let records = Arc::new(Mutex::new(Vec::<RunRecord>::new()));
    let sink = records.clone();
    engine
        .run_for(Duration::from_secs(120), move |r| {
            sink.lock().unwrap().push(r.clone())
        })
        .await;
    let records = records.lock().unwrap();
    let sizes: Vec<(usize, bool)> = records
        .iter()
        .filter(|r| types(r).iter().all(|(_, t)| *t == BindingType::Event))
        .map(|r| (r.contexts.len(), r.failed))
        .collect();
    // 5 fails; its first half (2) runs, then the rest (3) fails and its halves run.
    assert_eq!(
        sizes[..5],
        [(5, true), (2, false), (3, true), (1, false), (2, false)],
        "{sizes:?}"
    );
    for name in ["c", "d", "e", "f", "g"] {
        let object = cluster
            .objects()
            .into_iter()
            .find(|o| o["metadata"]["name"] == name)
            .unwrap();
        assert_eq!(object["metadata"]["labels"]["seen"], "yes", "{name}");
    }
}

#[tokio::test(start_paused = true)]
async fn rate_limits_hold_the_head_while_events_merge_into_it() {
    let mut binding = pods_binding("pods");
    binding.execute_hook_on_synchronization = Some(false);
    let mut config = hook_config(vec![binding]);
    config.settings = Some(HookSettings {
        execution_min_interval_ms: Some(10_000),
        execution_burst: Some(1),
        timeout_ms: None,
    });
    let hook = Arc::new(Scripted::new(config));
    let (engine, cluster) = engine(hook.clone()).await;
    let records = Arc::new(Mutex::new(Vec::<RunRecord>::new()));
    let sink = records.clone();
    let runner = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .run_for(Duration::from_secs(25), move |r| {
                    sink.lock().unwrap().push(r.clone())
                })
                .await
        })
    };
    for i in 0..5 {
        cluster
            .apply_watch_event(
                WatchEvent::Added,
                pod(&format!("p{i}"), r#"{"seen":"yes"}"#),
            )
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    runner.await.unwrap();
    let records = records.lock().unwrap();
    let contexts: Vec<usize> = records.iter().map(|r| r.contexts.len()).collect();
    assert_eq!(contexts.iter().sum::<usize>(), 5);
    assert_eq!(contexts[0], 1, "the burst allows one run at once");
    assert_eq!(
        records.len(),
        2,
        "the rest waited 10 s at the head and merged: {contexts:?}"
    );
}

#[tokio::test]
async fn synchronization_without_waiting_runs_on_the_bindings_own_queue() {
    let mut binding = pods_binding("pods");
    binding.queue = Some("pods-queue".to_owned());
    binding.wait_for_synchronization = Some(false);
    let hook = Arc::new(Scripted::new(hook_config(vec![binding])));
    let (engine, _cluster) = engine(hook).await;
    let records = drain(&engine).await;
    assert_eq!(records[0].queue, "pods-queue");
    assert_eq!(types(&records[0])[0].1, BindingType::Synchronization);
}

#[tokio::test]
async fn an_invalid_metric_fails_the_run_before_any_patch_is_applied() {
    use operon_data::model::{MetricOperation, Sample};
    let mut hook = Scripted::new(hook_config(vec![pods_binding("pods")]));
    hook.patches = vec![label_patch(&pod("a", "{}"))];
    hook.metrics = vec![MetricOperation::Set(Sample {
        name: "operon_reserved".to_owned(),
        value: 1.0,
        labels: vec![],
        group: None,
    })];
    let (engine, cluster) = engine(Arc::new(hook)).await;
    let records = drain(&engine).await;
    assert!(records[0].failed);
    assert!(
        records[0]
            .apply_error
            .as_ref()
            .unwrap()
            .to_string()
            .starts_with("metrics:")
    );
    assert!(
        cluster
            .objects()
            .iter()
            .all(|o| o.pointer("/metadata/labels/seen").is_none()),
        "the patch was not applied"
    );
}

#[tokio::test]
async fn a_deletion_noticed_by_a_relist_reports_the_last_state_the_binding_saw() {
    let mut binding = pods_binding("pods");
    binding.jq_filter = Some(".metadata.name".to_owned());
    let hook = Arc::new(Scripted::new(hook_config(vec![binding])));
    let (engine, _cluster) = engine(hook.clone()).await;
    drain(&engine).await;
    // The cluster layer only knows the identity of an object deleted during the gap.
    let gone = || Event {
        kind: WatchEvent::Deleted,
        object: serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}).into(),
        deleted_final_state_unknown: Some(Identity::of("ns", "a")),
        received: std::time::Instant::now(),
    };
    engine.handle_event((0, 0), gone());
    assert_eq!(
        engine.lock().snapshots[&(0, 0)].len(),
        1,
        "a left the snapshot"
    );
    // A second notice of the same deletion reports nothing.
    engine.handle_event((0, 0), gone());
    let held = engine.lock().queues.values().map(Queue::len).sum::<usize>();
    assert_eq!(held, 1, "one Event run queued");
    let records = drain(&engine).await;
    let context = &records[0].contexts[0];
    assert_eq!(context.watch_event, Some(WatchEvent::Deleted));
    let object = context.object.as_ref().unwrap();
    assert_eq!(object.filter_result.as_deref(), Some("\"a\""));
}

#[tokio::test]
async fn a_standby_keeps_snapshots_current_and_runs_nothing_until_it_takes_over() {
    let mut config = hook_config(vec![pods_binding("pods")]);
    config.on_startup = Some(1);
    let hook = Arc::new(Scripted::new(config));
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(PODS, "fixtures").unwrap();
    let validated = config::validate("scripted", &hook.config, &config::any_kind).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let engine = Arc::new(Engine::new(
        vec![LoadedHook {
            hook: hook.clone(),
            config: validated,
        }],
        cluster.clone(),
        metrics,
    ));
    engine.observe().await.unwrap();
    cluster
        .apply_watch_event(WatchEvent::Added, pod("c", "{}"))
        .unwrap();
    engine.pump();
    assert!(!engine.has_tasks(), "a standby queues nothing");
    assert_eq!(
        engine.lock().snapshots[&(0, 0)].len(),
        3,
        "but sees the new pod"
    );
    assert!(!engine.synchronized());

    engine.take_over();
    let records = drain(&engine).await;
    assert_eq!(
        types(&records[0]),
        [("onStartup".to_owned(), BindingType::OnStartup)]
    );
    assert_eq!(
        types(&records[1]),
        [("pods".to_owned(), BindingType::Synchronization)]
    );
    assert_eq!(
        records[1].contexts[0].objects.len(),
        3,
        "the Synchronization run carries the current objects"
    );
    assert!(engine.synchronized());
}

#[tokio::test]
async fn every_run_names_the_platforms_cluster() {
    let hook = Arc::new(Scripted::new(hook_config(vec![pods_binding("pods")])));
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(PODS, "fixtures").unwrap();
    let validated = config::validate("scripted", &hook.config, &config::any_kind).unwrap();
    let loaded = LoadedHook {
        hook: hook.clone(),
        config: validated,
    };
    let engine = Engine::new(
        vec![loaded],
        cluster.clone(),
        Arc::new(Metrics::new().unwrap()),
    )
    .with_platform(Platform {
        cluster: Some("east-1".to_owned()),
    });
    let engine = Arc::new(engine);
    engine.start().await.unwrap();
    drain(&engine).await;
    cluster
        .apply_watch_event(WatchEvent::Added, pod("c", "{}"))
        .unwrap();
    engine.pump();
    drain(&engine).await;

    let contexts = hook.contexts.lock().unwrap();
    // Synchronization, the new pod, and the runs the hook's own labels cause.
    assert!(contexts.len() >= 2, "{contexts:?}");
    for context in contexts.iter() {
        assert_eq!(context.cluster.as_deref(), Some("east-1"));
        assert_eq!(context.name, "scripted");
    }
}

#[tokio::test]
async fn every_run_is_kept_in_the_hooks_history_and_log_levels_are_per_hook() {
    let mut scripted = Scripted::new(hook_config(vec![pods_binding("pods")]));
    scripted.fail_first = 1;
    let (engine, cluster) = engine(Arc::new(scripted)).await;
    drain(&engine).await;
    cluster
        .apply_watch_event(WatchEvent::Added, pod("c", "{}"))
        .unwrap();
    drain(&engine).await;
    let runs = engine.history(Some("scripted")).unwrap();
    assert_eq!(runs[0].trigger, "Synchronization (2 objects)");
    assert_eq!(runs[0].outcome, operon_data::api::HookRunOutcome::Failed);
    assert_eq!(runs[0].error.as_deref(), Some("failing on purpose"));
    assert_eq!(runs[1].outcome, operon_data::api::HookRunOutcome::Succeeded);
    let added = runs.iter().find(|r| r.trigger == "Added Pod ns/c").unwrap();
    assert_eq!(added.patch_descriptions, ["MergePatch Pod ns/c"]);
    assert_eq!(engine.history(None).unwrap(), runs);
    assert!(engine.history(Some("nope")).is_none());

    assert_eq!(engine.hook_infos()[0].log_level, None);
    assert!(engine.set_log_level("scripted", Some(operon_data::model::LogLevel::Debug)));
    assert_eq!(engine.hook_infos()[0].log_level, Some("debug"));
    assert!(!engine.set_log_level("nope", None));
}

mod start_order;
