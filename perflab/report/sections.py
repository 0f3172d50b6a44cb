"""Report pieces drawn from stored runs and results (plain values in, plain values out), shared by the
study and imported-run reports."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from db.models import HEADLINE_COLUMNS, ProfileResult, Run
from perflab.engines.registry import display_name
from perflab.report.model import BenchBlock
from perflab.runner.environment import time_scale_of
from perflab.runner.evidence import unjudged_reason
from perflab.study.loadcurve import LOAD_UNITS

# A candidate's decision in words, the same in every table (a search trial's state is its own).
DECISION_WORDS = {
    "winner": "winner",
    "kept": "baseline",
    "reused": "reused",
    "not_better": "not better",
    "failed": "failed",
    "disqualified": "disqualified",
    "unmeasured": "not measured",
    "within_noise": "within noise",
    "infeasible": "breaks an SLO",
    "noise_unknown": "noise unknown",
    "too_short": "too short to judge",
}

# What the engine counted over a result's window and the server's cached tokens, beside the headline
# figures in every row (perflab.bench.engine_metrics; None where the engine exposes none).
ENGINE_WINDOW_FIELDS: tuple[str, ...] = (
    "prefix_cache_hit_rate",
    "prefix_cache_hits",
    "prefix_cache_queries",
    "total_cached_tokens",
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
)


def case_name(result: ProfileResult) -> str:
    """The benchmark case a result belongs to: its profile's title, with the sweep point if any."""
    title = str(result.profile.get("title") or result.profile_name or "benchmark")
    point = result.sweep_point
    if point:
        unit = LOAD_UNITS.get(str(point.get("kind")), "")
        return f"{title} @ {point.get('value'):g} {unit}".rstrip()
    return title


def distinct_cases(names: Sequence[str], roles: Sequence[str]) -> list[str]:
    """Case names told apart: a name two cases share gets each case's role (``ShareGPT (tuning)``,
    ``ShareGPT (validation)``), numbered where the role repeats too."""
    pairs = list(zip(names, roles, strict=True))
    told = []
    for index, (name, role) in enumerate(pairs):
        if names.count(name) == 1:
            told.append(name)
            continue
        peers = [other for other, pair in enumerate(pairs) if pair == (name, role)]
        suffix = f" {peers.index(index) + 1}" if len(peers) > 1 else ""
        told.append(f"{name} ({role}{suffix})")
    return told


def result_block(result: ProfileResult, case: str | None = None) -> BenchBlock:
    """A stored result as a report block (its printed text block, first saying when it is too short to
    judge)."""
    text = result.text_block or "(no printed result was stored)"
    short = unjudged_reason(result.result)
    if short is not None:
        text = f"# {short}\n{text}"
    return BenchBlock(case or case_name(result), text.rstrip("\n"))


def failure_block(case: str, message: str) -> BenchBlock:
    """A configuration that produced no result, written as the seeds write it: ``# RuntimeError: …``."""
    lines = [line for line in message.strip().splitlines() if line.strip()] or ["failed"]
    return BenchBlock(case, "\n".join(f"# {line}" for line in lines[-3:]), failed=True)


def engine_title(engine: str | None) -> str:
    """``sglang`` → ``SGLang`` (unknown names as they are)."""
    return display_name(engine) if engine else "unknown engine"


def engine_versions(runs: Iterable[Run]) -> list[tuple[str, str]]:
    """``[(SGLang, v0.5.5)]``: the engine versions the runs' environment snapshots recorded."""
    found: dict[str, str] = {}
    for run in runs:
        version = (run.environment or {}).get("engine_version")
        if run.engine and version:
            found.setdefault(engine_title(run.engine), str(version))
    return sorted(found.items())


def hardware_text(runs: Iterable[Run]) -> str | None:
    """``8 × NVIDIA H100 80GB HBM3 (simulated)`` from the first run with an environment snapshot."""
    for run in runs:
        environment = run.environment or {}
        accelerator = environment.get("accelerator") or run.accelerator
        if not accelerator:
            continue
        count = environment.get("accelerator_count")
        text = f"{count} × {accelerator}" if count else str(accelerator)
        host = environment.get("host") or run.host_name
        if host:
            text += f" on host {host}"
        return text + (" (simulated)" if run.simulated else "")
    return None


def time_scale_note(runs: Iterable[Run]) -> str | None:
    """The simulated hosts among ``runs``' whose clock ran faster than the engine they model (their
    ``time_scale``, stored with each run's environment), and what that does to the figures; None when
    there is none."""
    scales: dict[str, float] = {}
    for run in runs:
        scale = time_scale_of(run.environment) if run.simulated else None
        if scale is not None:
            scales[run.host_name or "a simulated host"] = scale
    if not scales:
        return None
    hosts = ", ".join(f"{host} (× {scale:g})" for host, scale in sorted(scales.items()))
    return (
        f"Simulated time ran faster than the modelled engines on {hosts}, the hosts' time_scale: their "
        "latencies, energies and costs per token are that many times smaller, and their throughputs (per "
        "second and per joule) that many times higher, than the modelled accelerators' would be."
    )


def record(run: Run, result: ProfileResult, **facts: Any) -> dict[str, Any]:
    """One row of the report's CSV/JSON: run facts, the case, and every headline figure."""
    point = result.sweep_point or {}
    row: dict[str, Any] = {
        **facts,
        "run_id": run.id,
        "engine": run.engine,
        "model": run.model,
        "host": run.host_name,
        "replicas": run.replicas,
        "knobs": run.knobs_summary,
        "serve_command": first_serve_command(run),
        "profile": result.profile_name,
        "case": case_name(result),
        "sweep_kind": point.get("kind"),
        "sweep_value": point.get("value"),
    }
    for column in HEADLINE_COLUMNS:
        row[column] = getattr(result, column)
    for field in ENGINE_WINDOW_FIELDS:
        row[field] = result.result.get(field)
    return row


def by_profile(results: Sequence[ProfileResult], name: str) -> list[ProfileResult]:
    """The results of one profile (every sweep point of a swept one), in stored order."""
    return [result for result in results if result.profile_name == name]


def headline(results: Sequence[ProfileResult], field: str = "total_token_throughput") -> ProfileResult | None:
    """The result that stands for a profile: the only one, or a sweep's best point by ``field``."""
    measured = [result for result in results if isinstance(result.result.get(field), (int, float))]
    return max(measured, key=lambda result: result.result[field], default=None)


def first_serve_command(run: Run | None) -> str | None:
    return run.serve_commands[0] if run is not None and run.serve_commands else None
