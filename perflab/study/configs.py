"""Candidate configurations: a stage's changes applied on top of the best configuration so far.

``extra_args`` are appended to the base configuration's own (a flag already there is not repeated),
``env`` is merged into the base's, ``replicas: fill`` becomes accelerators-per-node ÷ (tp × dp), and
every other field replaces the base's value. Within a study's accelerator budget (``gpus``, see
:mod:`perflab.study.budget`) every configuration is filled to exactly that many accelerators. The
result is checked by the engine's adapter, so a
configuration the engine cannot run (a knob it lacks, a bad value) is a :class:`CandidateConfigError`
recorded against the candidate, never a launch.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from perflab.engines.config import EngineConfig
from perflab.engines.errors import EngineConfigError
from perflab.engines.registry import get_adapter
from perflab.problems import plain_message
from perflab.study.budget import FILL, check_fields, fill_budget


class CandidateConfigError(ValueError):
    """A candidate whose configuration cannot be launched; the message says why."""


def split_args(value: Any) -> tuple[str, ...]:
    """``extra_args`` as written (a command-line string or a list of words) as a tuple of words."""
    if isinstance(value, str):
        return tuple(shlex.split(value))
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ValueError("extra_args must be a command-line string or a list of strings")


def explain(error: ValidationError) -> str:
    """A pydantic error as one line: ``tp: must be >= 1; model: is required``."""
    parts = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"])
        message = plain_message(item)
        parts.append(f"{field}: {message}" if field else message)
    return "; ".join(parts)


def fill_replicas(config_fields: Mapping[str, Any], gpus_per_node: int | None) -> int:
    """Replicas that fill a node: accelerators per node ÷ accelerators per replica."""
    per_replica = int(config_fields.get("tp", 1)) * int(config_fields.get("dp", 1))
    if gpus_per_node is None:
        raise CandidateConfigError("replicas: fill needs to know the accelerators per node (gpus_per_node)")
    if per_replica > gpus_per_node:
        raise CandidateConfigError(
            f"tp×dp = {per_replica} needs more accelerators than the node has ({gpus_per_node})"
        )
    return gpus_per_node // per_replica


def build_config(
    base: Mapping[str, Any],
    changes: Mapping[str, Any],
    *,
    gpus_per_node: int | None = None,
    gpus: int | None = None,
) -> EngineConfig:
    """``changes`` applied to the config fields ``base``, validated by the model and the engine adapter;
    with a budget of ``gpus`` accelerators, filled to it with replicas."""
    fields = dict(base)
    if changes.get("disaggregation"):
        # a split sets its parallelism per group; the shared fields step aside
        fields.update(tp=1, dp=1, ep=1, replicas=1)
    elif {"tp", "dp", "ep"} & set(changes) and "disaggregation" not in changes:
        # an aggregated layout replaces a split of the configuration it builds on
        fields["disaggregation"] = None
    for name, value in changes.items():
        if name == "extra_args":
            fields["extra_args"] = tuple(dict.fromkeys([*fields.get("extra_args", ()), *split_args(value)]))
        elif name == "env":
            fields["env"] = {**fields.get("env", {}), **value}
        else:
            fields[name] = value
    if gpus is not None:
        fields["replicas"] = 1  # the budget decides; an explicit count is checked below
    elif fields.get("replicas") == FILL:
        fields["replicas"] = fill_replicas(fields, gpus_per_node)
    try:
        config = EngineConfig.model_validate(fields)
    except ValidationError as error:
        raise CandidateConfigError(f"invalid configuration: {explain(error)}") from None
    if gpus is not None:
        try:
            if config.disaggregation is None:
                check_fields({"tp": config.tp, "dp": config.dp, "replicas": changes.get("replicas")}, gpus)
            config = fill_budget(config, gpus)
        except ValueError as error:
            raise CandidateConfigError(str(error)) from None
    if gpus_per_node is not None and config.gpus_needed > gpus_per_node:
        counted = "prefill + decode" if config.disaggregation else "tp×dp×replicas"
        raise CandidateConfigError(
            f"needs {config.gpus_needed} accelerators ({counted}) but a node has {gpus_per_node}"
        )
    try:
        get_adapter(config.engine).validate(config)
    except EngineConfigError as error:
        raise CandidateConfigError(str(error)) from None
    return config


def config_fields(config: EngineConfig) -> dict[str, Any]:
    """The fields of a config to build candidates on (launch placement left out)."""
    return config.model_dump(exclude={"gpu_ids", "port"})


def serve_command(config: EngineConfig) -> str:
    """The command a user types to serve ``config``."""
    return get_adapter(config.engine).display_command(config)
