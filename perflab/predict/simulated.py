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

from perflab.engines import EngineConfig
from perflab.predict.case import Case, sim_deployment
from perflab.predict.figures import PredictedFigures
from perflab.sim.failures import EngineFailure
from perflab.sim.offline import RequestSpec, simulate
from perflab.sim.perfmodel import plan_memory

SOURCE = "perflab's simulator"


def simulated_figures(config: EngineConfig, case: Case) -> PredictedFigures | None:
    """The simulator's figures for ``config`` as ``case`` (None when the simulated engine would refuse
    it: then only AIConfigurator's stand)."""
    try:
        deployment = sim_deployment(config, case.accelerator)
        deployment.max_num_seqs = min(deployment.max_num_seqs, case.batch * max(1, config.dp))
        plan = plan_memory(deployment)
        timings, _ = simulate(
            deployment, [RequestSpec(0.0, case.isl, case.osl) for _ in range(case.prompts)], plan
        )
    except EngineFailure:
        return None
    seconds = max(timing.e2el for timing in timings)
    if seconds <= 0:
        return None
    replica_gpus = config.gpus_per_replica
    return PredictedFigures(
        output_tps_per_gpu=case.prompts * case.osl / seconds / replica_gpus,
        requests_per_s_per_gpu=case.prompts / seconds / replica_gpus,
        mean_tpot_ms=statistics.fmean(timing.tpot for timing in timings) * 1000.0,
        mean_ttft_ms=statistics.fmean(timing.ttft for timing in timings) * 1000.0,
    )
