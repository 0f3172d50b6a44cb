"""``python -m perflab bench`` end to end against scripted servers: results, failures, exit codes."""

from __future__ import annotations

import json
import statistics

import pytest

from perflab.cli import main
from tests.fixtures.streaming_server import Script, free_port


def bench(*argv):
    return main(["bench", *argv])


def test_run_writes_vllm_fields_and_perflab_extras(scripted_server, tiny_tokenizer_path, tmp_path, capsys):
    server = scripted_server(Script(ttft_s=0.02, itl_s=0.01))
    result_file, text_file = tmp_path / "result.json", tmp_path / "result.txt"
    status = bench(
        "--base-url",
        server.base_url + "/v1/",
        "--model",
        "scripted-model",
        "--num-prompts",
        "12",
        "--max-concurrency",
        "4",
        "--input-len",
        "40",
        "--output-len",
        "8",
        "--warmup",
        "2",
        "--tokenizer",
        str(tiny_tokenizer_path),
        "--percentiles",
        "50,99.9",
        "--goodput",
        "ttft:1000",
        "--label",
        "smoke",
        "--save-result",
        str(result_file),
        "--result-text",
        str(text_file),
        "--no-progress",
    )
    out = capsys.readouterr().out
    assert status == 0
    result = json.loads(result_file.read_text())
    assert len(server.completions) == 14  # two warmup requests, twelve measured
    assert (result["completed"], result["failed"], result["warmup_requests"]) == (12, 0, 2)
    # vLLM's definitions by default: input tokens as the server's usage reports them, concurrency per
    # 1-second bucket; perflab's own (the prompts' 40 tokens, the exact overlap) sit beside them.
    assert (
        result["input_tokens_definition"] == "usage" and result["peak_concurrency_definition"] == "per-second"
    )
    usage_counts = [record["usage_input_tokens"] for record in result["requests"]]
    assert result["total_input_tokens"] == result["total_usage_input_tokens"] == sum(usage_counts)
    assert result["input_lens"] == usage_counts
    assert result["total_prompt_input_tokens"] == 12 * 40 and result["input_tokens_source"] == "tokenizer"
    assert result["total_output_tokens"] == 12 * 8 and result["output_tokens_source"] == {"usage": 12}
    assert result["backend"] == result["endpoint_type"] == "openai-chat"
    assert (result["label"], result["model_id"], result["num_prompts"]) == ("smoke", "scripted-model", 12)
    assert result["request_rate"] == "inf" and result["max_concurrency"] == 4
    assert result["max_overlapping_requests"] == 4
    assert result["max_concurrent_requests"] == result["max_requests_per_second_bucket"] >= 4
    assert result["request_goodput"] == pytest.approx(result["request_throughput"])
    for name in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p50", "p99.9"):
            assert f"{stat}_{name}_ms" in result
    # The script's timings bound every request from below: its first token 20 ms after the request
    # arrived, its last 7 x 10 ms later. From above only the load of the machine bounds them, so the
    # summary is checked against the per-request figures it sums (the timings themselves are compared
    # with the server's writes on one clock in test_client.py).
    rows = result["requests"]
    assert all(row["ttft_ms"] > 18.0 and row["e2el_ms"] > 88.0 for row in rows)
    assert all(
        row["ttft_ms"] + sum(row["itl_ms"]) == pytest.approx(row["e2el_ms"], abs=0.001) for row in rows
    )
    assert result["mean_ttft_ms"] == pytest.approx(statistics.mean(row["ttft_ms"] for row in rows), abs=0.001)
    itls = [itl for row in rows for itl in row["itl_ms"]]
    assert result["mean_itl_ms"] == pytest.approx(statistics.mean(itls), abs=0.001)
    assert (
        len(result["ttfts"]) == len(result["itls"]) == len(result["errors"]) == len(result["requests"]) == 12
    )
    assert result["errors"] == [""] * 12
    first = result["requests"][0]
    assert set(first) >= {
        "index",
        "start_s",
        "ttft_ms",
        "itl_ms",
        "e2el_ms",
        "input_tokens",
        "output_tokens",
        "output_tokens_source",
        "base_url",
        "error",
        "success",
    }
    assert len(first["itl_ms"]) == 7 and first["base_url"] == server.base_url
    assert sum(row["output_tokens"] for row in result["timeseries"]) == 96
    assert set(result["dispatch_lag_ms"]) == {"mean", "p99", "max"}
    assert result["percentiles"] == [50.0, 99.9]
    assert result["bench_args"][:4] == ["--base-url", server.base_url, "--model", "scripted-model"]
    assert "--warmup" in result["bench_args"] and "--max-concurrency" in result["bench_args"]
    assert text_file.read_text() in out
    assert "P99.9 TTFT (ms):" in out and "Request goodput (req/s):" in out


