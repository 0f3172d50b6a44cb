"""One attention rank's scheduling policy: waiting queue, running batch, KV blocks and prefix cache.

Each engine step, as vLLM's V1 scheduler does it (``vllm/v1/core/sched/scheduler.py`` and
``kv_cache_manager.py`` of vLLM 0.32.0):

1. running sequences go first, in admission order: a sequence still in prefill gets the next chunk
   of its prompt (chunked prefill, limited by the token budget ``max_num_batched_tokens``), a
   decoding one gets one token (``1 + k`` to verify with speculative decoding);
2. a sequence that needs a KV block when none is free preempts the most recently admitted running
   sequence (possibly itself), which frees its blocks and returns to the head of the queue;
3. only in a step that preempted nothing, waiting sequences are admitted first-come-first-served
   while the budget lasts, the number of running sequences stays under ``max_num_seqs`` and the free
   KV blocks hold the whole sequence so far (prompt, and output before a preemption; vLLM's
   ``scheduler_reserve_full_isl``, on by default) — plus, for engines that promise room to their
   running sequences' output (:attr:`~perflab.sim.profiles.EngineProfile.output_reserve`), that
   share of every running and the new sequence's remaining output. Blocks are allocated for the
   first chunk only; the queue head blocks the queue (no overtaking).

With prefix caching every full block is cached as it is computed: a prompt's cached leading blocks
are skipped, and a preempted sequence resumes from the blocks of its prompt and output still cached
(freed last-block-first, as vLLM frees them, so its leading blocks survive longest) instead of
recomputing from zero; without prefix caching it recomputes everything. A finished sequence's blocks
(prompt and generated tokens) stay cached in the KV memory running sequences leave free (and while a
running sequence holds them), so a smaller KV cache, or more sequences in flight, evicts more of a
session's history before its next turn.

:meth:`RankScheduler.plan` picks one step's batch, :meth:`RankScheduler.load` says what it computes
(for :class:`~perflab.sim.perfmodel.PerfModel`), :meth:`RankScheduler.finish` applies its results;
:mod:`perflab.sim.batching` times the steps.
"""

from __future__ import annotations

from collections import deque
from typing import Deque, List, Optional, Tuple

from perflab.sim.deployment import Deployment
from perflab.sim.metrics import EngineGauges, MetricsRecorder
from perflab.sim.perfmodel import (
    StepLoad,
    kv_bytes_per_token_per_gpu,
    running_limit,
    state_bytes_per_seq_per_gpu,
)
from perflab.sim.prefix import BLOCK_TOKENS, PrefixCache, block_hashes, private_block_hashes
from perflab.sim.sequence import Deliver, Sequence
from perflab.sim.tokenizer import output_token_id

_MASK32 = 0xFFFFFFFF
Batch = List[Tuple[Sequence, int]]


def accepted_drafts(seed: int, step: int, drafts: int, acceptance: float) -> int:
    """How many of ``drafts`` speculative tokens a verification step accepts (deterministic)."""
    accepted = 0
    for position in range(drafts):
        draw = ((seed * 1103515245 + step * 2654435761 + position * 40503 + 12345) & _MASK32) / 2.0**32
        if draw >= acceptance:
            break
        accepted += 1
    return accepted


