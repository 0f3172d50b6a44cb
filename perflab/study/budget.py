"""A study's accelerator budget: every configuration it measures uses exactly ``gpus`` accelerators.

Comparing node totals is only fair between configurations on the same number of accelerators (seed 000
compares TP8 with TP4 ×2 on one 8-GPU node; seed 003 keeps its whole study on one H100). So a study
fills its budget with replicas, as the seeds' "×2" does: ``replicas = gpus ÷ (tp × dp)``. A
configuration whose replica does not divide the budget (TP3 on 8) cannot be measured fairly and is
refused with the reason; so is one that asks for a replica count that does not fill it. A disaggregated
configuration fills the budget with its two worker groups: prefill + decode accelerators = ``gpus``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perflab.engines.config import EngineConfig
from perflab.engines.layout import Disaggregation

FILL = "fill"


def _shape(tp: int, dp: int) -> str:
    return f"TP{tp}" + (f" × DP{dp}" if dp > 1 else "")


def replicas_for(tp: int, dp: int, gpus: int) -> int:
    """Replicas of a ``tp × dp`` replica that use exactly ``gpus`` accelerators; ValueError says why not."""
    per_replica = tp * dp
    if per_replica > gpus:
        raise ValueError(
            f"{_shape(tp, dp)} needs {per_replica} accelerators per replica, more than the study's "
            f"budget of {gpus}"
        )
    if gpus % per_replica:
        raise ValueError(
            f"{_shape(tp, dp)} uses {per_replica} accelerators per replica, and {gpus} is not a whole "
            f"number of replicas of it ({gpus} ÷ {per_replica} = {gpus / per_replica:.2f}); the study "
            f"compares configurations on {gpus} accelerators each"
        )
    return gpus // per_replica


def check_split(layout: Disaggregation, gpus: int) -> None:
    """Refuse a prefill/decode split whose workers do not use exactly ``gpus`` accelerators."""
    if layout.gpus != gpus:
        raise ValueError(
            f"disaggregated {layout.label()} uses {layout.gpus} accelerators (prefill {layout.prefill.gpus} "
            f"+ decode {layout.decode.gpus}), but the study's budget is {gpus}"
        )


def check_fields(fields: Mapping[str, Any], gpus: int, *, larger_ok: bool = False) -> None:
    """Refuse configuration fields (as written in a spec) that cannot use exactly ``gpus`` accelerators:
    a replica that does not divide the budget, an explicit replica count that does not fill it, a
    prefill/decode split whose groups do not add up to it. ``larger_ok`` lets a replica larger than the
    whole budget pass (it fails as a candidate, like a configuration larger than the node: the seeds list
    such failures)."""
    if fields.get("disaggregation"):
        check_split(Disaggregation.model_validate(fields["disaggregation"]), gpus)
        return
    tp, dp = int(fields.get("tp", 1)), int(fields.get("dp", 1))
    if larger_ok and tp * dp > gpus:
        return
    replicas = replicas_for(tp, dp, gpus)
    asked = fields.get("replicas")
    if asked not in (None, FILL) and asked != replicas:
        raise ValueError(
            f"replicas: {asked} of {_shape(tp, dp)} uses {asked * tp * dp} accelerators, but the study's "
            f"budget is {gpus} ({replicas} replica(s)); leave replicas out or write 'fill'"
        )


def fill_budget(config: EngineConfig, gpus: int) -> EngineConfig:
    """``config`` with the replicas that make ``tp × dp × replicas == gpus`` (a disaggregated one as it
    is, when its groups use exactly ``gpus``); ValueError says why not."""
    if config.disaggregation is not None:
        check_split(config.disaggregation, gpus)
        return config
    replicas = replicas_for(config.tp, config.dp, gpus)
    if config.gpu_ids is not None and len(config.gpu_ids) != gpus:
        raise ValueError(
            f"gpu_ids lists {len(config.gpu_ids)} accelerators, but the study's budget is {gpus}"
        )
    return config if config.replicas == replicas else config.model_copy(update={"replicas": replicas})
