"""The error a guest raises: a message the host records as the run's failure."""

from __future__ import annotations


class Error(Exception):
    """A failure with a message meant for people, e.g. ``missing required parameter `df```.

    Raise it from ``handle`` or from an operation: the host records the message as the
    run's failure (a failed hook run is retried unless its binding allows failure). Any
    other exception fails the run too, with its type name before the message.

    >>> str(Error("disk full").context("checking /var"))
    'checking /var: disk full'
    """

    def __init__(self, message: object) -> None:
        super().__init__(str(message))
        self.message: str = str(message)
        """The text the host records."""

    def context(self, context: object) -> Error:
        """A new error whose message is prefixed with ``context: ``."""
        return Error(f"{context}: {self.message}")

    def __str__(self) -> str:
        return self.message


def message_of(error: BaseException) -> str:
    """The message the host records for ``error``: an :class:`Error`'s text as is,
    anything else as ``TypeName: text``."""
    if isinstance(error, Error):
        return error.message
    return f"{type(error).__name__}: {error}"
