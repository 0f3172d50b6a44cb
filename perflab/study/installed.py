"""A study spec's configurations judged, when the study is created, by what its hosts have installed.

Each host's engine versions are those of its last stored probe (the host row); each configuration the
spec names — the baseline, every stage candidate applied to it, every choice of a search knob — is
judged for each host by :func:`perflab.engines.installed.refusals`: the installed engine's own answer
where an earlier preflight recorded it, else its recorded registries, else perflab's table of that
release (the newest where the host was never probed), each refusal naming the version. A candidate that
cannot even be built on the baseline is left to the study, which records it as that candidate's failure.
"""

from __future__ import annotations

from sqlmodel import Session

from db import crud
from perflab.engines.config import EngineConfig
from perflab.engines.installed import refusals
from perflab.engines.preflight import default_cache
from perflab.study.configs import CandidateConfigError, build_config, config_fields
from perflab.study.hosts import probed_engines
from perflab.study.spec import StudySpec


def _probed_engines(session: Session, host: str) -> dict[str, str]:
    row = crud.get_host(session, name=host)
    return probed_engines((row.last_probe if row is not None else None) or {})


def spec_configs(spec: StudySpec, *, gpus_per_node: int | None, gpus: int) -> list[tuple[str, EngineConfig]]:
    """The configurations ``spec`` names, each with where it is written."""
    baseline = spec.baseline_config(gpus_per_node, gpus)
    base = config_fields(baseline)
    configs = [("baseline", baseline)]
    for stage_index, stage in enumerate(spec.stages):
        changes = [
            (f"stages[{stage_index}].candidates[{index}] ({candidate.label})", candidate.changes)
            for index, candidate in enumerate(stage.candidates)
        ]
        if stage.search is not None:
            changes += [
                (f"stages[{stage_index}].search.knobs.{knob}: {value!r}", {knob: value})
                for knob, value in stage.search.choice_values()
            ]
        for where, change in changes:
            try:
                configs.append((where, build_config(base, change, gpus_per_node=gpus_per_node, gpus=gpus)))
            except CandidateConfigError:
                continue
    return configs


def installed_problems(
    session: Session, spec: StudySpec, *, gpus_per_node: int | None, gpus: int
) -> list[str]:
    """Every refusal of ``spec``'s configurations by its hosts' installed engines, as
    ``<where> on host '<host>': <why>``."""
    configs = spec_configs(spec, gpus_per_node=gpus_per_node, gpus=gpus)
    cache = default_cache()
    problems: list[str] = []
    for host in spec.hosts:
        engines = _probed_engines(session, host)
        for where, config in configs:
            for why in refusals(config, host=host, version=engines.get(config.engine), cache=cache):
                problems.append(f"{where} on host '{host}': {why}")
    return list(dict.fromkeys(problems))
