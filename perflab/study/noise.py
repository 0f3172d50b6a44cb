"""Measured noise: how much one configuration's objective varies between repetitions and between launches.

A configuration measured on ``M`` launches with ``N`` repetitions each (after each launch's warm-up)
gives groups of values, one group per launch. :func:`estimate_spread` splits their variation the classic
one-way random-effects way (analysis of variance): the within-launch mean square estimates the
run-to-run variance; the between-launch mean square, less its share of run-to-run variance, estimates
the launch-to-launch variance (clipped at zero). Both are coefficients of variation (% of the mean), so
a spread measured on one configuration carries over to others on the same host, model and engine:
:meth:`Spread.per_launch_cv_pct` is the CV of one launch's mean of ``N`` repetitions, the spread that
:func:`perflab.study.verdict.judge` takes as ``prior_cv_pct``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy import stats

from perflab.study.verdict import MIN_DF, pooled_cv, too_little_text


@dataclass(frozen=True)
class Spread:
    """Run-to-run and launch-to-launch coefficients of variation (%), with the launches and
    repetitions they were measured on."""

    run_cv_pct: float
    launch_cv_pct: float
    launches: int
    repetitions: int

    def per_launch_cv_pct(self, repeats: int) -> float:
        """The CV of one launch's mean over ``repeats`` repetitions."""
        return math.sqrt(self.launch_cv_pct**2 + self.run_cv_pct**2 / max(repeats, 1))

    @property
    def df(self) -> int:
        """Degrees of freedom behind the launch-to-launch part (launches − 1)."""
        return max(self.launches - 1, 0)

    def text(self) -> str:
        """``run CV 2.0 %, launch CV 1.1 % (4 launches, 12 runs)``."""
        return (
            f"run CV {self.run_cv_pct:.1f} %, launch CV {self.launch_cv_pct:.1f} % "
            f"({self.launches} launches, {self.repetitions} runs)"
        )


def estimate_spread(groups: Sequence[Sequence[float]]) -> Spread | None:
    """The spread of ``groups`` (one group of values per launch); None when there are fewer than two
    values in all or a value is not positive."""
    launches = [np.asarray(list(group), dtype=float) for group in groups if len(group)]
    values = np.concatenate(launches) if launches else np.array([])
    if values.size < 2 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        return None
    grand = values.mean()
    relative = [group / grand for group in launches]
    within_df = sum(group.size - 1 for group in relative)
    squares = sum(float(((group - group.mean()) ** 2).sum()) for group in relative)
    within_ms = squares / within_df if within_df else 0.0
    launch_var = 0.0
    if len(relative) >= 2:
        means = np.array([group.mean() for group in relative])
        sizes = np.array([group.size for group in relative], dtype=float)
        between_ms = float((sizes * (means - 1.0) ** 2).sum()) / (len(relative) - 1)
        # the effective group size of an unbalanced one-way layout
        n0 = (sizes.sum() - (sizes**2).sum() / sizes.sum()) / (len(relative) - 1)
        launch_var = max((between_ms - within_ms) / n0, 0.0) if within_df else between_ms
    return Spread(
        run_cv_pct=math.sqrt(within_ms) * 100.0,
        launch_cv_pct=math.sqrt(launch_var) * 100.0,
        launches=len(relative),
        repetitions=int(values.size),
    )


# A reused spread is pooled only when today's launches show, at this one-sided level, that they vary less
# than REUSE_MARGIN times its CV (the upper confidence bound of today's CV over the reused one below it).
REUSE_TEST_ALPHA = 0.10
REUSE_MARGIN = 1.5


@dataclass(frozen=True)
class ReusedSpread:
    """A spread an earlier study measured: the CV of one launch's value (%), on ``df`` degrees of
    freedom, where and when (``study_id``, ``measured_at`` as ISO text) and on what (``matched``: host,
    engine, engine version, model, tuning profile and runs per launch)."""

    cv_pct: float
    df: int
    study_id: int
    measured_at: str | None = None
    matched: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "matched": dict(self.matched)}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> ReusedSpread:
        matched = data.get("matched") or {}
        return cls(
            cv_pct=float(data["cv_pct"]),  # type: ignore[arg-type]
            df=int(data["df"]),  # type: ignore[call-overload]
            study_id=int(data["study_id"]),  # type: ignore[call-overload]
            measured_at=data.get("measured_at"),  # type: ignore[arg-type]
            matched=tuple(sorted((str(k), str(v)) for k, v in dict(matched).items())),  # type: ignore[call-overload]
        )


