"""Continuous-batching scheduler of one engine replica (model mode).

Each engine step, like vLLM's V1 scheduler:

1. running sequences go first, in admission order: a sequence still in prefill gets the next chunk
   of its prompt (chunked prefill, limited by the token budget ``max_num_batched_tokens``), a
   decoding one gets one token (``1 + k`` to verify with speculative decoding);
2. waiting sequences are admitted first-come-first-served while the budget lasts, the number of
   running sequences stays under ``max_num_seqs`` and free KV blocks cover their first chunk; the
   queue head blocks the queue (no overtaking). With prefix caching the cached leading blocks of a
   prompt are skipped;
3. a sequence that needs a KV block when none is free preempts the most recently admitted running
   sequence, which returns to the head of the queue and recomputes its prompt and output later.

A finished sequence's blocks (prompt and generated tokens) stay cached in the KV memory running
sequences leave free (and while a running sequence holds them), so a smaller KV cache, or more
sequences in flight, evicts more of a session's history before its next turn.

The step's duration comes from :class:`~perflab.sim.perfmodel.PerfModel` and is divided by the
time scale; at the step's end every sequence that finished its prefill gets its first token and every
decoding sequence its next token(s), all in one pass. Time is the engine's simulated clock
(:class:`~perflab.sim.clock.SimClock`): ``clock.time()`` is the instant of the running event, a step
end is a timer from ``timer_factory(clock, callback)``, a batch start ``clock.call_soon``.
"""

from __future__ import annotations

from collections import deque
from typing import Deque, List, Optional, Tuple

from perflab.sim.clock import SchedulerClock
from perflab.sim.metrics import EngineGauges, MetricsRecorder
from perflab.sim.noise import Pace
from perflab.sim.perfmodel import PerfModel
from perflab.sim.prefix import BLOCK_TOKENS, PrefixCache, block_hashes
from perflab.sim.sequence import Deliver, Sequence
from perflab.sim.timing import TimerFactory
from perflab.sim.tokenizer import output_token_id

_MASK32 = 0xFFFFFFFF


def accepted_drafts(seed: int, step: int, drafts: int, acceptance: float) -> int:
    """How many of ``drafts`` speculative tokens a verification step accepts (deterministic)."""
    accepted = 0
    for position in range(drafts):
        draw = ((seed * 1103515245 + step * 2654435761 + position * 40503 + 12345) & _MASK32) / 2.0**32
        if draw >= acceptance:
            break
        accepted += 1
    return accepted


