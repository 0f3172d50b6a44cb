"""What a prediction says of one configuration, as stored and shown: AIConfigurator's figures, perflab's
simulator's figures for the same case, and whether the two disagree.

Figures are per accelerator (output tokens/s, requests/s) and per request (mean TPOT, mean TTFT), so
they compare across layouts of one budget; :meth:`Prediction.values` turns them into the result fields a
study judges (node totals, over the configuration's ``gpus``), for the search's seeding and
pre-screening. Two predictors **disagree** when, on output tokens/s per accelerator or on mean TPOT,
one's figure is more than :data:`DISAGREEMENT_FACTOR` times the other's, either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

DISAGREEMENT_FACTOR = 1.5
_FIGURES = ("output_tps_per_gpu", "requests_per_s_per_gpu", "mean_tpot_ms", "mean_ttft_ms")


@dataclass(frozen=True)
class PredictedFigures:
    """One predictor's figures for one configuration."""

    output_tps_per_gpu: float
    requests_per_s_per_gpu: float
    mean_tpot_ms: float
    mean_ttft_ms: float

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any] | None) -> PredictedFigures | None:
        if not isinstance(stored, Mapping):
            return None
        try:
            return cls(**{name: float(stored[name]) for name in _FIGURES})
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Prediction:
    """A configuration's prediction: AIConfigurator's ``figures`` (None with ``error``: it ran and gave
    none), the ``simulated`` figures of perflab's simulator, the case's accelerators, input and output
    lengths, the tables it followed (``vLLM 0.24.0``), how long it took, and the knobs it ignored."""

    gpus: int
    isl: int
    osl: int
    tables: str
    seconds: float
    figures: PredictedFigures | None = None
    simulated: PredictedFigures | None = None
    error: str | None = None
    ignored: tuple[str, ...] = ()

    def disagreement(self) -> str | None:
        """``AIConfigurator 1337 vs perflab's simulator 612 tok/s/GPU (2.2×)``, or None when they agree
        within :data:`DISAGREEMENT_FACTOR` (or one of them has no figures)."""
        if self.figures is None or self.simulated is None:
            return None
        found = []
        for name, unit in (("output_tps_per_gpu", "tok/s/GPU"), ("mean_tpot_ms", "ms TPOT")):
            ours, theirs = getattr(self.figures, name), getattr(self.simulated, name)
            if ours <= 0 or theirs <= 0:
                continue
            ratio = max(ours / theirs, theirs / ours)
            if ratio > DISAGREEMENT_FACTOR:
                found.append(f"{ours:,.0f} vs {theirs:,.0f} {unit} ({ratio:.1f}×)")
        return "AIConfigurator vs perflab's simulator: " + "; ".join(found) if found else None

    def values(self) -> dict[str, float]:
        """AIConfigurator's figures as the result fields a study judges (node totals over ``gpus``)."""
        if self.figures is None:
            return {}
        output = self.figures.output_tps_per_gpu * self.gpus
        requests = self.figures.requests_per_s_per_gpu * self.gpus
        return {
            "output_throughput": output,
            "request_throughput": requests,
            "total_token_throughput": requests * (self.isl + self.osl),
            "mean_tpot_ms": self.figures.mean_tpot_ms,
            "mean_ttft_ms": self.figures.mean_ttft_ms,
        }

    def to_dict(self) -> dict[str, Any]:
        stored = asdict(self)
        stored["ignored"] = list(self.ignored)
        return stored

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> Prediction | None:
        """The stored prediction, or None when it cannot be read (never a guess)."""
        try:
            return cls(
                gpus=int(stored["gpus"]),
                isl=int(stored["isl"]),
                osl=int(stored["osl"]),
                tables=str(stored["tables"]),
                seconds=float(stored["seconds"]),
                figures=PredictedFigures.from_dict(stored.get("figures")),
                simulated=PredictedFigures.from_dict(stored.get("simulated")),
                error=None if stored.get("error") is None else str(stored["error"]),
                ignored=tuple(str(knob) for knob in stored.get("ignored") or ()),
            )
        except (KeyError, TypeError, ValueError):
            return None
