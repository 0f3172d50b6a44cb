"""The run page's read model: a run with its profile results, per-request records and samples, as
plain values (picklable, so pages can cache them keyed by :func:`run_version`).

A result's text block is the stored one (the bench's, or the block an import came from), else it is
rendered from the result with :func:`perflab.bench.report.format_text_block` when the result has
every field that needs; imported results lacking fields simply have none. A partial result (its
benchmark stopped early: the engine died, the run was cancelled or failed) is marked so, with the
sentence that says how much it covers and why. A result that records which definitions it used for
input tokens and peak concurrency says so in :attr:`ProfileView.definition_notes`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlmodel import Session

from db import crud
from db.crud import RunSummary
from db.models import FINISHED_RUN_STATUSES, Dataset, ProfileResult, RequestRecord, Run, RunSample
from perflab.bench.report import format_text_block, partial_note
from perflab.datasets import dataset_file_name
from perflab.hub.catalog import used_sample
from perflab.runner.environment import time_scale_of
from perflab.runner.evidence import unjudged_reason
from perflab.views import timeline as timelines
from perflab.views.commands import CommandPreview, stored_command_preview, vllm_bench_commands
from perflab.views.formatting import PARTIAL_MARK, format_time, host_label

RECORD_COLUMNS: tuple[str, ...] = (
    "index",
    "start_s",
    "ttft_ms",
    "tpot_ms",
    "e2el_ms",
    "itl_ms",
    "input_tokens",
    "output_tokens",
    "success",
    "error",
    "base_url",
)


@dataclass(frozen=True)
class RunView(RunSummary):
    """A run's columns as the pages use them."""

    config: dict[str, Any] | None
    profiles: list[dict[str, Any]]
    serve_commands: list[str]
    bench_commands: list[str]
    environment: dict[str, Any]
    log_tail: str | None
    failure_message: str | None
    progress: dict[str, Any] | None
    gpu_ids: list[int] | None
    bench_mode: str | None
    worker_id: str | None
    launching_at: datetime | None
    ready_at: datetime | None
    benchmarking_at: datetime | None
    heartbeat_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_RUN_STATUSES

    @property
    def host_display(self) -> str:
        return host_label(self.host_name, self.simulated)

    @property
    def time_scale(self) -> float | None:
        """How many times faster than the engine it models a simulated host's clock ran (None: at the
        modelled speed, or not simulated)."""
        return time_scale_of(self.environment) if self.simulated else None

    @property
    def title(self) -> str:
        """``Run 42 · vllm · Qwen/Qwen3-32B`` (the label when the run has one)."""
        detail = self.label or " · ".join(part for part in (self.engine, self.model) if part)
        return f"Run {self.id}" + (f" · {detail}" if detail else "")

    def phase_times(self) -> list[tuple[str, datetime | None]]:
        """The lifecycle timestamps in order."""
        return [
            ("queued", self.created_at),
            ("launching", self.launching_at),
            ("ready", self.ready_at),
            ("benchmarking", self.benchmarking_at),
            ("finished", self.finished_at),
        ]


def lifecycle_markdown(run: RunView) -> str:
    """The run's lifecycle as a markdown table: each phase and when it began (``—`` if never)."""
    rows = [f"| {phase} | {format_time(moment)} |" for phase, moment in run.phase_times()]
    return "\n".join(["| Phase | At |", "|---|---|", *rows]) + "\n"


def run_view(run: Run) -> RunView:
    """The plain view of a stored run."""
    return RunView(**{field.name: getattr(run, field.name) for field in dataclasses.fields(RunView)})


@dataclass(frozen=True)
class ProfileView:
    """One profile's result of a run, with its per-request records."""

    id: int
    position: int
    name: str
    title: str
    profile: dict[str, Any]
    result: dict[str, Any]
    text_block: str | None
    sweep_point: dict[str, Any] | None
    records: pd.DataFrame
    # Output tokens/s and requests in flight over time: from the per-request records in bins fit for
    # the run's length, else the bench's per-second series.
    timeline: timelines.Timeline

    @property
    def partial(self) -> bool:
        """Whether the result covers only the requests that ended before its benchmark was stopped."""
        return self.result.get("partial") is True

    @property
    def marked_title(self) -> str:
        """Its title, marked ``(partial)`` for a partial result."""
        return f"{self.title} {PARTIAL_MARK}" if self.partial else self.title

    @property
    def definition_notes(self) -> list[str]:
        """How its input tokens and peak concurrent requests were counted (see :func:`definition_notes`)."""
        return definition_notes(self.result)

    @property
    def notes(self) -> list[str]:
        """The benchmark's remarks on its dataset (lengths estimated, prompts reused, sample used)."""
        return [note for note in self.result.get("notes") or [] if isinstance(note, str)]

    @property
    def used_sample(self) -> bool:
        """Whether the result was measured on perflab's ShareGPT-format sample."""
        return used_sample(self.notes)


