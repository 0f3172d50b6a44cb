"""vLLM's CUDA graphs in the simulator: a step of at most ``max_cudagraph_capture_size`` tokens runs as a
graph, a larger one (every one with ``--enforce-eager``) eagerly, where each collective costs the
accelerator's measured eager launch on top (:attr:`perflab.sim.hardware.Accelerator.eager_collective_s`,
from NVIDIA's vLLM all-reduce tables). Engines whose graphs the simulator does not model keep one cost."""

from __future__ import annotations

import pytest

from perflab.sim.deployment import Knobs, resolve_deployment, vllm_graph_tokens
from perflab.sim.engines.vllm import build_parser, knobs_from_args, normalize_options
from perflab.sim.hardware import find_accelerator
from perflab.sim.offline import RequestSpec, simulate
from perflab.sim.perfmodel import PerfModel

DENSE = "Qwen/Qwen3-32B"


def _deployment(engine: str = "vllm", accelerator: str = "H100", **knobs: object):
    values = Knobs(DENSE)
    for name, value in knobs.items():
        setattr(values, name, value)
    return resolve_deployment(engine, values, find_accelerator(accelerator))


@pytest.mark.parametrize(
    ("max_num_seqs", "spec_tokens", "eager", "tokens"),
    [(1024, 0, False, 512), (8, 0, False, 16), (64, 2, False, 384), (1024, 0, True, 0)],
)
def test_the_largest_graph_follows_vllms_capture_size(
    max_num_seqs: int, spec_tokens: int, eager: bool, tokens: int
) -> None:
    assert vllm_graph_tokens(max_num_seqs, spec_tokens, eager) == tokens


def test_the_vllm_shim_reads_enforce_eager_into_the_deployment() -> None:
    def served(*argv: str):
        args = build_parser().parse_args(
            normalize_options([DENSE, "-tp", "2", "--max-num-seqs", "64", *argv])
        )
        return resolve_deployment("vllm", knobs_from_args(args), find_accelerator("H100"))

    assert (served().graph_tokens, served("--enforce_eager").graph_tokens) == (128, 0)


@pytest.mark.parametrize(("accelerator", "launch_s"), [("A100", 38e-6), ("H100", 16e-6)])
def test_a_step_past_the_largest_graph_pays_the_eager_launch_of_every_all_reduce(
    accelerator: str, launch_s: float
) -> None:
    dep = _deployment(accelerator=accelerator, tp=4)
    perf = PerfModel(dep)
    layers = dep.model.arch.layers
    limit = dep.graph_tokens
    assert limit == 512
    # two all-reduces a layer (after attention and after the MLP), each launched once
    step_over = perf.comm_seconds(limit + 1) - perf.comm_seconds(limit)
    ring_per_token = perf.comm_seconds(limit) - perf.comm_seconds(limit - 1)
    assert step_over - ring_per_token == pytest.approx(2 * layers * launch_s)
    # with --enforce-eager even a one-token step launches eagerly
    eager = PerfModel(_deployment(accelerator=accelerator, tp=4, enforce_eager=True))
    assert eager.comm_seconds(1) - perf.comm_seconds(1) == pytest.approx(2 * layers * launch_s)
    # one GPU has no collective to launch
    assert PerfModel(_deployment(accelerator=accelerator, enforce_eager=True)).comm_seconds(1024) == 0.0


def test_engines_without_modelled_graphs_keep_one_collective_cost() -> None:
    sglang = PerfModel(_deployment("sglang", tp=4))
    assert sglang.dep.graph_tokens is None
    per_token = sglang.comm_seconds(2) - sglang.comm_seconds(1)
    assert sglang.comm_seconds(2048) - sglang.comm_seconds(2047) == pytest.approx(per_token)


def test_enforce_eager_slows_a_tensor_parallel_decode_and_leaves_one_gpu_alone() -> None:
    requests = [RequestSpec(0.0, 256, 64) for _ in range(32)]

    def mean_tpot(**knobs: object) -> float:
        timings, _ = simulate(_deployment(max_model_len=4096, **knobs), requests)
        return sum(timing.tpot for timing in timings) / len(timings)

    assert mean_tpot(tp=4, enforce_eager=True) > 1.1 * mean_tpot(tp=4)
    assert mean_tpot(enforce_eager=True) == pytest.approx(mean_tpot())
