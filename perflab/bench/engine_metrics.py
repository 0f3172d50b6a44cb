"""What the engine itself counted over a benchmark's window: prefix-cache hits and speculative decoding.

The bench reads every server's Prometheus ``/metrics`` just before the measured requests and again
after them (as ``vllm bench serve`` 0.33.0 does for speculative decoding, ``fetch_spec_decode_metrics``)
and reports the difference of the counters, summed over servers and label sets:

- prefix cache, in prompt tokens: vLLM's ``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries``
  (``vllm/v1/metrics/loggers.py``, 0.32.0 and 0.33.0; vLLM's own hit rate is their ratio), else
  SGLang's ``sglang:cached_tokens`` (every ``cache_source``) / ``sglang:prompt_tokens``
  (``sglang/srt/observability/metrics_collector.py``, 0.5.23; SGLang serves them with
  ``--enable-metrics``). Counters are exposed with the ``_total`` suffix. SGLang 0.5.23 increments
  ``sglang:cached_tokens_total`` only for a request with cached tokens (``observe_one_finished_request``:
  ``if cached_tokens > 0``), and a labelled Prometheus counter has no sample before its first
  increment: a server whose ``sglang:prompt_tokens_total`` is there without it has had no hit, and its
  hits count 0. An engine with neither (a hit-rate gauge covers its whole life, not the window) gets no
  hit rate and a note saying why.
- speculative decoding: vLLM's ``vllm:spec_decode_num_drafts``, ``…_num_draft_tokens``,
  ``…_num_accepted_tokens`` and ``…_num_accepted_tokens_per_pos{position}``
  (``vllm/v1/spec_decode/metrics.py``), giving the result's ``spec_decode_*`` fields with vLLM's
  definitions: acceptance rate = accepted / draft tokens (%), acceptance length = 1 + accepted /
  drafts, each position's accepted / drafts. Written only when drafts were made in the window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from perflab.bench.serverapi import ServerUnavailable, server_call

# engine → (hits counter, queries counter, whether the hits counter appears only at the first hit), in
# the order they are looked for.
PREFIX_COUNTERS: Tuple[Tuple[str, str, str, bool], ...] = (
    ("vLLM", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", False),
    ("SGLang", "sglang:cached_tokens_total", "sglang:prompt_tokens_total", True),
)
SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
SPEC_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
WANTED = {SPEC_DRAFTS, SPEC_DRAFT_TOKENS, SPEC_ACCEPTED} | {
    name for _, hits, queries, _ in PREFIX_COUNTERS for name in (hits, queries)
}
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_POSITION = re.compile(r'position="(\d+)"')
NO_COUNTERS = (
    "the server's /metrics has no prefix-cache counters over a window "
    "(vLLM's vllm:prefix_cache_queries/hits, SGLang's sglang:cached_tokens/prompt_tokens)"
)


@dataclass
class CounterSnapshot:
    """The counters of one server at one moment: each wanted name summed over its label sets."""

    values: Dict[str, float] = field(default_factory=dict)
    accepted_per_position: Dict[int, float] = field(default_factory=dict)


def parse_metrics(text: str) -> CounterSnapshot:
    """The wanted counters of a Prometheus text page."""
    snapshot = CounterSnapshot()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, raw = match.groups()
        if name not in WANTED and name != SPEC_PER_POSITION:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if name == SPEC_PER_POSITION:
            position = _POSITION.search(labels or "")
            if position is not None:
                index = int(position.group(1))
                snapshot.accepted_per_position[index] = snapshot.accepted_per_position.get(index, 0.0) + value
            continue
        snapshot.values[name] = snapshot.values.get(name, 0.0) + value
    return snapshot


def read_counters(base_url: str, headers: Dict[str, str]) -> Tuple[Optional[CounterSnapshot], str]:
    """The server's counters now, or None and why not."""
    try:
        status, body = server_call(base_url, "GET", "/metrics", headers)
    except ServerUnavailable as exc:
        return None, f"{base_url}/metrics cannot be read: {exc}"
    if status != 200:
        return None, f"{base_url}/metrics answered HTTP {status} (SGLang serves it with --enable-metrics)"
    return parse_metrics(body.decode("utf-8", "replace")), ""


