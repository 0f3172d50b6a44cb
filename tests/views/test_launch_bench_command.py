"""The Launch page's "equivalent vllm bench serve command" runs unchanged under ``perflab bench``
(against a simulated engine here; against a real vLLM with ``vllm bench serve`` too in
tests/real_engine/test_bench_agreement.py) and sends the requests perflab's own profile sends."""

from __future__ import annotations

import json
import math
import shlex

import pytest

from perflab.cli import main
from perflab.hub.sample import SAMPLE_NAME
from perflab.importers.vllm_text import parse_block
from perflab.profiles import PRESETS, SHAREGPT_FILE, BenchmarkProfile, GoodputSLOs
from perflab.views import launch
from perflab.views.commands import vllm_bench_commands
from tests.bench.test_vllm_commands import write_sharegpt_standin

MODEL = "Qwen/Qwen3-8B"
PROFILES = [
    *launch.scale_profiles([PRESETS["short"], PRESETS["sharegpt_concurrency_4"]], 0.01),
    BenchmarkProfile(
        name="paced",
        title="Paced",
        dataset="random",
        input_len=24,
        output_len=6,
        num_prompts=6,
        request_rate=40.0,
        burstiness=2.0,
        max_concurrency=3,
        seed=7,
        warmup=1,
        range_ratio=0.25,
        prefix_len=4,
        percentiles=(50.0, 99.0),
        goodput=GoodputSLOs(ttft_ms=5000),
    ),
]


def displayed_commands() -> list[str]:
    return list(launch.profiles_frame(PROFILES, MODEL)["vllm bench serve"])


def test_the_displayed_command_states_what_perflab_sends_by_default():
    short, sharegpt, paced = (shlex.split(command) for command in displayed_commands())
    assert short[:3] == ["vllm", "bench", "serve"] and "--ignore-eos" not in short  # vLLM forces it on random
    assert short[short.index("--temperature") + 1] == "0"
    assert "--ignore-eos" in sharegpt and sharegpt[sharegpt.index("--max-concurrency") + 1] == "4"
    assert paced[paced.index("--metric-percentiles") + 1] == "50,99"
    assert paced[paced.index("--percentile-metrics") + 1] == "ttft,tpot,itl,e2el"
    for flag in ("--num-warmups", "--request-rate", "--burstiness", "--random-range-ratio", "--goodput"):
        assert flag in paced


@pytest.mark.parametrize("position", range(len(PROFILES)), ids=[profile.name for profile in PROFILES])
def test_displayed_command_runs_unchanged_under_perflab_bench(
    position, sim_server, tmp_path, monkeypatch, capsys
):
    url = sim_server(model=MODEL, fixed_ttft_ms=1, fixed_itl_ms=1)
    monkeypatch.chdir(tmp_path)
    write_sharegpt_standin(tmp_path / "ShareGPT_V3_unfiltered_cleaned_split.json")
    profile, command = PROFILES[position], displayed_commands()[position]
    status = main(["bench", "--base-url", url, *shlex.split(command)[3:], "--save-result", "r.json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    fields, problems = parse_block(captured.out[captured.out.index("=== Serving") :])
    assert problems == [] and (fields["completed"], fields["failed"]) == (profile.num_prompts, 0)
    # The same run as perflab's own argv for the profile would make.
    result = json.loads((tmp_path / "r.json").read_text())
    own = profile.bench_args(base_urls=[url], model=MODEL)
    assert result["dataset"]["name"] == own[own.index("--dataset") + 1]
    assert (
        result["max_concurrency"] == profile.max_concurrency and result["warmup_requests"] == profile.warmup
    )
    assert result["percentiles"] == list(profile.percentiles)
    assert (result["request_rate"] == "inf") == math.isinf(profile.request_rate)
    if profile.dataset == "random" and not profile.range_ratio:
        assert result["total_output_tokens"] == profile.num_prompts * profile.output_len


def test_a_stored_sharegpt_run_names_the_file_its_benchmark_read() -> None:
    profile = {"name": "sharegpt", "title": "ShareGPT", "dataset": "sharegpt", "num_prompts": 100}
    bench = (
        "perflab bench --base-url http://127.0.0.1:8000 --model m --endpoint chat --dataset sharegpt "
        "--dataset-path {path} --num-prompts 100"
    )
    for path in (SAMPLE_NAME, SHAREGPT_FILE):
        (command,) = vllm_bench_commands([profile], "m", [bench.format(path=path)], {})
        assert f"--dataset-path {path}" in command and "--base-url http://127.0.0.1:8000" in command
    (unknown,) = vllm_bench_commands([profile], "m", [], {})  # no benchmark yet: the dump, as planned
    assert f"--dataset-path {SHAREGPT_FILE}" in unknown