class BatchScheduler:
    """One replica's scheduler: waiting queue, running batch, KV blocks, steps."""

    def __init__(
        self,
        loop: SchedulerClock,
        perf: PerfModel,
        kv_tokens: int,
        time_scale: float,
        deliver: Deliver,
        metrics: MetricsRecorder,
        timer_factory: TimerFactory,
        pace: Optional[Pace] = None,
    ) -> None:
        dep = perf.dep
        self._pace = pace
        self._loop = loop
        self._perf = perf
        self._time_scale = time_scale
        self._deliver = deliver
        self._metrics = metrics
        self._block = dep.profile.block_size
        self._capacity_blocks = kv_tokens // self._block
        self._used_blocks = 0
        self._budget = dep.max_num_batched_tokens
        self._max_seqs = dep.max_num_seqs
        self._chunked = dep.chunked_prefill
        self._spec_tokens = dep.spec_tokens
        self._acceptance = dep.spec_acceptance
        self._prefix: Optional[PrefixCache] = (
            PrefixCache(self._capacity_blocks * self._block // BLOCK_TOKENS) if dep.prefix_caching else None
        )
        if self._spec_tokens:
            metrics.enable_speculation(self._spec_tokens)
        self.waiting: Deque[Sequence] = deque()
        self.running: List[Sequence] = []
        self._batch: List[Tuple[Sequence, int]] = []
        self._step_end: Optional[float] = None
        self._kick_pending = False
        self._steps = 0
        self._busy_seconds = 0.0
        self._timer = timer_factory(loop, self._finish_step)  # type: ignore[arg-type]

    @property
    def load(self) -> int:
        return len(self.running) + len(self.waiting)

    @property
    def busy_seconds(self) -> float:
        """Wall time spent in steps so far (for the utilisation the GPU state reports)."""
        return self._busy_seconds

    def submit(self, seq: Sequence) -> None:
        self.waiting.append(seq)
        if self._step_end is None and not self._kick_pending:
            # Start on the next loop turn, so requests that arrived together share the first step.
            self._kick_pending = True
            self._loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._kick_pending = False
        if self._step_end is None:
            self._start_step(self._loop.time())

    def abort(self, seq: Sequence) -> None:
        seq.aborted = True
        if seq in self.running:
            self.running.remove(seq)
            self._free(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)

    @property
    def idle(self) -> bool:
        """Nothing running or waiting."""
        return not self.running and not self.waiting

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix block, as vLLM's and SGLang's resets do; refused (False) while
        requests run or wait, whose blocks are still held."""
        if not self.idle:
            return False
        if self._prefix is not None:
            self._prefix.clear()
        return True

    def _cache_sequence(self, seq: Sequence) -> None:
        """Keep a finished sequence's blocks, its generated tokens' too (as vLLM caches every full
        block), so the next turn of a conversation finds its whole history."""
        if self._prefix is None or seq.prompt_ids is None:
            return
        generated = [output_token_id(seq.seed, index) for index in range(seq.generated)]
        self._prefix.insert(block_hashes(seq.prompt_ids + generated), self._cache_room())

    def _cache_room(self) -> int:
        """How many prefix blocks the cache may keep now: the free KV memory, plus the prompt blocks
        running sequences hold (cached while in use, never evicted then)."""
        held = sum(len(seq.block_hashes or ()) for seq in self.running if seq.computed >= seq.prefill_target)
        free_tokens = (self._capacity_blocks - self._used_blocks) * self._block
        return free_tokens // BLOCK_TOKENS + held

    def gauges(self) -> EngineGauges:
        return EngineGauges(
            len(self.running),
            len(self.waiting),
            self._used_blocks * self._block,
            self._capacity_blocks * self._block,
            self._block,
        )

    # -- KV blocks -------------------------------------------------------------------------------

    def _reserve(self, seq: Sequence, tokens: int) -> bool:
        """Hold enough blocks for ``tokens`` tokens of ``seq``; False if they are not free."""
        need = -(-tokens // self._block) - seq.blocks
        if need <= 0:
            return True
        if self._used_blocks + need > self._capacity_blocks:
            return False
        self._used_blocks += need
        seq.blocks += need
        return True

    def _free(self, seq: Sequence) -> None:
        self._used_blocks -= seq.blocks
        seq.blocks = 0

    def _preempt(self, victim: Sequence) -> None:
        self.running.remove(victim)
        self._free(victim)
        victim.computed = 0
        victim.prefill_target = victim.prompt_len + victim.generated
        self.waiting.appendleft(victim)
        self._metrics.preemptions += 1

    def _reserve_or_preempt(self, seq: Sequence, tokens: int) -> bool:
        """Reserve blocks, preempting later sequences; False if ``seq`` itself had to go."""
        while not self._reserve(seq, tokens):
            victim = self.running[-1]
            self._preempt(victim)
            if victim is seq:
                return False
        return True

    # -- steps -----------------------------------------------------------------------------------

    def _cached_prefix(self, seq: Sequence) -> None:
        if self._prefix is None or seq.prompt_ids is None or seq.generated:
            return
        if seq.block_hashes is None:
            seq.block_hashes = block_hashes(seq.prompt_ids)
            self._metrics.prefix_queries += seq.prompt_len
        cached = min(self._prefix.cached_tokens(seq.block_hashes), seq.prompt_len - 1)
        if cached > seq.cached_tokens:
            self._metrics.prefix_hits += cached - seq.cached_tokens
            seq.cached_tokens = cached
        seq.computed = max(seq.computed, cached)

    def _plan(self, now: float) -> List[Tuple[Sequence, int]]:
        budget = self._budget
        batch: List[Tuple[Sequence, int]] = []
        index = 0
        while index < len(self.running) and budget > 0:
            seq = self.running[index]
            if seq.computed < seq.prefill_target:
                chunk = min(seq.prefill_target - seq.computed, budget)
                if self._reserve_or_preempt(seq, seq.computed + chunk):
                    batch.append((seq, chunk))
                    budget -= chunk
                    index += 1
            else:
                need = 1 + self._spec_tokens
                if self._reserve_or_preempt(seq, seq.computed + need):
                    batch.append((seq, 0))
                    budget -= need
                    index += 1
        while self.waiting and budget > 0 and len(self.running) < self._max_seqs:
            seq = self.waiting[0]
            self._cached_prefix(seq)
            remaining = seq.prefill_target - seq.computed
            chunk = min(remaining, budget)
            if chunk < remaining and not self._chunked:
                if batch:
                    break
                chunk = remaining
            if not self._reserve(seq, seq.computed + chunk):
                break
            self.waiting.popleft()
            self.running.append(seq)
            if seq.scheduled_at < 0:
                seq.scheduled_at = now
            batch.append((seq, chunk))
            budget -= chunk
        return batch

    def _cost(self, batch: List[Tuple[Sequence, int]]) -> float:
        tokens = 0
        pairs = 0.0
        kv_read = 0.0
        decoding = 0
        width = 1 + self._spec_tokens
        for seq, chunk in batch:
            if chunk:
                tokens += chunk
                pairs += chunk * (seq.computed + chunk / 2.0)
                kv_read += seq.computed
            else:
                decoding += 1
                tokens += width
                pairs += width * seq.computed
                kv_read += seq.computed
        return self._perf.step_seconds(tokens, pairs, kv_read, len(batch), decoding)

    def _start_step(self, start: float) -> None:
        batch = self._plan(start)
        if not batch:
            self._step_end = None
            if self._pace is not None:
                self._pace.idle(start)
            return
        speed = self._pace.factor(start) if self._pace is not None else 1.0
        duration = self._cost(batch) / self._time_scale / speed
        self._batch = batch
        self._busy_seconds += duration
        self._step_end = start + duration
        self._timer.arm(self._step_end)

    def _finish_step(self) -> None:
        now = self._loop.time()
        step_end = self._step_end if self._step_end is not None else now
        self._steps += 1
        self._metrics.iterations += 1
        for seq, chunk in self._batch:
            if seq.aborted or seq.done:
                continue
            if chunk:
                seq.computed += chunk
                if seq.computed < seq.prefill_target:
                    continue
                if self._prefix is not None and seq.block_hashes:
                    self._prefix.insert(seq.block_hashes, self._cache_room())
                count = 1
            else:
                drafts = min(self._spec_tokens, seq.remaining - 1)
                accepted = (
                    accepted_drafts(seq.seed, self._steps, drafts, self._acceptance) if drafts > 0 else 0
                )
                if drafts > 0:
                    self._metrics.on_verification(drafts, accepted)
                count = 1 + accepted
            seq.generated += count
            seq.computed += count if not chunk else 0
            self._deliver(seq, count, now)
            if seq.done:
                self._cache_sequence(seq)
                self._free(seq)
        self._batch = []
        self.running = [seq for seq in self.running if not seq.done and not seq.aborted]
        self._start_step(step_end)
