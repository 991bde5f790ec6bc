#!/usr/bin/env bash
# afterHelm: records what was deployed in the module's ConfigMap (a kubernetes patch);
# afterDeleteHelm: nothing is left to record, it only says so.
set -euo pipefail
if [[ "${1:-}" == "--config" ]]; then
  echo '{"configVersion":"v1","afterHelm":10,"afterDeleteHelm":10}'
  exit 0
fi
binding=$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")
if [[ "$binding" == "afterHelm" ]]; then
  jq -c '{operation: "MergePatch", apiVersion: "v1",
      kind: "ConfigMap", namespace: .configReporter.namespace, name: "config-reporter",
      mergePatch: {data: {enabledModules: (.global.enabledModules | join(",")),
                          clusterName: .global.clusterName}}}' "$VALUES_PATH" \
    > "$KUBERNETES_PATCH_PATH"
else
  echo "config-reporter deleted" >&2
fi
