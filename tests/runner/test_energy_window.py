"""A run's energy window is the benchmark's own first send and last receive, on the samples' clock.

A run on a simulated local host (its simulated nvidia-smi reports utilization and power that follow the
engine's work), sampled every 0.3 s: the stored result's window — the bench's first send and last
receive on the wall clock, though the figures come from the simulator's clock — holds every second the
engine's own gauges show requests, and its energy from the samples is recomputed here (the trapezoid
rule over the power readings inside the window, each edge's part of its sampling interval at that
interval's mean power). The figure the result publishes is the simulated engine's own energy count over
its simulated time.

The simulator's clock runs the engine in bursts when the client is slower than the model (it waits for
the client's requests, then catches up), so inside the window the engine is busy only part of the time:
the gauges are read for requests outside the window, never for being busy at every reading inside it.
The host runs at time scale 2 (its engine starts at 1/200): a request's decode then lasts about two
seconds of the clock, longer than a loaded machine stalls the client, so the engine stays busy through
most of the window. At time scale 20 such a stall left it idle for seconds, most of a short window's
power samples read idle, and the samples rightly gave no energy.

The sampler keeps the wall clock, and a loaded machine can hold its rounds back (one full run saw a 7.3 s
window with 2 power samples, a round every 3–4 s): the run serves 160 requests so that its window is
long against such stalls, and the samples' energy is checked against the rule the cost code states —
recomputed where they cover the window, refused with their count where they do not.
"""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.cost.energy import (
    MIN_SAMPLED_SHARE,
    MIN_WINDOW_SAMPLES,
    SIMULATED_COUNTER,
    Energy,
    NotMeasured,
    window_energy,
)
from perflab.cost.figures import result_energy
from perflab.engines import EngineConfig
from perflab.runner import RunnerOptions, execute_run, submit_run
from perflab.runner.profile_spec import parse_profile
from tests.fixtures.runs import SimHostFactory, free_port_block, inventory_of, stored_run

INTERVAL_S = 0.3
EDGE_S = 0.25
WORKER = "energy-worker"


def _power_joules(samples: list[tuple[float, float]], start: float, end: float) -> float:
    times = np.array([t for t, _ in samples])
    watts = np.array([power for _, power in samples])
    inside = np.flatnonzero((times >= start) & (times <= end))
    first, last = inside[0], inside[-1]
    joules = float(np.sum((watts[first + 1 : last + 1] + watts[first:last]) / 2 * np.diff(times[inside])))
    # each edge at the mean power of the interval that reaches it, or of the nearest one where no sample
    # lies beyond it (the sampling may stop with the benchmark)
    before = first - 1 if first > 0 else first
    after = last + 1 if last + 1 < len(times) else last
    joules += (times[first] - start) * (watts[before] + watts[before + 1]) / 2
    return joules + (end - times[last]) * (watts[after - 1] + watts[after]) / 2


@pytest.mark.slow
def test_the_window_holds_every_busy_reading_and_its_tokens_per_joule_recompute(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    host = sim_host("energy-window", kind="local", count=1, time_scale=2.0, startup_scale=200.0)
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    profile = parse_profile("random:in=512,out=256,n=160,concurrency=16,name=saturated")
    run = submit_run(runs_db, host_name=host.name, config=config, profiles=[profile], worker_id=WORKER)
    options = RunnerOptions(sample_interval_s=INTERVAL_S, ready_poll_s=0.2, stop_grace_s=5.0)

    status = execute_run(
        run.id, engine=runs_db, inventory=inventory_of(host), worker_id=WORKER, options=options
    )

    assert status == "done", stored_run(runs_db, run.id).failure_message
    with new_session(runs_db) as session:
        [stored] = crud.list_profile_results(session, run_id=run.id)
        samples = crud.list_samples(session, run_id=run.id)
    result = stored.result
    start, end = result["sample_window_s"]
    # the figures come from the simulator's clock; the window is the bench's wall-clock span, which that
    # clock never runs ahead of
    assert result["timing_source"] == "simulated"
    assert end - start >= result["duration"] - 0.01
    # the engine's own gauges, read in every round: idle before and after the window (readings within
    # EDGE_S of an edge are left out: a request reaches the engine's count a moment after it was sent
    # and leaves it a moment before its last token is read)
    engine = [(s.t_s, s.values["running"] + s.values["waiting"] > 0) for s in samples if s.source == "engine"]
    assert not any(busy for t_s, busy in engine if t_s < start - EDGE_S or t_s > end + EDGE_S)
    assert sum(start < t_s < end for t_s, _ in engine) >= 3
    power = [(s.t_s, s.values["power_w"]) for s in samples if s.source == "accelerator"]
    rows = [(s.t_s, s.source, s.values) for s in samples]
    sampled = window_energy(rows, (start, end), stored_run(runs_db, run.id).gpu_ids)
    inside = [t_s for t_s, _ in power if start <= t_s <= end]
    if len(inside) >= MIN_WINDOW_SAMPLES and inside[-1] - inside[0] >= MIN_SAMPLED_SHARE * (end - start):
        assert isinstance(sampled, Energy) and sampled.methods == ("power samples",)
        assert sampled.joules == pytest.approx(_power_joules(power, start, end), rel=1e-9)
    else:
        # a machine loaded enough to hold the sampler's rounds back for half the window: too few samples
        # rightly give no energy from them, and say so
        assert isinstance(sampled, NotMeasured) and f"holds {len(inside)} of its samples" in sampled.reason
    # the figure published is the simulated engine's own count over the measured simulated time, which
    # the machine's load does not stretch as it stretches the wall-clock window
    energy = result_energy(stored_run(runs_db, run.id), result, samples)
    assert isinstance(energy, Energy) and energy.methods == (SIMULATED_COUNTER,)
    assert energy.window_s == result["duration"] and energy.joules == result["simulated_energy"]["joules"]