@dataclass(frozen=True)
class RunDetail:
    """Everything the run page shows."""

    run: RunView
    profiles: list[ProfileView]
    samples: pd.DataFrame
    planned_command: CommandPreview | None
    # The ``vllm bench serve`` equivalent of each profile (sends the same requests).
    vllm_bench_commands: list[str]

    def result_warnings(self) -> list[str]:
        """One sentence per partial result (how much of its benchmark it covers and why it stopped) and
        per result too short to judge (perflab.runner.evidence), headed by the profile's title when the
        run has several."""
        several = len(self.profiles) > 1
        found = []
        for profile in self.profiles:
            short = unjudged_reason(profile.result)
            notes = ([partial_note(profile.result)] if profile.partial else []) + ([short] if short else [])
            found += [f"{profile.title}: {note}" if several else note for note in notes]
        return found


# Per definition field: each value's words, and (words, result field) of the other definition's value.
DEFINITIONS: dict[str, tuple[str, dict[str, str], dict[str, tuple[str, str]]]] = {
    "input_tokens_definition": (
        "Total input tokens",
        {
            "usage": "the server's usage.prompt_tokens, chat template included (vLLM's definition)",
            "prompt": "the prompts' own tokens (perflab's definition)",
        },
        {
            "usage": ("the prompts' own tokens", "total_prompt_input_tokens"),
            "prompt": ("the server's usage", "total_usage_input_tokens"),
        },
    ),
    "peak_concurrency_definition": (
        "Peak concurrent requests",
        {
            "per-second": "requests active during the fullest 1-second bucket (vLLM's definition)",
            "exact": "the most requests in flight at one instant (perflab's definition)",
        },
        {
            "per-second": ("at one instant at most", "max_overlapping_requests"),
            "exact": ("per 1-second bucket (vLLM's)", "max_requests_per_second_bucket"),
        },
    ),
}


def definition_notes(result: dict[str, Any]) -> list[str]:
    """``Total input tokens: the server's usage.prompt_tokens, … (vLLM's definition); the prompts' own
    tokens: 1536.`` and the like for peak concurrency; nothing for a result that does not record them."""
    notes = []
    for field, (label, words, others) in DEFINITIONS.items():
        used = result.get(field)
        if used not in words:
            continue
        other, other_field = others[used]
        other_value = result.get(other_field)
        tail = f"; {other}: {other_value}" if isinstance(other_value, int) else ""
        notes.append(f"{label}: {words[used]}{tail}.")
    return notes


def profile_title(profile: dict[str, Any], fallback: str | None) -> str:
    """What a profile is called on the pages: its title, else its name."""
    for key in ("title", "name"):
        value = profile.get(key)
        if isinstance(value, str) and value:
            return value
    return fallback or "benchmark"


def text_block_for(stored: str | None, result: dict[str, Any]) -> str | None:
    """The "Serving Benchmark Result" block of a result (stored, else rendered, else None)."""
    if stored:
        return stored
    try:
        return format_text_block(result)
    except (KeyError, TypeError, ValueError):
        return None


# The stored columns the page reads, in :data:`RECORD_COLUMNS` order (TPOT is computed).
_STORED_RECORD_COLUMNS = tuple(column for column in RECORD_COLUMNS if column != "tpot_ms")


