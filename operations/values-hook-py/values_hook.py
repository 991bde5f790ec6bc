"""Values hook: the Python twin of operations/fixtures/values-hook.

The hook of an addon module (or a global hook), reading and patching its values through
:mod:`operon_sdk.values`, as addon-operator's shell hooks do through ``$VALUES_PATH``
and ``$VALUES_JSON_PATCH_PATH``. It declares ``beforeHelm`` (order 10). Its section is
the values key other than ``global`` (the module's), or ``global`` when there is none.
It reads ``replicas`` there (default 1) and submits
``add /<section>/internal/wasmReplicas = 2 * replicas`` and
``add /<section>/internal/wasmRuns = <the runs counted so far + 1>``; when the section
has ``patchConfig: true`` it also adds ``/<section>/wasmSeen = true`` to the config
values. The values it saw are its output's ``validating`` message; it logs
``values patched``.
"""

import json
from typing import Any

from operon_sdk import Hook, HookConfig, HookInput, HookOutput, config, hook, log, values
from operon_sdk.types import ValidatingResponse


def count(value: Any) -> int | None:
    """``value`` when it is a JSON unsigned integer (as the Rust twin's ``as_u64``)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


@hook
class ValuesHook(Hook):
    def configure(self) -> HookConfig:
        return config(lifecycle={"beforeHelm": 10})

    def handle(self, input: HookInput) -> HookOutput:
        seen = values.get()
        section = next((k for k in seen if k != "global"), "global")
        mine: dict[str, Any] = seen.get(section) or {}
        replicas = count(mine.get("replicas"))
        replicas = 1 if replicas is None else replicas
        internal = mine.get("internal")
        runs = (count(internal.get("wasmRuns")) if isinstance(internal, dict) else None) or 0
        runs += 1
        ops = []
        if "internal" not in mine:
            ops.append(values.add(f"/{section}/internal", {}))
        ops.append(values.add(f"/{section}/internal/wasmReplicas", replicas * 2))
        ops.append(values.add(f"/{section}/internal/wasmRuns", runs))
        values.patch(ops)
        if mine.get("patchConfig") is True:
            config_ops = []
            if section not in values.get_config():
                config_ops.append(values.add(f"/{section}", {}))
            config_ops.append(values.add(f"/{section}/wasmSeen", True))
            values.patch_config(config_ops)
        log.info("values patched", section=section, replicas=replicas)
        return HookOutput(ValidatingResponse(True, json.dumps(seen), [], None), None)
