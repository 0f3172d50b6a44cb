"""Predictions before measurements: what a predictor expects of a configuration, and how a search uses it.

A **predictor** is a callable ``EngineConfig -> Prediction | None`` (None: it does not cover that
configuration, e.g. an unlisted model or an accelerator it has no tables for). A
:class:`Prediction` holds predicted result fields (the objective's, e.g. ``total_token_throughput``,
and the SLOs', e.g. ``mean_tpot_ms``) or an ``infeasible`` verdict (the configuration would not start:
out of memory, an unsupported kernel). The search (:func:`perflab.study.search.step`, given
``predict``) uses predictions in two ways only, and never as measurements — no predicted figure is a
trial's value, a finalist, a verdict or a published number:

- **seeding**: while the search has launched fewer than ``startup_trials`` configurations, its next
  proposal is the untried point with the best predicted objective among those predicted to meet the
  SLOs (Optuna's ``enqueue_trial``), instead of a random one;
- **pre-screening**: a proposal predicted infeasible, or predicted to break an SLO by more than
  :data:`PRESCREEN_FACTOR` × its limit, is not launched; it is recorded as "predicted infeasible" and
  told to the sampler as a constraint violation, so it steers away from that region.

The search calls the predictor for every point of its space on every advance, so a slow predictor is
wrapped in :func:`cached`. :func:`simulator_predictor` is one predictor: perflab's own offline simulator
(:func:`perflab.sim.offline.simulate`) run on a burst of the tuning profile's prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from perflab.engines.config import EngineConfig
from perflab.predict.case import NotCovered, sim_deployment
from perflab.predict.simulated import SOURCE, simulate_burst
from perflab.sim.failures import EngineFailure

# A prediction breaks an SLO for the pre-screen only past this multiple of its limit: predictors err
# by 10-40 % on latencies, and a configuration near the limit is worth a measurement.
PRESCREEN_FACTOR = 1.25


@dataclass(frozen=True)
class Prediction:
    """A predictor's figures for one configuration (result field → value), or why it cannot run."""

    values: Mapping[str, float] = field(default_factory=dict)
    infeasible: str | None = None
    source: str = ""

    def prescreen(self, slos: Mapping[str, float]) -> str | None:
        """Why the search need not launch the configuration (None: launch it when proposed)."""
        if self.infeasible is not None:
            return f"predicted infeasible by {self.source}: {self.infeasible}"
        broken = [
            f"{name} {self.values[name]:.4g} against {limit:g}"
            for name, limit in slos.items()
            if name in self.values and self.values[name] > limit * PRESCREEN_FACTOR
        ]
        return f"predicted by {self.source} to break the SLOs: {'; '.join(broken)}" if broken else None

    def meets(self, slos: Mapping[str, float]) -> bool:
        """Whether it is predicted to start and to meet every SLO it has a figure for."""
        return self.infeasible is None and all(
            self.values[name] <= limit for name, limit in slos.items() if name in self.values
        )


Predictor = Callable[[EngineConfig], "Prediction | None"]


def cached(predictor: Predictor) -> Predictor:
    """``predictor`` called once per configuration (by fingerprint)."""
    seen: dict[str, Prediction | None] = {}

    def predict(config: EngineConfig) -> Prediction | None:
        key = config.fingerprint()
        if key not in seen:
            seen[key] = predictor(config)
        return seen[key]

    return predict


def simulator_predictor(accelerator: str, input_len: int, output_len: int, prompts: int) -> Predictor:
    """perflab's offline simulator as a predictor: each configuration (its argv read by the simulated
    engine's parser, :func:`perflab.predict.case.sim_deployment`) on ``accelerator`` serving a burst of
    ``prompts`` requests of ``input_len``/``output_len`` tokens (split among its replicas), predicting
    ``total_token_throughput``, ``output_throughput`` and ``mean_tpot_ms``; None for an engine or
    accelerator the simulator does not resolve."""

    def predict(config: EngineConfig) -> Prediction | None:
        replicas = config.replicas or 1
        each = max(1, prompts // replicas)
        try:
            burst = simulate_burst(sim_deployment(config, accelerator), each, input_len, output_len)
        except NotCovered:
            return None
        except EngineFailure as failure:
            return Prediction(infeasible=str(failure).splitlines()[0], source=SOURCE)
        if burst is None:
            return None
        values = {
            "total_token_throughput": each * (input_len + output_len) / burst.seconds * replicas,
            "output_throughput": each * output_len / burst.seconds * replicas,
            "mean_tpot_ms": burst.mean_tpot_s * 1000.0,
        }
        return Prediction(values, source=SOURCE)

    return predict
