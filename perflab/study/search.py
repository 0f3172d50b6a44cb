"""The search: which configuration to launch next, when to stop, and which one to recommend.

Pure and deterministic, so the coordinator can call it on every advance and keep nothing in memory:

- :func:`rebuild` re-creates an in-memory Optuna study from the stored trials (``add_trial``), with a
  sampler seeded from the search's seed plus the number of trials, so the same history always gives
  the same proposal (a resumed study proposes what an uninterrupted one would have). One objective:
  constrained expected improvement on Gaussian processes (:mod:`perflab.study.search_sampler`); two:
  NSGA-II.
- Infeasible points (the engine refused or could not start the configuration: OOM, bad value,
  unsupported kernel; or it broke an SLO) are told to the sampler as constraint violations, so it
  steers away from their region; one that broke an SLO was measured, and with one objective its
  objective's model learns the value (its screening's, when the screening broke it), so the model knows
  how the objective rises towards the limit. A trial the infrastructure kept from being measured is
  never told.
- :func:`step` proposes one configuration at a time: a proposal whose configuration was tried already
  (same :meth:`~perflab.engines.config.EngineConfig.fingerprint`), by the search or before it, is told
  its earlier result and not launched again; one that cannot be built is told as infeasible without a
  launch. Every proposal counts, whatever its outcome: the search stops once every point of its space
  was proposed, or after :data:`MAX_WITHOUT_LAUNCH` proposals in a row that launched nothing, so one
  step proposes at most that many.
- :func:`promising` says whether a screened configuration (a fraction of the tuning prompts) earns the
  full profile: not when its screening breaks an SLO; else by Optuna's percentile pruner over the
  screening results of the feasible trials so far.
- the final pick, once the search has stopped, is :func:`perflab.study.finalists.final_pick`'s.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import optuna
from optuna.pruners import PercentilePruner
from optuna.samplers import NSGAIISampler
from optuna.trial import TrialState, create_trial

from perflab.engines.config import EngineConfig
from perflab.study.predictions import Prediction, Predictor
from perflab.study.search_sampler import MEASURED, ConstrainedGPSampler, space_points
from perflab.study.search_space import LATENCY_OBJECTIVES, MAX_SEED, SearchSpec

TrialStatus = Literal["pending", "screened", "complete", "pruned", "infeasible", "unmeasured"]
# Proposals in a row that launch nothing (tried, measured before the search, or not buildable) before
# the space counts as exhausted.
MAX_WITHOUT_LAUNCH = 40
# Screening keeps a configuration whose screening value is in the better (100 - this) percent.
PRUNE_PERCENTILE = 50.0

optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass(frozen=True)
class Trial:
    """One proposal: its parameters, configuration fingerprint and, from the measurements, its outcome.

    ``refused`` is why its configuration could not be built (never launched); ``repeat_of`` the number
    of an earlier trial with the same configuration (not launched again); ``earlier`` marks a
    configuration measured before the search (its run is reused, not launched again). ``values`` are
    the full profile's objective values (means over its launches), ``samples`` every measurement of the
    first objective (re-measurements for the final pick included), ``violation`` how far the worst SLO
    is exceeded (> 0: infeasible). ``screening_short`` says why the screening result is too short to
    judge (it is shown, but prunes nothing and is told to no pruner). ``prescreened`` is why a
    prediction kept it from being launched (:mod:`perflab.study.predictions`).
    """

    number: int
    params: Mapping[str, Any]
    fingerprint: str | None
    refused: str | None = None
    repeat_of: int | None = None
    earlier: bool = False
    status: TrialStatus = "pending"
    screening: float | None = None
    values: tuple[float, ...] | None = None
    samples: tuple[float, ...] = ()
    violation: float = 0.0
    accelerators: int | None = None
    batch: int | None = None
    note: str | None = None
    screening_short: str | None = None
    prescreened: str | None = None

    @property
    def launched(self) -> bool:
        return self.refused is None and self.repeat_of is None and not self.earlier and not self.prescreened

    @property
    def point(self) -> tuple[tuple[str, Any], ...]:
        """The point of the space it proposed."""
        return tuple(sorted(self.params.items()))

    def stored(self) -> dict[str, Any]:
        """What ``study.state`` keeps of the trial (its outcome is read from the runs each time)."""
        return {
            "number": self.number,
            "params": dict(self.params),
            "fingerprint": self.fingerprint,
            "refused": self.refused,
            "repeat_of": self.repeat_of,
            "earlier": self.earlier,
            "prescreened": self.prescreened,
        }


@dataclass(frozen=True)
class Observation:
    """What the runs of one configuration have shown (from the coordinator or a benchmark harness)."""

    status: TrialStatus
    screening: float | None = None
    values: tuple[float, ...] | None = None
    samples: tuple[float, ...] = ()
    violation: float = 0.0
    note: str | None = None
    screening_short: str | None = None


@dataclass(frozen=True)
class SearchStep:
    """The trials after one step (new proposals appended) and why the search stopped, if it did."""

    trials: tuple[Trial, ...]
    stop: str | None = None

    @property
    def proposed(self) -> list[Trial]:
        return [trial for trial in self.trials if trial.launched and trial.status == "pending"]


def directions(objectives: Sequence[str]) -> list[str]:
    """Optuna's direction of each objective (latencies down, throughputs up)."""
    return ["minimize" if name in LATENCY_OBJECTIVES else "maximize" for name in objectives]


