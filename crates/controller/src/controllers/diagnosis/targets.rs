//! Diagnoses about many nodes (`spec.targetSelector`, KubeDiag's field after v0.3.1):
//! the Diagnosis becomes a parent that runs nothing itself. The controller resolves its
//! nodes once, records them in `status.targets`, and creates one child Diagnosis per
//! node, `<parent>-<node>`, with the parent's spec but `spec.nodeName` set to that node;
//! each child is then placed and run like any Diagnosis naming a node. The parent
//! gathers their outcomes: `Running` while a child runs, `Succeeded` when every child
//! succeeded, `Failed` otherwise, each node's phase and results in `status.targets`.
//!
//! The children carry an owner reference to the parent (deleting the parent deletes
//! them) and the label [`PARENT_LABEL`], so the controller watches only them to wake
//! their parent. Their names are deterministic and a create that finds the child there
//! already counts as done, so a controller restarted between recording the targets and
//! creating the children creates each child once.

use super::{Context, DiagnosisError, Patience, SCHEDULED, metrics, now, wait};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{Api, ListParams, PostParams};
use kube::core::Selector;
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use operon_cluster::kube::FIELD_MANAGER;
use operon_data::api::{
    API_VERSION, Condition, ConditionStatus, Diagnosis, DiagnosisPhase, DiagnosisStatus,
    TargetSelector, TargetStatus,
};
use operon_data::conventions::conditions::set_condition;
use sha2::Digest as _;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The label on every child, naming its parent (shortened past 63 characters): what
/// `kubectl get diagnoses -l operon.dev/parent-diagnosis=<parent>` lists, and what the
/// controller's watch of children selects.
pub(crate) const PARENT_LABEL: &str = "operon.dev/parent-diagnosis";

/// How often a parent looks at its children without being woken: a missed watch event
/// must not leave it running for ever.
const CHILD_POLL: Duration = Duration::from_secs(60);

/// The longest object name the API server takes.
const MAX_NAME: usize = operon_data::conventions::names::MAX_SUBDOMAIN;
/// The longest label value.
const MAX_LABEL_VALUE: usize = 63;
/// Hex digits of the digest that keeps shortened names apart.
const DIGEST_HEX: usize = 16;

/// The watch of child Diagnoses only, for the controller's `owns`.
pub(crate) fn children_watch() -> watcher::Config {
    watcher::Config::default().labels(PARENT_LABEL)
}

/// The name of `parent`'s child on `node`: `<parent>-<node>`, or past [`MAX_NAME`] its
/// beginning and a digest of both names, so that two long pairs never share a child.
pub(crate) fn child_name(parent: &str, node: &str) -> String {
    let name = format!("{parent}-{node}");
    if name.len() <= MAX_NAME {
        return name;
    }
    shortened(&name, &format!("{parent}\n{node}"), MAX_NAME)
}

/// The value of [`PARENT_LABEL`] for `parent`: its name, or past 63 characters its
/// beginning and a digest.
pub(crate) fn parent_label_value(parent: &str) -> String {
    if parent.len() <= MAX_LABEL_VALUE {
        return parent.to_owned();
    }
    shortened(parent, parent, MAX_LABEL_VALUE)
}

/// `name` cut to `max` characters with `-<digest of key>` at its end. `name` is made of
/// valid object names joined by `-` (ASCII, dot-separated segments that start and end
/// with a letter or digit), so the cut is at a character and, with the separators it
/// leaves at its end trimmed, still a valid name and label value.
fn shortened(name: &str, key: &str, max: usize) -> String {
    let digest = hex::encode(sha2::Sha256::digest(key.as_bytes()));
    let digest = &digest[..DIGEST_HEX];
    let keep = max - DIGEST_HEX - 1;
    let head = name[..keep.min(name.len())].trim_end_matches(['-', '.']);
    format!("{head}-{digest}")
}

/// The child of `parent` on `node`: the parent's spec with `spec.nodeName` set and no
/// selector, the parent as its controlling owner.
pub(crate) fn child(parent: &Diagnosis, node: &str) -> Diagnosis {
    let parent_name = parent.name_any();
    let mut spec = parent.spec.clone();
    spec.target_selector = None;
    spec.pod_reference = None;
    spec.node_name = Some(node.to_owned());
    let mut child = Diagnosis::new(&child_name(&parent_name, node), spec);
    child.metadata.namespace = parent.metadata.namespace.clone();
    child.metadata.labels = Some(BTreeMap::from([(
        PARENT_LABEL.to_owned(),
        parent_label_value(&parent_name),
    )]));
    // `blockOwnerDeletion`: a foreground deletion of the parent waits for its children
    // (the controller needs `update` on diagnoses/finalizers for it).
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: API_VERSION.to_owned(),
        kind: "Diagnosis".to_owned(),
        name: parent_name,
        uid: parent.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    child
}