def test_failures_are_counted_with_reasons_never_a_crash(scripted_server, tmp_path, capsys):
    scripts = {1: Script(status=500), 2: Script(itl_s=0.002, cut_after=2), 3: Script(hang=True)}
    server = scripted_server(lambda index, body: scripts.get(index % 4, Script()))
    result_file = tmp_path / "result.json"
    status = bench(
        "--base-url",
        server.base_url,
        "--model",
        "scripted-model",
        "--num-prompts",
        "8",
        "--input-len",
        "4",
        "--output-len",
        "5",
        "--timeout",
        "2",
        "--max-concurrency",
        "1",
        "--save-result",
        str(result_file),
        "--no-progress",
    )
    captured = capsys.readouterr()
    assert status == 0
    result = json.loads(result_file.read_text())
    assert (result["completed"], result["failed"]) == (2, 6)
    assert result["failure_reasons"] == {"http_500": 2, "stream_interrupted": 2, "timeout": 2}
    reasons = [record["reason"] for record in result["requests"]]
    assert reasons == [None, "http_500", "stream_interrupted", "timeout"] * 2
    assert "Failed requests:                         6" in captured.out
    assert "timeout: 2" in captured.out and "http_500: 2 (first: HTTP 500: scripted failure)" in captured.out
    # failed requests stay out of the latency statistics (the interrupted ones had a first token)
    succeeded = [record["ttft_ms"] for record in result["requests"] if record["success"]]
    assert len(succeeded) == 2
    assert result["mean_ttft_ms"] == pytest.approx(statistics.mean(succeeded), abs=0.001)


def test_unreachable_server_exits_1_with_every_request_failed(tmp_path, capsys):
    result_file = tmp_path / "result.json"
    status = bench(
        "--base-url",
        f"http://127.0.0.1:{free_port()}",
        "--model",
        "m",
        "--num-prompts",
        "5",
        "--input-len",
        "4",
        "--save-result",
        str(result_file),
        "--no-progress",
    )
    assert status == 1
    assert "no request could be sent" in capsys.readouterr().err
    result = json.loads(result_file.read_text())
    assert result["failure_reasons"] == {"connect_error": 5}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dataset", "custom"], "--dataset custom needs --dataset-path"),
        (["--goodput", "ttfb:10"], "--goodput: 'ttfb:10' must be NAME:MILLISECONDS"),
        (["--percentiles", "50,abc"], "--percentiles: 'abc' is not a number"),
        (["--ramp-up-seconds", "5"], "--ramp-up-seconds needs a finite --request-rate"),
        (["--num-prompts", "0"], "--num-prompts must be at least 1"),
        (["--tokenizer", "/nonexistent/tok"], "--tokenizer /nonexistent/tok: no tokenizer.json there"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(scripted_server, capsys, argv, message):
    server = scripted_server(Script())
    status = bench("--base-url", server.base_url, "--model", "m", "--no-progress", *argv)
    err = capsys.readouterr().err
    assert status == 2
    assert err.strip().splitlines() == [f"perflab bench: error: {message}"] or message in err
    assert "Traceback" not in err
    assert server.completions == []


def test_malformed_dataset_exits_2_naming_file_and_line(scripted_server, tmp_path, capsys):
    server = scripted_server(Script())
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "fine"}\n{"prompt": 3}\n')
    status = bench(
        "--base-url",
        server.base_url,
        "--model",
        "m",
        "--dataset",
        "custom",
        "--dataset-path",
        str(path),
        "--no-progress",
    )
    assert status == 2
    assert f"{path}:2: field 'prompt': must be a non-empty string" in capsys.readouterr().err


