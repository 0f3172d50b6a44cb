"""Seeded noise for simulated engines: run-to-run and launch-to-launch variation of their speed.

A simulated host's ``simulate: {noise: {run_cv_pct: 2, launch_cv_pct: 1, seed: 7}}`` makes every
engine launched on it slower or faster by a factor drawn once per launch (``launch_cv_pct``) times a
factor drawn once per benchmark run on that launch (``run_cv_pct``). Both are log-normal with median 1,
so their coefficients of variation are close to the given percentages. Draws are seeded by
``(seed, launch, run)``: the ``n``-th launch on a host (counted in the sim home's state directory) and
the ``k``-th run on it always see the same factors, so tests and benchmarks know the truth they decide
against. A new run starts when the engine has been idle for :data:`RUN_GAP_S` seconds of simulated
time (a benchmark's repetitions are separated by at least that), and with the first request of a
benchmark whose requests declare it (:mod:`perflab.sim.timelines`: its warm-up and measured phases are
one run, however long the wall clock took between them). Without ``noise`` the factors are exactly 1.
"""

from __future__ import annotations

import fcntl
import math
import os
import random
from typing import Dict, Optional

RUN_GAP_S = 1.0
COUNTER_FILE = "launches"
FIELDS = ("run_cv_pct", "launch_cv_pct", "seed")


def check_noise(spec: object) -> Optional[Dict[str, float]]:
    """The validated ``noise`` mapping (None when absent); ValueError names the field."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) - set(FIELDS):
        raise ValueError(f"simulate.noise: expected a mapping of {', '.join(FIELDS)}")
    checked: Dict[str, float] = {}
    for name in ("run_cv_pct", "launch_cv_pct"):
        value = spec.get(name, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 50:
            raise ValueError(f"simulate.noise.{name}: expected a number 0..50, got {value!r}")
        checked[name] = float(value)
    seed = spec.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"simulate.noise.seed: expected an integer, got {seed!r}")
    checked["seed"] = seed
    return checked


class NoiseModel:
    """The speed factors of launches and runs, as a pure function of the seed."""

    def __init__(self, run_cv_pct: float = 0.0, launch_cv_pct: float = 0.0, seed: int = 0) -> None:
        self.run_cv_pct = run_cv_pct
        self.launch_cv_pct = launch_cv_pct
        self.seed = seed

    def _draw(self, cv_pct: float, *key: int) -> float:
        if cv_pct == 0:
            return 1.0
        sigma = math.sqrt(math.log(1.0 + (cv_pct / 100.0) ** 2))
        return math.exp(random.Random(":".join(str(part) for part in (self.seed, *key))).gauss(0.0, sigma))

    def launch_speed(self, launch: int) -> float:
        """The speed factor of the ``launch``-th launch (1 = as modelled)."""
        return self._draw(self.launch_cv_pct, launch, -1)

    def speed(self, launch: int, run: int) -> float:
        """The speed factor of run ``run`` on launch ``launch``: launch factor × run factor."""
        return self.launch_speed(launch) * self._draw(self.run_cv_pct, launch, run)


def next_launch(state_dir: str) -> int:
    """The number of this launch on the host (0, 1, …), counted under a lock in ``state_dir``."""
    os.makedirs(state_dir, exist_ok=True)
    path = os.path.join(state_dir, COUNTER_FILE)
    with open(path, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        text = handle.read().strip()
        launch = int(text) if text.isdigit() else 0
        handle.seek(0)
        handle.truncate()
        handle.write(str(launch + 1))
    return launch


class Pace:
    """One launch's speed over time: a new run factor after each idle gap of :data:`RUN_GAP_S`, or
    when a new benchmark begins."""

    def __init__(self, model: NoiseModel, launch: int) -> None:
        self._model = model
        self._launch = launch
        self._run = -1
        self._idle_since: Optional[float] = None
        self._speed = 1.0
        self._new_run = False

    def begin_run(self) -> None:
        """A new benchmark begins: the next step starts a new run (once, with an idle gap or not)."""
        self._new_run = True

    def idle(self, now: float) -> None:
        """The engine has nothing to do from ``now``."""
        if self._idle_since is None:
            self._idle_since = now

    def factor(self, now: float) -> float:
        """The divisor of step durations for a step starting at ``now``."""
        gap = self._idle_since is not None and now - self._idle_since >= RUN_GAP_S
        if self._run < 0 or gap or self._new_run:
            self._run += 1
            self._speed = self._model.speed(self._launch, self._run)
        self._idle_since = None
        self._new_run = False
        return self._speed
