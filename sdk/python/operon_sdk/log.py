"""Levelled, structured logging through the host's ``log`` import.

Each function takes a message and optional fields as keyword arguments, whose values
are turned into text with ``str``. The host keeps the records with the run and
forwards them to its own log under the run's name::

    from operon_sdk import log

    log.info(f"labelled {count} pods", namespace="default")

Use :func:`emit` for keys that are not Python identifiers (``"disk.mount"``) or a level
chosen at run time.
"""

from __future__ import annotations

from collections.abc import Iterable

from wit_world.imports import log as _wit
from wit_world.imports.log import Level

from ._format import display as _text

__all__ = ["Level", "emit", "trace", "debug", "info", "warn", "error"]


def emit(level: Level, message: str, fields: Iterable[tuple[str, object]] = ()) -> None:
    """Emits one record at ``level`` with ``fields`` as (key, value) pairs."""
    _wit.log(level, message, [(key, _text(value)) for key, value in fields])


def trace(message: str, **fields: object) -> None:
    """Logs very detailed tracing."""
    emit(Level.TRACE, message, fields.items())


def debug(message: str, **fields: object) -> None:
    """Logs debugging detail."""
    emit(Level.DEBUG, message, fields.items())


def info(message: str, **fields: object) -> None:
    """Logs normal progress."""
    emit(Level.INFO, message, fields.items())


def warn(message: str, **fields: object) -> None:
    """Logs something unexpected that the guest handled."""
    emit(Level.WARN, message, fields.items())


def error(message: str, **fields: object) -> None:
    """Logs a failure."""
    emit(Level.ERROR, message, fields.items())

