"""Benchmark profiles: the seeds' presets, bench argv, vllm bench commands, sweeps and scaling."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from perflab.profiles import (
    PRESETS,
    BenchmarkProfile,
    GoodputSLOs,
    SharedPrefix,
    Sweep,
    TraceReplay,
    derived_seed,
    scaled,
)

# The five seed write-ups, shipped with the tests.
SEEDS = Path(__file__).resolve().parents[1] / "tests" / "data" / "seeds"

# The seeds' "Benchmark Script" lines (identical in seeds 000, 001, 003 and 004 apart from the model).
_SEED_SCRIPT_HEAD = (
    "vllm bench serve --model Qwen/Qwen3-32B --backend openai-chat --endpoint /v1/chat/completions "
)
SEED_SCRIPTS = {
    "sharegpt": _SEED_SCRIPT_HEAD
    + "--dataset-name sharegpt --dataset-path ShareGPT_V3_unfiltered_cleaned_split.json --num-prompts 1000",
    "long": _SEED_SCRIPT_HEAD
    + "--dataset-name random --random-input-len 4000 --random-output-len 200 --num-prompts 500 --seed 42",
}


def test_presets_are_the_seeds_profiles() -> None:
    shape = {
        name: (p.dataset, p.input_len, p.output_len, p.num_prompts, p.request_rate, p.max_concurrency, p.seed)
        for name, p in PRESETS.items()
    }
    assert shape == {
        "sharegpt": ("sharegpt", None, None, 1000, math.inf, None, None),
        "short": ("random", 128, 4, 1000, math.inf, None, 42),
        "medium": ("random", 2000, 100, 500, math.inf, None, 42),
        "long": ("random", 4000, 200, 500, math.inf, None, 42),
        "very_long": ("random", 32000, 100, 100, math.inf, None, 42),
        "sharegpt_concurrency_4": ("sharegpt", None, None, 1000, math.inf, 4, None),
        "sharegpt_profile": ("sharegpt", None, None, 1000, 1000.0, 512, None),
        "throughput": ("random", 1024, 128, 1000, 1000.0, 512, 42),
        "long_context": ("random", 32000, 100, 100, 1000.0, 512, 42),
        "generation_heavy": ("random", 1000, 2000, 200, 1000.0, 512, 42),
        "agentic": ("generated-shared-prefix", None, 128, 256, math.inf, 64, 42),
        "shared_prefix": ("generated-shared-prefix", None, 128, 1000, math.inf, 256, 42),
    }


@pytest.mark.parametrize("name", sorted(SEED_SCRIPTS))
def test_vllm_bench_command_reproduces_the_seed_script(name: str) -> None:
    assert PRESETS[name].vllm_bench_command("Qwen/Qwen3-32B") == SEED_SCRIPTS[name]


def test_seed_scripts_are_rendered_from_presets() -> None:
    scripts = {
        line.strip()
        for path in SEEDS.glob("*.txt")
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip().startswith("vllm bench serve")
    }
    assert scripts
    for script in scripts:
        model = re.search(r"--model (\S+)", script).group(1)
        rendered = {preset.vllm_bench_command(model) for preset in PRESETS.values()}
        assert script in rendered


def test_seed_002_profiles_match_its_yaml() -> None:
    """Seed 002 lists dataset_input_tokens/output_tokens/seed/request_rate/total_requests per profile."""
    expected = {
        "throughput": (1024, 128, 1000),
        "long_context": (32000, 100, 100),
        "generation_heavy": (1000, 2000, 200),
    }
    for name, (input_len, output_len, total) in expected.items():
        profile = PRESETS[name]
        assert (profile.input_len, profile.output_len, profile.num_prompts) == (input_len, output_len, total)
        assert (profile.request_rate, profile.seed) == (1000.0, 42)


def test_bench_args_for_two_replicas() -> None:
    profile = PRESETS["throughput"].model_copy(
        update={"goodput": GoodputSLOs(ttft_ms=2000, tpot_ms=50), "warmup": 8}
    )
    args = profile.bench_args(
        base_urls=["http://127.0.0.1:8000", "http://127.0.0.1:8001"],
        model="Qwen/Qwen3.5-35B-A3B-FP8",
        tokenizer="/models/qwen",
        save_result="result.json",
    )
    assert args == [
        "--base-url", "http://127.0.0.1:8000", "--base-url", "http://127.0.0.1:8001",
        "--model", "Qwen/Qwen3.5-35B-A3B-FP8", "--endpoint", "chat", "--dataset", "random",
        "--input-len", "1024", "--output-len", "128", "--num-prompts", "1000", "--request-rate", "1000",
        "--burstiness", "1", "--max-concurrency", "512", "--seed", "42", "--warmup", "8",
        "--range-ratio", "0", "--prefix-len", "0", "--flush-cache", "--percentiles", "50,90,95,99",
        "--goodput", "ttft:2000",
        "tpot:50", "--tokenizer", "/models/qwen", "--save-result", "result.json",
    ]  # fmt: skip


def test_bench_args_sharegpt_defaults_and_infinite_rate() -> None:
    args = PRESETS["sharegpt"].bench_args(base_urls=["http://h:1"], model="m")
    assert args[args.index("--dataset-path") + 1] == "ShareGPT_V3_unfiltered_cleaned_split.json"
    assert args[args.index("--request-rate") + 1] == "inf"
    assert "--input-len" not in args and "--range-ratio" not in args
    explicit = PRESETS["sharegpt"].bench_args(
        base_urls=["http://h:1"], model="m", dataset_path="/data/sg.json"
    )
    assert explicit[explicit.index("--dataset-path") + 1] == "/data/sg.json"


def test_custom_dataset_profile() -> None:
    profile = BenchmarkProfile(
        name="support-chats", title="Support chats", dataset="custom", dataset_ref="sha256:ab12",
        num_prompts=300, output_len=256, endpoint="completions", percentiles=(99, 50),
    )  # fmt: skip
    args = profile.bench_args(base_urls=["http://h:1"], model="m")
    assert args[args.index("--dataset-path") + 1] == "sha256:ab12"
    assert args[args.index("--percentiles") + 1] == "50,99"
    assert profile.vllm_bench_command("m") == (
        "vllm bench serve --model m --backend openai --endpoint /v1/completions --dataset-name custom "
        "--dataset-path sha256:ab12 --num-prompts 300"
    )


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"dataset": "random", "input_len": 10}, "needs input_len and output_len"),
        ({"dataset": "sharegpt", "input_len": 10}, "comes from the sharegpt dataset"),
        ({"dataset": "custom"}, "needs dataset_ref"),
        ({"dataset": "sharegpt", "range_ratio": 0.5}, "random datasets only"),
        ({"dataset": "sharegpt", "percentiles": (0,)}, "between 0 and 100"),
        ({"dataset": "sharegpt", "request_rate": 0}, "greater than 0"),
        ({"dataset": "sharegpt", "name": "Bad Name"}, "pattern"),
        ({"dataset": "generated-shared-prefix"}, "shared_prefix describes"),
        (
            {"dataset": "random", "input_len": 1, "output_len": 1, "shared_prefix": {}},
            "shared_prefix describes",
        ),
        ({"dataset": "agentic-trace"}, "needs dataset_ref"),
        ({"dataset": "mooncake"}, "needs dataset_ref"),
        ({"dataset": "sharegpt", "trace": {}}, "mooncake dataset only"),
        (
            {"dataset": "agentic-trace", "dataset_ref": "a.json", "endpoint": "completions"},
            "needs endpoint chat",
        ),
        ({"dataset": "sharegpt", "turn_delay_ms": 5}, "session workloads only"),
        ({"dataset": "generated-shared-prefix", "shared_prefix": {"distribution": "zipf"}}, "zipf_alpha"),
        ({"dataset": "generated-shared-prefix", "shared_prefix": {"zipf_alpha": 1.0}}, "zipf_alpha"),
    ],
)
def test_invalid_profiles_are_rejected(fields: dict, problem: str) -> None:
    base = {"name": "p", "title": "P", "num_prompts": 10}
    with pytest.raises(ValidationError, match=problem):
        BenchmarkProfile(**{**base, **fields})


def test_sweep_points_lowest_load_first() -> None:
    profile = PRESETS["short"].model_copy(update={"sweep": Sweep(kind="request_rate", values=(16, 2, 4))})
    points = profile.sweep_points()
    assert [point.request_rate for point in points] == [2.0, 4.0, 16.0]
    assert all(point.sweep is None for point in points)
    assert PRESETS["short"].sweep_points() == [PRESETS["short"]]


def test_each_sweep_point_draws_fresh_prompts_from_the_profiles_seed() -> None:
    profile = PRESETS["short"].model_copy(update={"sweep": Sweep(kind="request_rate", values=(1, 2, 4))})
    seeds = [point.seed for point in profile.sweep_points()]
    assert seeds == [42, derived_seed(42, 1), derived_seed(42, 2)] and len(set(seeds)) == 3
    assert seeds == [point.seed for point in profile.sweep_points()]  # the same draws every time
    assert PRESETS["sharegpt"].fresh_draw(1).seed == derived_seed(0, 1)  # no seed: the bench's 0
    assert all(0 <= derived_seed(seed, index) < 2**31 for seed in (0, 42, 2**40) for index in (1, 99))


def test_concurrency_sweep_needs_whole_numbers() -> None:
    with pytest.raises(ValidationError, match="whole numbers"):
        Sweep(kind="max_concurrency", values=(1, 2.5))
    sweep = Sweep(kind="max_concurrency", values=(8, 1), stop_when_flat=False)
    profile = PRESETS["sharegpt"].model_copy(update={"sweep": sweep})
    assert [point.max_concurrency for point in profile.sweep_points()] == [1, 8]


def test_at_needs_a_sweep() -> None:
    with pytest.raises(ValueError, match="has no sweep"):
        PRESETS["long"].at(4)


def test_scaled_shrinks_prompts_for_demo_runs() -> None:
    small = scaled(PRESETS["long"].model_copy(update={"warmup": 10}), 0.05)
    assert (small.num_prompts, small.warmup, small.scale) == (25, 0, 0.05)
    assert (small.input_len, small.output_len, small.seed) == (4000, 200, 42)
    assert scaled(PRESETS["very_long"], 0.001).num_prompts == 1
    with pytest.raises(ValueError, match="> 0"):
        scaled(PRESETS["long"], 0)


def test_profiles_round_trip_through_json() -> None:
    for profile in PRESETS.values():
        assert BenchmarkProfile.model_validate_json(profile.model_dump_json()) == profile


def test_session_shared_prefix_and_trace_profiles_render_their_bench_flags() -> None:
    agentic = PRESETS["agentic"]
    assert agentic.sessions and not agentic.needs_dataset_file
    args = agentic.bench_args(base_urls=["http://h:1"], model="m")
    flags = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
    assert flags["--dataset"] == "generated-shared-prefix" and flags["--gsp-num-turns"] == "4"
    assert flags["--gsp-system-prompt-len"] == "2048" and flags["--conversation-turn-delay-mean"] == "500"
    assert "--dataset-path" not in args and "--flush-cache" in args
    zipf = PRESETS["shared_prefix"]
    assert not zipf.sessions
    assert zipf.bench_args(base_urls=["-"], model="m")[-5:-2] == ["--gsp-zipf-alpha", "1.1", "--flush-cache"]
    trace = BenchmarkProfile(
        name="trace", title="Trace", dataset="mooncake", dataset_ref="trace.jsonl", num_prompts=300,
        trace=TraceReplay(slowdown_factor=0.5, max_seconds=30), flush_cache=False,
    )  # fmt: skip
    args = trace.bench_args(base_urls=["-"], model="m")
    assert args[args.index("--dataset-path") + 1] == "trace.jsonl" and "--use-trace-timestamps" in args
    assert args[args.index("--mooncake-slowdown-factor") + 1] == "0.5"
    assert args[args.index("--max-seconds") + 1] == "30" and "--flush-cache" not in args
    command = trace.vllm_bench_command("m")
    assert command.startswith("# vllm bench serve (vLLM 0.32.0) has no mooncake dataset")
    assert "perflab bench --base-url http://127.0.0.1:8000 --model m" in command
    multi = BenchmarkProfile(
        name="chats", title="Chats", dataset="sharegpt-multi-turn", num_prompts=10, max_turns=3,
        shared_prefix=None,
    )  # fmt: skip
    args = multi.bench_args(base_urls=["-"], model="m")
    assert args[args.index("--dataset-path") + 1] == "ShareGPT_V3_unfiltered_cleaned_split.json"
    assert args[args.index("--agentic-max-turns") + 1] == "3" and multi.sessions
    assert SharedPrefix().num_groups == 64  # SGLang's default
