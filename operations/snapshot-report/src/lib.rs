//! Snapshot report: a hook that compares, for every Deployment, its running pods with its
//! replicas, reading only the snapshots of a binding group.
//!
//! The `deployments` and `pods` bindings are both in the group `workloads`, so whichever of
//! them fires, the hook runs once with a `Group` context holding the current snapshots of
//! both, filtered down to what the report needs. A pod counts for a Deployment when it is
//! `Running`, in the same namespace, carries the same `app` label, and is owned by one of
//! the Deployment's ReplicaSets (`<deployment>-<pod-template-hash>`), so that two
//! Deployments sharing an `app` label (say `web` and `web-canary`) are told apart.
//! Deployments without an `app` label are skipped.
//!
//! For each Deployment it sets the gauge `workload_available_ratio{namespace,
//! deployment}` (running pods over replicas, at most 1) in the metric group `workloads`,
//! and keeps the annotation `operon.dev/unavailable-pods` on it: the number of missing pods
//! while it has fewer running pods than replicas, removed (a merge patch with `null`) once
//! it has enough. The filter includes the annotation, so only a change is patched: every
//! pod event runs the hook over all Deployments, which must not write to each of them.

use std::collections::BTreeMap;

use operon_sdk::metrics::{self, Gauge};
use operon_sdk::{
    BindingType, Error, Hook, HookConfig, HookInput, HookOutput, KubernetesBinding, Metric,
    ObjectAndFilter, Patch, ResultExt, debug, info,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The group of both bindings, and the metric group of the gauges.
const GROUP: &str = "workloads";
/// The name of the Deployment binding.
const DEPLOYMENTS: &str = "deployments";
/// The name of the Pod binding.
const PODS: &str = "pods";
/// The annotation holding how many pods a Deployment is missing.
const ANNOTATION: &str = "operon.dev/unavailable-pods";
/// The label that ties pods to their Deployment.
const APP_LABEL: &str = "app";

/// Reduces a Deployment to what the report needs, including the annotation this hook set.
const DEPLOYMENT_FILTER: &str = r#"{
    name: .metadata.name,
    namespace: .metadata.namespace,
    replicas: (.spec.replicas // 1),
    labels: (.metadata.labels // {}),
    unavailablePods: .metadata.annotations["operon.dev/unavailable-pods"]
}"#;
/// Reduces a Pod to what the report needs; owner references keep only kind and name.
const POD_FILTER: &str = r#"{
    name: .metadata.name,
    namespace: .metadata.namespace,
    phase: .status.phase,
    labels: (.metadata.labels // {}),
    ownerReferences: [.metadata.ownerReferences[]? | {kind: .kind, name: .name}]
}"#;

struct SnapshotReport;

impl Hook for SnapshotReport {
    fn configure() -> Result<HookConfig, Error> {
        Ok(HookConfig::new()
            .kubernetes(
                KubernetesBinding::new(DEPLOYMENTS, "Deployment")
                    .api_version("apps/v1")
                    .jq_filter(DEPLOYMENT_FILTER)
                    .keep_full_objects_in_memory(false)
                    .group(GROUP),
            )
            .kubernetes(
                KubernetesBinding::new(PODS, "Pod")
                    .jq_filter(POD_FILTER)
                    .keep_full_objects_in_memory(false)
                    .group(GROUP),
            ))
    }

    fn handle(input: HookInput) -> Result<HookOutput, Error> {
        // A compacted run carries several group contexts; the newest has the newest
        // snapshots, and the older ones add nothing to them.
        let Some(context) = (input.binding_contexts.iter().rev())
            .find(|context| context.type_ == BindingType::Group)
        else {
            debug!("no group context, nothing to report"; contexts = input.binding_contexts.len());
            return Ok(HookOutput::default());
        };
        // A missing snapshot is a host fault, not an empty cluster: reading it as empty
        // would annotate every Deployment as missing all its pods.
        let snapshot = |binding: &str| match context.snapshot(binding) {
            Some(snapshot) => Ok(snapshot.objects.as_slice()),
            None => Err(Error::new(format_args!(
                "the group context carries no `{binding}` snapshot"
            ))),
        };
        let deployments: Vec<Deployment> = parse_snapshot(DEPLOYMENTS, snapshot(DEPLOYMENTS)?)?;
        let pods: Vec<Pod> = parse_snapshot(PODS, snapshot(PODS)?)?;
        let report = availability(&deployments, &pods);

        // Expiring first drops the gauges of deleted Deployments, whether the host expires
        // the whole group or only the series this run does not set again.
        metrics::expire_group(GROUP)?;
        let mut patched = 0;
        for workload in &report {
            let (gauge, ratio) = ratio_gauge(workload);
            gauge.set(ratio)?;
            if let Some(patch) = annotation_patch(workload) {
                patch.submit()?;
                patched += 1;
            }
        }
        let degraded = report
            .iter()
            .filter(|workload| workload.missing() > 0)
            .count();
        info!(
            "{} deployments, {degraded} with fewer running pods than replicas",
            report.len();
            pods = pods.len(),
            patched = patched,
            skipped = deployments.len() - report.len(),
        );
        Ok(HookOutput::default())
    }
}

operon_sdk::hook!(SnapshotReport);

/// A Deployment, as its filter result describes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Deployment {
    name: String,
    namespace: String,
    /// The desired number of pods.
    replicas: u32,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    /// The annotation as it is now, so that an unchanged value is not patched again.
    #[serde(default)]
    unavailable_pods: Option<String>,
}

/// A Pod, as its filter result describes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Pod {
    name: String,
    namespace: String,
    /// `None` before the pod is scheduled.
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    owner_references: Vec<PodOwner>,
}

