#!/usr/bin/env bash
# Type-checks the Python SDK, its build tool and the Python examples with mypy --strict,
# and runs the SDK's doctests, against bindings generated from wit/ by componentize-py
# (they exist only at build time otherwise). Needs componentize-py and mypy.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
bindings="$(mktemp -d)"
trap 'rm -rf "$bindings"' EXIT

"$python" -c "import sys, componentize_py; sys.argv[0] = 'componentize-py'; componentize_py.script()" \
  --quiet -d "$repo/wit" -w hook bindings "$bindings"
export MYPYPATH="$bindings:$here"
"$python" -m mypy --strict --no-error-summary --cache-dir "$bindings/.mypy_cache" \
  "$here/operon_sdk" "$here/operon_build.py" \
  "$repo/operations/pod-labeler-py/pod_labeler.py" \
  "$repo/operations/disk-pressure-py/disk_pressure.py" \
  "$repo/operations/values-hook-py/values_hook.py"
PYTHONPATH="$bindings:$here" "$python" -c '
import doctest, importlib, sys
names = ["operon_build", "operon_sdk.errors", "operon_sdk._format", "operon_sdk.operation", "operon_sdk.values"]
results = [doctest.testmod(importlib.import_module(name)) for name in names]
print(f"python sdk: mypy --strict passed, {sum(r.attempted for r in results)} doctests run")
sys.exit(sum(r.failed for r in results))'
