"""The serve command of an engine config as a user would type it, or why the engine cannot run it; and
the ``vllm bench serve`` command that sends a stored run's benchmark requests."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from perflab.engines import EngineConfig, EngineConfigError, get_adapter
from perflab.engines.base import EngineAdapter
from perflab.profiles import BenchmarkProfile


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


def _flag_values(bench_command: str | None, flag: str) -> list[str]:
    """The values ``flag`` takes in a ``perflab bench`` command (none for no command)."""
    if not bench_command:
        return []
    try:
        words = shlex.split(bench_command)
    except ValueError:
        return []
    return [words[at + 1] for at, word in enumerate(words[:-1]) if word == flag]


def _base_url(bench_command: str | None) -> str | None:
    """The one ``--base-url`` of a ``perflab bench`` command (None for none or several: replicas)."""
    urls = _flag_values(bench_command, "--base-url")
    return urls[0] if len(urls) == 1 else None


def _shared_file(profile: BenchmarkProfile, bench_command: str | None) -> str | None:
    """The ShareGPT file a ShareGPT profile's ``perflab bench`` command read (the dump, or perflab's
    sample where the hub could not be reached), else None."""
    paths = _flag_values(bench_command, "--dataset-path") if profile.dataset == "sharegpt" else []
    return paths[-1] if paths else None


def vllm_bench_commands(
    profiles: Sequence[dict[str, Any]],
    model: str | None,
    bench_commands: Sequence[str],
    dataset_files: Mapping[str, str],
) -> list[str]:
    """Per stored profile of a run, the ``vllm bench serve`` command that sends the same requests (see
    :meth:`BenchmarkProfile.vllm_bench_command`), against the server its ``perflab bench`` command
    used when that was one; a stored dataset is named by its file name (``dataset_files`` by content
    hash), a ShareGPT one by the file its benchmark read. Profiles that no longer validate are left
    out."""
    commands = []
    for position, stored in enumerate(profiles):
        try:
            profile = BenchmarkProfile.model_validate(stored)
        except ValidationError:
            continue
        bench_command = bench_commands[position] if position < len(bench_commands) else None
        stored_file = dataset_files.get(profile.dataset_ref or "")
        commands.append(
            profile.vllm_bench_command(
                model or "MODEL",
                base_url=_base_url(bench_command),
                dataset_path=stored_file or _shared_file(profile, bench_command),
                same_requests=True,
            )
        )
    return commands