/// An owner of a pod: for a Deployment's pods, one of its ReplicaSets.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct PodOwner {
    kind: String,
    name: String,
}

/// One Deployment with the number of its pods that are running.
#[derive(Debug, Clone, PartialEq)]
struct Workload<'a> {
    deployment: &'a Deployment,
    running: u32,
}

impl Workload<'_> {
    /// How many pods are missing to reach the replicas.
    fn missing(&self) -> u32 {
        self.deployment.replicas.saturating_sub(self.running)
    }

    /// Running pods over replicas, at most 1 (a rollout briefly runs extra pods); 1 when
    /// no pod is wanted.
    fn available_ratio(&self) -> f64 {
        match self.deployment.replicas {
            0 => 1.0,
            replicas => (f64::from(self.running) / f64::from(replicas)).min(1.0),
        }
    }
}

/// Parses the filter results of the snapshot of `binding`; errors name the object, or its
/// position when it has no name.
fn parse_snapshot<T: DeserializeOwned>(
    binding: &str,
    objects: &[ObjectAndFilter],
) -> Result<Vec<T>, Error> {
    let parse = |(index, object): (usize, &ObjectAndFilter)| {
        let value = object.parse_filter_result()?.unwrap_or(Value::Null);
        let field = |key| value.get(key).and_then(Value::as_str);
        let object = match (field("namespace"), field("name")) {
            (Some(namespace), Some(name)) => format!("`{namespace}/{name}`"),
            (None, Some(name)) => format!("`{name}`"),
            (_, None) => format!("#{index}"),
        };
        serde_json::from_value(value)
            .with_context(|| format!("object {object} in the `{binding}` snapshot"))
    };
    objects.iter().enumerate().map(parse).collect()
}

/// Pairs each Deployment that has an `app` label with its running pods.
fn availability<'a>(deployments: &'a [Deployment], pods: &[Pod]) -> Vec<Workload<'a>> {
    deployments
        .iter()
        .filter(|deployment| deployment.labels.contains_key(APP_LABEL))
        .map(|deployment| {
            let running = pods
                .iter()
                .filter(|pod| {
                    pod.phase.as_deref() == Some("Running") && belongs_to(pod, deployment)
                })
                .count();
            Workload {
                deployment,
                running: u32::try_from(running).unwrap_or(u32::MAX),
            }
        })
        .collect()
}

/// Whether `pod` is one of `deployment`'s: same namespace and `app` label, owned by one of
/// its ReplicaSets.
fn belongs_to(pod: &Pod, deployment: &Deployment) -> bool {
    pod.namespace == deployment.namespace
        && pod
            .labels
            .get(APP_LABEL)
            .is_some_and(|app| deployment.labels.get(APP_LABEL) == Some(app))
        && pod.owner_references.iter().any(|owner| {
            owner.kind == "ReplicaSet" && is_replica_set_of(&owner.name, &deployment.name)
        })
}

/// Whether a ReplicaSet named `replica_set` was created by the Deployment `deployment`,
/// which names them `<deployment>-<pod-template-hash>`; the hash has no dash, so `web`
/// does not claim the ReplicaSets of `web-canary`.
fn is_replica_set_of(replica_set: &str, deployment: &str) -> bool {
    replica_set
        .strip_prefix(deployment)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hash| !hash.is_empty() && !hash.contains('-'))
}