/// Whether `child` is owned by the Diagnosis of uid `parent`.
fn owned_by(child: &Diagnosis, parent: &str) -> bool {
    child
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.kind == "Diagnosis" && owner.uid == parent)
}

/// The nodes a selector names or matches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// Nodes that exist: each gets a child.
    pub(crate) found: BTreeSet<String>,
    /// Names in `nodeNames` with no Node.
    pub(crate) missing: BTreeSet<String>,
}

/// Looks up the nodes of `selector`: a GET per name, one list for the label selector.
/// `selector` is valid ([`Diagnosis::validate`]).
async fn resolve(client: &Client, selector: &TargetSelector) -> Result<Resolved, kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut resolved = Resolved::default();
    let names: BTreeSet<&String> = selector.node_names.iter().collect();
    for name in names {
        match nodes.get_metadata_opt(name).await? {
            Some(_) => resolved.found.insert(name.clone()),
            None => resolved.missing.insert(name.clone()),
        };
    }
    if let Some(labels) = &selector.node_selector {
        let mut params = ListParams::default();
        // Validated before: a selector kube cannot render was refused there.
        if let Ok(selector) = Selector::try_from(labels.clone())
            && !selector.selects_all()
        {
            params = params.labels_from(&selector);
        }
        for node in nodes.list_metadata(&params).await? {
            resolved.found.insert(node.name_any());
        }
    }
    Ok(resolved)
}

/// The targets recorded for `resolved`: children for the nodes found, failures for
/// the names with no Node.
pub(crate) fn record(parent: &str, resolved: &Resolved) -> Vec<TargetStatus> {
    let mut targets: Vec<TargetStatus> = resolved
        .found
        .iter()
        .map(|node| TargetStatus {
            node_name: node.clone(),
            diagnosis: Some(child_name(parent, node)),
            phase: DiagnosisPhase::Pending,
            message: None,
            operation_results: BTreeMap::new(),
            results_omitted: false,
        })
        .chain(resolved.missing.iter().map(|node| TargetStatus {
            node_name: node.clone(),
            diagnosis: None,
            phase: DiagnosisPhase::Failed,
            message: Some(format!(
                "spec.targetSelector.nodeNames: there is no Node {node:?}"
            )),
            operation_results: BTreeMap::new(),
            results_omitted: false,
        }))
        .collect();
    targets.sort_by(|a, b| a.node_name.cmp(&b.node_name));
    targets
}

fn done(phase: DiagnosisPhase) -> bool {
    matches!(phase, DiagnosisPhase::Succeeded | DiagnosisPhase::Failed)
}

/// Brings `targets` up to what the `children` (by name) say. A finished child's
/// results are copied while all the targets' results stay under `budget` bytes; the
/// others are marked `resultsOmitted`. A target whose child is gone keeps its record.
pub(crate) fn gather(
    targets: &mut [TargetStatus],
    children: &BTreeMap<String, Diagnosis>,
    budget: usize,
) {
    let mut used = 0;
    for target in targets.iter_mut() {
        let Some(child) = target
            .diagnosis
            .as_ref()
            .and_then(|name| children.get(name))
        else {
            used += size(&target.operation_results);
            continue;
        };
        let status = child.status.clone().unwrap_or_default();
        target.phase = status.phase.unwrap_or(DiagnosisPhase::Pending);
        target.message = message(&status);
        target.operation_results.clear();
        target.results_omitted = false;
        if done(target.phase) {
            let bytes = size(&status.operation_results);
            if used + bytes <= budget {
                used += bytes;
                target.operation_results = status.operation_results;
            } else {
                target.results_omitted = true;
            }
        }
    }
}

