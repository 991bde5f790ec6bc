//! Pod labeler: labels every pod it sees with `operon.dev/seen: "true"`.
//!
//! It watches pods (added or modified), filtered to their labels so that only label
//! changes run it, and resyncs every ten minutes over the snapshot of all pods. Each pod
//! without the label gets a merge patch and is counted in `pods_labelled_total`.

use operon_sdk::{Error, Hook, HookConfig, HookInput, HookOutput, KubernetesBinding, Metric};
use operon_sdk::{ScheduleBinding, WatchEvent::*, info};
use serde_json::json;

const SEEN: &str = "operon.dev/seen";

struct PodLabeler;

impl Hook for PodLabeler {
    fn configure() -> Result<HookConfig, Error> {
        let pods = KubernetesBinding::new("pods", "Pod").jq_filter(".metadata.labels");
        let resync = ScheduleBinding::new("resync", "*/10 * * * *");
        Ok(HookConfig::new()
            .kubernetes(pods.execute_hook_on_event(&[Added, Modified]))
            .schedule(resync.include_snapshots_from(&["pods"])))
    }

    fn handle(input: HookInput) -> Result<HookOutput, Error> {
        let mut labelled = 0;
        for pod in input.objects() {
            // Skip pods already labelled, or sent without the full object.
            let Some(pod) = pod.meta()?.filter(|pod| pod.label(SEEN).is_none()) else {
                continue;
            };
            // The pod may be deleted before the host applies the patch: ignore that.
            let patch = pod.merge_patch(json!({"metadata": {"labels": {SEEN: "true"}}}));
            patch.ignore_missing_object().submit()?;
            let counter = Metric::counter("pods_labelled_total");
            counter
                .label("namespace", pod.namespace().unwrap_or_default())
                .add(1.0)?;
            labelled += 1;
        }
        info!("labelled {labelled} pods"; contexts = input.binding_contexts.len());
        Ok(HookOutput::default())
    }
}

operon_sdk::hook!(PodLabeler);
