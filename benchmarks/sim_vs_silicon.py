"""How close the simulator comes to NVIDIA's measured serving runs, which no constant was fitted on.

AIConfigurator 0.12.0 (perflab's ``predict`` extra) ships ``aiconfigurator_core/systems/
silicon_sample.csv``: end-to-end runs of vLLM, SGLang and TensorRT-LLM that NVIDIA measured on real GPUs,
each a configuration (engine and version, model, GPU, precision, tensor and expert parallelism), a
workload (input and output lengths, concurrency) and its measured mean TTFT and TPOT. This script reads
that file as data (found through the extra's installation, :func:`perflab.predict.installation.
find_installation`, or given with ``--csv``) and runs every row the simulator can express through the
offline simulator (:func:`perflab.sim.offline.simulate`) with the engine's defaults. Rows it can
express: aggregated serving (no prefill/decode split) on one node of the GPUs perflab predicts for
(A100, H100, H200, L40S; tensor parallelism up to 8), a model of the simulator's catalogue (not one
whose architecture it would estimate from its name), no attention data parallelism, and MoE layers
split over the same GPUs as attention (the MoE group's tensor × expert parallelism is the tensor
parallelism, or not given). An FP8 row of a
16-bit model id is served as ``--quantization fp8``. Rows whose configuration the simulated engine
refuses (out of memory, …) are counted and named. The corpus does not give the serving flags beyond
parallelism and precision (NVIDIA's runs may set batch limits, CUDA graphs, KV-cache dtype, …), so
each row runs with the engine's defaults.

The workload is the one AIConfigurator's generated benchmark sends (``aiperf profile --concurrency C
--request-count ROUNDS×C --warmup-request-count C``, fixed lengths, ``ignore_eos``): a closed loop of C
requests, of which the first C are warm-up and the rest are measured. The warm-up wave is spread over one
request's latency (measured by a first short run) rather than sent at once, so that the loop is in its
steady state, where requests start and finish at different times, as on a real server; sent at once,
identical requests would run in lockstep and every prefill would queue behind all the others. One wave
is measured by default, the one that replaces the spread one (aiperf's workflow measures 20): in a
simulation without jitter, identical requests drift back into lockstep over later waves, while the real
runs were not in lockstep (Qwen3-32B on 8 × H100, vLLM, concurrency 16, 1024/128 tokens: a measured TTFT
of 110 ms, where the simulation gives 658 ms with every wave sent at once, and 0.90 of the measured TTFT
over one wave after the spread one, 1.00 over three and 2.03 over ten; TPOT 0.97, 1.10, 1.08).

Printed: per group (engine and version, model, GPU) the number of rows and the median of simulated ÷
real for TPOT and TTFT with their median |error|; ``--rows`` prints every row too. Last line: a JSON
object with the same per group, ``median_abs_err_tpot`` and ``median_abs_err_ttft`` over all rows,
``rows``, ``refused`` and ``available`` (false, with ``reason``, where the extra is not installed).

None of the simulator's constants was fitted on these runs (``docs/simulator.md``): they are held out.

Run from the repository root: ``python benchmarks/sim_vs_silicon.py`` (``--smoke``: two rows per
engine). Prints figures only.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from perflab.predict.case import SYSTEMS as PREDICTED_SYSTEMS  # noqa: E402
from perflab.predict.installation import NotInstalled, find_installation  # noqa: E402
from perflab.sim.catalog import resolve_model  # noqa: E402
from perflab.sim.deployment import Deployment, Knobs, resolve_deployment  # noqa: E402
from perflab.sim.failures import EngineFailure  # noqa: E402
from perflab.sim.hardware import find_accelerator  # noqa: E402
from perflab.sim.offline import RequestSpec, RequestTiming, simulate  # noqa: E402
from perflab.sim.perfmodel import plan_memory  # noqa: E402

CORPUS = Path("systems") / "silicon_sample.csv"
# AIConfigurator's system names → the simulator's accelerators (the predictions' mapping, read back).
SYSTEMS = {system: accelerator for accelerator, system in PREDICTED_SYSTEMS.items()}
ENGINES = ("vllm", "sglang", "trtllm")
# A simulated host is one node; runs over more GPUs than one node has are left out.
NODE_GPUS = 8
ROUNDS = 1
SMOKE_ROWS_PER_ENGINE = 2


@dataclass(frozen=True)
class SiliconRun:
    """One measured run of the corpus."""

    engine: str
    version: str
    model: str
    system: str
    fp8: bool
    tp: int
    ep: int
    concurrency: int
    isl: int
    osl: int
    ttft_ms: float
    tpot_ms: float

    @property
    def group(self) -> str:
        version = self.version or "(version not given)"
        return f"{self.engine} {version} · {self.model} · {SYSTEMS[self.system]}"


def corpus_path(given: str) -> Path:
    """The corpus file: ``given``, else the one of the installed ``predict`` extra; raises NotInstalled."""
    if given:
        return Path(given)
    return find_installation().core_dir / CORPUS


def expressible(row: dict[str, str]) -> bool:
    """Whether the simulator can serve this row's configuration as measured."""
    if row["backend"] not in ENGINES or row["mode"] != "agg" or row["system"] not in SYSTEMS:
        return False
    tp = int(row["tp_size"])
    moe_group = int(row["moe_tp_size"] or 0) * int(row["moe_ep_size"] or 0)
    if int(row["attention_dp_size"] or 1) > 1 or tp > NODE_GPUS or moe_group not in (0, 1, tp):
        return False
    spec = resolve_model(row["model_path"])
    return spec is not None and not spec.arch.estimated