class RankScheduler:
    """The queue, batch and KV cache of one attention rank."""

    def __init__(self, dep: Deployment, kv_tokens: int, deliver: Deliver, metrics: MetricsRecorder) -> None:
        self._deliver = deliver
        self._metrics = metrics
        self._block = dep.profile.block_size
        self._capacity_blocks = kv_tokens // self._block
        # A hybrid model's recurrent state takes KV memory too: blocks' worth per running sequence
        # (SGLang keeps it in a pool of its own, which bounds the running sequences instead).
        block_bytes = kv_bytes_per_token_per_gpu(dep) * self._block
        state = 0.0 if dep.engine == "sglang" else state_bytes_per_seq_per_gpu(dep)
        self._state_blocks = -int(-state // block_bytes)
        self._used_blocks = 0
        self._budget = dep.max_num_batched_tokens
        self._prefill_budget = dep.prefill_tokens
        self._max_seqs = running_limit(dep, kv_tokens)
        self._max_prefill_seqs = dep.max_prefill_seqs
        self._chunked = dep.chunked_prefill
        self._spec_tokens = dep.spec_tokens
        self._acceptance = dep.spec_acceptance
        profile = dep.profile
        self._reserve_initial = profile.output_reserve
        self._reserve_floor = profile.output_reserve_floor
        self._reserve_decay = (
            profile.output_reserve - profile.output_reserve_floor
        ) / profile.output_reserve_steps
        self._output_reserve = profile.output_reserve
        self._prefill_first = profile.prefill_first
        self._decode_batch_cap = profile.decode_batch_cap
        self._prefill_reserve_blocks = int(profile.prefill_reserve * self._capacity_blocks)
        self._held = 0
        self._keys = 0
        self._prefix: Optional[PrefixCache] = (
            PrefixCache(self._capacity_blocks * self._block // BLOCK_TOKENS) if dep.prefix_caching else None
        )
        self.waiting: Deque[Sequence] = deque()
        self.running: List[Sequence] = []

    @property
    def queued(self) -> int:
        return len(self.running) + len(self.waiting)

    @property
    def idle(self) -> bool:
        """Nothing running or waiting."""
        return not self.running and not self.waiting

    def submit(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def abort(self, seq: Sequence) -> bool:
        """Drop ``seq`` if it is this rank's (freeing its blocks); whether it was."""
        if seq in self.running:
            self.running.remove(seq)
            self._release(seq)
            return True
        if seq in self.waiting:
            self.waiting.remove(seq)
            return True
        return False

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix block, as vLLM's and SGLang's resets do; refused (False) while
        requests run or wait, whose blocks are still held."""
        if not self.idle:
            return False
        if self._prefix is not None:
            self._prefix.clear()
        return True

    def gauges(self) -> EngineGauges:
        return EngineGauges(
            len(self.running),
            len(self.waiting),
            self._used_blocks * self._block,
            self._capacity_blocks * self._block,
            self._block,
        )

    # -- prefix cache ----------------------------------------------------------------------------

    def _hashes(self, seq: Sequence, tokens: int) -> List[int]:
        """Hashes of the full cache blocks among the first ``tokens`` tokens of ``seq`` (prompt, then
        generated tokens)."""
        if seq.prompt_ids is None:
            if seq.cache_key < 0:
                self._keys += 1
                seq.cache_key = self._keys
            return private_block_hashes(seq.cache_key, tokens // BLOCK_TOKENS)
        if tokens <= seq.prompt_len:
            if seq.block_hashes is None:
                seq.block_hashes = block_hashes(seq.prompt_ids)
            return seq.block_hashes[: tokens // BLOCK_TOKENS]
        generated = [output_token_id(seq.seed, index) for index in range(tokens - seq.prompt_len)]
        return block_hashes(seq.prompt_ids + generated)

    def _cache_room(self) -> int:
        """How many prefix blocks the cache may keep now: the free KV memory, plus the blocks
        running sequences hold (cached while in use, never evicted then)."""
        free_tokens = (self._capacity_blocks - self._used_blocks) * self._block
        return free_tokens // BLOCK_TOKENS + self._held

    def _cache_blocks(self, seq: Sequence, tokens: int, held: bool) -> None:
        """Cache the full blocks of ``seq``'s first ``tokens`` tokens; ``held`` while it runs on them.
        Inserted last block first, so the leading blocks are the last evicted."""
        if self._prefix is None:
            return
        hashes = self._hashes(seq, tokens)
        if held:
            self._held += len(hashes) - seq.held_blocks
            seq.held_blocks = len(hashes)
        self._prefix.insert(hashes[::-1], self._cache_room())

    def _cache_finished(self, seq: Sequence) -> None:
        """Keep a finished sequence's blocks, its generated tokens' too (as vLLM caches every full
        block), so the next turn of a conversation finds its whole history."""
        if seq.prompt_ids is not None:
            self._cache_blocks(seq, seq.prompt_len + seq.generated, held=False)

    def _cached_prefix(self, seq: Sequence) -> None:
        """Skip what the cache holds of a waiting sequence (its prompt's shared prefix on first
        admission, which the engine's counters record; its own blocks after a preemption)."""
        if self._prefix is None or (seq.prompt_ids is None and seq.cache_key < 0):
            return
        first = seq.block_hashes is None and not seq.generated
        cached = min(
            self._prefix.cached_tokens(self._hashes(seq, seq.prefill_target)), seq.prefill_target - 1
        )
        if first and seq.prompt_ids is not None:
            self._metrics.prefix_queries += seq.prompt_len
            if cached > seq.cached_tokens:
                self._metrics.prefix_hits += cached - seq.cached_tokens
                seq.cached_tokens = cached
        seq.computed = max(seq.computed, cached)

    # -- KV blocks -------------------------------------------------------------------------------

    def _blocks_for(self, tokens: float) -> int:
        return -int(-tokens // self._block) + self._state_blocks

    def _reserve(self, seq: Sequence, tokens: int) -> bool:
        """Hold enough blocks for ``tokens`` tokens of ``seq``; False if they are not free. Cached
        blocks beyond the memory left free are evicted."""
        need = self._blocks_for(tokens) - seq.blocks
        if need <= 0:
            return True
        if self._used_blocks + need > self._capacity_blocks:
            return False
        self._used_blocks += need
        seq.blocks += need
        if self._prefix is not None:
            self._prefix.trim(self._cache_room())
        return True

    def _release(self, seq: Sequence) -> None:
        """Free ``seq``'s blocks; its cached ones become evictable."""
        self._used_blocks -= seq.blocks
        seq.blocks = 0
        self._held -= seq.held_blocks
        seq.held_blocks = 0

    def _preempt(self, victim: Sequence) -> None:
        self.running.remove(victim)
        computed = victim.computed
        self._release(victim)
        self._cache_blocks(victim, computed, held=False)
        victim.computed = 0
        victim.prefill_target = victim.prompt_len + victim.generated
        self.waiting.appendleft(victim)
        self._metrics.preemptions += 1

    def _reserve_or_preempt(self, seq: Sequence, tokens: int) -> Tuple[bool, bool]:
        """Reserve blocks, preempting later sequences: (whether ``seq`` got them, whether anything
        was preempted)."""
        preempted = False
        while not self._reserve(seq, tokens):
            victim = self.running[-1]
            self._preempt(victim)
            preempted = True
            self._output_reserve = self._reserve_initial
            if victim is seq:
                return False, True
        return True, preempted

    def _admissible(self, seq: Sequence) -> bool:
        """Whether the free blocks hold the waiting ``seq`` whole (with its computed prefix), plus the
        output room the engine promises to running sequences and to ``seq``."""
        need = self._blocks_for(seq.prefill_target + self._output_reserve * seq.remaining)
        if self._output_reserve:
            for other in self.running:
                promised = max(other.computed, other.prefill_target) + self._output_reserve * other.remaining
                need += max(0, self._blocks_for(promised) - other.blocks)
        return self._used_blocks + need <= self._capacity_blocks

    # -- one step --------------------------------------------------------------------------------

    def plan(self, now: float) -> Batch:
        """This step's batch: ``(sequence, prefill chunk)`` pairs, chunk 0 for a decoding sequence.

        Mixed steps (vLLM, TensorRT-LLM): running sequences, then admissions. Prefill-first engines
        (SGLang's "run prefill first if possible", MindIE) run a prefill batch whenever one can be
        formed (MindIE: while the engine's reserve of free blocks lasts) and decode the running
        sequences otherwise (MindIE: the first ``max_num_seqs`` of them)."""
        if not self._prefill_first:
            batch, budget, preempted = self._schedule_running(self._budget, prefills=True, decodes=True)
            if not preempted:  # vLLM admits nothing in a step that preempted
                self._admit(batch, budget, now)
            return batch
        batch, budget, _ = self._schedule_running(self._prefill_budget, prefills=True, decodes=False)
        if self._capacity_blocks - self._used_blocks >= self._prefill_reserve_blocks:
            self._admit(batch, budget, now)
        if batch:
            return batch
        batch, _, _ = self._schedule_running(self._budget, prefills=False, decodes=True)
        if batch:
            self._output_reserve = max(self._reserve_floor, self._output_reserve - self._reserve_decay)
        return batch

    def _schedule_running(self, budget: int, prefills: bool, decodes: bool) -> Tuple[Batch, int, bool]:
        """Running sequences' chunks and tokens in admission order: (batch, budget left, whether a
        sequence was preempted for blocks). An engine whose ``max_num_seqs`` bounds the decode batch
        decodes only the first that many."""
        batch: Batch = []
        preempted = False
        decoded = 0
        index = 0
        while index < len(self.running) and budget > 0:
            seq = self.running[index]
            prefilling = seq.computed < seq.prefill_target
            if not (prefills if prefilling else decodes):
                index += 1
                continue
            if not prefilling and self._decode_batch_cap and decoded >= self._max_seqs:
                break
            tokens = min(seq.prefill_target - seq.computed, budget) if prefilling else 1 + self._spec_tokens
            scheduled, preempting = self._reserve_or_preempt(seq, seq.computed + tokens)
            preempted = preempted or preempting
            if not scheduled:
                break
            batch.append((seq, tokens if prefilling else 0))
            decoded += 0 if prefilling else 1
            budget -= tokens
            index += 1
        return batch, budget, preempted

    def _admit(self, batch: Batch, budget: int, now: float) -> None:
        """Admit waiting sequences into ``batch`` first-come-first-served (the head blocks the rest),
        within the running-sequence limit (unless it bounds only decode batches) and the engine's
        limit of sequences per prefill batch."""
        admitted = 0
        while self.waiting and budget > 0:
            if not self._decode_batch_cap and len(self.running) >= self._max_seqs:
                break
            if self._max_prefill_seqs and admitted >= self._max_prefill_seqs:
                break
            seq = self.waiting[0]
            self._cached_prefix(seq)
            remaining = seq.prefill_target - seq.computed
            chunk = min(remaining, budget)
            if chunk < remaining and not self._chunked:
                if batch:
                    break
                chunk = remaining
            if not self._admissible(seq) or not self._reserve(seq, seq.computed + chunk):
                break
            self.waiting.popleft()
            self.running.append(seq)
            if seq.scheduled_at < 0:
                seq.scheduled_at = now
            batch.append((seq, chunk))
            budget -= chunk
            admitted += 1

    def load(self, batch: Batch) -> StepLoad:
        """What ``batch`` computes."""
        work = StepLoad(sequences=len(batch))
        width = 1 + self._spec_tokens
        for seq, chunk in batch:
            work.reasoning += seq.parsed_reasoning
            if chunk:
                work.tokens += chunk
                work.pairs += chunk * (seq.computed + chunk / 2.0)
            else:
                work.decoding += 1
                work.tokens += width
                work.pairs += width * seq.computed
            work.kv_read += seq.computed
        return work

    def finish(self, batch: Batch, now: float, step: int) -> None:
        """Apply a finished step: prefills advance, first and next tokens are delivered."""
        for seq, chunk in batch:
            if seq.aborted or seq.done:
                continue
            if chunk:
                seq.computed += chunk
                if seq.computed < seq.prefill_target:
                    continue
                self._cache_blocks(seq, seq.computed, held=True)
                count = 1
            else:
                drafts = min(self._spec_tokens, seq.remaining - 1)
                accepted = accepted_drafts(seq.seed, step, drafts, self._acceptance) if drafts > 0 else 0
                if drafts > 0:
                    self._metrics.on_verification(drafts, accepted)
                count = 1 + accepted
            seq.generated += count
            seq.computed += count if not chunk else 0
            self._deliver(seq, count, now)
            if seq.done:
                self._release(seq)
                self._cache_finished(seq)
        self.running = [seq for seq in self.running if not seq.done and not seq.aborted]
        if self.idle:
            self._output_reserve = self._reserve_initial
