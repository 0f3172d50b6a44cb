"""A study's accelerator budget: every configuration it compares uses the same number of accelerators.

:func:`fill_budget` sets a configuration's replicas so that tp × dp × replicas equals the budget, or
says why it cannot (a replica wider than the budget, or one that does not divide it).
"""

from __future__ import annotations

from perflab.engines.config import EngineConfig


def fill_budget(config: EngineConfig, gpus: int) -> EngineConfig:
    """``config`` with as many replicas as fill ``gpus`` accelerators; ValueError with the reason."""
    if gpus < 1:
        raise ValueError(f"the accelerator budget must be at least 1, not {gpus}")
    per_replica = config.gpus_per_replica
    if per_replica > gpus:
        raise ValueError(f"tp×dp = {per_replica} needs more accelerators than the budget of {gpus}")
    if gpus % per_replica:
        raise ValueError(f"tp×dp = {per_replica} does not divide the budget of {gpus} accelerators")
    return config.model_copy(update={"replicas": gpus // per_replica})
