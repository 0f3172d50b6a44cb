"""``vllm bench serve`` command lines under ``python -m perflab bench``: the seeds' commands run
unchanged against a local simulated engine, vLLM 0.32.0's flags keep their meaning, and a vLLM flag
perflab does not offer is named in a one-line error."""

from __future__ import annotations

import argparse
import json
import random
import re
import shlex
from pathlib import Path

import pytest

from perflab.bench.cli import configure
from perflab.bench.vllm_flags import UNSUPPORTED_FLAGS
from perflab.cli import main
from perflab.importers.vllm_text import parse_block
from tests.fixtures.streaming_server import Script

SEEDS = Path(__file__).resolve().parents[1] / "data" / "seeds"
SEED_COMMANDS = sorted(
    {
        line.strip()
        for path in SEEDS.glob("*.txt")
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip().startswith("vllm bench serve ")
    }
)
SHAREGPT_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "sigma", "tau")


def write_sharegpt_standin(path: Path, conversations: int = 40) -> None:
    """A small ShareGPT_V3-shaped file: two-turn conversations of known word counts."""
    rng = random.Random(3)

    def turn(speaker: str, low: int, high: int) -> dict:
        return {
            "from": speaker,
            "value": " ".join(rng.choice(SHAREGPT_WORDS) for _ in range(rng.randint(low, high))),
        }

    entries = [
        {"id": str(i), "conversations": [turn("human", 8, 40), turn("gpt", 8, 60)]}
        for i in range(conversations)
    ]
    path.write_text(json.dumps(entries), encoding="utf-8")


def vllm_args(command: str) -> list[str]:
    """The arguments of a ``vllm bench serve …`` line."""
    words = shlex.split(command)
    assert words[:3] == ["vllm", "bench", "serve"]
    return words[3:]


def exit_status(argv: list[str]) -> int:
    """``main(argv)``, or the status argparse exits with for a command line it refuses."""
    try:
        return main(argv)
    except SystemExit as exit:
        return int(exit.code)


def text_block(out: str) -> dict:
    fields, problems = parse_block(out[out.index("=== Serving Benchmark Result") :])
    assert problems == []
    return fields


def test_the_seeds_print_vllm_bench_serve_commands():
    assert len(SEED_COMMANDS) == 8  # seeds 000, 001, 003 and 004: ShareGPT and random 4000/200 each


@pytest.mark.slow
@pytest.mark.parametrize(
    "command", SEED_COMMANDS, ids=lambda command: command.split()[4] + " " + command.split()[10]
)
def test_each_seed_command_runs_unchanged(command, sim_server, tmp_path, monkeypatch, capsys):
    args = vllm_args(command)
    model = args[args.index("--model") + 1]
    url = sim_server(model=model, fixed_ttft_ms=0, fixed_itl_ms=0)
    monkeypatch.chdir(tmp_path)
    write_sharegpt_standin(tmp_path / "ShareGPT_V3_unfiltered_cleaned_split.json")
    status = main(["bench", "--base-url", url, *args])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    fields = text_block(captured.out)
    prompts = int(args[args.index("--num-prompts") + 1])
    assert (fields["completed"], fields["failed"]) == (prompts, 0)
    assert "Total token throughput (tok/s):" in captured.out
    if "random" in args:
        # --random-input-len 4000 --random-output-len 200, lengths exact through the server's /tokenize.
        assert fields["total_output_tokens"] == prompts * 200
        assert fields["total_input_tokens"] == prompts * 4000
    else:
        assert "reusing them for 1000 requests" in captured.err  # the 40-conversation stand-in


