#!/usr/bin/env bash
# beforeHelm: computes the greeting the chart renders into a memory value.
set -euo pipefail
if [[ "${1:-}" == "--config" ]]; then
  echo '{"configVersion":"v1","beforeHelm":10}'
  exit 0
fi
jq '[{"op":"add","path":"/echoServer/internal/greeting",
      "value":"\(.echoServer.message) from \(.global.clusterName)"}]' "$VALUES_PATH" \
  > "$VALUES_JSON_PATCH_PATH"
