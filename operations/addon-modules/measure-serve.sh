#!/usr/bin/env bash
# Time from a ConfigMap values change to the module's objects applied, under
# `operon serve` against an API server: serve converges this directory in a scratch
# namespace; each round patches echoServer.replicas in the ConfigMap and a watch
# (kubectl get -w) notes when the Deployment carries the new value. Also prints
# Operon's own part, from the ConfigMap watch event to the apply done, as serve logs it.
#
#   measure-serve.sh KUBECONFIG [ROUNDS]
#
# With MODE=run the same rounds go through `operon modules run` instead (the local
# loop with --kubeconfig), for a comparison on the same machine at the same time.
#
# Needs kubectl, jq, python3, a built `operon` (OPERON, default target/debug/operon)
# and a `helm` (HELM, default the test tree's helm-python-sdk wrapper).
set -euo pipefail
kubeconfig=${1:?usage: measure-serve.sh KUBECONFIG [ROUNDS]}
rounds=${2:-6}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
operon=${OPERON:-$root/target/debug/operon}
helm=${HELM:-$root/engine/tests/fixtures/addons/helm}
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
ns=operon-measure-$RANDOM
work=$(mktemp -d)
cleanup() {
  [[ -n "${watch_pid:-}" ]] && kill "$watch_pid" 2>/dev/null || true
  [[ -n "${serve_pid:-}" ]] && kill "$serve_pid" 2>/dev/null || true
  k delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
k create namespace "$ns" >/dev/null
k -n "$ns" create configmap addon-operator \
  --from-literal=global=$'clusterName: measure\n' \
  --from-literal=echoServer=$'replicas: 1\nmessage: hi\n' \
  --from-literal=configReporter="namespace: $ns" >/dev/null
mkdir "$work/hooks"
dirs=(--modules-dir "$here/modules" --global-hooks-dir "$here/global-hooks" --helm-binary "$helm")
if [[ "${MODE:-serve}" == run ]]; then
  "$operon" modules run --kubeconfig "$kubeconfig" -n "$ns" "${dirs[@]}" >"$work/serve.log" 2>&1 &
else
  "$operon" serve --kubeconfig "$kubeconfig" --hooks-dir "$work/hooks" \
    --listen-address 127.0.0.1 --listen-port 0 --debug-unix-socket "$work/debug.socket" \
    --no-controllers --kube-client-qps 0 --modules-namespace "$ns" "${dirs[@]}" \
    2>"$work/serve.log" &
fi
serve_pid=$!
for _ in $(seq 300); do
  k -n "$ns" get deployment echo-server >/dev/null 2>&1 && break
  sleep 0.2
done
k -n "$ns" get deployment echo-server >/dev/null
sleep 2 # let the first convergence finish (afterAll)
k -n "$ns" get deployment echo-server --watch --output-watch-events \
  -o jsonpath='{.object.spec.replicas}{"\n"}' |
  while read -r replicas; do echo "$(date +%s.%N) $replicas"; done >"$work/watch" &
watch_pid=$!
sleep 1
for i in $(seq "$rounds"); do
  replicas=$((i + 1))
  start=$(date +%s.%N)
  k -n "$ns" patch configmap addon-operator --type merge \
    -p "{\"data\":{\"echoServer\":\"replicas: $replicas\\nmessage: hi\\n\"}}" >/dev/null
  for _ in $(seq 200); do
    seen=$(awk -v r="$replicas" '$2 == r {print $1; exit}' "$work/watch")
    [[ -n "$seen" ]] && break
    sleep 0.05
  done
  [[ -n "$seen" ]] || { echo "round $i: the Deployment never got replicas $replicas" >&2; exit 1; }
  python3 -c "print(f'round $i: ConfigMap patch to Deployment updated: {($seen - $start) * 1000:.0f} ms')"
  sleep 1
done
echo "operon's part (ConfigMap watch event to apply done), from its log:"
# serve logs `latency_ms=N`, modules run prints `module M applied 503.2ms after ...`.
grep -E 'module applied after the ConfigMap change|module echo-server applied .* after the ConfigMap change' "$work/serve.log" |
  grep -v 'module=config-reporter' |
  sed -E -e 's/.*latency_ms=([0-9.]+).*/\1/' \
    -e 's/.*applied ([0-9.]+)ms after.*/\1/' -e 's/.*applied ([0-9.]+)s after.*/\1e3/' |
  python3 -c 'import sys, statistics as s
v = sorted(float(x) for x in sys.stdin)
print(f"  {len(v)} changes: {v[0]:.0f}-{v[-1]:.0f} ms, median {s.median(v):.0f} ms")'