def read_runs(path: Path) -> list[SiliconRun]:
    with path.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if expressible(row)]
    return [
        SiliconRun(
            engine=row["backend"],
            version=row["backend_version"],
            model=row["model_path"],
            system=row["system"],
            fp8=row["gemm_quant_mode"] == "fp8",
            tp=int(row["tp_size"]),
            ep=max(1, int(row["moe_ep_size"] or 1)),
            concurrency=int(row["batch_size"]),
            isl=int(row["isl"]),
            osl=int(row["osl"]),
            ttft_ms=float(row["silicon_ttft_ms"]),
            tpot_ms=float(row["silicon_tpot_ms"]),
        )
        for row in rows
    ]


def deployment_of(run: SiliconRun) -> Deployment:
    """The run's configuration with the engine's defaults; raises EngineFailure as the engine would."""
    knobs = Knobs(run.model)
    knobs.tp = run.tp
    knobs.ep = run.ep
    if run.fp8 and "fp8" not in run.model.lower():
        knobs.quantization = "fp8"
    accelerator = find_accelerator(SYSTEMS[run.system])
    assert accelerator is not None
    dep = resolve_deployment(run.engine, knobs, accelerator, run.version or None)
    plan_memory(dep)
    return dep


def closed_loop(dep: Deployment, run: SiliconRun, rounds: int, spread_s: float) -> list[RequestTiming]:
    """``rounds + 1`` waves of the run's concurrency, the first spread over ``spread_s`` seconds; the
    timings of the requests after the first wave."""
    gap = spread_s / run.concurrency
    first = [RequestSpec(index * gap, run.isl, run.osl) for index in range(run.concurrency)]
    rest = [RequestSpec(spread_s, run.isl, run.osl) for _ in range(rounds * run.concurrency)]
    timings, _ = simulate(dep, first + rest, max_concurrency=run.concurrency)
    return sorted(timings, key=lambda timing: timing.sent)[run.concurrency :]


@dataclass
class Outcome:
    run: SiliconRun
    tpot: float
    ttft: float


