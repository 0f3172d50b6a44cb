"""The kept changes measured again on fresh launches: the published gains, and the closing test on the
recommendation.

A kept candidate came out high, which is partly why it was kept, and its reference came out low: any
figure computed from the launches that decided is biased upward (the winner's curse), and no correction
holds under every noise (heavy tails, a few degrees of freedom, several candidates picked from). Once
every stage is decided, the study therefore launches each configuration of its **path** — the baseline
and every stage's winner — again (sample splitting: these launches take part in no decision, so what
they show is unbiased whatever was selected), in a **mirrored block**: the path in a random order seeded
by the study, then the same order backwards without its last, ``A B C B A`` — every configuration but
the middle one launched twice, the middle one once, in the middle. Every configuration's launches then
have the same mean position in the block, so a drift of the host's speed that is linear over the block
(warming up, load from elsewhere) cancels from every comparison between them, instead of reading as a
gain; the random order spreads whatever is not linear. ``2k + 1`` launches for a path of ``k + 1``
configurations, one at a time in that order. From them:

- each kept stage **publishes** its winner's gain over the configuration it was kept over: the ratio of
  their fresh launches' means (equal mean positions: the drift cancels), divided by ``1 + CV²/n`` (``n``
  the reference's fresh launches: the ratio estimator's mean bias, Cochran 1977, §6.8, exact for
  log-normal launches), with the interval at the study's confidence on the study's spread;
- the recommendation faces a **closing test** against the baseline. A study of ``K`` stages, each
  keeping a change whose true gain is at most the minimum gain at most α of the time, recommends such a
  change only after some stage kept one (at most ``K·α``) *and* its fresh launches then show it above
  the minimum gain at one-sided level ``1/K`` (independent of what came before): at most α in all — the
  false-change rate of the whole study is within the one-sided α = (1 − confidence) / 2. A study of
  one stage needs no closing test (its stage's own test is the study's). When the closing test fails,
  the study recommends the baseline, and says why.

Pure: the plan calls it on every advance with the measurements so far and what it stored.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from perflab.engines.config import EngineConfig
from perflab.study.types import CandidatePlan, Confirmation, Measurement, Rules, StagePlan
from perflab.study.verdict import MIN_DF, Verdict, gain_of, one_sided_alpha


def block_order(path: Sequence[CandidatePlan], seed: int) -> tuple[str, ...]:
    """The confirmation block of ``path`` (fingerprints, one per launch, in launch order): the path's
    configurations in the random order of the study's ``seed``, then backwards without the last
    (``A B C B A``), so every configuration's launches have the same mean position."""
    fingerprints = [candidate.fingerprint for candidate in path if candidate.fingerprint is not None]
    order = [fingerprints[index] for index in np.random.default_rng(abs(seed)).permutation(len(fingerprints))]
    return (*order, *reversed(order[:-1]))


def closing_alpha(stages: int, confidence: float) -> float:
    """The one-sided level of the closing test of a study of ``stages`` stages: ``1/stages`` (1: none)."""
    del confidence  # the bound holds at any confidence: K stages × α each × 1/K = α
    return 1.0 if stages <= 1 else 1.0 / stages


def _fresh(measurement: Measurement | None, before: int, wanted: int) -> tuple[float, ...]:
    """The values of the launches after the block began (at most ``wanted``)."""
    if measurement is None:
        return ()
    return tuple(measurement.samples[before : before + wanted])


def fresh_gain(
    candidate: Sequence[float], reference: Sequence[float], cv_pct: float, higher_is_better: bool
) -> tuple[float, float]:
    """Fresh launches' values of a configuration against another's: the ratio of their means and the
    gain it makes (%). The ratio of two means overstates the ratio of the true values by a factor
    ``1 + CV²/n`` on average (``n``: the reference's launches; the ratio estimator's bias, Cochran 1977,
    §6.8; exact for log-normal launches), so the ratio is divided by it."""
    reference_values = np.asarray(reference, dtype=float)
    shrink = 1.0 + (cv_pct / 100.0) ** 2 / reference_values.size
    return gain_of(np.asarray(candidate, dtype=float) / shrink, reference_values, higher_is_better)


def _compare(
    candidate: Sequence[float], reference: Sequence[float], rules: Rules, alpha: float | None
) -> tuple[Verdict, bool]:
    """Fresh launches of one configuration against another's: the gain with its interval at the study's
    confidence, and whether it clears the minimum gain at one-sided level ``alpha`` (None: not tested)."""
    spread = rules.spread
    known = spread is not None and spread.known and spread.df >= MIN_DF
    counts = (len(candidate), len(reference))
    if not known:
        _, gain = gain_of(np.asarray(candidate), np.asarray(reference), not rules.lower_is_better)
        found = Verdict("noise_unknown", gain, math.inf, rules.confidence, *counts, spread_launches=None)
        return found, alpha is None or alpha >= 1.0
    assert spread is not None and spread.cv_pct is not None
    ratio, gain = fresh_gain(candidate, reference, spread.cv_pct, not rules.lower_is_better)
    se_pct = spread.cv_pct * ratio * math.sqrt(1.0 / counts[0] + 1.0 / counts[1])
    half_width = float(stats.t.isf(one_sided_alpha(rules.confidence), spread.df)) * se_pct
    passed = True
    if alpha is not None and alpha < 1.0:
        passed = gain - rules.min_gain * 100.0 > float(stats.t.isf(alpha, spread.df)) * se_pct
    outcome = "better" if passed else "within_noise"
    found = Verdict(
        outcome, gain, half_width, rules.confidence, *counts, df=spread.df, spread_launches=spread.launches
    )
    return found, passed