def _delta(
    before: Sequence[CounterSnapshot],
    after: Sequence[CounterSnapshot],
    name: str,
    absent_is_zero: bool = False,
) -> Optional[float]:
    """The counter's increase over the window, summed over servers; None when a server lacks it at the
    window's end, unless ``absent_is_zero`` (a counter that appears at its first increment)."""
    if not after or (not absent_is_zero and not all(name in snapshot.values for snapshot in after)):
        return None
    return sum(late.values.get(name, 0.0) - early.values.get(name, 0.0) for early, late in zip(before, after))


def prefix_cache_fields(
    before: Sequence[CounterSnapshot], after: Sequence[CounterSnapshot]
) -> Dict[str, Any]:
    """``prefix_cache_hit_rate`` (%), ``prefix_cache_hits``/``_queries`` (tokens) and their source, or
    a null rate with ``prefix_cache_note`` saying why there is none."""
    for engine, hits_name, queries_name, created_at_first_hit in PREFIX_COUNTERS:
        queries = _delta(before, after, queries_name)
        hits = _delta(before, after, hits_name, absent_is_zero=created_at_first_hit and queries is not None)
        if hits is None or queries is None:
            continue
        fields: Dict[str, Any] = {
            "prefix_cache_hit_rate": 100.0 * hits / queries if queries > 0 else None,
            "prefix_cache_hits": int(hits),
            "prefix_cache_queries": int(queries),
            "prefix_cache_source": f"{engine} {hits_name} / {queries_name}",
        }
        if queries <= 0:
            fields["prefix_cache_note"] = (
                "no prompt token was looked up in the prefix cache (prefix caching off?)"
            )
        return fields
    return {"prefix_cache_hit_rate": None, "prefix_cache_note": NO_COUNTERS}


def spec_decode_fields(before: Sequence[CounterSnapshot], after: Sequence[CounterSnapshot]) -> Dict[str, Any]:
    """vLLM's ``spec_decode_*`` result fields over the window, or nothing when no draft was made."""
    drafts = _delta(before, after, SPEC_DRAFTS)
    draft_tokens = _delta(before, after, SPEC_DRAFT_TOKENS)
    accepted = _delta(before, after, SPEC_ACCEPTED)
    if drafts is None or draft_tokens is None or accepted is None or draft_tokens <= 0:
        return {}
    positions = sorted({index for snapshot in (*before, *after) for index in snapshot.accepted_per_position})
    per_position = (
        [
            sum(
                late.accepted_per_position.get(index, 0.0) - early.accepted_per_position.get(index, 0.0)
                for early, late in zip(before, after)
            )
            / drafts
            for index in positions
        ]
        if drafts > 0
        else []
    )
    return {
        "spec_decode_acceptance_rate": 100.0 * accepted / draft_tokens,
        "spec_decode_acceptance_length": 1.0 + accepted / drafts if drafts > 0 else 0.0,
        "spec_decode_num_drafts": int(drafts),
        "spec_decode_draft_tokens": int(draft_tokens),
        "spec_decode_accepted_tokens": int(accepted),
        "spec_decode_per_position_acceptance_rates": per_position,
    }


class EngineWindow:
    """The counters of every server at the start of the window, to be compared with its end."""

    def __init__(self, base_urls: Sequence[str], headers: Dict[str, str]) -> None:
        self._base_urls = list(base_urls)
        self._headers = headers
        self._before: List[Optional[CounterSnapshot]] = []
        self._problems: List[str] = []

    def start(self) -> None:
        self._before = self._read_all()

    def _read_all(self) -> List[Optional[CounterSnapshot]]:
        snapshots = []
        for base_url in self._base_urls:
            snapshot, problem = read_counters(base_url, self._headers)
            if problem and problem not in self._problems:
                self._problems.append(problem)
            snapshots.append(snapshot)
        return snapshots

    def fields(self) -> Dict[str, Any]:
        """The result fields of the window that ends now."""
        after = self._read_all()
        pairs = [
            (early, late)
            for early, late in zip(self._before, after)
            if early is not None and late is not None
        ]
        if len(pairs) < len(self._base_urls):
            return {"prefix_cache_hit_rate": None, "prefix_cache_note": "; ".join(self._problems)}
        before_list = [early for early, _ in pairs]
        after_list = [late for _, late in pairs]
        return {**prefix_cache_fields(before_list, after_list), **spec_decode_fields(before_list, after_list)}