fn size(results: &BTreeMap<String, String>) -> usize {
    results.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// What a child says about itself: how it ended, else why it waits.
fn message(status: &DiagnosisStatus) -> Option<String> {
    let complete = status
        .conditions
        .iter()
        .find(|c| c.type_ == operon_pipeline::COMPLETE);
    complete
        .or_else(|| {
            status
                .conditions
                .iter()
                .find(|c| c.status == ConditionStatus::False)
        })
        .map(|c| c.message.clone())
        .filter(|m| !m.is_empty())
}

/// The parent's phase for `targets`, and once finished its `Complete` condition.
pub(crate) fn outcome(targets: &[TargetStatus]) -> (DiagnosisPhase, Option<Condition>) {
    if targets.iter().any(|t| !done(t.phase)) {
        return (DiagnosisPhase::Running, None);
    }
    let failed: Vec<&str> = targets
        .iter()
        .filter(|t| t.phase != DiagnosisPhase::Succeeded)
        .map(|t| t.node_name.as_str())
        .collect();
    if failed.is_empty() {
        let message = format!("succeeded on every node ({})", targets.len());
        let complete = Condition::new(
            operon_pipeline::COMPLETE,
            ConditionStatus::True,
            "Succeeded",
            message,
        );
        (DiagnosisPhase::Succeeded, Some(complete))
    } else {
        let message = format!(
            "failed on {} of {} nodes: {}",
            failed.len(),
            targets.len(),
            failed.join(", ")
        );
        let complete = Condition::new(
            operon_pipeline::COMPLETE,
            ConditionStatus::True,
            "Failed",
            message,
        );
        (DiagnosisPhase::Failed, Some(complete))
    }
}

/// Brings a parent forward: resolves and records its nodes the first time, creates
/// the children it lacks, gathers what they report.
pub(super) async fn reconcile(
    mut diagnosis: Diagnosis,
    selector: &TargetSelector,
    ctx: &Context,
) -> Result<Action, DiagnosisError> {
    let mut writer = ctx.writer(&diagnosis);
    let recorded = diagnosis
        .status
        .as_ref()
        .is_some_and(|s| !s.targets.is_empty());
    if !recorded {
        // Admission refuses these; without the webhook they still must not run.
        let problems = diagnosis.validate();
        if !problems.is_empty() {
            let message = problems
                .iter()
                .map(|p| format!("{}: {}", p.field, p.reason))
                .collect::<Vec<_>>()
                .join("; ");
            return wait(
                ctx,
                &mut diagnosis,
                &mut writer,
                SCHEDULED,
                "InvalidTargetSelector",
                message,
                Patience::Never,
            )
            .await;
        }
        let resolved = resolve(&ctx.client, selector)
            .await
            .map_err(ctx.read_error(&diagnosis, "the Nodes of spec.targetSelector"))?;
        if resolved.found.is_empty() && resolved.missing.is_empty() {
            return wait(
                ctx,
                &mut diagnosis,
                &mut writer,
                SCHEDULED,
                "NoMatchingNode",
                "spec.targetSelector.nodeSelector matches no Node".to_owned(),
                Patience::Limited,
            )
            .await;
        }
        let targets = record(&diagnosis.name_any(), &resolved);
        let status = diagnosis.status.get_or_insert_with(Default::default);
        let nodes: Vec<&str> = targets.iter().map(|t| t.node_name.as_str()).collect();
        set_condition(
            &mut status.conditions,
            Condition::new(
                SCHEDULED,
                ConditionStatus::True,
                "TargetsResolved",
                format!(
                    "one Diagnosis per node ({}): {}",
                    nodes.len(),
                    nodes.join(", ")
                ),
            ),
        );
        status.targets = targets;
        status.phase = Some(DiagnosisPhase::Running);
        status.start_time = Some(Time(now()));
        // Recorded before any child exists: a restart creates the same children.
        writer.write(&diagnosis).await?;
    }
    let namespace = diagnosis.namespace().unwrap_or_default();
    let api: Api<Diagnosis> = Api::namespaced(ctx.client.clone(), &namespace);
    let uid = diagnosis.metadata.uid.clone().unwrap_or_default();
    let label = format!(
        "{PARENT_LABEL}={}",
        parent_label_value(&diagnosis.name_any())
    );
    let mut children: BTreeMap<String, Diagnosis> = api
        .list(&ListParams::default().labels(&label))
        .await
        .map_err(ctx.read_error(&diagnosis, "its child Diagnoses"))?
        .into_iter()
        .filter(|child| owned_by(child, &uid))
        .map(|child| (child.name_any(), child))
        .collect();
    let targets = diagnosis
        .status
        .as_ref()
        .map(|s| s.targets.clone())
        .unwrap_or_default();
    let mut taken = BTreeSet::new();
    for target in &targets {
        let Some(name) = &target.diagnosis else {
            continue;
        };
        if done(target.phase) || children.contains_key(name) {
            continue;
        }
        match create(&api, &diagnosis, &target.node_name, &uid).await {
            Ok(Created::Mine(child)) => {
                children.insert(name.clone(), *child);
            }
            Ok(Created::Taken) => {
                taken.insert(name.clone());
            }
            Err(source) => {
                return Err(DiagnosisError::CreateChild {
                    diagnosis: diagnosis.object_ref(),
                    child: name.clone(),
                    source,
                });
            }
        }
    }
    let status = diagnosis.status.get_or_insert_with(Default::default);
    gather(
        &mut status.targets,
        &children,
        ctx.settings.limits.per_diagnosis,
    );
    for target in &mut status.targets {
        if let Some(name) = target.diagnosis.as_ref().filter(|n| taken.contains(*n)) {
            target.phase = DiagnosisPhase::Failed;
            target.message = Some(format!(
                "a Diagnosis {name} that this one does not own exists already: delete it or \
                 rename this Diagnosis"
            ));
        }
    }
    let (phase, complete) = outcome(&status.targets);
    status.phase = Some(phase);
    let finished_now = complete.is_some();
    if let Some(complete) = complete {
        set_condition(&mut status.conditions, complete);
        status.completion_time = Some(Time(now()));
    }
    writer.write(&diagnosis).await?;
    if finished_now {
        metrics::finished(&ctx.settings.role, phase);
        tracing::info!(diagnosis = %diagnosis.object_ref(), phase = ?phase, "Diagnosis of several nodes finished");
        return Ok(Action::await_change());
    }
    Ok(Action::requeue(CHILD_POLL))
}

/// What creating a child came to.
enum Created {
    /// The child, created now or found created by this parent before.
    Mine(Box<Diagnosis>),
    /// Another Diagnosis holds the child's name.
    Taken,
}

/// Creates the child of `parent` (uid `uid`) on `node`; one there already is this
/// child when `parent` owns it.
async fn create(
    api: &Api<Diagnosis>,
    parent: &Diagnosis,
    node: &str,
    uid: &str,
) -> Result<Created, kube::Error> {
    let child = child(parent, node);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api.create(&params, &child).await {
        Ok(created) => {
            tracing::info!(parent = %parent.object_ref(), child = %created.name_any(), node, "child Diagnosis created");
            Ok(Created::Mine(Box::new(created)))
        }
        Err(kube::Error::Api(status)) if status.code == 409 && status.reason == "AlreadyExists" => {
            // Created before a restart, or a stranger of the same name.
            match api.get_opt(&child.name_any()).await? {
                Some(existing) if owned_by(&existing, uid) => Ok(Created::Mine(Box::new(existing))),
                Some(_) => Ok(Created::Taken),
                // Deleted since: the next reconcile creates it.
                None => Ok(Created::Mine(Box::new(child))),
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_data::conventions::names::is_dns_subdomain;
    use serde_json::json;

    fn target(node: &str, phase: DiagnosisPhase) -> TargetStatus {
        TargetStatus {
            node_name: node.to_owned(),
            diagnosis: Some(child_name("d", node)),
            phase,
            message: None,
            operation_results: BTreeMap::new(),
            results_omitted: false,
        }
    }

    #[test]
    fn child_names_are_parent_dash_node_and_stay_valid_and_apart_when_long() {
        assert_eq!(child_name("disk", "worker-1"), "disk-worker-1");
        let parent = format!("{}.b", "a".repeat(200));
        let (one, two) = (
            child_name(&parent, &"n".repeat(60)),
            child_name(&parent, &format!("{}m", "n".repeat(59))),
        );
        assert_eq!(one.len(), MAX_NAME);
        assert!(
            is_dns_subdomain(&one) && is_dns_subdomain(&two),
            "{one} {two}"
        );
        assert_ne!(one, two);
        assert_eq!(one, child_name(&parent, &"n".repeat(60)), "deterministic");
        // A cut that lands on a dot or dash leaves no separator before the digest.
        let dotted = format!("{}.{}", "a".repeat(235), "b".repeat(30));
        let name = child_name(&dotted, "node");
        assert!(is_dns_subdomain(&name), "{name}");
    }

    #[test]
    fn the_parent_label_is_its_name_or_a_short_form() {
        assert_eq!(parent_label_value("disk"), "disk");
        let long = "p".repeat(64);
        let value = parent_label_value(&long);
        assert_eq!(value.len(), MAX_LABEL_VALUE);
        assert!(value.starts_with("ppp") && value != parent_label_value(&"p".repeat(65)));
    }

    #[test]
    fn a_child_has_the_parents_spec_on_one_node_and_the_parent_as_owner() {
        let parent: Diagnosis = serde_json::from_value(json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
            "metadata": {"name": "d", "namespace": "ops", "uid": "u-1"},
            "spec": {"operationSet": "s", "parameters": {"k": "v"}, "serviceAccountName": "sa",
                     "dryRun": true, "targetSelector": {"nodeNames": ["n1"]}},
        }))
        .unwrap();
        let child = serde_json::to_value(child(&parent, "n1")).unwrap();
        assert_eq!(
            child,
            json!({
                "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                "metadata": {
                    "name": "d-n1", "namespace": "ops",
                    "labels": {"operon.dev/parent-diagnosis": "d"},
                    "ownerReferences": [{"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                        "name": "d", "uid": "u-1", "controller": true, "blockOwnerDeletion": true}],
                },
                "spec": {"operationSet": "s", "nodeName": "n1", "parameters": {"k": "v"},
                         "serviceAccountName": "sa", "dryRun": true},
            })
        );
    }

    #[test]
    fn missing_names_are_recorded_as_failed_targets_in_node_order() {
        let resolved = Resolved {
            found: ["w2".to_owned(), "w1".to_owned()].into(),
            missing: ["gone".to_owned()].into(),
        };
        let targets = record("d", &resolved);
        let nodes: Vec<(&str, Option<&str>, DiagnosisPhase)> = targets
            .iter()
            .map(|t| (t.node_name.as_str(), t.diagnosis.as_deref(), t.phase))
            .collect();
        assert_eq!(
            nodes,
            [
                ("gone", None, DiagnosisPhase::Failed),
                ("w1", Some("d-w1"), DiagnosisPhase::Pending),
                ("w2", Some("d-w2"), DiagnosisPhase::Pending),
            ]
        );
        assert!(
            targets[0]
                .message
                .as_deref()
                .unwrap()
                .contains("no Node \"gone\"")
        );
    }

    fn finished_child(node: &str, phase: &str, results: serde_json::Value) -> (String, Diagnosis) {
        let child: Diagnosis = serde_json::from_value(json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
            "metadata": {"name": child_name("d", node), "namespace": "ops"},
            "spec": {"operationSet": "s", "nodeName": node},
            "status": {"phase": phase, "operationResults": results,
                       "conditions": [{"type": "Complete", "status": "True", "reason": phase,
                                       "message": format!("{phase} on {node}"),
                                       "lastTransitionTime": "2026-11-28T10:00:00Z"}]},
        }))
        .unwrap();
        (child_name("d", node), child)
    }

    #[test]
    fn results_are_gathered_while_they_fit_and_the_rest_omitted() {
        let mut targets = vec![
            target("a", DiagnosisPhase::Pending),
            target("b", DiagnosisPhase::Pending),
            target("c", DiagnosisPhase::Pending),
        ];
        let children = BTreeMap::from([
            finished_child("a", "Succeeded", json!({"k": "123456"})),
            finished_child("b", "Failed", json!({"k": "1234567890"})),
        ]);
        gather(&mut targets, &children, 10);
        assert_eq!(targets[0].operation_results["k"], "123456");
        assert_eq!(targets[0].message.as_deref(), Some("Succeeded on a"));
        assert_eq!(targets[1].phase, DiagnosisPhase::Failed);
        assert!(targets[1].operation_results.is_empty() && targets[1].results_omitted);
        assert_eq!(targets[2].phase, DiagnosisPhase::Pending, "no child yet");
    }

    #[test]
    fn the_parent_runs_until_every_child_ends_and_fails_naming_the_failed_nodes() {
        use DiagnosisPhase::*;
        let (phase, complete) = outcome(&[target("a", Succeeded), target("b", Running)]);
        assert_eq!((phase, complete), (Running, None));
        let (phase, complete) = outcome(&[target("a", Succeeded), target("b", Succeeded)]);
        assert_eq!(phase, Succeeded);
        assert_eq!(complete.unwrap().reason, "Succeeded");
        let (phase, complete) = outcome(&[
            target("a", Failed),
            target("b", Succeeded),
            target("c", Failed),
        ]);
        assert_eq!(phase, Failed);
        let complete = complete.unwrap();
        assert_eq!(complete.type_, operon_pipeline::COMPLETE);
        assert_eq!(complete.message, "failed on 2 of 3 nodes: a, c");
    }
}
