"""How one run is paced: readiness deadline and polling, metric sampling, stop grace, benchmark limits."""

from __future__ import annotations

from dataclasses import dataclass

from perflab import settings


@dataclass(frozen=True)
class RunnerOptions:
    """Timings of one run. ``ready_timeout_s=None`` takes :func:`perflab.settings.ready_timeout_s`.

    ``hand_back_when_busy``: when other runs hold the GPUs, a worker hands the run back to the queue
    (True); the CLI waits for them instead (False). ``flat_gain``: a load-curve sweep stops once a
    point's output throughput is not at least this fraction above the best point before it.
    ``reconnect_delays_s``: when a run ends, stopping what it started on its host is tried again after
    each of these pauses while the connection is lost (the SSH pool reconnects each time).
    ``pull_timeout_s``: how long pulling a config's image may take (vendors' images are 10-25 GB).
    ``gpu_drain_s``: for this long after a run of the same database ended, memory still in use on its
    GPUs counts as that run's engine freeing it (the next run waits), not as someone else's.
    """

    ready_timeout_s: float | None = None
    ready_poll_s: float = 1.0
    sample_interval_s: float = 2.0
    stop_grace_s: float = 15.0
    bench_timeout_s: float = 6 * 3600.0
    gpu_wait_poll_s: float = 2.0
    hand_back_when_busy: bool = True
    log_tail_lines: int = 200
    flat_gain: float = 0.03
    reconnect_delays_s: tuple[float, ...] = (1.0, 3.0, 10.0)
    pull_timeout_s: float = 3600.0
    gpu_drain_s: float = 60.0

    def ready_deadline_s(self, *, simulated: bool) -> float:
        if self.ready_timeout_s is not None:
            return self.ready_timeout_s
        return settings.ready_timeout_s(simulated=simulated)