def _next_launch(order: Sequence[str], fresh: Mapping[str, Sequence[float]]) -> str | None:
    """The configuration of the block's first launch not measured yet (None: the block is measured)."""
    seen: dict[str, int] = {}
    for fingerprint in order:
        seen[fingerprint] = seen.get(fingerprint, 0) + 1
        if len(fresh[fingerprint]) < seen[fingerprint]:
            return fingerprint
    return None


def confirm(
    path: Sequence[CandidatePlan],
    stages: Sequence[StagePlan],
    measurements: Mapping[str, Measurement],
    rules: Rules,
    *,
    stored: Mapping[str, Any] | None,
    seed: int,
    stage_count: int,
) -> tuple[Confirmation, tuple[EngineConfig, ...]]:
    """The confirmation of ``path`` (the baseline, then each kept stage's winner) and the launch it
    needs next (one at a time, in the block's order); ``stored`` is what an earlier advance kept of it."""
    if stored:
        order = tuple(stored["order"])
        before = {str(key): int(value) for key, value in dict(stored["before"]).items()}
    else:
        order = block_order(path, seed)
        before = {
            candidate.fingerprint: len(measurements[candidate.fingerprint].samples)
            for candidate in path
            if candidate.fingerprint is not None and candidate.fingerprint in measurements
        }
    alpha = closing_alpha(stage_count, rules.confidence)
    pending = Confirmation(order, before, alpha=alpha, note="confirming the kept changes on fresh launches")
    by_fingerprint = {candidate.fingerprint: candidate for candidate in path}
    block_launches = Counter(order)  # each configuration's launches in the block, in first-launch order
    fresh = {
        fingerprint: _fresh(measurements.get(fingerprint), before.get(fingerprint, 0), wanted)
        for fingerprint, wanted in block_launches.items()
    }
    missing = _next_launch(order, fresh)
    failed = [
        by_fingerprint[fingerprint]
        for fingerprint, wanted in block_launches.items()
        if len(fresh[fingerprint]) < wanted
        and (found := measurements.get(fingerprint))
        and found.state == "failed"
    ]
    if failed:
        why = "; ".join(
            f"{candidate.label}: {measurements[candidate.fingerprint].error}" for candidate in failed
        )
        note = f"the kept changes could not be measured again ({why}); no change is recommended"
        return Confirmation(order, before, alpha=alpha, confirmed=False, note=note), ()
    if missing is not None:
        config = by_fingerprint[missing].config
        idle = all(_idle(measurements.get(fingerprint)) for fingerprint in order)
        return pending, (config,) if config is not None and idle else ()
    verdicts: dict[int, Verdict] = {}
    for stage in stages:
        winner = stage.winner
        if winner is None or winner.verdict is None or winner.fingerprint not in fresh:
            continue
        found, _ = _compare(fresh[winner.fingerprint], fresh[stage.reference.fingerprint], rules, None)
        counts = (found.n_candidate, found.n_reference)
        verdicts[stage.index] = winner.verdict.with_confirmation(found.gain_pct, found.half_width_pct, counts)
    best, baseline = path[-1], path[0]
    closing, passed = _compare(fresh[best.fingerprint], fresh[baseline.fingerprint], rules, alpha)
    if alpha >= 1.0:
        note = f"{best.label} measured again on fresh launches: {closing.text()}"
    elif passed:
        note = (
            f"{best.label} confirmed over {baseline.label} on fresh launches ({closing.text()}), above "
            f"the minimum gain at one-sided {alpha * 100:g} % (the closing test of {stage_count} stages)"
        )
    else:
        note = (
            f"the kept changes did not hold up on fresh launches ({best.label} against {baseline.label}: "
            f"{closing.text()}, not above the minimum gain at one-sided {alpha * 100:g} %); "
            f"no change is recommended"
        )
    return Confirmation(order, before, verdicts, closing, alpha, passed, note), ()


def _idle(measurement: Measurement | None) -> bool:
    """Whether no launch of it is in flight (its next launch may be queued)."""
    return measurement is None or measurement.state != "pending"


def stored_form(confirmation: Confirmation) -> dict[str, Any]:
    """What the plan keeps of the confirmation between advances (the order and where it began)."""
    return {"order": list(confirmation.order), "before": dict(confirmation.before)}