def test_progress_json_lines(scripted_server, capsys):
    server = scripted_server(Script(ttft_s=0.3))
    assert (
        bench(
            "--base-url",
            server.base_url,
            "--model",
            "m",
            "--num-prompts",
            "6",
            "--input-len",
            "4",
            "--output-len",
            "2",
            "--max-concurrency",
            "2",
            "--progress-json",
        )
        == 0
    )
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("PERFLAB_PROGRESS ")]
    snapshots = [json.loads(line.split(" ", 1)[1]) for line in lines]
    assert len(snapshots) >= 1
    assert snapshots[-1] == {
        "phase": "benchmark",
        "done": 6,
        "failed": 0,
        "total": 6,
        "elapsed_s": snapshots[-1]["elapsed_s"],
        "in_flight": 0,
        "e2el_sum_s": snapshots[-1]["e2el_sum_s"],
        "e2el_n": 6,
        "clock_s": snapshots[-1]["clock_s"],
    }
    assert snapshots[-1]["e2el_sum_s"] > 0
    # each line says when it was written on the bench's own clock, the clock of its result's window
    clocks = [snapshot["clock_s"] for snapshot in snapshots]
    assert clocks == sorted(clocks)
    assert all(0 <= snapshot["in_flight"] <= 2 for snapshot in snapshots)


def test_requests_rotate_over_base_urls_and_follow_the_schedule(
    scripted_server, tmp_path, capsys, monkeypatch
):
    first, second = scripted_server(Script()), scripted_server(Script())
    monkeypatch.setenv("OPENAI_API_KEY", "secret")
    result_file = tmp_path / "result.json"
    assert (
        bench(
            "--base-url",
            first.base_url,
            "--base-url",
            second.base_url,
            "--model",
            "m",
            "--num-prompts",
            "10",
            "--request-rate",
            "20",
            "--burstiness",
            "inf",
            "--input-len",
            "4",
            "--output-len",
            "2",
            "--endpoint",
            "completions",
            "--no-ignore-eos",
            "--save-result",
            str(result_file),
            "--no-progress",
        )
        == 0
    )
    result = json.loads(result_file.read_text())
    assert [record["base_url"] for record in result["requests"]] == [first.base_url, second.base_url] * 5
    assert len(first.completions) == len(second.completions) == 5
    assert first.completions[0].path == "/v1/completions"
    assert "ignore_eos" not in first.completions[0].body
    assert first.completions[0].headers["authorization"] == "Bearer secret"
    assert result["base_urls"] == [first.base_url, second.base_url] and result["burstiness"] == "inf"
    scheduled = [record["scheduled_s"] for record in result["requests"]]
    assert scheduled == pytest.approx([i / 20 for i in range(10)])
    starts = [record["start_s"] for record in result["requests"]]
    # Each request leaves at its time or after it: a busy machine only ever delays a dispatch.
    assert all(start >= due - 0.005 for start, due in zip(starts, scheduled, strict=True))


def test_server_timings_and_tool_call_streams_as_vllm_033_writes_them(scripted_server, tmp_path):
    metrics = {"queue_time_ms": 7.5, "time_to_first_token_ms": 21.0, "generation_time_ms": 3.0}
    server = scripted_server(
        lambda index, body: Script(tool_calls=True, server_metrics=metrics if index % 2 == 0 else None)
    )
    result_file = tmp_path / "result.json"
    common = ["--model", "scripted-model", "--input-len", "4", "--output-len", "3", "--no-progress"]
    argv = ["--base-url", server.base_url, "--num-prompts", "4", "--max-concurrency", "1"]
    assert bench(*argv, *common, "--save-result", str(result_file)) == 0
    result = json.loads(result_file.read_text())
    assert (result["completed"], result["failed"]) == (4, 0)  # tool calls are the first token
    assert result["server_queue_times"] == [0.0075, None, 0.0075, None]
    assert result["server_ttfts"] == [0.021, None, 0.021, None]
    assert [record["server_ttft_ms"] for record in result["requests"]] == [21.0, None, 21.0, None]
    assert [record["server_queue_ms"] for record in result["requests"]] == [7.5, None, 7.5, None]

    plain = scripted_server(Script())
    argv = ["--base-url", plain.base_url, "--num-prompts", "2"]
    assert bench(*argv, *common, "--save-result", str(result_file)) == 0
    assert not {"server_queue_times", "server_ttfts"} & set(json.loads(result_file.read_text()))
