"""Pod labeler: labels every pod it sees with ``operon.dev/seen: "true"``.

The Python twin of operations/pod-labeler: watches pods (added or modified), filtered to
their labels so that only label changes run it, and resyncs every ten minutes over the
snapshot of all pods. Each pod without the label gets a merge patch and is counted in
``pods_labelled_total``.
"""

from operon_sdk import Hook, HookConfig, HookInput, Metric, config, hook, kubernetes, log
from operon_sdk import objects, schedule

SEEN = "operon.dev/seen"


@hook
class PodLabeler(Hook):
    def configure(self) -> HookConfig:
        return config(
            kubernetes(
                "pods", "Pod", jq_filter=".metadata.labels", execute_hook_on_event=["Added", "Modified"]
            ),
            schedule("resync", "*/10 * * * *", include_snapshots_from=["pods"]),
        )

    def handle(self, input: HookInput) -> None:
        labelled = 0
        for pod in objects(input):
            # Skip pods already labelled, or sent without the full object.
            if pod.name is None or SEEN in pod.labels:
                continue
            # The pod may be deleted before the host applies the patch: ignore that.
            pod.merge_patch({"metadata": {"labels": {SEEN: "true"}}}).ignore_missing_object().submit()
            Metric.counter("pods_labelled_total").label("namespace", pod.namespace or "").add(1)
            labelled += 1
        log.info(f"labelled {labelled} pods", contexts=len(input.binding_contexts))
