//! Pod labeler: a hook that labels every pod it sees with `operon.dev/seen: "true"`.
//!
//! It watches pods (added or modified), filtered down to their labels so that only label
//! changes run it, and also runs every ten minutes over a snapshot of all pods to catch
//! any it missed. For each pod without the label it submits a merge patch, which the host
//! applies after the run (or only shows, in a dry run), and counts the pod in the
//! `pods_labelled_total` counter.

use operon_sdk::{
    BindingContext, BindingType, Error, Hook, HookConfig, HookInput, HookOutput, KubernetesBinding,
    Metric, ObjectAndFilter, Patch, ScheduleBinding, WatchEvent, info, warn,
};
use serde_json::{Value, json};

/// The label this hook adds.
const SEEN_LABEL: &str = "operon.dev/seen";
/// The name of the pod binding, which the schedule binding takes snapshots from.
const PODS: &str = "pods";

struct PodLabeler;

impl Hook for PodLabeler {
    fn configure() -> Result<HookConfig, Error> {
        Ok(HookConfig::new()
            .kubernetes(
                KubernetesBinding::new(PODS, "Pod")
                    .jq_filter(".metadata.labels")
                    .execute_hook_on_event(&[WatchEvent::Added, WatchEvent::Modified]),
            )
            .schedule(
                ScheduleBinding::new("resync", "*/10 * * * *").include_snapshots_from(&[PODS]),
            ))
    }

    fn handle(input: HookInput) -> Result<HookOutput, Error> {
        let mut labelled = 0;
        for context in &input.binding_contexts {
            for pod in pods_of(context) {
                if label_if_unseen(pod)? {
                    labelled += 1;
                }
            }
        }
        info!("labelled {labelled} pods"; contexts = input.binding_contexts.len());
        Ok(HookOutput::default())
    }
}

operon_sdk::hook!(PodLabeler);

/// The pods a context is about: the watched ones for events and synchronization, the whole
/// snapshot for the periodic resync.
fn pods_of(context: &BindingContext) -> Box<dyn Iterator<Item = &ObjectAndFilter> + '_> {
    match context.type_ {
        BindingType::Schedule => Box::new(
            context
                .snapshot(PODS)
                .into_iter()
                .flat_map(|snapshot| &snapshot.objects),
        ),
        _ => Box::new(context.objects_reported()),
    }
}

/// Submits the label patch when the pod lacks the label; returns whether it did.
fn label_if_unseen(pod: &ObjectAndFilter) -> Result<bool, Error> {
    // The filter result is the pod's labels (`null` when it has none), so a pod that
    // already carries the label is skipped without parsing the whole object.
    let labels = pod.parse_filter_result()?.unwrap_or(Value::Null);
    if labels.get(SEEN_LABEL).is_some() {
        return Ok(false);
    }
    let Some(object) = pod.parse_object()? else {
        warn!("the pods binding sent no object; is keepFullObjectsInMemory off?");
        return Ok(false);
    };
    let metadata = &object["metadata"];
    let (Some(name), namespace) = (metadata["name"].as_str(), metadata["namespace"].as_str())
    else {
        warn!("skipping a pod without a name");
        return Ok(false);
    };

    // Ignoring a missing object: the pod may be deleted before the host applies the patch.
    Patch::merge(
        "Pod",
        namespace,
        name,
        json!({"metadata": {"labels": {SEEN_LABEL: "true"}}}),
    )
    .ignore_missing_object()
    .submit()?;
    Metric::counter("pods_labelled_total")
        .label("namespace", namespace.unwrap_or_default())
        .add(1.0)?;
    Ok(true)
}
