"""Errors raised when an engine config cannot be turned into a launch.

Every error names the engine and the knob (an :class:`~perflab.engines.config.EngineConfig` field) so the
UI can point at the offending input, and carries a one-line hint saying what to do instead.
"""

from __future__ import annotations


class EngineConfigError(ValueError):
    """A config that the engine cannot run as given."""

    def __init__(self, engine: str, knob: str, message: str) -> None:
        self.engine = engine
        self.knob = knob
        self.detail = message
        super().__init__(message)


class UnsupportedKnob(EngineConfigError):
    """The engine has no equivalent of a typed knob; the knob is never silently dropped."""

    def __init__(self, engine: str, knob: str, hint: str) -> None:
        self.hint = hint
        super().__init__(engine, knob, f"{engine} has no {knob.replace('_', '-')} setting; {hint}")


class InvalidKnobValue(EngineConfigError):
    """The engine has the knob but not this value or combination of values."""

    def __init__(self, engine: str, knob: str, problem: str) -> None:
        super().__init__(engine, knob, f"{engine}: {knob} {problem}")
