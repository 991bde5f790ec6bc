"""Hooks: programs bound to cluster events and schedules, written as a :class:`Hook`.

A hook tells the host what to watch once, in :meth:`Hook.configure`, and is then run
with the binding contexts that fired, in :meth:`Hook.handle`. The configuration mirrors
shell-operator's ``configVersion: v1``; :func:`config`, :func:`kubernetes` and
:func:`schedule` build it with shell-operator's defaults::

    from operon_sdk import Hook, HookConfig, HookInput, config, hook, objects, schedule

    @hook
    class Nightly(Hook):
        def configure(self) -> HookConfig:
            return config(schedule("nightly", "0 3 * * *"))

        def handle(self, input: HookInput) -> None:
            for obj in objects(input):
                ...
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any, TypeVar, Union

from wit_world.imports.types import (
    BindingContext,
    BindingType,
    ConversionBinding,
    HookConfig,
    HookInput,
    HookOutput,
    HookSettings,
    KubernetesBinding,
    LabelSelector,
    LifecycleBinding,
    LifecycleOrder,
    MutatingBinding,
    NamespaceSelector,
    ObjectAndFilter,
    ScheduleBinding,
    ValidatingBinding,
    ValidatingResponse,
    WatchEvent,
)

from ._format import to_json
from .errors import Error
from .kubernetes import Patch

__all__ = [
    "Binding",
    "Hook",
    "KubeObject",
    "allow",
    "config",
    "deny",
    "hook",
    "kubernetes",
    "objects",
    "schedule",
]


class Hook:
    """A hook: its configuration and what it does when a binding fires.

    Subclass it, implement both methods and export the class with :func:`hook`. The
    instance is made once, when the component is built (componentize-py pre-initialises
    the module), and every run starts from that state: nothing a run stores survives it.
    """

    def configure(self) -> HookConfig:
        """Returns the bindings; called once when the hook is loaded."""
        raise NotImplementedError

    def handle(self, input: HookInput) -> HookOutput | None:
        """Handles one run; ``None`` means no admission or conversion answer. Raising
        fails the run, which the host retries unless its binding allows failure."""
        raise NotImplementedError


_H = TypeVar("_H", bound=type[Hook])

_exported: list[Hook] = []


def hook(cls: _H) -> _H:
    """Exports a :class:`Hook` subclass as the component's ``configure`` and ``handle``;
    use it on one class of the module given to the build."""
    _exported.append(cls())
    return cls


Binding = Union[
    KubernetesBinding, ScheduleBinding, ValidatingBinding, MutatingBinding, ConversionBinding
]
"""Any binding :func:`config` accepts."""


_LIFECYCLE = {
    "beforeAll": LifecycleBinding.BEFORE_ALL,
    "afterAll": LifecycleBinding.AFTER_ALL,
    "beforeHelm": LifecycleBinding.BEFORE_HELM,
    "afterHelm": LifecycleBinding.AFTER_HELM,
    "beforeDeleteHelm": LifecycleBinding.BEFORE_DELETE_HELM,
    "afterDeleteHelm": LifecycleBinding.AFTER_DELETE_HELM,
}


def config(
    *bindings: Binding,
    on_startup: int | None = None,
    settings: HookSettings | None = None,
    lifecycle: Mapping[str | LifecycleBinding, float] | None = None,
) -> HookConfig:
    """A configuration with these bindings, sorted into their lists by type.

    ``on_startup`` runs the hook once at start (hooks run in ascending order, then by
    name); ``settings`` holds the rate limit and the per-run budget. ``lifecycle`` maps
    addon-operator's lifecycle bindings (``"beforeHelm"``, ... or
    :class:`LifecycleBinding`) to their order; only the hooks of addon modules may
    declare them.
    """
    orders = []
    for key, order in (lifecycle or {}).items():
        if isinstance(key, LifecycleBinding):
            orders.append(LifecycleOrder(key, float(order)))
        elif key in _LIFECYCLE:
            orders.append(LifecycleOrder(_LIFECYCLE[key], float(order)))
        else:
            raise Error(f"unknown lifecycle binding {key!r}: expected one of {', '.join(_LIFECYCLE)}")
    result = HookConfig(on_startup, [], [], [], [], [], settings, orders)
    for binding in bindings:
        if isinstance(binding, KubernetesBinding):
            result.kubernetes.append(binding)
        elif isinstance(binding, ScheduleBinding):
            result.schedule.append(binding)
        elif isinstance(binding, ValidatingBinding):
            result.kubernetes_validating.append(binding)
        elif isinstance(binding, MutatingBinding):
            result.kubernetes_mutating.append(binding)
        else:
            result.kubernetes_conversion.append(binding)
    return result


_EVENTS = {"Added": WatchEvent.ADDED, "Modified": WatchEvent.MODIFIED, "Deleted": WatchEvent.DELETED}


def kubernetes(
    name: str,
    kind: str,
    *,
    api_version: str | None = None,
    jq_filter: str | None = None,
    execute_hook_on_event: Sequence[WatchEvent | str] | None = None,
    execute_hook_on_synchronization: bool | None = None,
    wait_for_synchronization: bool | None = None,
    keep_full_objects_in_memory: bool | None = None,
    name_selector: Sequence[str] | None = None,
    label_selector: Mapping[str, str] | LabelSelector | None = None,
    namespaces: Sequence[str] | None = None,
    allow_failure: bool = False,
    queue: str | None = None,
    group: str | None = None,
    include_snapshots_from: Sequence[str] = (),
) -> KubernetesBinding:
    """A watch binding on objects of ``kind`` (e.g. ``Pod``), in every namespace unless
    ``namespaces`` names some. ``execute_hook_on_event`` takes :class:`WatchEvent`\\ s or
    shell-operator's names (``"Added"``, ``"Modified"``, ``"Deleted"``); ``None`` means all
    three, an empty list keeps a snapshot only. ``label_selector`` may be a plain mapping
    of ``matchLabels``."""
    events = None
    if execute_hook_on_event is not None:
        events = [_EVENTS[e] if isinstance(e, str) else e for e in execute_hook_on_event]
    if isinstance(label_selector, Mapping):
        label_selector = LabelSelector(list(label_selector.items()), [])
    namespace = None if namespaces is None else NamespaceSelector(list(namespaces), None)
    return KubernetesBinding(
        name,
        api_version,
        kind,
        events,
        execute_hook_on_synchronization,
        wait_for_synchronization,
        keep_full_objects_in_memory,
        None if name_selector is None else list(name_selector),
        label_selector,
        None,
        namespace,
        jq_filter,
        allow_failure,
        queue,
        group,
        list(include_snapshots_from),
    )


def schedule(
    name: str,
    crontab: str,
    *,
    allow_failure: bool = False,
    queue: str | None = None,
    group: str | None = None,
    include_snapshots_from: Sequence[str] = (),
) -> ScheduleBinding:
    """A crontab binding: 5 fields, or 6 with seconds first."""
    return ScheduleBinding(name, crontab, allow_failure, queue, group, list(include_snapshots_from))


def allow(warnings: Iterable[str] = (), json_patch: Any = None) -> HookOutput:
    """Admits an admission review, with warnings and, for mutating bindings, a JSON Patch
    (a list of RFC 6902 operations)."""
    patch = None if json_patch is None else to_json(json_patch)
    return HookOutput(ValidatingResponse(True, None, list(warnings), patch), None)


def deny(message: str, warnings: Iterable[str] = ()) -> HookOutput:
    """Refuses an admission review; kubectl shows ``message``."""
    return HookOutput(ValidatingResponse(False, message, list(warnings), None), None)


class KubeObject:
    """One object a binding context is about: the object and its jq filter result, parsed
    from JSON on first use, with its metadata at hand."""

    def __init__(self, raw: ObjectAndFilter) -> None:
        self.raw: ObjectAndFilter = raw
        """What the host sent, as JSON text."""

    @cached_property
    def object(self) -> dict[str, Any] | None:
        """The full object; ``None`` when the binding keeps only filter results."""
        parsed = _parse(self.raw.object, "object")
        if parsed is not None and not isinstance(parsed, dict):
            raise Error("the host sent an object that is not a JSON object")
        return parsed

    @cached_property
    def filter_result(self) -> Any:
        """The jq filter result; ``None`` without a filter, or when it yielded ``null``."""
        return _parse(self.raw.filter_result, "filter result")

    @property
    def metadata(self) -> dict[str, Any]:
        """``metadata``; empty without a full object."""
        metadata = (self.object or {}).get("metadata")
        return metadata if isinstance(metadata, dict) else {}

    @property
    def name(self) -> str | None:
        """``metadata.name``."""
        return _str(self.metadata.get("name"))

    @property
    def namespace(self) -> str | None:
        """``metadata.namespace``; ``None`` for cluster-scoped objects."""
        return _str(self.metadata.get("namespace"))

    @property
    def labels(self) -> dict[str, str]:
        """``metadata.labels``; empty when it has none."""
        labels = self.metadata.get("labels")
        return labels if isinstance(labels, dict) else {}

    @property
    def kind(self) -> str | None:
        """``kind``."""
        return _str((self.object or {}).get("kind"))

    def merge_patch(self, patch: Any) -> Patch:
        """A JSON merge patch of this object (by kind, namespace and name; the host picks
        the preferred ``apiVersion``). Raises :class:`Error` without a full object."""
        if self.kind is None or self.name is None:
            raise Error("a merge patch needs the full object, with its kind and name")
        return Patch.merge(self.kind, self.namespace, self.name, patch)


def objects(input: HookInput | BindingContext) -> Iterator[KubeObject]:
    """Every object a run (or one of its contexts) is about, whatever the context's type:
    the object of an ``Event``, every object of a ``Synchronization``, and for the other
    types (``Schedule``, ``Group``, admission...) the objects of its snapshots."""
    contexts = input.binding_contexts if isinstance(input, HookInput) else [input]
    for context in contexts:
        if context.type == BindingType.EVENT:
            found: Iterable[ObjectAndFilter] = [context.object] if context.object else []
        elif context.type == BindingType.SYNCHRONIZATION:
            found = context.objects
        else:
            found = (obj for snapshot in context.snapshots for obj in snapshot.objects)
        for raw in found:
            yield KubeObject(raw)


def _parse(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as err:
        raise Error(f"the host sent an invalid {what}: {err}") from None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