def compare(run: SiliconRun, rounds: int) -> Outcome:
    dep = deployment_of(run)
    wave, _ = simulate(dep, [RequestSpec(0.0, run.isl, run.osl)] * run.concurrency)
    latency = statistics.fmean(timing.e2el for timing in wave)
    measured = closed_loop(dep, run, rounds, latency)
    tpot_ms = 1000 * statistics.fmean(timing.tpot for timing in measured)
    ttft_ms = 1000 * statistics.fmean(timing.ttft for timing in measured)
    return Outcome(run, tpot=tpot_ms / run.tpot_ms, ttft=ttft_ms / run.ttft_ms)


def summary(outcomes: list[Outcome]) -> dict[str, float]:
    return {
        "rows": len(outcomes),
        "median_tpot_ratio": round(statistics.median(outcome.tpot for outcome in outcomes), 3),
        "median_abs_err_tpot": round(statistics.median(abs(outcome.tpot - 1) for outcome in outcomes), 3),
        "median_ttft_ratio": round(statistics.median(outcome.ttft for outcome in outcomes), 3),
        "median_abs_err_ttft": round(statistics.median(abs(outcome.ttft - 1) for outcome in outcomes), 3),
    }


def pick(runs: list[SiliconRun], engines: list[str], smoke: bool) -> list[SiliconRun]:
    chosen = [run for run in runs if run.engine in engines]
    if smoke:
        chosen = [
            run
            for engine in engines
            for run in [run for run in chosen if run.engine == engine and run.concurrency <= 16][
                :SMOKE_ROWS_PER_ENGINE
            ]
        ]
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="two rows per engine")
    parser.add_argument("--csv", default="", help="the corpus file (default: the installed predict extra's)")
    parser.add_argument("--engines", default=",".join(ENGINES), help="of vllm, sglang, trtllm")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="waves of requests measured per row")
    parser.add_argument("--rows", action="store_true", help="print every row")
    options = parser.parse_args()
    try:
        path = corpus_path(options.csv)
    except NotInstalled as reason:
        print(f"no silicon runs to compare with: {reason}")
        print(json.dumps({"available": False, "reason": str(reason)}))
        return 0
    if not path.is_file():
        print(f"no silicon runs to compare with: {path} does not exist")
        print(json.dumps({"available": False, "reason": f"{path} does not exist"}))
        return 0
    started = time.monotonic()
    runs = pick(read_runs(path), options.engines.split(","), options.smoke)
    rounds = max(1, options.rounds)
    print(f"simulated ÷ real (NVIDIA's measured runs in {path.name}, {len(runs)} rows, {rounds} round(s))")
    outcomes: list[Outcome] = []
    refused: dict[str, str] = {}
    for run in runs:
        try:
            outcome = compare(run, rounds)
        except EngineFailure as failure:
            refused.setdefault(f"{run.group} tp{run.tp}", failure.lines[-1].splitlines()[0][:120])
            continue
        outcomes.append(outcome)
        if options.rows:
            print(
                f"{run.group} tp{run.tp} ep{run.ep} isl {run.isl} osl {run.osl} c {run.concurrency}: "
                f"tpot {outcome.tpot:.2f} ({run.tpot_ms:.2f} ms real) ttft {outcome.ttft:.2f} "
                f"({run.ttft_ms:.0f} ms real)"
            )
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        groups[outcome.run.group].append(outcome)
    print(f"{'rows':>4} {'tpot':>6} {'|err|':>6} {'ttft':>6} {'|err|':>6}  group")
    per_group = {}
    for name, members in sorted(groups.items()):
        figures = per_group[name] = summary(members)
        print(
            f"{figures['rows']:4d} {figures['median_tpot_ratio']:6.2f} {figures['median_abs_err_tpot']:6.2f} "
            f"{figures['median_ttft_ratio']:6.2f} {figures['median_abs_err_ttft']:6.2f}  {name}"
        )
    for name, reason in sorted(refused.items()):
        print(f"refused: {name}: {reason}")
    overall = summary(outcomes) if outcomes else {"rows": 0}
    print(
        json.dumps(
            {
                "available": True,
                **overall,
                "refused": len(refused),
                "groups": per_group,
                "smoke": options.smoke,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
