"""The serve command of an engine config as a user would type it, or why the engine cannot run it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from perflab.engines import EngineConfig, EngineConfigError, get_adapter
from perflab.engines.base import EngineAdapter


@dataclass(frozen=True)
class CommandPreview:
    """The adapter's display command, or its error message and the knob it names."""

    command: str | None
    error: str | None
    knob: str | None = None


def command_preview(config: EngineConfig, adapter: EngineAdapter | None = None) -> CommandPreview:
    """The display command of ``config``, or the adapter's error for a setting it does not support
    (``adapter``: one judging values for a host's engine version,
    :func:`~perflab.engines.preflight.host_adapter`)."""
    try:
        chosen = adapter or get_adapter(config.engine)
        return CommandPreview(command=chosen.display_command(config), error=None)
    except EngineConfigError as error:
        return CommandPreview(command=None, error=str(error), knob=error.knob)


def stored_command_preview(config: dict[str, Any] | None) -> CommandPreview | None:
    """:func:`command_preview` of a config stored as JSON (None when there is none)."""
    if config is None:
        return None
    try:
        engine_config = EngineConfig.model_validate(config)
    except ValidationError as error:
        return CommandPreview(command=None, error=f"the stored config is not valid any more: {error}")
    return command_preview(engine_config)
