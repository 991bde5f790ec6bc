"""Operations: one step of a diagnosis pipeline, a function ``(Input) -> Output``.

::

    from operon_sdk import Input, Output, operation

    @operation
    def run(input: Input) -> Output:
        node = input.require("node")
        return Output().result("node.checked", node).output(f"{node} looks fine")
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from wit_world.imports.types import OperationInput, OperationOutput, RunnerContext

from ._format import display
from .errors import Error

__all__ = ["Input", "Output", "operation", "OperationFunction"]

OperationFunction = Callable[["Input"], "Output"]
"""What :func:`operation` exports: a function from :class:`Input` to :class:`Output`."""

_F = TypeVar("_F", bound=OperationFunction)


class Input:
    """What an operation receives: parameters, earlier results, arguments and the run's
    context. Lookups follow the contract's rule that the last of repeated keys wins.

    Inputs can be built by hand to test an operation's logic outside the sandbox:

    >>> Input(parameters=[("threshold", "90")], args=["/var"]).param("threshold")
    '90'
    """

    __slots__ = ("raw",)

    def __init__(
        self,
        parameters: Sequence[tuple[str, str]] = (),
        results: Sequence[tuple[str, str]] = (),
        args: Sequence[str] = (),
        context: RunnerContext | None = None,
    ) -> None:
        self.raw: OperationInput = OperationInput(
            context or RunnerContext("test", False, 60_000, None, None, None, None),
            list(parameters) + list(results),
            list(results),
            list(args),
        )
        """Everything the host sent, so nothing is lost to a guest that needs it."""

    @classmethod
    def from_wit(cls, raw: OperationInput) -> Input:
        """Wraps the input the host sent."""
        input = cls.__new__(cls)
        input.raw = raw
        return input

    def param(self, key: str) -> str | None:
        """The parameter ``key``, if given. Parameters include earlier results."""
        return _lookup(self.raw.parameters, key)

    def require(self, key: str) -> str:
        """The parameter ``key``; raises :class:`Error` naming it when it is missing."""
        value = self.param(key)
        if value is None:
            raise Error(f"missing required parameter `{key}`")
        return value

    def param_int(self, key: str) -> int | None:
        """The parameter ``key`` as an integer; ``None`` when missing, an
        :class:`Error` naming the parameter when it is not a number."""
        text = self.param(key)
        if text is None:
            return None
        try:
            return int(text.strip())
        except ValueError:
            raise Error(f"parameter `{key}`: not an integer (got `{text}`)") from None

    def result(self, key: str) -> str | None:
        """The result ``key`` of an earlier operation, ignoring plain parameters."""
        return _lookup(self.raw.results, key)

    def params(self) -> Iterator[tuple[str, str]]:
        """Every parameter in the order the host sent them."""
        return iter(self.raw.parameters)

    def results(self) -> Iterator[tuple[str, str]]:
        """Every result of earlier operations in the order the host sent them."""
        return iter(self.raw.results)

    @property
    def args(self) -> list[str]:
        """The positional arguments resolved from the Operation's ``argKeys``."""
        return self.raw.args

    @property
    def context(self) -> RunnerContext:
        """Where and how the operation runs: name, dry-run flag, budget, node, namespace."""
        return self.raw.context


class Output:
    """What an operation returns: results for later operations and text for people.

    >>> out = Output().result("disk.pressure", True).result("disk.worst_percent", 91)
    >>> out.get("disk.pressure"), out.get("disk.worst_percent")
    ('true', '91')
    """

    __slots__ = ("_results", "text")

    def __init__(self, text: str = "") -> None:
        self._results: dict[str, str] = {}
        self.text: str = text
        """Free-form human-readable output, shown by the CLI and stored with the run."""

    def result(self, key: str, value: object) -> Output:
        """Sets the result ``key`` to ``value`` (formatted as the Rust SDK formats it:
        ``true``/``false``, ``3`` for ``3.0``), replacing an earlier value."""
        self._results[key] = display(value)
        return self

    def output(self, text: str) -> Output:
        """Sets the human-readable text, replacing earlier text."""
        self.text = text
        return self

    def get(self, key: str) -> str | None:
        """The result ``key``, if set."""
        return self._results.get(key)

    @property
    def results(self) -> list[tuple[str, str]]:
        """Every result, in the order they were first set."""
        return list(self._results.items())

    def to_wit(self) -> OperationOutput:
        """The output in the contract's shape."""
        return OperationOutput(self.results, self.text)


_exported: list[OperationFunction] = []


def operation(function: _F) -> _F:
    """Exports ``function`` as the component's ``run``; use it on one function of the
    module given to the build. Raising :class:`Error` fails the operation with its
    message."""
    _exported.append(function)
    return function


def _lookup(pairs: Sequence[tuple[str, str]], key: str) -> str | None:
    for candidate, value in reversed(pairs):
        if candidate == key:
            return value
    return None
