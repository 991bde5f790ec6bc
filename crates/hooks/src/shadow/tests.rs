//! Shadows compared with their live hook: what counts as a difference, a shadow that
//! runs on the live hook's queue runs and reviews without its patches being applied,
//! and a shadow that is detached.

use super::*;
use crate::config;
use crate::engine::{Engine, LoadedHook};
use crate::runner::HookError;
use futures::future::BoxFuture;
use operon_cluster::local::LocalCluster;
use operon_data::model::{
    AdmissionBindingConfig, HookConfig, KubernetesBindingConfig, ObjectRef, PatchOperation,
    PatchSpec, ValidatingResponse, WebhookRule,
};
use serde_json::json;

/// Labels every pod of its contexts `version=<label>`, and answers reviews with
/// `allowed`; fails every run when `fail`.
struct Labeler {
    name: &'static str,
    label: &'static str,
    allowed: bool,
    fail: bool,
}

fn config() -> HookConfig {
    HookConfig {
        kubernetes: vec![KubernetesBindingConfig {
            name: "pods".into(),
            kind: "Pod".into(),
            ..KubernetesBindingConfig::default()
        }],
        kubernetes_validating: vec![AdmissionBindingConfig {
            name: "pods.example.com".into(),
            rules: vec![WebhookRule {
                operations: vec!["CREATE".into()],
                api_groups: vec![String::new()],
                api_versions: vec!["v1".into()],
                resources: vec!["pods".into()],
                scope: None,
            }],
            ..AdmissionBindingConfig::default()
        }],
        ..HookConfig::default()
    }
}

fn label(namespace: &str, name: &str, value: &str, spacing: bool) -> PatchOperation {
    let patch = if spacing {
        format!("{{ \"metadata\": {{ \"labels\": {{ \"version\": \"{value}\" }} }} }}")
    } else {
        format!(r#"{{"metadata":{{"labels":{{"version":"{value}"}}}}}}"#)
    };
    PatchOperation::MergePatch(PatchSpec {
        target: ObjectRef {
            api_version: Some("v1".into()),
            kind: "Pod".into(),
            namespace: Some(namespace.into()),
            name: name.into(),
        },
        patch,
        subresource: None,
        ignore_missing_object: false,
    })
}

impl Hook for Labeler {
    fn name(&self) -> &str {
        self.name
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async { Ok(config()) })
    }

    fn handle(&self, input: HookInput, _: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let mut patches = Vec::new();
            for context in &input.binding_contexts {
                for entry in context.object.iter().chain(&context.objects) {
                    let object: Value =
                        serde_json::from_str(entry.object.as_deref().unwrap_or("{}")).unwrap();
                    let (namespace, name) = operon_cluster::namespace_and_name(&object);
                    // The shadow writes the same JSON with other spacing.
                    patches.push(label(namespace, name, self.label, self.name == "shadow"));
                }
            }
            let review = input.binding_contexts[0].review.is_some();
            let outcome = if self.fail {
                Err(HookError::Run("exit code 1".into()))
            } else {
                Ok(HookOutput {
                    validating: review.then(|| ValidatingResponse {
                        allowed: self.allowed,
                        message: Some(format!("from {}", self.name)),
                        warnings: vec![],
                        patch: None,
                    }),
                    conversion: None,
                })
            };
            let run = HookRun {
                outcome,
                patches,
                metrics: vec![],
                logs: vec![],
                stdout: String::new(),
                stderr: String::new(),
                elapsed: Duration::from_millis(1),
            };
            (run, input)
        })
    }
}

fn labeler(name: &'static str, label: &'static str) -> Labeler {
    Labeler {
        name,
        label,
        allowed: true,
        fail: false,
    }
}

fn observed(patches: Vec<PatchOperation>, failed: bool, allowed: Option<bool>) -> Observed {
    Observed::of(&HookRun {
        outcome: if failed {
            Err(HookError::Run("exit code 2".into()))
        } else {
            Ok(HookOutput {
                validating: allowed.map(|allowed| ValidatingResponse {
                    allowed,
                    message: None,
                    warnings: vec![],
                    patch: None,
                }),
                conversion: None,
            })
        },
        patches,
        metrics: vec![],
        logs: vec![],
        stdout: String::new(),
        stderr: String::new(),
        elapsed: Duration::ZERO,
    })
}

#[test]
fn patches_and_answers_are_compared_as_json_and_messages_are_not() {
    let live = observed(vec![label("ns", "a", "v1", false)], false, None);
    // The same patch with other spacing: the same.
    let same = observed(vec![label("ns", "a", "v1", true)], false, None);
    assert_eq!(compare(&live, &same), vec![]);
    let other = observed(vec![label("ns", "a", "v2", false)], false, None);
    let differences = compare(&live, &other);
    assert_eq!(differences.len(), 1);
    assert_eq!(differences[0].label(), "patches");
    assert!(
        differences[0].describe().contains("\"v2\""),
        "{}",
        differences[0].describe()
    );
    let failed = observed(vec![], true, None);
    assert_eq!(
        compare(&live, &failed),
        vec![Difference::Outcome {
            live: None,
            shadow: Some("exit code 2".into())
        }]
    );
    assert_eq!(
        compare(
            &observed(vec![], false, Some(true)),
            &observed(vec![], false, Some(false))
        ),
        vec![Difference::Allowed {
            live: true,
            shadow: false
        }]
    );
    // No answer where the live hook answered: a denial.
    assert_eq!(
        compare(
            &observed(vec![], false, Some(true)),
            &observed(vec![], false, None)
        )[0]
        .label(),
        "allowed"
    );
}

