"""How much of a run's prompt tokens its own prompts could serve one another from a prefix cache.

The engine's prefix-cache hit rate over a benchmark's window (``prefix_cache_hit_rate``) counts every
prompt token it found cached, whoever put it there. A run whose prompts share no prefixes finds hardly
any, unless an earlier run on the same engine sent the same prompts (a screening with the same seed, a
repetition) and left them cached: then the run measures a cache it did not fill. ``own_prefix_share``
(% of the prompt tokens the server counted) bounds what the run's own prompts can explain: for each
measured prompt, in the order sent, the longest prefix it shares with any prompt sent before it in the
run (the warm-up's too, unless a cache reset emptied the cache after it), plus every token the
server's chat template added to it (its usage's prompt tokens less its own, all counted as if shared).
A hit rate above the bound came from outside the run. Sessions carry their history from turn to turn
and are not bounded here.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple


def common_length(first: str, second: str) -> int:
    """The length of the longest common prefix of two texts (a binary search over comparisons of their
    prefixes, each one done at C speed)."""
    low, high = 0, min(len(first), len(second))
    if first[:high] == second[:high]:
        return high
    high -= 1
    while low < high:
        middle = (low + high + 1) // 2
        if first[:middle] == second[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def shared_with_earlier(texts: Sequence[str]) -> List[int]:
    """For each text, in the order given (sent), the length of the longest prefix it shares with any
    text before it. In sorted order the prefix two texts share is the smallest of the prefixes shared by
    the neighbours between them, so the nearest earlier text on either side holds each side's longest."""
    order = sorted(range(len(texts)), key=texts.__getitem__)
    between = [common_length(texts[order[k]], texts[order[k + 1]]) for k in range(len(order) - 1)]
    shared = [0] * len(texts)
    for position, index in enumerate(order):
        best = 0
        for step in (-1, 1):
            common: Optional[int] = None
            other = position + step
            while 0 <= other < len(order):
                gap = between[min(other, other - step)]
                common = gap if common is None else min(common, gap)
                if common <= best:
                    break
                if order[other] < index:
                    best = common
                    break
                other += step
        shared[index] = best
    return shared


def own_prefix_share(
    earlier: Sequence[str], measured: Sequence[Tuple[str, int, Optional[int]]]
) -> Optional[float]:
    """The bound, in %, for the ``measured`` prompts ``(text, own tokens, tokens the server counted or
    None)`` in the order sent, after the ``earlier`` texts still in the cache; None without prompt
    tokens."""
    texts = [*earlier, *(text for text, _, _ in measured)]
    shared = shared_with_earlier(texts)[len(earlier) :]
    cached = counted = 0.0
    for (text, own, served), chars in zip(measured, shared):
        total = served if served is not None else own
        template = max(total - own, 0)
        cached += template + (own * chars / len(text) if text else 0.0)
        counted += total
    return 100.0 * min(cached, counted) / counted if counted > 0 else None
