#!/usr/bin/env bash
# Example hook: exports how many Diagnoses are in each phase, cluster-wide, as the gauge
# diagnoses_by_phase{phase=...}. It needs no permissions beyond the controller's
# own (list and watch diagnoses.operon.dev), so it runs as soon as Operon is installed.
# Replace it with your own hooks: see deploy/README.md.
set -euo pipefail

if [[ "${1:-}" == "--config" ]]; then
  cat <<'CONFIG'
configVersion: v1
kubernetes:
- name: diagnoses
  apiVersion: operon.dev/v1alpha1
  kind: Diagnosis
  group: diagnoses
  jqFilter: '.status.phase // "Pending"'
  keepFullObjectsInMemory: false
CONFIG
  exit 0
fi

# Every context of the group carries the whole snapshot: count the last one's phases,
# and set every phase (zeros included) so that a phase nobody is in drops to 0.
jq -c '
  (last | .snapshots.diagnoses // []) as $snapshot
  | ["Pending", "Running", "Succeeded", "Failed"][] as $phase
  | {
      group: "diagnosis-phases",
      name: "diagnoses_by_phase",
      action: "set",
      value: ([$snapshot[] | select(.filterResult == $phase)] | length),
      labels: {phase: $phase}
    }
' "$BINDING_CONTEXT_PATH" >> "$METRICS_PATH"
