"""Rounds: the measured workload sent again, each time with fresh prompts, until the benchmark has
measured long enough to be judged (perflab's own ``--perflab-min-duration`` and
``--perflab-min-requests``; ``vllm bench serve`` has neither).

A benchmark of a fixed number of prompts is shorter on a faster server, so a floor on its length
("at least 5 s and 50 requests") would discard exactly the fastest configurations. Instead, once the
``--num-prompts`` requests of a round have all ended, another round of the same shape is sent while the
rounds so far have measured less than the floor: the same count, rate, concurrency cap and dataset, a
fresh draw of prompts each time (:func:`round_spec`). Every round samples the same load, so a faster
server measures the same quantity as a slower one, over more rounds.

The measured time is the sum of the rounds' own times (each from its first dispatch to its last
completion, by the clock the run is timed by: a simulator's own, :mod:`perflab.bench.simclock`, else
the wall clock); the pauses between rounds, while the next draw is prepared and the prefix cache
emptied, are left out of every figure and reported beside them (``rounds`` in the result). Rounds
stop at the floor, when a round completes no request (another would not either), or when another would
pass :data:`MAX_MEASURED_REQUESTS` requests in all.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from perflab.bench.client import Outcome
from perflab.bench.datasets import DatasetSpec
from perflab.bench.dispatch import Dispatch
from perflab.bench.records import RequestRecord
from perflab.bench.simclock import clock_timing
from perflab.bench.tally import request_times, to_record
from perflab.bench.tokenizer import Tokenizer

# The most requests one benchmark measures over all its rounds (the bound of --num-prompts).
MAX_MEASURED_REQUESTS = 100_000
# Datasets of prompts read from a file keep its entries' order (shuffled with the seed, or the file's):
# a later round takes the entries after those of the rounds before it, so no prompt is sent twice until
# the file runs out (then they are reused, and the result's notes say so). Generated datasets, and a
# trace (replayed again from its start), draw a round's text from a seed derived from the run's.
POOL_DATASETS = ("sharegpt", "custom", "sharegpt-multi-turn", "agentic-trace")


def derived_seed(seed: int, index: Union[int, str]) -> int:
    """The seed of the ``index``-th draw from a workload seeded ``seed`` (a stable function of both:
    CRC-32 of ``"seed:index"``, 31 bits)."""
    return zlib.crc32(f"{seed}:{index}".encode()) & 0x7FFFFFFF


def round_seed(seed: int, round_index: int) -> int:
    """The seed of round ``round_index`` (the run's own for the first)."""
    return seed if round_index == 0 else derived_seed(seed, f"round-{round_index}")


def round_spec(spec: DatasetSpec, num_prompts: int, round_index: int) -> DatasetSpec:
    """The dataset to build for round ``round_index`` of a run whose first round is ``spec`` (warm-up
    included): a pool's entries up to the end of this round (the caller keeps the last
    ``num_prompts``), or a generated dataset of ``num_prompts`` from the round's seed."""
    if round_index == 0:
        return spec
    if spec.kind in POOL_DATASETS:
        return dataclasses.replace(spec, count=spec.count + num_prompts * round_index)
    return dataclasses.replace(spec, count=num_prompts, seed=round_seed(spec.seed, round_index))


@dataclass(frozen=True)
class Floor:
    """How long a benchmark must measure: seconds of measured time and completed requests (0: none)."""

    min_duration_s: float = 0.0
    min_requests: int = 0

    def reached(self, measured_s: float, completed: int) -> bool:
        return measured_s >= self.min_duration_s and completed >= self.min_requests


def another_round(
    floor: Floor, measured_s: float, completed: int, last_completed: int, sent: int, per_round: int
) -> bool:
    """Whether to send another round after rounds that measured ``measured_s`` seconds and completed
    ``completed`` of ``sent`` requests (the last round ``last_completed``), ``per_round`` requests each."""
    if floor.reached(measured_s, completed) or last_completed == 0:
        return False
    return sent + per_round <= MAX_MEASURED_REQUESTS


@dataclass(frozen=True)
class Sizing:
    """How a benchmark whose every round lasts ``round_s`` and completes ``per_round`` requests ends:
    after ``rounds`` rounds, ``measured_s`` seconds and ``completed`` requests."""

    rounds: int
    measured_s: float
    completed: int


def sized(floor: Floor, round_s: float, per_round: int) -> Sizing:
    """The rounds a benchmark of rounds that each last ``round_s`` seconds and complete ``per_round``
    requests sends under ``floor`` (the rule :func:`another_round` applies as the rounds end)."""
    rounds = 1
    while another_round(
        floor, rounds * round_s, rounds * per_round, per_round, rounds * per_round, per_round
    ):
        rounds += 1
    return Sizing(rounds, rounds * round_s, rounds * per_round)


def round_items(items: Sequence[Any], count: int, round_index: int, pool: bool) -> List[Any]:
    """A round's measured items from what its dataset built: a pool's last ``count`` (the entries after
    the earlier rounds'), all of a generated one."""
    return list(items[-count:] if pool and round_index else items)


def _span(dispatches: Sequence[Dispatch], simulated: bool, default: float) -> Tuple[float, float]:
    """``(first send, last end)`` of a round's requests by the wall clock or the ``simulated`` one
    (``(default, default)`` for a round that sent none)."""
    times = [request_times(dispatch, simulated) for dispatch in dispatches]
    first = min((sent for sent, _, _, _ in times), default=default)
    return first, max([first, *(ended for _, _, ended, _ in times)])


@dataclass
class _Round:
    dispatches: List[Dispatch]
    first_session: int
    dataset_source: str
    wall: Tuple[float, float]
    simulated: Tuple[float, float]


@dataclass
class MeasuredRounds:
    """The rounds a run has measured so far: their dispatches, measured time and counts, and how each
    round's times are placed on the measured time (right after the round before it).

    A run against a simulator that answers with its clock (:mod:`perflab.bench.simclock`) is timed by
    it: each round's time, the floor's sum and the records are the simulator's (each round on its own
    timeline, from its first send to its last end), and the engines' own energy count over those spans
    is kept (:meth:`simulated_energy`); otherwise by the wall clock. The pauses between rounds, and the
    window the power samples are read over (:meth:`clock_window`), are always the wall clock's."""

    rounds: List[_Round] = field(default_factory=list)
    phases: List[Tuple[List[Dispatch], float]] = field(default_factory=list)
    paused_s: float = 0.0
    completed: int = 0
    last_completed: int = 0
    sent: int = 0
    sessions: int = 0
    planned_turns: Dict[int, int] = field(default_factory=dict)
    preconnected: Optional[int] = None
    reads: Dict[str, int] = field(default_factory=dict)
    coalesced_chunks: int = 0
    resets_done: int = 0

    @property
    def count(self) -> int:
        return len(self.rounds)

    def add(
        self,
        dispatches: List[Dispatch],
        *,
        started_at: float,
        sent: int,
        planned_turns: Mapping[int, int],
        dataset_source: str,
        preconnected: int,
        reads: Mapping[str, int],
        reset: Mapping[str, Any],
    ) -> None:
        """One more round: its ended ``dispatches`` (``sent`` were started), its phase's start, the
        sessions it planned, how its prompts were counted, its connections, its reads by timing
        source, and its cache reset."""
        wall = _span(dispatches, False, started_at)
        if self.rounds:
            self.paused_s += max(wall[0] - self.rounds[-1].wall[1], 0.0)
        simulated = _span(dispatches, True, 0.0)
        self.rounds.append(_Round(dispatches, self.sessions, dataset_source, wall, simulated))
        self.phases.append((dispatches, started_at))
        self.last_completed = sum(1 for dispatch in dispatches if dispatch.outcome.success)
        self.completed += self.last_completed
        self.sent += sent
        for session, turns in planned_turns.items():
            self.planned_turns[self.sessions + session] = turns
        self.sessions += len(planned_turns)
        self.preconnected = preconnected if self.preconnected is None else self.preconnected
        for source, count in reads.items():
            self.reads[source] = self.reads.get(source, 0) + count
        self.coalesced_chunks += sum(dispatch.outcome.coalesced for dispatch in dispatches)
        self.resets_done += 1 if reset.get("done") else 0

    def _outcomes(self) -> List[Outcome]:
        return [dispatch.outcome for measured in self.rounds for dispatch in measured.dispatches]

    @property
    def simulated(self) -> bool:
        """Whether the run is timed by the simulator's clock (:func:`~perflab.bench.simclock.clock_timing`
        over every round's requests)."""
        return clock_timing(self._outcomes())[0]

    def clock_notes(self) -> List[str]:
        """The notes that go with the clock the run is timed by."""
        return clock_timing(self._outcomes())[1]

    def _spans(self) -> List[Tuple[float, float]]:
        """Each round's ``(first send, last end)`` by the clock the run is timed by."""
        simulated = self.simulated
        return [measured.simulated if simulated else measured.wall for measured in self.rounds]

    @property
    def round_s(self) -> List[float]:
        """Each round's measured time."""
        return [last - first for first, last in self._spans()]

    @property
    def measured_s(self) -> float:
        """The rounds' measured time in all (the pauses between them left out)."""
        return sum(self.round_s)

    def another(self, floor: Floor, per_round: int) -> bool:
        """Whether ``floor`` asks for another round of ``per_round`` requests (:func:`another_round`)."""
        return another_round(
            floor, self.measured_s, self.completed, self.last_completed, self.sent, per_round
        )

    def simulated_energy(self) -> Optional[Dict[str, float]]:
        """The joules the engines' devices drew over the measured rounds, on their simulated clocks, and
        the rounds' measured seconds: per round and server, the energy counter from its first arrival to
        its last end (``perflab_sim_energy_mj``). None unless the run is timed by the simulator's clock
        and every successful response carried the counter."""
        if not self.simulated:
            return None
        joules = 0.0
        for measured in self.rounds:
            spans: Dict[str, Tuple[float, float]] = {}
            for dispatch in measured.dispatches:
                outcome = dispatch.outcome
                if not outcome.success:
                    continue
                if outcome.sim_energy_mj is None:
                    return None
                first, last = outcome.sim_energy_mj
                low, high = spans.get(dispatch.prepared.base_url, (first, last))
                spans[dispatch.prepared.base_url] = (min(low, first), max(high, last))
            joules += sum(high - low for low, high in spans.values()) / 1000.0
        return {"joules": joules, "window_s": self.measured_s}

    def clock_window(self) -> List[float]:
        """``[first send, last receive]`` over every round on the ``perf_counter`` clock (the pauses
        between rounds inside it): the span the engine served this result in, where its energy is read."""
        spans = [measured.wall for measured in self.rounds if measured.dispatches]
        first = min(first for first, _ in spans)
        last = max(last for _, last in spans)
        return [round(first, 6), round(max(last, first), 6)]

    def records(self, tokenizer: Optional[Tokenizer]) -> List[RequestRecord]:
        """Every round's records, numbered in order, times on the measured time, sessions numbered
        after the earlier rounds'."""
        simulated = self.simulated
        records: List[RequestRecord] = []
        before = 0.0
        for measured, (first, last) in zip(self.rounds, self._spans()):
            for dispatch in measured.dispatches:
                record = to_record(
                    len(records), dispatch, first - before, measured.dataset_source, tokenizer, simulated
                )
                if record.session is not None:
                    record.session += measured.first_session
                records.append(record)
            before += last - first
        return records

    def prompts(self) -> List[str]:
        """The prompt of every measured request, in the order of :meth:`records`."""
        return [
            dispatch.prepared.sample.prompt for measured in self.rounds for dispatch in measured.dispatches
        ]

    def summary(self, floor: Floor, per_round: int) -> Dict[str, Any]:
        """The result's ``rounds``: how many were sent and why they stopped, each one's measured time,
        and the pauses between them (left out of every figure)."""
        return {
            "count": self.count,
            "prompts_per_round": per_round,
            "measured_s": [round(seconds, 6) for seconds in self.round_s],
            "paused_s": round(self.paused_s, 6),
            "min_duration_s": floor.min_duration_s,
            "min_requests": floor.min_requests,
            "floor_reached": floor.reached(self.measured_s, self.completed),
            "cache_resets_done": self.resets_done,
        }