/// The patch that brings the annotation up to date, or `None` when it already is.
fn annotation_patch(workload: &Workload<'_>) -> Option<Patch> {
    let deployment = workload.deployment;
    let wanted = match workload.missing() {
        0 => None,
        missing => Some(missing.to_string()),
    };
    if wanted == deployment.unavailable_pods {
        return None;
    }
    // `null` removes the annotation in a merge patch. Ignoring a missing object: the
    // Deployment may be deleted before the host applies the patch.
    let patch = json!({"metadata": {"annotations": {ANNOTATION: wanted}}});
    Some(
        Patch::merge(
            "Deployment",
            Some(&deployment.namespace),
            &deployment.name,
            patch,
        )
        .api_version("apps/v1")
        .ignore_missing_object(),
    )
}

/// The availability gauge of one Deployment, with its value.
fn ratio_gauge(workload: &Workload<'_>) -> (Metric<Gauge>, f64) {
    let deployment = workload.deployment;
    let gauge = Metric::gauge("workload_available_ratio")
        .label("namespace", &deployment.namespace)
        .label("deployment", &deployment.name)
        .group(GROUP);
    (gauge, workload.available_ratio())
}

#[cfg(test)]
mod tests {
    use operon_sdk::kubernetes::PatchOperation;

    use super::*;

    fn filtered(result: Value) -> ObjectAndFilter {
        ObjectAndFilter {
            object: None,
            filter_result: Some(result.to_string()),
        }
    }

    fn deployment(name: &str, app: &str, replicas: u32, annotation: Option<&str>) -> Deployment {
        Deployment {
            name: name.into(),
            namespace: "shop".into(),
            replicas,
            labels: BTreeMap::from([(APP_LABEL.into(), app.into())]),
            unavailable_pods: annotation.map(str::to_owned),
        }
    }

    fn pod(name: &str, app: &str, replica_set: &str, phase: &str) -> Pod {
        Pod {
            name: name.into(),
            namespace: "shop".into(),
            phase: Some(phase.into()),
            labels: BTreeMap::from([(APP_LABEL.into(), app.into())]),
            owner_references: vec![PodOwner {
                kind: "ReplicaSet".into(),
                name: replica_set.into(),
            }],
        }
    }

    fn running_counts(deployments: &[Deployment], pods: &[Pod]) -> Vec<(String, u32)> {
        (availability(deployments, pods).iter())
            .map(|workload| (workload.deployment.name.clone(), workload.running))
            .collect()
    }

    /// The annotation value a patch sets, `null` when it removes it.
    fn annotation_set_by(patch: &Patch) -> Value {
        let PatchOperation::MergePatch(spec) = patch.operation() else {
            panic!("expected a merge patch, got {patch:?}");
        };
        assert_eq!(spec.target.kind, "Deployment");
        assert_eq!(spec.target.api_version.as_deref(), Some("apps/v1"));
        assert_eq!(spec.target.namespace.as_deref(), Some("shop"));
        assert!(spec.ignore_missing_object);
        let patch: Value = serde_json::from_str(&spec.patch).unwrap();
        patch["metadata"]["annotations"][ANNOTATION].clone()
    }

