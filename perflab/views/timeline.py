"""A benchmark's throughput and requests in flight over time, binned finely enough to read.

The bench's own series (``result["timeseries"]``) has one row per second, so a run shorter than a
few seconds is one or two points. When the per-request records are stored, the timeline is rebuilt
from them with a bin width chosen from the run's length (:func:`bin_width`: 10 ms to 1 min, about
:data:`TARGET_BINS` bins): each request's output tokens are spread evenly over its streamed chunks
(the first at TTFT, the others at its inter-token gaps), and each bin's requests in flight is the
largest overlap of the requests' [sent, ended) intervals within it. Imported summaries without records
keep the per-second series.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from perflab.bench.metrics import peak_in_flight

NICE_WIDTHS_S: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
TARGET_BINS = 40
COLUMNS = ("t", "output_tokens_per_s", "requests_in_flight")


@dataclass(frozen=True)
class Timeline:
    """Rows ``t`` (bin start, s), ``output_tokens_per_s`` and ``requests_in_flight``; ``bin_s`` wide."""

    frame: pd.DataFrame
    bin_s: float

    @property
    def empty(self) -> bool:
        return self.frame.empty


def bin_width(duration_s: float) -> float:
    """The smallest nice width that cuts ``duration_s`` into at most :data:`TARGET_BINS` bins."""
    for width in NICE_WIDTHS_S:
        if duration_s / width <= TARGET_BINS:
            return width
    return NICE_WIDTHS_S[-1]


def _token_arrivals(records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Times (s from the first dispatch) of every streamed chunk of the successful requests, and the
    output tokens each carries."""
    usable = records[
        records["success"].astype(bool)
        & np.isfinite(records["start_s"].to_numpy(dtype=float))
        & np.isfinite(records["ttft_ms"].to_numpy(dtype=float))
    ]
    if usable.empty:
        return np.empty(0), np.empty(0)
    gap_lists = [[float(gap) for gap in gaps or [] if gap is not None] for gaps in usable["itl_ms"]]
    chunks = np.fromiter((len(gaps) + 1 for gaps in gap_lists), dtype=np.int64, count=len(gap_lists))
    # Each request's offsets from its first chunk: a 0 then the running sum of its gaps.
    steps = np.fromiter(
        (step for gaps in gap_lists for step in (0.0, *gaps)), dtype=float, count=int(chunks.sum())
    )
    running = np.cumsum(steps)
    firsts = np.repeat(running[np.cumsum(chunks) - chunks], chunks)
    starts = np.repeat(usable["start_s"].to_numpy(dtype=float), chunks)
    ttfts = np.repeat(usable["ttft_ms"].to_numpy(dtype=float), chunks)
    times = starts + (ttfts + running - firsts) / 1000.0
    outputs = usable["output_tokens"].to_numpy(dtype=float)
    counts = np.where(np.isfinite(outputs), outputs, chunks)
    return times, np.repeat(counts / chunks, chunks)


def _in_flight_peaks(records: pd.DataFrame, bins: int, width: float) -> list[int]:
    """Per bin, the largest number of requests in flight at any instant in it."""
    spans = records.dropna(subset=["start_s", "e2el_ms"])
    starts = spans["start_s"].to_numpy(dtype=float)
    intervals = list(
        zip(starts.tolist(), (starts + spans["e2el_ms"].to_numpy(dtype=float) / 1000.0).tolist(), strict=True)
    )
    return peak_in_flight(intervals, [(index + 1) * width for index in range(bins)])


def from_records(records: pd.DataFrame) -> Timeline:
    """The timeline rebuilt from per-request records (empty when none has a start and a TTFT)."""
    times, tokens = _token_arrivals(records)
    ends = (records["start_s"] + records["e2el_ms"] / 1000.0).dropna().to_numpy(dtype=float)
    duration = float(max(times.max(initial=0.0), ends.max(initial=0.0)))
    if not len(times) or duration <= 0:
        return Timeline(pd.DataFrame(columns=list(COLUMNS)), 1.0)
    width = bin_width(duration)
    bins = max(1, math.ceil(duration / width - 1e-9))
    index = np.minimum((times / width).astype(int), bins - 1)
    per_bin = np.bincount(index, weights=tokens, minlength=bins)
    frame = pd.DataFrame(
        {
            "t": np.arange(bins) * width,
            "output_tokens_per_s": per_bin / width,
            "requests_in_flight": _in_flight_peaks(records, bins, width),
        }
    )
    return Timeline(frame, width)


def from_series(rows: list[dict]) -> Timeline:
    """The bench's per-second series as a timeline."""
    frame = pd.DataFrame([row for row in rows if isinstance(row, dict)])
    if frame.empty or "t" not in frame:
        return Timeline(pd.DataFrame(columns=list(COLUMNS)), 1.0)
    frame = frame.rename(columns={"output_tokens": "output_tokens_per_s"})
    return Timeline(frame[[column for column in COLUMNS if column in frame]], 1.0)
