"""Changes to Kubernetes objects, built with :class:`Patch` and submitted to the host.

The host buffers submitted operations and applies them in order only after the run
returns successfully; a failed run or a dry run applies nothing. These are the patch
operations of shell-operator's ``$KUBERNETES_PATCH_PATH``.
"""

from __future__ import annotations

from typing import Any

from componentize_py_types import Err
from wit_world.imports import kubernetes as _wit
from wit_world.imports.kubernetes import (
    CreateSpec,
    JqPatchSpec,
    ObjectRef,
    PatchOperation,
    PatchSpec,
)

from ._format import to_json
from .errors import Error

__all__ = ["Patch", "PatchOperation", "submit"]


class Patch:
    """One change to a Kubernetes object, ready to :meth:`submit`.

    Start from a constructor named after the operation, refine it, then submit it::

        Patch.merge("Pod", "default", "web-0", {"metadata": {"labels": {"checked": "yes"}}}) \\
            .ignore_missing_object() \\
            .submit()

    Documents (objects, patches) are given as JSON-ready values (dicts, lists) or as
    JSON text. ``namespace`` is ``None`` for cluster-scoped objects.
    """

    __slots__ = ("operation",)

    def __init__(self, operation: PatchOperation) -> None:
        self.operation: PatchOperation = operation
        """The operation in the contract's own shape; refinements edit it."""

    @classmethod
    def merge(cls, kind: str, namespace: str | None, name: str, patch: Any) -> Patch:
        """A JSON merge patch (RFC 7386) of the object ``kind`` ``namespace``/``name``."""
        return cls(_wit.PatchOperation_MergePatch(_patch_spec(kind, namespace, name, patch)))

    @classmethod
    def json_patch(cls, kind: str, namespace: str | None, name: str, operations: Any) -> Patch:
        """A JSON Patch (RFC 6902), a list of operations, of ``kind`` ``namespace``/``name``."""
        return cls(_wit.PatchOperation_JsonPatch(_patch_spec(kind, namespace, name, operations)))

    @classmethod
    def jq(cls, kind: str, namespace: str | None, name: str, jq_filter: str) -> Patch:
        """Replaces the object with the output of a jq filter, e.g. ``.spec.replicas = 2``."""
        return cls(
            _wit.PatchOperation_JqPatch(
                JqPatchSpec(_ref(kind, namespace, name), jq_filter, None, False)
            )
        )

    @classmethod
    def create(cls, obj: Any) -> Patch:
        """``Create``: creates the object, failing if it exists."""
        return cls(_wit.PatchOperation_Create(CreateSpec(to_json(obj), None)))

    @classmethod
    def create_or_update(cls, obj: Any) -> Patch:
        """``CreateOrUpdate``: creates the object or replaces an existing one."""
        return cls(_wit.PatchOperation_CreateOrUpdate(CreateSpec(to_json(obj), None)))

    @classmethod
    def create_if_not_exists(cls, obj: Any) -> Patch:
        """``CreateIfNotExists``: creates the object unless it exists."""
        return cls(_wit.PatchOperation_CreateIfNotExists(CreateSpec(to_json(obj), None)))

    @classmethod
    def delete(cls, kind: str, namespace: str | None, name: str) -> Patch:
        """``Delete``: foreground deletion, waiting for dependents."""
        return cls(_wit.PatchOperation_Delete(_ref(kind, namespace, name)))

    @classmethod
    def delete_in_background(cls, kind: str, namespace: str | None, name: str) -> Patch:
        """``DeleteInBackground``: the garbage collector removes dependents later."""
        return cls(_wit.PatchOperation_DeleteInBackground(_ref(kind, namespace, name)))

    @classmethod
    def delete_non_cascading(cls, kind: str, namespace: str | None, name: str) -> Patch:
        """``DeleteNonCascading``: deletes the object and orphans its dependents."""
        return cls(_wit.PatchOperation_DeleteNonCascading(_ref(kind, namespace, name)))

    def subresource(self, subresource: str) -> Patch:
        """Goes through a subresource, e.g. ``status``; deletions have none."""
        value = self.operation.value
        if isinstance(value, (CreateSpec, PatchSpec, JqPatchSpec)):
            value.subresource = subresource
        return self

    def ignore_missing_object(self) -> Patch:
        """Makes a missing object no error (patches only): it may be deleted before the
        host applies the patch."""
        value = self.operation.value
        if isinstance(value, (PatchSpec, JqPatchSpec)):
            value.ignore_missing_object = True
        return self

    def api_version(self, api_version: str) -> Patch:
        """Names the object's ``apiVersion``; without it the host picks the preferred one."""
        value = self.operation.value
        if isinstance(value, ObjectRef):
            value.api_version = api_version
        elif isinstance(value, (PatchSpec, JqPatchSpec)):
            value.target.api_version = api_version
        return self

    def submit(self) -> None:
        """Queues the operation; raises :class:`Error` when the host refuses it."""
        submit(self.operation)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Patch) and self.operation == other.operation

    def __repr__(self) -> str:
        return f"Patch({self.operation!r})"


def submit(operation: PatchOperation) -> None:
    """Queues one operation in the contract's shape; :class:`Patch` is usually simpler."""
    try:
        _wit.submit(operation)
    except Err as err:
        raise Error(f"submitting a patch: {err.value}") from None


def _ref(kind: str, namespace: str | None, name: str) -> ObjectRef:
    return ObjectRef(None, kind, namespace, name)


def _patch_spec(kind: str, namespace: str | None, name: str, patch: Any) -> PatchSpec:
    return PatchSpec(_ref(kind, namespace, name), to_json(patch), None, False)

