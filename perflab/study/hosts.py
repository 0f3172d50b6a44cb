"""The hosts a study runs on: what accelerators each has, and which host gets the next run.

Node-level throughput (replicas counted) only compares between nodes of the same accelerator type, so
a study's hosts must agree on it where it is known: from ``simulate:`` in hosts.yaml or from the host's
last probe. The engine versions the hosts share (``simulate: versions`` or the last probe) are those
perflab's simulator resolves a configuration at when it predicts one (:mod:`perflab.study.predicting`).
Runs are spread over the hosts: the next one goes to the host with the fewest unfinished runs of the
study (ties to the host listed first); the worker's GPU locks do the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session

from db import crud
from db.models import FINISHED_RUN_STATUSES, Run
from perflab.inventory import Inventory, InventoryError

# The study state's key for :func:`shared_versions` of its hosts.
ENGINE_VERSIONS = "engine_versions"


class StudyHostError(ValueError):
    """A study's hosts cannot be used together (unknown host, mixed accelerator types)."""


@dataclass(frozen=True)
class HostFacts:
    """A host's accelerator type and count, and the versions of its engines, when known."""

    name: str
    accelerator: str | None
    count: int | None
    engines: Mapping[str, str] = field(default_factory=dict)


def probed_engines(probe: Mapping[str, Any]) -> dict[str, str]:
    """Engine → version in a stored probe (``engines``; those it found no version of left out)."""
    return {str(engine): str(version) for engine, version in (probe.get("engines") or {}).items() if version}


def host_facts(session: Session, inventory: Inventory, name: str) -> HostFacts:
    """What is known of host ``name``: its ``simulate:`` entry, else its last stored probe."""
    try:
        host = inventory.get(name)
    except InventoryError as error:
        raise StudyHostError(str(error)) from None
    if host.simulate is not None:
        return HostFacts(name, host.simulate.accelerator, host.simulate.count, dict(host.simulate.versions))
    stored = crud.get_host(session, name=name)
    probe = (stored.last_probe if stored is not None else None) or {}
    engines = probed_engines(probe)
    accelerators = probe.get("accelerators")
    if accelerators:
        return HostFacts(name, str(accelerators[0].get("name")), len(accelerators), engines)
    return HostFacts(name, None, None, engines)


def check_hosts(facts: Sequence[HostFacts]) -> tuple[str | None, int | None]:
    """The accelerator type and per-node count the hosts share; raises when known types differ."""
    types = {fact.accelerator for fact in facts if fact.accelerator}
    if len(types) > 1:
        listed = ", ".join(f"'{fact.name}' ({fact.accelerator})" for fact in facts if fact.accelerator)
        raise StudyHostError(
            f"a study's hosts must have one accelerator type, so node-level figures compare: {listed}"
        )
    counts = [fact.count for fact in facts if fact.count]
    return (next(iter(types)) if types else None), (min(counts) if counts else None)


def shared_versions(facts: Sequence[HostFacts]) -> dict[str, str]:
    """Engine → the version every host that reports the engine has (an engine whose hosts differ, or
    that no host reports, is left out: its simulated engine's own version stands for it)."""
    found: dict[str, set[str]] = {}
    for fact in facts:
        for engine, version in fact.engines.items():
            found.setdefault(engine, set()).add(version)
    return {engine: next(iter(versions)) for engine, versions in sorted(found.items()) if len(versions) == 1}


def next_host(hosts: Sequence[str], runs: Sequence[Run]) -> str:
    """The study host with the fewest unfinished runs (the first listed on a tie)."""
    load = {name: 0 for name in hosts}
    for run in runs:
        if run.host_name in load and run.status not in FINISHED_RUN_STATUSES:
            load[run.host_name] += 1
    return min(hosts, key=lambda name: load[name])
