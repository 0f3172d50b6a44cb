"""One generation request as the schedulers see it.

A :class:`Sequence` carries its prompt length (and token ids when prefix caching needs them), the
number of tokens it will generate, and the progress the scheduler made. Schedulers report generated
tokens through a :data:`Deliver` callback; the API layer turns them into SSE chunks or a JSON body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, List, Optional

if TYPE_CHECKING:
    from perflab.sim.timelines import Ticket


class Sequence:
    """A request inside the simulated engine."""

    __slots__ = (
        "request_id",
        "arrival",
        "prompt_len",
        "prompt_ids",
        "target_tokens",
        "finish_reason",
        "seed",
        "generated",
        "computed",
        "cached_tokens",
        "blocks",
        "scheduled_at",
        "first_token_at",
        "last_token_at",
        "done",
        "aborted",
        "on_tokens",
        "owner",
        "prefill_target",
        "block_hashes",
        "held_blocks",
        "cache_key",
        "ticket",
        "energy_mj",
        "parsed_reasoning",
    )

    def __init__(
        self,
        request_id: str,
        arrival: float,
        prompt_len: int,
        target_tokens: int,
        finish_reason: str,
        seed: int,
        prompt_ids: Optional[List[int]] = None,
    ) -> None:
        self.request_id = request_id
        self.arrival = arrival
        self.prompt_len = prompt_len
        self.prompt_ids = prompt_ids
        self.target_tokens = target_tokens
        self.finish_reason = finish_reason
        self.seed = seed
        self.generated = 0
        self.computed = 0
        self.cached_tokens = 0
        self.blocks = 0
        self.scheduled_at = -1.0
        self.first_token_at = -1.0
        self.last_token_at = -1.0
        self.done = False
        self.aborted = False
        self.on_tokens: Optional[Callable[["Sequence", int, bool], None]] = None
        self.owner: object = None
        self.prefill_target = prompt_len
        self.block_hashes: Optional[List[int]] = None
        self.held_blocks = 0
        self.cache_key = -1
        self.ticket: Optional["Ticket"] = None  # its place on its client's timeline, if it declared one
        # The engine's energy counter (mJ, its simulated clock) at its arrival, then at its last token.
        self.energy_mj: List[float] = []
        # Its streamed output goes through the server's reasoning parser (a chat request to a server
        # started with one), which costs the API front end more per token.
        self.parsed_reasoning = False

    @property
    def remaining(self) -> int:
        return self.target_tokens - self.generated


Deliver = Callable[[Sequence, int, float], None]