def records_frame(rows: Sequence[Sequence[Any]]) -> pd.DataFrame:
    """Per-request records (rows of :data:`_STORED_RECORD_COLUMNS`) as a table with TPOT (excl. 1st
    token) computed per request: (E2EL − TTFT) / (output tokens − 1), for requests with two or more."""
    frame = pd.DataFrame(list(rows), columns=list(_STORED_RECORD_COLUMNS))
    for column in ("start_s", "ttft_ms", "e2el_ms", "input_tokens", "output_tokens"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["itl_ms"] = [list(gaps) if gaps else [] for gaps in frame["itl_ms"]]
    steps = frame["output_tokens"].where(frame["output_tokens"] >= 2) - 1
    frame["tpot_ms"] = ((frame["e2el_ms"] - frame["ttft_ms"]) / steps).astype("float64")
    return frame[list(RECORD_COLUMNS)]


def _records_by_result(session: Session, result_ids: list[int]) -> dict[int, pd.DataFrame]:
    """The request records of each profile result, read in one query of the columns the page uses."""
    columns = [getattr(RequestRecord, name) for name in _STORED_RECORD_COLUMNS]
    rows = session.execute(
        sa.select(RequestRecord.profile_result_id, *columns)
        .where(RequestRecord.profile_result_id.in_(result_ids))
        .order_by(RequestRecord.profile_result_id, RequestRecord.index)
    ).all()
    grouped: dict[int, list[Sequence[Any]]] = {result_id: [] for result_id in result_ids}
    for result_id, *values in rows:
        grouped[result_id].append(values)
    return {result_id: records_frame(values) for result_id, values in grouped.items()}


def profile_view(stored: ProfileResult, records: pd.DataFrame) -> ProfileView:
    """A stored profile result with its request records (and the timeline drawn from them)."""
    built = timelines.from_records(records) if not records.empty else None
    return ProfileView(
        id=stored.id,
        position=stored.position,
        name=stored.profile_name or "benchmark",
        title=profile_title(stored.profile, stored.profile_name),
        profile=dict(stored.profile),
        result=dict(stored.result),
        text_block=text_block_for(stored.text_block, stored.result),
        sweep_point=stored.sweep_point,
        records=records,
        timeline=(
            built
            if built is not None and not built.empty
            else timelines.from_series(stored.result.get("timeseries") or [])
        ),
    )


def profile_views(session: Session, run_id: int) -> list[ProfileView]:
    """Every profile result of a run, in order, with its request records."""
    stored = crud.list_profile_results(session, run_id=run_id)
    records = _records_by_result(session, [result.id for result in stored])
    return [profile_view(result, records[result.id]) for result in stored]


def samples_frame(samples: list[RunSample]) -> pd.DataFrame:
    """Samples as rows of ``t_s``, ``source`` and each sampled value in its own column."""
    rows = [{"t_s": sample.t_s, "source": sample.source, **sample.values} for sample in samples]
    return pd.DataFrame(rows, columns=None if rows else ["t_s", "source"])


def load_run_detail(session: Session, run_id: int) -> RunDetail | None:
    """The run page's data for ``run_id``, or None when the run does not exist."""
    run = crud.get_run(session, run_id=run_id)
    if run is None:
        return None
    return RunDetail(
        run=run_view(run),
        profiles=profile_views(session, run_id),
        samples=samples_frame(crud.list_samples(session, run_id=run_id)),
        planned_command=None if run.serve_commands else stored_command_preview(run.config),
        vllm_bench_commands=vllm_bench_commands(
            run.profiles or [],
            run.model,
            run.bench_commands or [],
            _dataset_files(session, run.profiles or []),
        ),
    )


def _dataset_files(session: Session, profiles: list[dict[str, Any]]) -> dict[str, str]:
    """The file names of the stored datasets ``profiles`` send, by content hash (names only: the
    contents are not read)."""
    refs = {profile.get("dataset_ref") for profile in profiles if isinstance(profile, dict)}
    refs.discard(None)
    if not refs:
        return {}
    rows = session.execute(
        sa.select(Dataset.content_hash, Dataset.name, Dataset.format).where(Dataset.content_hash.in_(refs))
    )
    return {content_hash: dataset_file_name(name, fmt) for content_hash, name, fmt in rows}


def run_version(session: Session, run_id: int) -> str | None:
    """A short key that changes whenever the run page's data changes (None for an unknown run)."""
    return run_versions(session, [run_id]).get(run_id)


def run_versions(session: Session, run_ids: list[int]) -> dict[int, str]:
    """:func:`run_version` of each of ``run_ids`` that exists, in three queries whatever their number."""
    rows = session.execute(
        sa.select(Run.id, Run.status, Run.heartbeat_at, Run.finished_at, Run.cancel_requested).where(
            Run.id.in_(run_ids)
        )
    ).all()
    results = _counts(session, ProfileResult, run_ids)
    samples = _counts(session, RunSample, run_ids)
    return {
        run_id: "|".join(str(part) for part in (*columns, results.get(run_id, 0), samples.get(run_id, 0)))
        for run_id, *columns in rows
    }


def _counts(
    session: Session, table: type[ProfileResult] | type[RunSample], run_ids: list[int]
) -> dict[int, int]:
    """How many rows of ``table`` each of ``run_ids`` has (runs without any are left out)."""
    query = sa.select(table.run_id, sa.func.count()).where(table.run_id.in_(run_ids)).group_by(table.run_id)
    return {run_id: count for run_id, count in session.execute(query)}