def with_outcomes(trials: Sequence[Trial], observations: Mapping[str, Observation]) -> list[Trial]:
    """The trials with their outcomes: a launched trial's (or one measured before the search) from its
    configuration's observation, a repeat's from the trial it repeats, a refused one infeasible."""
    done: dict[int, Trial] = {}
    for trial in trials:
        if trial.refused is not None or trial.prescreened is not None:
            trial = replace(trial, status="infeasible", note=trial.refused or trial.prescreened)
        elif trial.repeat_of is not None and trial.repeat_of in done:
            earlier = done[trial.repeat_of]
            trial = replace(
                earlier,
                number=trial.number,
                params=trial.params,
                repeat_of=trial.repeat_of,
                note=f"same configuration as trial {trial.repeat_of}; not launched again",
            )
        else:
            seen = observations.get(trial.fingerprint or "")
            if seen is not None:
                trial = replace(
                    trial,
                    status=seen.status,
                    screening=seen.screening,
                    values=seen.values,
                    samples=seen.samples,
                    violation=seen.violation,
                    note=seen.note,
                    screening_short=seen.screening_short,
                )
            if trial.earlier:
                trial = replace(trial, note="measured before the search; its run is reused")
        done[trial.number] = trial
    return [done[trial.number] for trial in trials]


def _sampler(spec: SearchSpec, objectives: int, seed: int) -> optuna.samplers.BaseSampler:
    """Constrained Bayesian optimization for one objective, NSGA-II for two; both read each trial's
    ``constraints`` (Optuna 5)."""
    if objectives == 1:
        return ConstrainedGPSampler(
            spec.distributions(), seed=seed, startup=spec.startup_trials, embeddings=spec.embeddings()
        )
    return NSGAIISampler(seed=seed, population_size=max(4, spec.startup_trials))


def _told(trial: Trial, spec: SearchSpec, worst: list[float]) -> optuna.trial.FrozenTrial | None:
    """The trial as the sampler sees it; None for one it must not be told (pending, unmeasured)."""
    distributions = spec.distributions()
    sampled = spec.to_sampler(dict(trial.params))
    params = {name: sampled[name] for name in distributions if name in sampled}
    judged = trial.screening is not None and trial.screening_short is None
    intermediate = {0: trial.screening} if judged else None
    infeasible = trial.status == "infeasible"
    # an infeasible trial's violation is its SLO excess (1, twice the limit, for an engine that failed);
    # a feasible one's is its margin (<= 0), which the constraint's model learns from too
    violation = (trial.violation if trial.violation > 0 else 1.0) if infeasible else trial.violation
    # a configuration that broke an SLO at its screening was measured there: with one objective, the
    # objective's model learns that value (where the objective rises beyond the limit); an engine that
    # failed or a configuration never launched measured nothing and is told a stand-in
    screened = infeasible and trial.violation > 0 and judged and len(worst) == 1
    if trial.status == "pruned":
        return create_trial(
            state=TrialState.PRUNED,
            params=params,
            distributions=distributions,
            intermediate_values=intermediate,
            constraints={"violation": violation},
        )
    if infeasible or (trial.status == "complete" and trial.values is not None):
        if screened:
            values = [trial.screening]
        elif infeasible:
            values = list(worst)
        else:
            values = list(trial.values or ())
        return create_trial(
            values=values,
            params=params,
            user_attrs={MEASURED: screened or not infeasible},
            distributions=distributions,
            intermediate_values=intermediate,
            constraints={"violation": violation},
        )
    return None


