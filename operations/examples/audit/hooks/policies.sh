#!/usr/bin/env bash
# Rules for an audit of existing objects (operon audit, operon serve --audit-interval):
# a pod must pin its image (enforced); a pod in a namespace labelled audit=on should
# name its team (being rolled out: DryRun); a namespace must name its owner (enforced).
# The last binding reviews `kubectl exec`, which no audit can: it is reported as not
# audited.
set -euo pipefail

if [[ "${1:-}" == "--config" ]]; then
  cat <<CONFIG
configVersion: v1
kubernetesValidating:
- name: pinned-images.example.com
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["pods"]
    scope: Namespaced
- name: team-label.example.com
  enforcement: DryRun
  namespace:
    labelSelector:
      matchLabels: {audit: "on"}
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["pods"]
- name: namespace-owner.example.com
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["namespaces"]
    scope: Cluster
- name: no-exec.example.com
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CONNECT"]
    resources: ["pods/exec"]
CONFIG
  exit 0
fi

binding=$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")
object=$(jq -c '.[0].review.request.object' "$BINDING_CONTEXT_PATH")
allow() { echo '{"allowed": true}' > "$VALIDATING_RESPONSE_PATH"; }
deny() { jq -n --arg m "$1" '{allowed: false, message: $m}' > "$VALIDATING_RESPONSE_PATH"; }
warn() { jq -n --arg w "$1" '{allowed: true, warnings: [$w]}' > "$VALIDATING_RESPONSE_PATH"; }

case "$binding" in
pinned-images.example.com)
  image=$(jq -r '.spec.containers[0].image' <<<"$object")
  if [[ "$image" == *:latest ]]; then
    deny "image $image is not pinned: use a version tag"
  elif [[ "${image##*/}" != *:* ]]; then
    warn "image $image has no tag: it means latest"
  else
    allow
  fi
  ;;
team-label.example.com)
  if [[ $(jq -r '.metadata.labels.team // ""' <<<"$object") == "" ]]; then
    deny "the pod names no team (label team)"
  else
    allow
  fi
  ;;
namespace-owner.example.com)
  if [[ $(jq -r '.metadata.labels.owner // ""' <<<"$object") == "" ]]; then
    deny "namespace $(jq -r '.metadata.name' <<<"$object") names no owner (label owner)"
  else
    allow
  fi
  ;;
*)
  allow
  ;;
esac
