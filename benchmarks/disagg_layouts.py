"""Aggregated against disaggregated serving of Qwen3-32B on a simulated 8 × H200 node, under a TPOT SLO.

The layouts are a study's search layouts on a budget of 8 accelerators (:class:`perflab.study.
search_space.SearchSpec`, built into configurations by :func:`perflab.study.configs.build_config`, so the
budget rule P + D = 8 is the study's): aggregated SGLang TP1 ×8, TP2 ×4, TP4 ×2, TP8, and every
prefill/decode split ``xPyD`` with prefill TP 1, 2 or 4 and decode TP 1, 2, 4 or 8 that fills the node.

Each layout is measured by the simulator's own schedulers and performance model on a virtual clock
(:func:`perflab.sim.offline.simulate`): Poisson arrivals of random 4000-token prompts with 500-token
outputs (``--smoke``: 2000 / 128, fewer requests and rates). An aggregated replica serves its share of
the requests; a split runs every prefill worker on its share (one token each), moves each prompt's KV
cache in :func:`perflab.sim.disagg.transfer_seconds` (the H200's 450 GB/s link at 80 %, the figure the
simulated workers use), and decodes the prefilled requests on a decode worker. At each request rate a
layout's figures are the means the bench reports (TTFT, TPOT) and its output tokens per second per GPU;
its value under an SLO is the highest throughput at a rate whose mean TPOT meets it and whose mean TTFT
stays under ``--ttft-ms`` (2 s: a rate past saturation, whose queue grows for as long as requests come,
keeps its throughput and is no serving point). The pick is the best
layout under the SLO; the line below it compares the best split with the best aggregated layout
(:func:`perflab.study.layout_trade.trade_sentence`).

AIConfigurator 0.12 predicts, for Qwen3-32B on 8 × H200: disaggregated wins by 1.45× tokens/s/GPU at
TPOT ≤ 12 ms, aggregated by 1.08× at ≤ 30 ms. Run from the repository root:
``python benchmarks/disagg_layouts.py [--smoke] [--slo 12 30]``; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflab.engines.config import EngineConfig  # noqa: E402
from perflab.sim.deployment import Deployment, Knobs, resolve_deployment  # noqa: E402
from perflab.sim.disagg import transfer_seconds  # noqa: E402
from perflab.sim.failures import EngineFailure  # noqa: E402
from perflab.sim.hardware import find_accelerator  # noqa: E402
from perflab.sim.offline import RequestSpec, simulate  # noqa: E402
from perflab.sim.perfmodel import plan_memory  # noqa: E402
from perflab.study.configs import build_config  # noqa: E402
from perflab.study.layout_trade import Figures, trade_sentence  # noqa: E402
from perflab.study.search_space import SearchSpec, layout_label  # noqa: E402

MODEL = "Qwen/Qwen3-32B"
GPUS = 8
ACCELERATOR = find_accelerator("H200")


@dataclass(frozen=True)
class Workload:
    prompt: int
    output: int
    requests: int
    rates: tuple[float, ...]  # requests per second, the whole node


def layouts() -> list[dict]:
    """The search's layouts: aggregated TP1–TP8 and every split of the node."""
    found: list[dict] = [{"tp": tp} for tp in (1, 2, 4, 8)]
    for p_tp, d_tp in itertools.product((1, 2, 4), (1, 2, 4, 8)):
        for p_workers in range(1, GPUS // p_tp + 1):
            rest = GPUS - p_workers * p_tp
            if rest > 0 and rest % d_tp == 0:
                split = {
                    "prefill": {"workers": p_workers, "tp": p_tp},
                    "decode": {"workers": rest // d_tp, "tp": d_tp},
                }
                found.append({"disaggregation": {**split, "transfer_backend": "mooncake"}})
    return found


def deployment(tp: int, *, decode: bool = False) -> Deployment | None:
    knobs = Knobs(MODEL)
    knobs.tp = tp
    if decode:
        knobs.disaggregation_mode = "decode"
    try:
        dep = resolve_deployment("sglang", knobs, ACCELERATOR)
        plan_memory(dep)
    except EngineFailure:
        return None
    if decode:
        dep.prefix_caching = False
    return dep


def arrivals(count: int, rate: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    now, times = 0.0, []
    for _ in range(count):
        now += rng.expovariate(rate)
        times.append(now)
    return times


def measure(config: EngineConfig, workload: Workload, rate: float) -> dict | None:
    """Mean TTFT and TPOT (ms) and output tokens/s per GPU of ``config`` at ``rate`` requests/s."""
    times = arrivals(workload.requests, rate, seed=7)
    if config.disaggregation is None:
        dep = deployment(config.tp)
        if dep is None:
            return None
        share = times[:: config.replicas]
        timings, _ = simulate(dep, [RequestSpec(t, workload.prompt, workload.output) for t in share])
        ttft = [t.ttft for t in timings]
        tpot = [t.tpot for t in timings]
        ends = [arrival + t.e2el for arrival, t in zip(share, timings, strict=True)]
        served = len(share) * config.replicas
    else:
        layout = config.disaggregation
        prefill, decode = deployment(layout.prefill.tp), deployment(layout.decode.tp, decode=True)
        if prefill is None or decode is None:
            return None
        ready = [0.0] * len(times)
        for worker in range(layout.prefill.workers):
            picked = list(range(worker, len(times), layout.prefill.workers))
            timings, _ = simulate(prefill, [RequestSpec(times[i], workload.prompt, 1) for i in picked])
            for i, timing in zip(picked, timings, strict=True):
                ready[i] = times[i] + timing.ttft + transfer_seconds(prefill, workload.prompt)
        share = list(range(0, len(times), layout.decode.workers))
        specs = [RequestSpec(ready[i], workload.prompt, workload.output, prefilled=True) for i in share]
        timings, _ = simulate(decode, specs)
        ttft = [ready[i] + t.ttft - times[i] for i, t in zip(share, timings, strict=True)]
        tpot = [t.tpot for t in timings]
        ends = [ready[i] + t.e2el for i, t in zip(share, timings, strict=True)]
        served = len(share) * layout.decode.workers
    duration = max(ends) - times[0]
    return {
        "mean_ttft_ms": statistics.fmean(ttft) * 1000,
        "mean_tpot_ms": statistics.fmean(tpot) * 1000,
        "tokens_per_s_per_gpu": served * workload.output / duration / GPUS,
        "rate": rate,
    }


def best_under(curve: list[dict], slo_ms: float, ttft_ms: float) -> dict | None:
    feasible = [
        point for point in curve if point["mean_tpot_ms"] <= slo_ms and point["mean_ttft_ms"] <= ttft_ms
    ]
    return max(feasible, key=lambda point: point["tokens_per_s_per_gpu"]) if feasible else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a small run (under ~2 minutes)")
    parser.add_argument("--slo", type=float, nargs="+", default=[12.0, 30.0], help="mean TPOT limits (ms)")
    parser.add_argument(
        "--ttft-ms",
        type=float,
        default=2000.0,
        help="mean TTFT limit of every pick (ms): no overloaded queue",
    )
    args = parser.parse_args()
    if args.smoke:
        workload = Workload(2000, 128, 96, (2.0, 6.0, 14.0))
    else:
        workload = Workload(4000, 500, 400, (1.0, 2.0, 4.0, 6.0, 9.0, 13.0, 18.0, 25.0))
    started = time.monotonic()
    space = SearchSpec.model_validate({"parallelism": layouts(), "budget": {"launches": 64}})
    base = {"engine": "sglang", "model": MODEL}
    curves: dict[str, list[dict]] = {}
    for layout in space.parallelism:
        if args.smoke and "disaggregation" in layout and layout["disaggregation"]["prefill"]["tp"] == 4:
            continue
        config = build_config(base, {**space.changes({"parallelism": layout_label(layout)})}, gpus=GPUS)
        label = layout_label(layout)
        points = [measure(config, workload, rate) for rate in workload.rates]
        curves[label] = [point for point in points if point is not None]
        shown = (
            ", ".join(
                f"{p['rate']:g}/s: TPOT {p['mean_tpot_ms']:.1f} ms TTFT {p['mean_ttft_ms']:.0f} ms "
                f"{p['tokens_per_s_per_gpu']:.0f} tok/s/GPU"
                for p in curves[label]
            )
            or "does not fit in memory"
        )
        print(f"{label}: {shown}", flush=True)
    summary: dict[str, object] = {"workload": workload.__dict__, "layouts": len(curves)}
    for slo in args.slo:
        best = {label: best_under(curve, slo, args.ttft_ms) for label, curve in curves.items()}
        split = {label: point for label, point in best.items() if point and "P" in label and "D " in label}
        aggregated = {label: point for label, point in best.items() if point and label not in split}
        pick_split = max(split.items(), key=lambda item: item[1]["tokens_per_s_per_gpu"], default=None)
        pick_agg = max(aggregated.items(), key=lambda item: item[1]["tokens_per_s_per_gpu"], default=None)
        candidates = [item for item in (pick_split, pick_agg) if item is not None]
        chosen = max(candidates, key=lambda item: item[1]["tokens_per_s_per_gpu"], default=None)
        pick = chosen[0] if chosen else "nothing (no layout meets the SLOs)"
        print(f"TPOT <= {slo:g} ms, TTFT <= {args.ttft_ms:g} ms: chose {pick}")
        if pick_split and pick_agg:
            print(
                "  "
                + trade_sentence(
                    pick_split[0],
                    Figures(**_figures(pick_split[1])),
                    pick_agg[0],
                    Figures(**_figures(pick_agg[1])),
                )
            )
        summary[f"tpot_{slo:g}ms"] = {
            "chosen": chosen[0] if chosen else None,
            "best_split": pick_split[0] if pick_split else None,
            "best_aggregated": pick_agg[0] if pick_agg else None,
            "split_vs_aggregated": (
                round(pick_split[1]["tokens_per_s_per_gpu"] / pick_agg[1]["tokens_per_s_per_gpu"], 3)
                if pick_split and pick_agg
                else None
            ),
        }
    summary["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(summary))
    return 0


def _figures(point: dict) -> dict:
    return {
        "ttft_ms": point["mean_ttft_ms"],
        "tpot_ms": point["mean_tpot_ms"],
        "tokens_per_s_per_gpu": point["tokens_per_s_per_gpu"],
    }


if __name__ == "__main__":
    sys.exit(main())