async fn engine_with(
    live: Labeler,
    shadows: &Shadows,
) -> (Arc<Engine>, Arc<LocalCluster>, Arc<Metrics>) {
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: ns}\n",
            "pods",
        )
        .unwrap();
    let hook: Arc<dyn Hook> = Arc::new(live);
    let validated = config::validate(hook.name(), &config(), &config::any_kind).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let engine = Arc::new(
        Engine::new(
            vec![LoadedHook {
                hook,
                config: validated,
            }],
            cluster.clone(),
            metrics.clone(),
        )
        .with_shadows(shadows.clone()),
    );
    (engine, cluster, metrics)
}

/// A shadow of `live` that hands its comparisons to the returned list.
fn attach(
    shadows: &Shadows,
    shadow: Labeler,
    metrics: &Arc<Metrics>,
) -> (Attachment, Arc<Mutex<Vec<Comparison>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let attachment = shadows.attach(
        "live",
        Shadow::new(
            Arc::new(shadow),
            Duration::from_secs(5),
            metrics.clone(),
            move |c| {
                kept.lock().unwrap().push(c.clone());
            },
        ),
    );
    (attachment, seen)
}

async fn comparisons(seen: &Mutex<Vec<Comparison>>, count: usize) -> Vec<Comparison> {
    for _ in 0..500 {
        if seen.lock().unwrap().len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seen.lock().unwrap().clone()
}

#[tokio::test]
async fn a_shadow_runs_on_the_live_hooks_inputs_and_its_patches_are_never_applied() {
    let shadows = Shadows::default();
    let (engine, cluster, metrics) = engine_with(labeler("live", "v1"), &shadows).await;
    let (attachment, seen) = attach(&shadows, labeler("shadow", "v2"), &metrics);
    assert_eq!(shadows.of("live"), ["shadow"]);
    engine.start().await.unwrap();
    // The Synchronization run, then the run of the Modified event its patch causes.
    let mut runs = 0;
    engine.drain(|_| runs += 1).await;
    let found = comparisons(&seen, runs).await;
    assert_eq!(found.len(), runs);
    let comparison = &found[0];
    assert_eq!(
        (
            comparison.shadow.as_str(),
            comparison.live.as_str(),
            comparison.binding.as_str()
        ),
        ("shadow", "live", "pods")
    );
    assert_eq!(comparison.object, "Pod ns/web");
    assert_eq!(comparison.differences[0].label(), "patches");
    // Only the live hook's patch was applied.
    let pod = cluster.objects().into_iter().next().unwrap();
    assert_eq!(pod["metadata"]["labels"]["version"], "v1");
    let count = |result: &str| {
        metrics
            .shadow_runs_total
            .with_label_values(&["shadow", "live", result])
            .get()
    };
    assert!(found.iter().all(|c| c.differences.len() == 1));
    assert_eq!(count("diverged"), runs as u64);
    assert_eq!(
        metrics
            .shadow_divergences_total
            .with_label_values(&["shadow", "live", "pods", "patches"])
            .get(),
        runs as u64
    );

    // A review: the shadow denies what the live hook allows.
    drop(attachment);
    assert!(shadows.of("live").is_empty());
    let denying = Labeler {
        allowed: false,
        ..labeler("shadow", "v1")
    };
    let (_attachment, seen) = attach(&shadows, denying, &metrics);
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE", "namespace": "ns", "name": "api",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "object": {"metadata": {"name": "api", "namespace": "ns"}}}});
    let record = engine
        .review(0, "pods.example.com", review.to_string())
        .await
        .unwrap();
    let answer = record.run.outcome.unwrap().validating.unwrap();
    assert!(answer.allowed, "the live answer is the one given");
    let found = comparisons(&seen, 1).await;
    assert_eq!(found[0].object, "CREATE Pod ns/api");
    assert_eq!(
        found[0].differences,
        vec![Difference::Allowed {
            live: true,
            shadow: false
        }]
    );
}

#[tokio::test]
async fn a_shadow_that_does_what_the_live_hook_does_counts_as_the_same() {
    let shadows = Shadows::default();
    let (engine, _cluster, metrics) = engine_with(labeler("live", "v1"), &shadows).await;
    let (_attachment, seen) = attach(&shadows, labeler("shadow", "v1"), &metrics);
    engine.start().await.unwrap();
    let mut runs = 0;
    engine.drain(|_| runs += 1).await;
    let found = comparisons(&seen, runs).await;
    assert!(found.iter().all(|c| c.differences.is_empty()), "{found:?}");
    assert_eq!(
        metrics
            .shadow_runs_total
            .with_label_values(&["shadow", "live", "same"])
            .get(),
        runs as u64
    );
}

#[tokio::test]
async fn an_audit_review_runs_no_shadow() {
    let shadows = Shadows::default();
    let (engine, _cluster, metrics) = engine_with(labeler("live", "v1"), &shadows).await;
    let denying = Labeler {
        allowed: false,
        ..labeler("shadow", "v1")
    };
    let (_attachment, seen) = attach(&shadows, denying, &metrics);
    let review = |name: &str| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE", "namespace": "ns", "name": name,
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "object": {"metadata": {"name": name, "namespace": "ns"}}}})
        .to_string()
    };
    let audited = engine
        .audit_review(0, "pods.example.com", review("audited"))
        .await
        .unwrap();
    assert_eq!(audited.queue, "audit");
    engine
        .review(0, "pods.example.com", review("api"))
        .await
        .unwrap();
    comparisons(&seen, 1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let found = seen.lock().unwrap().clone();
    assert_eq!(
        found.iter().map(|c| c.object.as_str()).collect::<Vec<_>>(),
        ["CREATE Pod ns/api"],
        "only the API server's review is compared"
    );
}
