#!/usr/bin/env bash
# A global hook. At startup it records who started the operator in the memory values
# (lost on restart, recomputed at the next start); before every convergence it counts
# convergences; after it, it reports the modules that were enabled.
set -euo pipefail
if [[ "${1:-}" == "--config" ]]; then
  cat <<'YAML'
configVersion: v1
onStartup: 1
beforeAll: 10
afterAll: 10
YAML
  exit 0
fi
binding=$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")
case "$binding" in
  onStartup)
    echo '[{"op":"add","path":"/global/discovery/startedBy","value":"cluster-info"}]' \
      > "$VALUES_JSON_PATCH_PATH" ;;
  beforeAll)
    jq '[{"op":"add","path":"/global/discovery/convergences",
          "value":((.global.discovery.convergences // 0) + 1)}]' "$VALUES_PATH" \
      > "$VALUES_JSON_PATCH_PATH" ;;
  afterAll)
    echo "enabled modules: $(jq -c '.global.enabledModules' "$VALUES_PATH")" >&2 ;;
esac
