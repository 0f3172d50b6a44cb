"""perflab's own simulator's prediction of a :class:`~perflab.predict.case.Case`, for the comparison
with AIConfigurator.

The configuration is resolved as the simulated engine resolves it (:func:`~perflab.predict.case.
sim_deployment`), its batch held to the case's, and one replica's share of the tuning profile's
prompts is sent at once through the same schedulers the simulated servers use, on a virtual clock
(:func:`perflab.sim.offline.simulate`): no noise, no wall time. The figures are the same as
AIConfigurator's: output tokens/s per accelerator, mean TPOT and mean TTFT.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from perflab.engines import EngineConfig
from perflab.predict.case import Case, sim_deployment
from perflab.predict.figures import PredictedFigures
from perflab.sim.deployment import Deployment
from perflab.sim.failures import EngineFailure
from perflab.sim.offline import RequestSpec, simulate
from perflab.sim.perfmodel import plan_memory

SOURCE = "perflab's simulator"


@dataclass(frozen=True)
class Burst:
    """How one replica served a burst of equal prompts sent at once: the seconds until its last token,
    and its requests' mean TPOT and TTFT (seconds)."""

    seconds: float
    mean_tpot_s: float
    mean_ttft_s: float


def simulate_burst(deployment: Deployment, prompts: int, isl: int, osl: int) -> Burst | None:
    """``prompts`` requests of ``isl``/``osl`` tokens sent at once to ``deployment`` on the simulator's
    virtual clock (None when it served nothing); raises :class:`~perflab.sim.failures.EngineFailure`
    where the simulated engine would refuse the deployment."""
    plan = plan_memory(deployment)
    timings, _ = simulate(deployment, [RequestSpec(0.0, isl, osl) for _ in range(prompts)], plan)
    seconds = max((timing.e2el for timing in timings), default=0.0)
    if seconds <= 0:
        return None
    return Burst(
        seconds,
        statistics.fmean(timing.tpot for timing in timings),
        statistics.fmean(timing.ttft for timing in timings),
    )


def simulated_figures(config: EngineConfig, case: Case) -> PredictedFigures | None:
    """The simulator's figures for ``config`` as ``case`` (None when the simulated engine would refuse
    it: then only AIConfigurator's stand)."""
    try:
        deployment = sim_deployment(config, case.accelerator, case.engine_version)
        deployment.max_num_seqs = min(deployment.max_num_seqs, case.batch * max(1, config.dp))
        burst = simulate_burst(deployment, case.prompts, case.isl, case.osl)
    except EngineFailure:
        return None
    if burst is None:
        return None
    replica_gpus = config.gpus_per_replica
    return PredictedFigures(
        output_tps_per_gpu=case.prompts * case.osl / burst.seconds / replica_gpus,
        requests_per_s_per_gpu=case.prompts / burst.seconds / replica_gpus,
        mean_tpot_ms=burst.mean_tpot_s * 1000.0,
        mean_ttft_ms=burst.mean_ttft_s * 1000.0,
    )
