#!/usr/bin/env bash
# Builds a TypeScript (or JavaScript) guest into an Operon component:
#   sdk/js/build.sh path/to/guest.ts [-o guest.wasm] [--world hook|operation]
# The world is detected from the SDK call the module exports (`hook(...)` or
# `operation(...)`). Needs `npm ci` in sdk/js first (componentize-js and jco).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
usage="usage: $0 GUEST.ts [-o OUT.wasm] [--world hook|operation]"

guest="" output="" world=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o|--output) output="$2"; shift 2 ;;
    --world) world="$2"; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) [ -z "$guest" ] || { echo "$usage" >&2; exit 2; }; guest="$1"; shift ;;
  esac
done
[ -n "$guest" ] || { echo "$usage" >&2; exit 2; }
output="${output:-${guest%.*}.wasm}"

if [ -z "$world" ]; then
  hook=0 operation=0
  grep -Eq '\bhook\(' "$guest" && hook=1
  grep -Eq '\boperation\(' "$guest" && operation=1
  case "$hook$operation" in
    10) world=hook ;;
    01) world=operation ;;
    *) echo "$guest: calls neither or both of hook() and operation(); pass --world hook|operation" >&2; exit 2 ;;
  esac
fi

jco="$here/node_modules/.bin/jco"
[ -x "$jco" ] || { echo "jco is not installed: run \`npm ci\` in $here" >&2; exit 1; }
# Operon links WASI 0.2 without wasi:http, so the fetch and HTTP server features of the
# JavaScript engine are left out of the component.
"$jco" componentize "$guest" --wit "$repo/wit" --world-name "$world" \
  --bundle --bundle-config "$here/bundle.config.js" --disable http fetch-event \
  --out "$output" >/dev/null
echo "built $output"