def test_vllm_flags_keep_their_meaning(scripted_server, tmp_path, monkeypatch, capsys):
    server = scripted_server(Script())
    monkeypatch.chdir(tmp_path)
    host, port = re.match(r"http://(.+):(\d+)$", server.base_url).groups()
    command = (
        f"vllm bench serve --host {host} --port {port} --model org/Some-Model --served-model-name served "
        "--backend openai --endpoint /v1/completions --dataset-name random --random-input-len 8 "
        "--random-output-len 3 --random-range-ratio 0 --random-prefix-len 0 --num-prompts 4 --seed 1 "
        "--num-warmups 1 --max-concurrency 2 --temperature 0.5 --top-p 0.9 --top-k 20 "
        '--extra-body \'{"chat_template_kwargs": {"enable_thinking": false}}\' --header x-team=perf '
        "--request-id-prefix bench-x- --ignore-eos --metric-percentiles 50,99 --percentile-metrics ttft,e2el "
        "--goodput ttft:5000 --label lbl --save-result --save-detailed --result-dir out --metadata tp=1 "
        "--disable-tqdm"
    )
    status = main(["bench", *vllm_args(command)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert len(server.completions) == 5  # one warmup, four measured
    first = server.completions[1]
    assert first.path == "/v1/completions"
    assert first.body["model"] == "served" and first.body["max_tokens"] == 3
    assert (first.body["temperature"], first.body["top_p"], first.body["top_k"]) == (0.5, 0.9, 20)
    assert (
        first.body["chat_template_kwargs"] == {"enable_thinking": False} and first.body["ignore_eos"] is True
    )
    measured = server.completions[1:]  # two at a time: they may arrive in either order
    assert all(request.headers["x-team"] == "perf" for request in measured)
    assert sorted(request.headers["x-request-id"] for request in measured) == [
        f"bench-x-{number}" for number in range(1, 5)
    ]
    # vLLM's file name: {label}-{rate}qps-concurrency{N}-{model basename}-{date}.json in --result-dir.
    saved = list((tmp_path / "out").iterdir())
    assert len(saved) == 1 and re.fullmatch(
        r"lbl-infqps-concurrency2-Some-Model-\d{8}-\d{6}\.json", saved[0].name
    )
    result = json.loads(saved[0].read_text())
    assert (result["backend"], result["model_id"], result["label"], result["tp"]) == (
        "openai",
        "org/Some-Model",
        "lbl",
        "1",
    )
    assert result["max_concurrency"] == 2 and result["percentiles"] == [50.0, 99.0]
    lines = captured.out.splitlines()
    assert "P50 TTFT (ms):" in captured.out and "P99 E2EL (ms):" in captured.out
    assert not any(line.startswith(("Mean TPOT", "Mean ITL", "P90")) for line in lines)
    assert "Request goodput (req/s):" in captured.out


def test_chat_backend_alone_picks_the_chat_endpoint_and_the_model_comes_from_the_server(
    scripted_server, tmp_path, capsys
):
    server = scripted_server(Script())
    result_file = tmp_path / "r.json"
    argv = ["bench", "--base-url", server.base_url, "--backend", "openai-chat", "--input-len", "4"]
    status = main([*argv, "--num-prompts", "2", "--output-len", "2", "--save-result", str(result_file)])
    assert status == 0, capsys.readouterr().err
    assert {request.path for request in server.completions} == {"/v1/chat/completions"}
    assert server.completions[0].body["model"] == server.model  # the first of /v1/models
    assert json.loads(result_file.read_text())["backend"] == "openai-chat"


def test_save_result_switch_append_and_old_file_form(scripted_server, tmp_path, monkeypatch, capsys):
    server = scripted_server(Script())
    monkeypatch.chdir(tmp_path)
    base = ["bench", "--base-url", server.base_url, "--model", "m", "--num-prompts", "2", "--input-len", "4"]
    assert main([*base, "--save-result", "--result-filename", "named.json", "--no-progress"]) == 0
    assert json.loads((tmp_path / "named.json").read_text())["completed"] == 2
    for _ in range(2):
        assert main([*base, "--append-result", "--result-filename", "all.jsonl", "--no-progress"]) == 0
    assert [json.loads(line)["completed"] for line in (tmp_path / "all.jsonl").read_text().splitlines()] == [
        2,
        2,
    ]
    assert main([*base, "--save-result", "old.json", "--no-progress"]) == 0  # perflab's FILE form
    assert json.loads((tmp_path / "old.json").read_text())["num_prompts"] == 2
    capsys.readouterr()
    assert main([*base, "--save-result", "a.json", "--result-filename", "b.json"]) == 2
    assert "either as --save-result FILE or as --result-filename" in capsys.readouterr().err
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--profile"], "vllm bench serve flag --profile is not supported by perflab bench"),
        (
            ["--lora-modules", "a", "b"],
            "vllm bench serve flag --lora-modules is not supported by perflab bench",
        ),
        (
            ["--ramp-up-strategy", "linear"],
            "vllm bench serve flag --ramp-up-strategy is not supported by perflab bench; "
            "perflab ramps linearly with --ramp-up-seconds",
        ),
        (
            ["--backend", "openai-audio"],
            "vllm bench serve backend 'openai-audio' is not supported by perflab bench "
            "(supported: openai, vllm, openai-chat)",
        ),
        (
            ["--dataset-name", "hf"],
            "vllm bench serve dataset 'hf' is not supported by perflab bench "
            "(supported: random, sharegpt, custom, generated-shared-prefix, sharegpt-multi-turn, "
            "agentic-trace, mooncake)",
        ),
        (
            ["--percentile-metrics", "ttft,client_queue_time"],
            "vllm bench serve percentile metric 'client_queue_time' is not supported by perflab bench",
        ),
        (
            ["--backend", "openai-chat", "--endpoint", "/v1/completions"],
            "--backend openai-chat sends chat requests "
            "but --endpoint /v1/completions is a completions endpoint",
        ),
        (["--random-range-ratio", '{"input": 0.1}'], "separate input/output range ratios are not supported"),
        (
            ["--endpoint", "/v1/embeddings"],
            "--endpoint '/v1/embeddings' must be chat, completions, or a path",
        ),
    ],
)
def test_what_perflab_does_not_offer_is_one_clear_error(scripted_server, capsys, argv, message):
    server = scripted_server(Script())
    assert exit_status(["bench", "--base-url", server.base_url, "--model", "m", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert "unrecognized arguments" not in err
    assert server.completions == []


def accepted_flags() -> set[str]:
    """Every flag ``perflab bench`` takes (the hidden unsupported ones left out)."""
    parser = argparse.ArgumentParser()
    configure(parser)
    return {
        flag
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for flag in action.option_strings
    }


def test_the_unsupported_table_names_no_flag_perflab_accepts():
    assert accepted_flags().isdisjoint(UNSUPPORTED_FLAGS)


def test_random_prompts_follow_the_servers_tokenizer_when_the_local_one_disagrees(
    sim_server, tiny_tokenizer_path, tmp_path, capsys
):
    # The simulated engine counts words; the local tokenizer.json counts BPE pieces: the prompts are
    # re-aligned to the server's lengths, as vllm bench serve 0.32 re-aligns its random prompts.
    url = sim_server(fixed_ttft_ms=1, fixed_itl_ms=1)
    result_file = tmp_path / "r.json"
    argv = ["bench", "--base-url", url, "--model", "sim-model", "--tokenizer", str(tiny_tokenizer_path)]
    argv += ["--random-input-len", "40", "--random-output-len", "2", "--num-prompts", "6", "--seed", "5"]
    assert main([*argv, "--no-progress", "--save-result", str(result_file)]) == 0
    result = json.loads(result_file.read_text())
    assert any("6 prompts re-aligned to its lengths" in note for note in result["notes"])
    assert result["input_tokens_source"] == "server" and result["input_tokens_check"]["mismatched"] == 0
    assert [record["usage_input_tokens"] for record in result["requests"]] == [40] * 6
    assert result["total_input_tokens"] == result["total_prompt_input_tokens"] == 240
