"""A run's live state as the Run and Launch pages show it, from one small query: its status and for how
long it has had it, what it is fetching, the engine's replicas coming up, and, while it benchmarks, the
profile's step (:mod:`perflab.runner.live`: starting the benchmark, warm-up, benchmarking, draining,
preparing the next round, collecting the result) with its own elapsed time, the round of a benchmark
sized to the floor of evidence and what it has measured, the request counts and the time left (of
every round the floor still asks for)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session

from db.models import Run
from perflab.runner import live
from perflab.views.formatting import format_duration

# When a run entered each status it can be watched in.
_STATUS_SINCE = {"launching": Run.launching_at, "ready": Run.ready_at, "benchmarking": Run.benchmarking_at}


@dataclass(frozen=True)
class RunProgress:
    """A run's live state for the progress panel. ``status_since`` is when it entered its status;
    ``step`` is the running profile's step and ``step_since`` when that began (seconds since the
    epoch, the worker's clock)."""

    status: str
    done: int
    failed: int
    total: int
    in_flight: int
    elapsed_s: float | None
    profile: str | None
    profile_number: int | None
    profiles: int | None
    cancel_requested: bool
    pulling: str | None = None
    # The running profile's progress points (see :mod:`perflab.runner.live`).
    history: list[Any] = dataclasses.field(default_factory=list)
    status_since: datetime | None = None
    step: str | None = None
    step_since: float | None = None
    warmup: tuple[int, int] | None = None
    replicas: tuple[int, int] | None = None
    # The rounds of a benchmark sized to the floor of evidence (None: one round).
    rounds: live.Rounds | None = None

    @property
    def eta_s(self) -> float | None:
        """Seconds until the running profile's requests have all ended, in every round the floor still
        asks for (see :func:`live.eta_s`)."""
        return live.eta_s(self.history, self.total, self.rounds)

    @property
    def planned(self) -> int:
        """The requests the profile is expected to send: ``total``, and the rounds the floor still asks
        for once their size can be told."""
        plan = live.rounds_plan(self.history, self.total, self.rounds) if self.rounds is not None else None
        return self.total + (plan.more * plan.per_round if plan is not None else 0)

    @property
    def fraction(self) -> float:
        planned = self.planned
        return min(1.0, self.done / planned) if planned else 0.0

    def _rounds_text(self) -> str | None:
        """``round 2 (0.9 of at least 5.1 s and 40 of at least 50 requests measured before it)``, or
        between rounds what the rounds so far measured; None for a benchmark of one round."""
        rounds = self.rounds
        if rounds is None or self.step in (live.STARTING, live.WARMUP, live.COLLECTING):
            return None
        if rounds.next:
            return rounds.floor_text(measured=True)
        if rounds.number == 1:
            return f"round 1 (measures {rounds.floor_text()})"
        return f"round {rounds.number} ({rounds.floor_text(measured=True)} before it)"

    def _status_text(self, now_s: float) -> str:
        """``launching for 23.0 s``: the status, and for how long while the engine comes up."""
        if self.status in ("launching", "ready") and self.status_since is not None:
            return f"{self.status} for {format_duration(max(0.0, now_s - self.status_since.timestamp()))}"
        return self.status

    def _step_text(self, now_s: float) -> str | None:
        """``warm-up 3/10 for 4.0 s``, ``draining: every request sent, 32 still in flight for 3.0 s``;
        None while the profile's requests are being measured (the status says so)."""
        if self.step is None or self.step == live.MEASURING:
            return None
        text = self.step
        if self.step == live.WARMUP and self.warmup is not None:
            text += f" {self.warmup[0]}/{self.warmup[1]}"
        elif self.step == live.DRAINING:
            of_round = f" of round {self.rounds.number}" if self.rounds is not None else ""
            text += f": every request{of_round} sent, {self.in_flight} still in flight"
        elif self.step == live.PREPARING and self.rounds is not None:
            text = f"preparing round {self.rounds.number + 1}"
        if self.step_since is not None:
            text += f" for {format_duration(max(0.0, now_s - self.step_since))}"
        return text

    def text(self, now_s: float | None = None) -> str:
        """``benchmarking · profile sharegpt (1 of 2) · 412/1000 requests (3 failed), 64 in flight ·
        41.5 s elapsed · about 1 min 2 s left`` (``done`` counts the failed requests too); the
        engine's replicas while it launches, the step of a profile not measuring yet or any more, each
        with how long it has lasted at ``now_s`` (default: now)."""
        now_s = time.time() if now_s is None else now_s
        parts = [self._status_text(now_s)]
        if self.pulling:
            parts.append(self.pulling)
        if self.replicas is not None and self.status == "launching":
            parts.append(f"loading the engine: {self.replicas[0]} of {self.replicas[1]} replicas ready")
        if self.profile:
            of = (
                f" ({self.profile_number} of {self.profiles})"
                if self.profile_number and self.profiles
                else ""
            )
            parts.append(f"profile {self.profile}{of}")
        step = self._step_text(now_s)
        if step:
            parts.append(step)
        rounds = self._rounds_text()
        if rounds:
            parts.append(rounds)
        if self.total:
            counted = f"{self.done}/{self.total} requests"
            if self.failed:
                counted += f" ({self.failed} failed)"
            parts.append(f"{counted}, {self.in_flight} in flight")
        if self.elapsed_s is not None:
            parts.append(f"{format_duration(self.elapsed_s)} elapsed")
        if self.history and (self.done < self.total or self.step == live.PREPARING):
            eta = self.eta_s
            parts.append(
                f"about {format_duration(eta)} left" if eta is not None else "estimating the time left"
            )
        if self.cancel_requested:
            parts.append("cancel requested")
        return " · ".join(parts)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _pair(progress: dict[str, Any], first: str, second: str) -> tuple[int, int] | None:
    """Two counts of the progress (``3`` of ``10``), or None when it lacks the total."""
    total = _int(progress.get(second))
    return (_int(progress.get(first)), total) if total else None