@dataclass(frozen=True)
class StudySpread:
    """The spread a study's verdicts use: the CV of one launch's value (%) on ``df`` degrees of freedom
    (``cv_pct`` None: unknown), what today's launches measured (pooled over ``configurations``
    configurations measured on two launches or more, ``launches`` launches in all), and whether a
    reused spread was pooled in."""

    cv_pct: float | None
    df: float
    measured_cv_pct: float | None
    measured_df: int
    configurations: int
    launches: int = 0
    reused: ReusedSpread | None = None
    reuse: str = "not offered"  # "pooled", "refused", "given" or "not offered"
    reuse_reason: str | None = None

    @classmethod
    def given(cls, cv_pct: float) -> StudySpread:
        """A spread stated rather than measured (a search's ``noise_cv_pct``), taken as known."""
        return cls(cv_pct, math.inf, None, 0, 0, reuse="given", reuse_reason="stated in the spec")

    @property
    def known(self) -> bool:
        return self.cv_pct is not None and self.df > 0

    def text(self) -> str:
        """``CV 2.3 % per launch on 6 df (measured: 2.3 % on 6 df over 4 configurations)`` and the reuse."""
        if self.reuse == "given":
            return f"CV {self.cv_pct:.1f} % per launch, stated in the spec (taken as known)"
        if not self.known:
            head = "noise unknown (no configuration measured on two launches yet)"
        elif self.df < MIN_DF:
            head = too_little_text(self.launches)
        else:
            head = f"CV {self.cv_pct:.1f} % per launch on {self.df:g} df"
        measured = (
            f"measured today: {self.measured_cv_pct:.1f} % on {self.measured_df} df over "
            f"{self.configurations} configuration(s)"
            if self.measured_cv_pct is not None
            else "nothing measured twice today"
        )
        parts = [head, measured]
        if self.reused is not None:
            source = f"study {self.reused.study_id}" + (
                f", measured {self.reused.measured_at[:10]}" if self.reused.measured_at else ""
            )
            reused = f"{self.reused.cv_pct:.1f} % on {self.reused.df} df from {source}"
            parts.append(
                f"reused {reused}"
                if self.reuse == "pooled"
                else f"not reused ({reused}): {self.reuse_reason}"
            )
        return "; ".join(parts)

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["reused"] = self.reused.to_dict() if self.reused is not None else None
        data["text"] = self.text()
        return data


def reuse_bound(measured_cv_pct: float, measured_df: int, reused: ReusedSpread) -> float:
    """The upper one-sided (1 − :data:`REUSE_TEST_ALPHA`) confidence bound of today's CV over the reused
    one, from the F distribution of the ratio of their variances (Snedecor's F on ``measured_df`` and
    the reused df)."""
    if reused.cv_pct <= 0 or reused.df <= 0:
        return math.inf
    ratio = (measured_cv_pct / reused.cv_pct) ** 2
    return math.sqrt(ratio / float(stats.f.ppf(REUSE_TEST_ALPHA, measured_df, reused.df)))


def study_spread(
    groups: Sequence[Sequence[float]], reused: ReusedSpread | None = None, refused: str | None = None
) -> StudySpread:
    """The per-launch spread of a study from each configuration's launch values, pooled (each relative
    to its own mean), with ``reused`` pooled in by degrees of freedom only where today's launches show
    it is not much quieter than they are: the upper confidence bound of today's CV over the reused one
    (:func:`reuse_bound`) must lie within :data:`REUSE_MARGIN` — a test of the reused spread's
    equivalence with real power against a quieter one (a spread a third of today's passes it at most
    1.4 % of the time), checked again at every look. Today's launches must give at least
    :data:`~perflab.study.verdict.MIN_DF` degrees of freedom first: fewer cannot bound today's spread,
    so they cannot vouch for a reused one. ``refused`` names a reason not to use it at all."""
    usable = [group for group in groups if len(group) >= 2]
    cv, df = pooled_cv(usable)
    measured = cv * 100.0 if df else None
    launches = sum(len(group) for group in usable)
    own = StudySpread(measured, float(df), measured, df, len(usable), launches)
    if reused is None:
        return own
    if refused is not None:
        return replace(own, reused=reused, reuse="refused", reuse_reason=refused)
    if df < MIN_DF or measured is None:
        today = "no configuration measured twice today" if df == 0 else f"today's launches give {df} df"
        why = f"{today}: too little to check it against (at least {MIN_DF} df)"
        return replace(own, reused=reused, reuse="refused", reuse_reason=why)
    bound = reuse_bound(measured, df, reused)
    if bound > REUSE_MARGIN:
        why = (
            f"today's launches cannot show they vary less than {REUSE_MARGIN:g}× its CV (today "
            f"{measured:.1f} % on {df} df; upper {100 * (1 - REUSE_TEST_ALPHA):g} % bound {bound:.2f}×)"
        )
        return replace(own, reused=reused, reuse="refused", reuse_reason=why)
    pooled = math.sqrt((df * measured**2 + reused.df * reused.cv_pct**2) / (df + reused.df))
    return replace(own, cv_pct=pooled, df=float(df + reused.df), reused=reused, reuse="pooled")
