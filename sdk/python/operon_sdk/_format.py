"""Turning values into the text that crosses the contract."""

from __future__ import annotations

import json
from typing import Any


def display(value: object) -> str:
    """Formats a value as the Rust SDK's ``Display`` does, so guests in every language
    return and log the same text: booleans lowercase, whole floats without a fraction.

    >>> display(True), display(3.0), display(2.5), display("x")
    ('true', '3', '2.5', 'x')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def to_json(value: Any) -> str:
    """Compact JSON text of ``value``, or ``value`` itself when it already is text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))
