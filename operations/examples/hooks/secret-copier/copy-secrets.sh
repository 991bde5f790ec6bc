#!/usr/bin/env bash
# Keeps a copy of each Secret of the namespace default labelled secret-copier=yes in every
# other active namespace, with kubectl, as shell-operator's example 104 does in three
# hooks: when such a Secret is created or changed, when a namespace is added, and every
# hour. Under `operon hook test` and `operon test`, kubectl reaches the test's objects.
set -euo pipefail

if [[ "${1:-}" == "--config" ]]; then
  cat <<'CONFIG'
configVersion: v1
kubernetes:
- name: secrets
  apiVersion: v1
  kind: Secret
  executeHookOnEvent: [Added, Modified]
  namespace: {nameSelector: {matchNames: [default]}}
  labelSelector: {matchLabels: {secret-copier: "yes"}}
  jqFilter: .data
- name: namespaces
  apiVersion: v1
  kind: Namespace
  executeHookOnEvent: [Added]
  executeHookOnSynchronization: false
schedule:
- name: hourly
  crontab: "0 * * * *"
CONFIG
  exit 0
fi

namespaces=$(kubectl get namespaces -o json |
  jq -r '.items[] | select(.metadata.name != "default" and .status.phase == "Active") | .metadata.name')
copies=0
while read -r secret; do
  for namespace in $namespaces; do
    jq --arg ns "$namespace" '{apiVersion, kind, type, data,
        metadata: {name: .metadata.name, namespace: $ns, labels: .metadata.labels}}
      | with_entries(select(.value != null))' <<<"$secret" |
      kubectl apply -f - >/dev/null
    copies=$((copies + 1))
  done
done < <(kubectl -n default get secrets -l secret-copier=yes -o json | jq -c '.items[]')
echo "copied $copies secrets"