def rebuild(spec: SearchSpec, objectives: Sequence[str], trials: Sequence[Trial]) -> optuna.Study:
    """An in-memory Optuna study holding every told trial, its sampler seeded by seed + trial count."""
    ways = directions(objectives)
    study = optuna.create_study(
        directions=ways,
        sampler=_sampler(spec, len(ways), (spec.seed + len(trials)) % (MAX_SEED + 1)),
        pruner=PercentilePruner(100.0 - PRUNE_PERCENTILE, n_startup_trials=2, n_min_trials=2),
    )
    measured = [trial.values for trial in trials if trial.status == "complete" and trial.values]
    worst = [
        (max if way == "minimize" else min)((values[index] for values in measured), default=0.0)
        for index, way in enumerate(ways)
    ]
    for trial in trials:
        frozen = _told(trial, spec, worst)
        if frozen is not None:
            study.add_trial(frozen)
    return study


def feasible(trial: Trial) -> bool:
    """Whether a trial was measured in full and met every SLO."""
    return trial.status == "complete" and bool(trial.values) and trial.violation <= 0.0


def stop_reason(
    spec: SearchSpec,
    objectives: Sequence[str],
    trials: Sequence[Trial],
    *,
    gpu_hours: float = 0.0,
    min_gain_pct: float = 1.0,
) -> str | None:
    """Why the search proposes nothing more (None while it goes on)."""
    launches = sum(1 for trial in trials if trial.launched)
    if spec.budget.launches is not None and launches >= spec.budget.launches:
        return f"budget: {launches} launches of {spec.budget.launches}"
    if spec.budget.gpu_hours is not None and gpu_hours >= spec.budget.gpu_hours:
        return f"budget: {gpu_hours:.2f} GPU-hours of {spec.budget.gpu_hours:g}"
    if len({trial.point for trial in trials}) >= spec.size():
        return f"every configuration of the space ({spec.size()}) was tried"
    if _without_launch_in_a_row(trials) >= MAX_WITHOUT_LAUNCH:
        return (
            f"the last {MAX_WITHOUT_LAUNCH} proposals launched nothing (tried before, measured before "
            "the search, or not buildable)"
        )
    if spec.patience is not None:
        since = _launches_since_gain(trials, objectives, min_gain_pct)
        if since is not None and since >= spec.patience:
            return f"no gain of {min_gain_pct:g}% in the last {since} launches"
    return None


def _without_launch_in_a_row(trials: Sequence[Trial]) -> int:
    count = 0
    for trial in reversed(trials):
        if trial.launched:
            break
        count += 1
    return count


def _launches_since_gain(
    trials: Sequence[Trial], objectives: Sequence[str], min_gain_pct: float
) -> int | None:
    sign = -1.0 if directions(objectives)[0] == "minimize" else 1.0
    best: float | None = None
    since = 0
    for trial in trials:
        if not trial.launched:
            continue
        since += 1
        if feasible(trial):
            value = sign * trial.values[0]
            if best is None or value > best + abs(best) * min_gain_pct / 100.0:
                best, since = value, 0
    return since if best is not None else None


