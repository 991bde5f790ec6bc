#!/usr/bin/env bash
# Time from a ConfigMap values change to the module's objects applied, with a wasm
# beforeHelm hook (001-wasm-hooked, the values interface) and with a shell one
# (002-shell-hooked, addon-operator's files) in the same `operon modules run` against an
# API server. Rounds alternate: a patch of wasmHooked.replicas, then of
# shellHooked.replicas, so each change converges one module; Operon logs each module's
# latency from the ConfigMap watch event to its apply done.
#
#   measure.sh KUBECONFIG [ROUNDS]
#
# Needs kubectl, jq, python3, a built `operon` (OPERON, default target/debug/operon) and
# the values-hook fixture (WASM, default target/guests/.../fixture_values_hook.wasm,
# built by `cargo test -p operon-tests`).
set -euo pipefail
kubeconfig=${1:?usage: measure.sh KUBECONFIG [ROUNDS]}
rounds=${2:-6}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
operon=${OPERON:-$root/target/debug/operon}
wasm=${WASM:-$root/target/guests/wasm32-wasip2/release/fixture_values_hook.wasm}
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
ns=operon-wasm-measure-$RANDOM
work=$(mktemp -d)
cleanup() {
  [[ -n "${run_pid:-}" ]] && kill "$run_pid" 2>/dev/null || true
  k delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
cp -r "$here/modules" "$work/modules"
mkdir -p "$work/modules/001-wasm-hooked/hooks"
cp "$wasm" "$work/modules/001-wasm-hooked/hooks/values.wasm"
k create namespace "$ns" >/dev/null
k -n "$ns" create configmap addon-operator \
  --from-literal=wasmHooked=$'replicas: 1\n' --from-literal=shellHooked=$'replicas: 1\n' >/dev/null
"$operon" modules run --kubeconfig "$kubeconfig" -n "$ns" --modules-dir "$work/modules" \
  >"$work/run.log" 2>&1 &
run_pid=$!
for _ in $(seq 300); do
  k -n "$ns" get configmap wasm-hooked shell-hooked >/dev/null 2>&1 && break
  sleep 0.2
done
sleep 2
for i in $(seq "$rounds"); do
  for key in wasmHooked shellHooked; do
    k -n "$ns" patch configmap addon-operator --type merge \
      -p "{\"data\":{\"$key\":\"replicas: $((i + 1))\\n\"}}" >/dev/null
    sleep 1.5
  done
done
for module in wasm-hooked shell-hooked; do
  grep -E "module $module applied .* after the ConfigMap change" "$work/run.log" |
    sed -E -e 's/.*applied ([0-9.]+)ms after.*/\1/' -e 's/.*applied ([0-9.]+)s after.*/\1e3/' -e 's/.*applied ([0-9.]+)µs after.*/\1e-3/' |
    python3 -c "import sys, statistics as s
v = sorted(float(x) for x in sys.stdin)
print(f'$module: {len(v)} changes, ConfigMap watch event to apply done: {v[0]:.0f}-{v[-1]:.0f} ms, median {s.median(v):.0f} ms' if v else '$module: no measurement')"
done
grep -E "^.*(ModuleRun|hook).*" "$work/run.log" | tail -4 >&2 || true
