"""Errors raised by the crud functions."""

from __future__ import annotations


class NotFound(LookupError):
    """The row named by an id does not exist."""

    def __init__(self, kind: str, key: object) -> None:
        super().__init__(f"{kind} {key} does not exist")
        self.kind = kind
        self.key = key


class IllegalTransition(ValueError):
    """A status change the lifecycle does not allow (e.g. out of a finished state)."""

    def __init__(self, kind: str, key: object, current: str, wanted: str) -> None:
        super().__init__(f"{kind} {key} cannot go from {current!r} to {wanted!r}")
        self.kind = kind
        self.key = key
        self.current = current
        self.wanted = wanted


class RunInUse(ValueError):
    """A run a study uses (a launch, repeat or validation of it) cannot be deleted; the message names
    the studies."""