def step(
    spec: SearchSpec,
    objectives: Sequence[str],
    trials: Sequence[Trial],
    build: Callable[[dict[str, Any]], EngineConfig],
    *,
    gpu_hours: float = 0.0,
    min_gain_pct: float = 1.0,
    propose: bool = True,
    earlier: Mapping[str, Observation] | None = None,
    predict: Predictor | None = None,
    slos: Mapping[str, float] | None = None,
    stopped: str | None = None,
) -> SearchStep:
    """Propose the next configuration once every launched trial has its outcome (with ``propose``
    false, only say whether the search has stopped).

    ``build`` turns a point's parameters into a configuration, raising ``ValueError`` with the reason
    for one that cannot be launched (told as infeasible). ``earlier`` holds what configurations measured
    before the search showed, by fingerprint; at the first step, those that are points of the space
    become its first trials (not launches), so the sampler learns them before it proposes. Trials must
    carry their outcomes (:func:`with_outcomes`). The loop is bounded: each proposal that launches
    nothing brings a stop (:func:`stop_reason`) closer. With ``predict``, predictions seed the first
    proposals and pre-screen the others under ``slos`` (:mod:`perflab.study.predictions`). A search that
    ``stopped`` before stays stopped for that reason, whatever its trials' outcomes have become
    since."""
    if stopped is not None:
        return SearchStep(tuple(trials), stopped)
    earlier = earlier or {}
    predicted = _predicted(spec, build, predict) if predict is not None else {}
    trials = list(trials)
    if any(trial.status in ("pending", "screened") for trial in trials):
        return SearchStep(tuple(trials))
    if not trials and earlier and propose:
        trials = _measured_before(spec, build, earlier)
    by_fingerprint = {trial.fingerprint: trial for trial in trials if trial.launched}
    while True:
        reason = stop_reason(spec, objectives, trials, gpu_hours=gpu_hours, min_gain_pct=min_gain_pct)
        if reason is not None or not propose:
            return SearchStep(tuple(trials), reason)
        study = rebuild(spec, objectives, trials)
        seed = _best_predicted(spec, objectives, trials, predicted, slos or {})
        if seed is not None:
            study.enqueue_trial(spec.to_sampler(seed))
        asked = study.ask(spec.distributions())
        params = spec.from_sampler(dict(asked.params))
        number = len(trials)
        prediction = predicted.get(_point(params))
        why = prediction.prescreen(slos or {}) if prediction is not None and seed is None else None
        if why is not None:
            trials.append(Trial(number, params, None, prescreened=why, status="infeasible", note=why))
            continue
        try:
            config = build(params)
        except ValueError as error:
            trials.append(
                Trial(number, params, None, refused=str(error), status="infeasible", note=str(error))
            )
            continue
        fingerprint = config.fingerprint()
        tried = by_fingerprint.get(fingerprint)
        if tried is not None:
            repeat = Trial(number, params, fingerprint, repeat_of=tried.number)
            trials.append(with_outcomes([tried, repeat], {})[1])
            continue
        if fingerprint in earlier:
            trials.append(with_outcomes([Trial(number, params, fingerprint, earlier=True)], earlier)[0])
            continue
        proposal = Trial(
            number, params, fingerprint, accelerators=config.gpus_needed, batch=config.max_num_seqs
        )
        trials.append(proposal)
        return SearchStep(tuple(trials))


def _measured_before(
    spec: SearchSpec, build: Callable[[dict[str, Any]], EngineConfig], earlier: Mapping[str, Observation]
) -> list[Trial]:
    """The points of the space whose configuration was measured before the search, as its first trials
    (not launches): the sampler learns from them before it proposes anything."""
    found: dict[str, dict[str, Any]] = {}
    for params, config in _buildable(spec, build):
        fingerprint = config.fingerprint()
        if fingerprint in earlier:
            found.setdefault(fingerprint, params)
    trials = [Trial(number, params, fp, earlier=True) for number, (fp, params) in enumerate(found.items())]
    return with_outcomes(trials, earlier)


def _buildable(
    spec: SearchSpec, build: Callable[[dict[str, Any]], EngineConfig]
) -> Iterator[tuple[dict[str, Any], EngineConfig]]:
    """Each point of the space (as :func:`space_points` gives them) whose configuration can be built."""
    for sampled in space_points(spec.distributions(), spec.seed):
        params = spec.from_sampler(sampled)
        try:
            config = build(params)
        except ValueError:
            continue
        yield params, config


def _point(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(params.items()))


def _predicted(
    spec: SearchSpec, build: Callable[[dict[str, Any]], EngineConfig], predict: Predictor
) -> dict[tuple[tuple[str, Any], ...], Prediction]:
    """The predictor's figures for each buildable point of the space it covers."""
    found = {}
    for params, config in _buildable(spec, build):
        prediction = predict(config)
        if prediction is not None:
            found[_point(params)] = prediction
    return found