    #[test]
    fn configures_two_grouped_bindings() {
        let config = SnapshotReport::configure().unwrap();
        assert!(config.schedule.is_empty());
        let bindings: Vec<_> = (config.kubernetes.iter())
            .map(|binding| {
                (
                    binding.name.as_str(),
                    binding.kind.as_str(),
                    binding.group.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            bindings,
            [
                (DEPLOYMENTS, "Deployment", Some(GROUP)),
                (PODS, "Pod", Some(GROUP)),
            ]
        );
        assert_eq!(
            config.kubernetes[0].jq_filter.as_deref(),
            Some(DEPLOYMENT_FILTER)
        );
        assert_eq!(config.kubernetes[1].jq_filter.as_deref(), Some(POD_FILTER));
    }

    #[test]
    fn parses_filter_results() {
        let deployments: Vec<Deployment> = parse_snapshot(
            DEPLOYMENTS,
            &[filtered(json!({
                "name": "cart", "namespace": "shop", "replicas": 3,
                "labels": {"app": "cart"}, "unavailablePods": "1",
            }))],
        )
        .unwrap();
        assert_eq!(deployments, [deployment("cart", "cart", 3, Some("1"))]);

        let pods: Vec<Pod> = parse_snapshot(
            PODS,
            &[filtered(json!({
                "name": "cart-7d9f-x", "namespace": "shop", "phase": "Running",
                "labels": {"app": "cart"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": "cart-7d9f"}],
            }))],
        )
        .unwrap();
        assert_eq!(pods, [pod("cart-7d9f-x", "cart", "cart-7d9f", "Running")]);
    }

    #[test]
    fn malformed_filter_results_name_the_object() {
        let err = parse_snapshot::<Deployment>(
            DEPLOYMENTS,
            &[filtered(
                json!({"name": "cart", "namespace": "shop", "replicas": "three"}),
            )],
        )
        .unwrap_err();
        assert!(
            err.message().starts_with(
                "object `shop/cart` in the `deployments` snapshot: invalid type: string \"three\""
            ),
            "{err}"
        );

        let err = parse_snapshot::<Pod>(PODS, &[filtered(Value::Null)]).unwrap_err();
        assert!(
            err.message()
                .starts_with("object #0 in the `pods` snapshot: invalid type: null"),
            "{err}"
        );
    }

    #[test]
    fn counts_running_pods_of_each_deployment() {
        let deployments = [
            deployment("web", "web", 3, None),
            deployment("web-canary", "web", 1, None),
        ];
        let mut elsewhere = pod("web-5c6b-z", "web", "web-5c6b", "Running");
        elsewhere.namespace = "staging".into();
        let pods = [
            pod("web-5c6b-a", "web", "web-5c6b", "Running"),
            pod("web-5c6b-b", "web", "web-5c6b", "Pending"),
            pod("web-canary-8f2d-a", "web", "web-canary-8f2d", "Running"),
            pod("stray", "web", "other-1a2b", "Running"),
            elsewhere,
        ];
        assert_eq!(
            running_counts(&deployments, &pods),
            [("web".into(), 1), ("web-canary".into(), 1)]
        );
    }

    #[test]
    fn skips_deployments_without_an_app_label() {
        let mut unlabelled = deployment("batch", "batch", 2, None);
        unlabelled.labels.clear();
        assert_eq!(running_counts(&[unlabelled], &[]), []);
    }

    #[test]
    fn recognises_replica_sets_by_name() {
        assert!(is_replica_set_of("web-5c6b8d", "web"));
        assert!(!is_replica_set_of("web-canary-8f2d", "web"));
        assert!(!is_replica_set_of("web-", "web"));
        assert!(!is_replica_set_of("web", "web"));
        assert!(!is_replica_set_of("webapp-5c6b", "web"));
    }

    #[test]
    fn annotates_deployments_below_their_replicas() {
        let deployment = deployment("web", "web", 3, None);
        let workload = Workload {
            deployment: &deployment,
            running: 1,
        };
        let patch = annotation_patch(&workload).expect("a patch");
        assert_eq!(annotation_set_by(&patch), json!("2"));
    }

    #[test]
    fn removes_the_annotation_once_healthy() {
        let deployment = deployment("web", "web", 3, Some("2"));
        let workload = Workload {
            deployment: &deployment,
            running: 3,
        };
        let patch = annotation_patch(&workload).expect("a patch");
        assert_eq!(annotation_set_by(&patch), Value::Null);
    }

    #[test]
    fn leaves_an_up_to_date_annotation_alone() {
        let degraded = deployment("web", "web", 3, Some("2"));
        let healthy = deployment("api", "api", 2, None);
        for (deployment, running) in [(&degraded, 1), (&healthy, 2), (&healthy, 4)] {
            assert_eq!(
                annotation_patch(&Workload {
                    deployment,
                    running
                }),
                None
            );
        }
    }

    #[test]
    fn gauges_the_available_ratio() {
        let web = deployment("web", "web", 4, None);
        let idle = deployment("idle", "idle", 0, None);
        let ratio = |deployment, running| {
            ratio_gauge(&Workload {
                deployment,
                running,
            })
            .1
        };
        assert_eq!(ratio(&web, 1), 0.25);
        assert_eq!(ratio(&web, 5), 1.0);
        assert_eq!(ratio(&idle, 0), 1.0);

        let (gauge, _) = ratio_gauge(&Workload {
            deployment: &web,
            running: 4,
        });
        let expected = Metric::gauge("workload_available_ratio")
            .label("namespace", "shop")
            .label("deployment", "web")
            .group(GROUP);
        assert_eq!(gauge, expected);
    }
}
