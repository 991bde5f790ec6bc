"""The pod labeler as shell-operator runs Python hooks: a process per run.

Not built into a component: the benchmark of tests/benches/sdk_languages.rs runs it with
``python3`` once per event, the way shell-operator does (``--config`` prints the
bindings; a run reads ``$BINDING_CONTEXT_PATH`` and appends to ``$KUBERNETES_PATCH_PATH``
and ``$METRICS_PATH``), to compare with the same logic in ``pod_labeler.py`` running in
Operon's sandbox.
"""

import json
import os
import sys

SEEN = "operon.dev/seen"

CONFIG = {
    "configVersion": "v1",
    "kubernetes": [
        {
            "name": "pods",
            "kind": "Pod",
            "jqFilter": ".metadata.labels",
            "executeHookOnEvent": ["Added", "Modified"],
        }
    ],
    "schedule": [{"name": "resync", "crontab": "*/10 * * * *", "includeSnapshotsFrom": ["pods"]}],
}


def objects(context: dict) -> list:
    if context["type"] == "Event":
        return [context]
    if context["type"] == "Synchronization":
        return context.get("objects", [])
    return [obj for snapshot in context.get("snapshots", {}).values() for obj in snapshot]


def main() -> None:
    if sys.argv[1:] == ["--config"]:
        print(json.dumps(CONFIG))
        return
    with open(os.environ["BINDING_CONTEXT_PATH"]) as file:
        contexts = json.load(file)
    labelled = 0
    with open(os.environ["KUBERNETES_PATCH_PATH"], "a") as patches, open(
        os.environ["METRICS_PATH"], "a"
    ) as metrics:
        for context in contexts:
            for item in objects(context):
                metadata = (item.get("object") or {}).get("metadata") or {}
                if "name" not in metadata or SEEN in (metadata.get("labels") or {}):
                    continue
                namespace = metadata.get("namespace", "")
                patch = {
                    "operation": "MergePatch",
                    "kind": "Pod",
                    "namespace": namespace,
                    "name": metadata["name"],
                    "ignoreMissingObject": True,
                    "mergePatch": {"metadata": {"labels": {SEEN: "true"}}},
                }
                metric = {
                    "name": "pods_labelled_total",
                    "action": "add",
                    "value": 1,
                    "labels": {"namespace": namespace},
                }
                patches.write(json.dumps(patch) + "\n")
                metrics.write(json.dumps(metric) + "\n")
                labelled += 1
    print(f"labelled {labelled} pods")


if __name__ == "__main__":
    main()