def _best_predicted(
    spec: SearchSpec,
    objectives: Sequence[str],
    trials: Sequence[Trial],
    predicted: Mapping[tuple[tuple[str, Any], ...], Prediction],
    slos: Mapping[str, float],
) -> dict[str, Any] | None:
    """The untried point with the best predicted objective among those predicted to meet the SLOs,
    while fewer than ``startup_trials`` configurations were launched; None after, or without one."""
    if sum(1 for trial in trials if trial.launched) >= spec.startup_trials:
        return None
    tried = {trial.point for trial in trials}
    name = objectives[0]
    sign = -1.0 if directions(objectives)[0] == "minimize" else 1.0
    ranked = sorted(
        (
            (-sign * prediction.values[name], point)
            for point, prediction in predicted.items()
            if point not in tried and name in prediction.values and prediction.meets(slos)
        ),
        key=lambda item: (item[0], repr(item[1])),
    )
    return dict(ranked[0][1]) if ranked else None


def promising(spec: SearchSpec, objectives: Sequence[str], trials: Sequence[Trial], number: int) -> bool:
    """Whether trial ``number`` (screened, full profile not yet run) earns the full profile. A screening
    that breaks an SLO does not; one that meets them is judged by Optuna's percentile pruner against the
    screening values of the feasible trials before it only (an infeasible configuration's fast
    screening raises no bar)."""
    candidate = next(trial for trial in trials if trial.number == number)
    if candidate.violation > 0:
        return False
    if candidate.screening is None or candidate.screening_short is not None or spec.screening >= 1.0:
        return True
    earlier = [
        trial
        for trial in trials
        if trial.number != number and trial.violation <= 0 and trial.status != "infeasible"
    ]
    study = rebuild(spec, objectives, earlier)
    distributions = spec.distributions()
    sampled = spec.to_sampler(dict(candidate.params))
    params = {name: sampled[name] for name in distributions if name in sampled}
    running = create_trial(
        state=TrialState.RUNNING,
        params=params,
        distributions=distributions,
        intermediate_values={0: candidate.screening},
    )
    study.add_trial(running)
    frozen = study.get_trials(deepcopy=False)[-1]
    return not study.pruner.prune(study, frozen)


def pareto_front(trials: Sequence[Trial], objectives: Sequence[str]) -> list[Trial]:
    """The feasible launched trials no other one beats on every objective."""
    signs = [-1.0 if way == "minimize" else 1.0 for way in directions(objectives)]
    points = [trial for trial in trials if trial.launched and feasible(trial)]

    def dominates(a: Trial, b: Trial) -> bool:
        pairs = [(s * x, s * y) for s, x, y in zip(signs, a.values, b.values, strict=True)]
        return all(x >= y for x, y in pairs) and any(x > y for x, y in pairs)

    return [point for point in points if not any(dominates(other, point) for other in points)]


def convergence(
    trials: Sequence[Trial], objectives: Sequence[str], hours: Mapping[int, float]
) -> list[dict[str, Any]]:
    """Best-so-far of the first objective against launches and cumulative GPU-hours (``hours`` by
    trial number), one point per launched trial."""
    sign = -1.0 if directions(objectives)[0] == "minimize" else 1.0
    best: float | None = None
    spent = 0.0
    points = []
    launches = 0
    for trial in trials:
        if not trial.launched:
            continue
        launches += 1
        spent += hours.get(trial.number, 0.0)
        if feasible(trial) and (best is None or sign * trial.values[0] > sign * best):
            best = trial.values[0]
        points.append({"launches": launches, "gpu_hours": spent, "best": best, "trial": trial.number})
    return points


def importances(spec: SearchSpec, objectives: Sequence[str], trials: Sequence[Trial]) -> dict[str, float]:
    """How much each knob mattered to the first objective (Optuna's PED-ANOVA evaluator); empty with
    fewer than two feasible trials or a single knob."""
    study = rebuild(spec, objectives, [trial for trial in trials if feasible(trial)])
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    if len(complete) < 2 or len(spec.distributions()) < 2:
        return {}
    sign = -1.0 if directions(objectives)[0] == "maximize" else 1.0  # PED-ANOVA looks for low targets
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PED-ANOVA's note that it ranks low targets
        found = optuna.importance.get_param_importances(
            study,
            target=lambda trial: sign * trial.values[0],
            evaluator=optuna.importance.PedAnovaImportanceEvaluator(),
        )
    return dict(found)
