#!/usr/bin/env bash
# Builds a Python guest into an Operon component:
#   sdk/python/build.sh path/to/guest.py [-o guest.wasm] [--world hook|operation]
# Needs componentize-py (the version pinned in sdk/python/pyproject.toml).
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "$0")/operon_build.py" "$@"
