"""What the build's entry module exports as the component's world (not part of the API).

componentize-py looks for a class named ``WitWorld`` in the entry module; the build
writes ``from operon_sdk._export import HookWorld as WitWorld`` (or ``OperationWorld``)
after importing the guest's module, whose :func:`~operon_sdk.hook` or
:func:`~operon_sdk.operation` registered what to call.
"""

from __future__ import annotations

import sys
import traceback
from typing import NoReturn, TypeVar

from componentize_py_types import Err
from wit_world.imports.types import (
    HookConfig,
    HookInput,
    HookOutput,
    OperationInput,
    OperationOutput,
)

from .hook import _exported as _hooks
from .operation import Input
from .operation import _exported as _operations
from .errors import Error, message_of

_T = TypeVar("_T")


class HookWorld:
    """The ``hook`` world's exports, forwarded to the one registered :class:`Hook`."""

    def configure(self) -> HookConfig:
        try:
            return _only(_hooks, "@hook class").configure()
        except Exception as err:
            _fail(err)

    def handle(self, input: HookInput) -> HookOutput:
        try:
            output = _only(_hooks, "@hook class").handle(input)
        except Exception as err:
            _fail(err)
        return output if output is not None else HookOutput(None, None)


class OperationWorld:
    """The ``operation`` world's export, forwarded to the one ``@operation`` function."""

    def run(self, input: OperationInput) -> OperationOutput:
        try:
            function = _only(_operations, "@operation function")
            return function(Input.from_wit(input)).to_wit()
        except Exception as err:
            _fail(err)


def _only(registered: list[_T], what: str) -> _T:
    if len(registered) != 1:
        raise Error(f"the guest module must define exactly one {what}, found {len(registered)}")
    return registered[0]


def _fail(err: Exception) -> NoReturn:
    """Turns an exception into the export's error; an unexpected one also leaves its
    traceback on stderr, which the host captures with the run."""
    if not isinstance(err, Error):
        traceback.print_exc(file=sys.stderr)
    raise Err(message_of(err)) from None
