"""Per-request records: what one benchmark request did, in seconds since the benchmark started.

A ``RequestRecord`` is the only input of ``perflab.bench.metrics``. Times are offsets from the first
dispatch of the measured run. ``chunk_times_s`` holds the arrival time of every streamed chunk that
carried generated text (content, reasoning or completion text); ``chunk_tokens`` says how many output
tokens each chunk stands for, so throughput is counted in tokens even when a chunk carries several.
``input_tokens`` is the prompt's own length (as the dataset counted it, else the server's usage);
``usage_input_tokens`` what the server reported as ``usage.prompt_tokens``, chat template included.
``server_queue_s`` and ``server_ttft_s`` are the server's own queue time and time to first token (from
scheduling), in seconds, when it reported them (vLLM 0.33 ``--enable-per-request-metrics``).
``session`` and ``turn`` place a session's request (both None for a single-turn one);
``cached_tokens`` is the server's ``usage.prompt_tokens_details.cached_tokens`` when it reported it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

SOURCE_USAGE = "usage"
SOURCE_TOKENIZER = "tokenizer"
SOURCE_CHUNKS = "chunks"


@dataclass
class RequestRecord:
    """One request's timeline and outcome."""

    index: int
    base_url: str
    scheduled_s: float
    dispatched_s: float
    start_s: float
    end_s: float
    chunk_times_s: List[float] = field(default_factory=list)
    chunk_tokens: List[int] = field(default_factory=list)
    input_tokens: int = 0
    input_tokens_source: str = "dataset"
    usage_input_tokens: Optional[int] = None
    output_tokens: int = 0
    output_tokens_source: str = SOURCE_CHUNKS
    success: bool = False
    error: Optional[str] = None
    reason: Optional[str] = None
    connect_ms: Optional[float] = None
    server_queue_s: Optional[float] = None
    server_ttft_s: Optional[float] = None
    session: Optional[int] = None
    turn: Optional[int] = None
    cached_tokens: Optional[int] = None

    @property
    def ttft_s(self) -> Optional[float]:
        return self.chunk_times_s[0] - self.start_s if self.chunk_times_s else None

    @property
    def e2el_s(self) -> Optional[float]:
        return self.chunk_times_s[-1] - self.start_s if self.chunk_times_s else None

    @property
    def itl_s(self) -> List[float]:
        times = self.chunk_times_s
        return [later - earlier for earlier, later in zip(times, times[1:])]

    @property
    def tpot_s(self) -> Optional[float]:
        """(E2EL − TTFT) / (output tokens − 1); None when fewer than two tokens were generated."""
        if self.output_tokens < 2 or not self.chunk_times_s:
            return None
        return (self.chunk_times_s[-1] - self.chunk_times_s[0]) / (self.output_tokens - 1)

    def input_tokens_as(self, definition: str) -> int:
        """Input tokens by ``definition``: ``prompt`` (the prompt's own length) or ``usage`` (the
        server's ``usage.prompt_tokens`` when it reported them, else the prompt's own length)."""
        if definition == "usage" and self.usage_input_tokens is not None:
            return self.usage_input_tokens
        return self.input_tokens

    def to_json(self, input_tokens: str = "usage") -> Dict[str, Any]:
        """The per-request record of the JSON result (milliseconds for latencies); ``input_tokens``
        follows the given definition, the prompt's own length and the server's usage sit beside it."""
        from_usage = input_tokens == "usage" and self.usage_input_tokens is not None
        return {
            "index": self.index,
            "start_s": round(self.start_s, 6),
            "scheduled_s": round(self.scheduled_s, 6),
            "ttft_ms": _milliseconds(self.ttft_s),
            "itl_ms": [round(gap * 1000.0, 4) for gap in self.itl_s],
            "e2el_ms": _milliseconds(self.e2el_s),
            "input_tokens": self.input_tokens_as(input_tokens),
            "input_tokens_source": "usage" if from_usage else self.input_tokens_source,
            "prompt_input_tokens": self.input_tokens,
            "usage_input_tokens": self.usage_input_tokens,
            "output_tokens": self.output_tokens,
            "output_tokens_source": self.output_tokens_source,
            "connect_ms": None if self.connect_ms is None else round(self.connect_ms, 4),
            "server_queue_ms": _milliseconds(self.server_queue_s),
            "server_ttft_ms": _milliseconds(self.server_ttft_s),
            "session": self.session,
            "turn": self.turn,
            "cached_tokens": self.cached_tokens,
            "base_url": self.base_url,
            "error": self.error,
            "reason": self.reason,
            "success": self.success,
        }


def _milliseconds(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else round(seconds * 1000.0, 4)


def distribute_tokens(total: int, chunk_chars: List[int]) -> List[int]:
    """Split ``total`` output tokens over chunks, one each when the counts match, else by text length.

    The result always sums to ``total`` (largest-remainder rounding); chunks without text count as
    one character so that every chunk can be attributed a share.
    """
    count = len(chunk_chars)
    if count == 0:
        return []
    if total == count:
        return [1] * count
    weights = [max(chars, 1) for chars in chunk_chars]
    weight_sum = float(sum(weights))
    exact = [total * weight / weight_sum for weight in weights]
    shares = [int(value) for value in exact]
    missing = total - sum(shares)
    by_remainder = sorted(range(count), key=lambda i: (exact[i] - shares[i], -i), reverse=True)
    for i in by_remainder[:missing]:
        shares[i] += 1
    return shares
