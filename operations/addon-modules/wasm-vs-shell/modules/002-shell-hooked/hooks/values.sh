#!/bin/bash
# The shell twin of operations/fixtures/values-hook (the wasm hook measure.sh puts in
# 001-wasm-hooked/hooks): at beforeHelm it reads its section of $VALUES_PATH and writes
# internal.wasmReplicas (twice replicas) and internal.wasmRuns to
# $VALUES_JSON_PATCH_PATH.
if [ "$1" = --config ]; then echo '{"configVersion":"v1","beforeHelm":10}'; exit 0; fi
jq '.shellHooked as $m | [
  (if $m.internal == null then {"op":"add","path":"/shellHooked/internal","value":{}} else empty end),
  {"op":"add","path":"/shellHooked/internal/wasmReplicas","value":(($m.replicas // 1) * 2)},
  {"op":"add","path":"/shellHooked/internal/wasmRuns","value":(($m.internal.wasmRuns // 0) + 1)}
]' "$VALUES_PATH" > "$VALUES_JSON_PATCH_PATH"