def load_progress(session: Session, run_id: int) -> RunProgress | None:
    """The live progress of a run (one small query), or None for an unknown run."""
    row = session.execute(
        sa.select(Run.status, Run.progress, Run.cancel_requested, *_STATUS_SINCE.values()).where(
            Run.id == run_id
        )
    ).first()
    if row is None:
        return None
    progress = row.progress if isinstance(row.progress, dict) else {}
    elapsed = progress.get("elapsed_s")
    profile = progress.get("profile")
    index = progress.get("profile_index")
    step, since = progress.get("step"), progress.get("step_since")
    entered = dict(zip(_STATUS_SINCE, row[3:], strict=True))
    return RunProgress(
        status=row.status,
        done=_int(progress.get("done")),
        failed=_int(progress.get("failed")),
        total=_int(progress.get("total")),
        in_flight=_int(progress.get("in_flight")),
        elapsed_s=float(elapsed) if isinstance(elapsed, (int, float)) else None,
        profile=profile if isinstance(profile, str) else None,
        profile_number=_int(index) + 1 if isinstance(index, int) else None,
        profiles=_int(progress.get("profiles")) or None,
        cancel_requested=bool(row.cancel_requested),
        pulling=_pull_text(progress),
        history=progress.get("history") if isinstance(progress.get("history"), list) else [],
        status_since=entered.get(row.status),
        step=step if isinstance(step, str) else None,
        step_since=float(since) if isinstance(since, (int, float)) and not isinstance(since, bool) else None,
        warmup=_pair(progress, "warmup_done", "warmup_total"),
        replicas=_pair(progress, "replicas_ready", "replicas"),
        rounds=live.Rounds.read(progress.get("rounds")),
    )


def _pull_text(progress: dict[str, Any]) -> str | None:
    """``pulling IMAGE: last line of the pull`` while a run's image is being pulled, ``downloading
    DATASET: 120 of 642 MiB`` while its hub dataset is fetched, else None."""
    for key in ("pulling", "downloading"):
        what, line = progress.get(key), progress.get("log_line")
        if isinstance(what, str):
            return f"{key} {what}: {line}" if isinstance(line, str) and line else f"{key} {what}"
    return None
