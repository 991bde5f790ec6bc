// Pod labeler: labels every pod it sees with `operon.dev/seen: "true"`.
//
// The TypeScript twin of operations/pod-labeler: watches pods (added or modified),
// filtered to their labels so that only label changes run it, and resyncs every ten
// minutes over the snapshot of all pods. Each pod without the label gets a merge patch
// and is counted in `pods_labelled_total`.
import { Metric, config, hook, kubernetes, log, objects, schedule } from "@operon/sdk";

const SEEN = "operon.dev/seen";

export const { configure, handle } = hook({
  configure: () =>
    config({
      kubernetes: [
        kubernetes("pods", "Pod", {
          jqFilter: ".metadata.labels",
          executeHookOnEvent: ["Added", "Modified"],
        }),
      ],
      schedule: [schedule("resync", "*/10 * * * *", { includeSnapshotsFrom: ["pods"] })],
    }),

  handle(input) {
    let labelled = 0;
    for (const pod of objects(input)) {
      // Skip pods already labelled, or sent without the full object.
      if (pod.name === undefined || SEEN in pod.labels) continue;
      // The pod may be deleted before the host applies the patch: ignore that.
      pod.mergePatch({ metadata: { labels: { [SEEN]: "true" } } }).ignoreMissingObject().submit();
      Metric.counter("pods_labelled_total").label("namespace", pod.namespace ?? "").add(1);
      labelled += 1;
    }
    log.info(`labelled ${labelled} pods`, { contexts: input.bindingContexts.length });
  },
});
