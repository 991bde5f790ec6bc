"""The values of addon-operator modules, for module hooks and global hooks.

What shell hooks read from ``$VALUES_PATH`` and ``$CONFIG_VALUES_PATH`` and write to
``$VALUES_JSON_PATCH_PATH`` and ``$CONFIG_VALUES_JSON_PATCH_PATH`` (the Rust SDK's
``operon_sdk::values``). Values are one JSON object: ``global`` and, for a module hook,
the module's section under its values key (the camelCase module name). Patches are
RFC 6902 JSON Patches; the host applies them, in order, only when the run succeeds. A
hook that is not part of an addon module gets an :class:`~operon_sdk.Error` from every
function here::

    replicas = values.get().get("myModule", {}).get("replicas", 1)
    values.patch([values.replace("/myModule/internal/replicas", replicas * 2)])

The operations are plain dictionaries:

>>> add("/m/x", 1)
{'op': 'add', 'path': '/m/x', 'value': 1}
>>> replace("/m/x", [1, 2])
{'op': 'replace', 'path': '/m/x', 'value': [1, 2]}
>>> remove("/m/x")
{'op': 'remove', 'path': '/m/x'}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, TypeVar

from componentize_py_types import Err

from .errors import Error

__all__ = ["add", "get", "get_config", "patch", "patch_config", "remove", "replace"]

_T = TypeVar("_T")


# Imported with the package, as a component has no files to import from later; only
# the hook world imports the values interface, and an operation importing this package
# (through ``operon_sdk``) must still build.
_wit: ModuleType | None
try:
    from wit_world.imports import values as _imported

    _wit = _imported
except ImportError:
    _wit = None


def _host() -> ModuleType:
    if _wit is None:
        raise Error("the values interface is only in the hook world")
    return _wit


def _call(call: Callable[[], _T]) -> _T:
    # The host's message as it is, as the Rust SDK gives it.
    try:
        return call()
    except Err as err:
        raise Error(str(err.value)) from None


def _parse(text: str, what: str) -> dict[str, Any]:
    try:
        parsed = json.loads(text)
    except ValueError as err:
        raise Error(f"the host's {what}: {err}") from None
    if not isinstance(parsed, dict):
        raise Error(f"the host's {what}: not a JSON object")
    return parsed


def get() -> dict[str, Any]:
    """The values the hook sees (every layer and earlier patches merged)."""
    return _parse(_call(_host().get), "values")


def get_config() -> dict[str, Any]:
    """The config values the hook sees (the configuration's layers)."""
    return _parse(_call(_host().get_config), "config values")


def patch(operations: Iterable[dict[str, Any]]) -> None:
    """Submits a JSON Patch of the values (memory values)."""
    text = json.dumps(list(operations), separators=(",", ":"))
    _call(lambda: _host().patch(text))


def patch_config(operations: Iterable[dict[str, Any]]) -> None:
    """Submits a JSON Patch of the config values, which the engine writes back."""
    text = json.dumps(list(operations), separators=(",", ":"))
    _call(lambda: _host().patch_config(text))


def add(path: str, value: Any) -> dict[str, Any]:
    """An ``add`` operation."""
    return {"op": "add", "path": path, "value": value}


def replace(path: str, value: Any) -> dict[str, Any]:
    """A ``replace`` operation."""
    return {"op": "replace", "path": path, "value": value}


def remove(path: str) -> dict[str, Any]:
    """A ``remove`` operation."""
    return {"op": "remove", "path": path}
