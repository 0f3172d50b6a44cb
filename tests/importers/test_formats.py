"""vLLM JSON results, JSON lines, guidellm reports and text-block variants beyond the seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import Session

from db import crud
from perflab.importers import import_content, import_files, parse_content
from perflab.importers.model import ImportFileError

DATA = Path(__file__).resolve().parents[1] / "data" / "imports"

TERMINAL_CAPTURE = """\
$ CUDA_VISIBLE_DEVICES=0,1 vllm serve Qwen/Qwen3-8B \\
    --tensor-parallel-size 2 --kv-cache-dtype fp8
INFO: Started server process
$ vllm bench serve --model Qwen/Qwen3-8B --request-rate 10 --num-prompts 500
Traffic request rate: 10.0
============ Serving Benchmark Result ============
Successful requests:                     498
Failed requests:                         2
Request rate configured (RPS):           10.00
Benchmark duration (s):                  51.20
Total input tokens:                      102000
Total generated tokens:                  99600
Request throughput (req/s):              9.73
Request goodput (req/s):                 9.10
Output token throughput (tok/s):         1945.31
Peak output token throughput (tok/s):    2400.00
Peak concurrent requests:                37.00
Total token throughput (tok/s):          3937.50
---------------Time to First Token----------------
Mean TTFT (ms):                          45.10
Median TTFT (ms):                        41.00
Std TTFT (ms):                           9.87
P50 TTFT (ms):                           41.00
P99.9 TTFT (ms):                         120.40
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          15.20
Median TPOT (ms):                        15.00
P99 TPOT (ms):                           19.90
---------------Inter-token Latency----------------
Mean ITL (ms):                           15.10
Median ITL (ms):                         14.80
P99 ITL (ms):                            30.00
----------------End-to-end Latency----------------
Mean E2EL (ms):                          3050.00
Median E2EL (ms):                        3000.00
P99 E2EL (ms):                           4100.25
==================================================
"""


def test_vllm_save_result_with_detailed_arrays(db_session: Session) -> None:
    [run] = import_files(db_session, [DATA / "vllm_save_result.json"], label="nightly")
    assert (run.status, run.source, run.label, run.model, run.engine) == (
        "done",
        "imported",
        "nightly",
        "Qwen/Qwen3-14B",
        None,
    )
    [stored] = crud.list_profile_results(db_session, run_id=run.id)
    assert (stored.completed, stored.failed, stored.success_rate) == (3, 1, 0.75)
    assert (stored.total_token_throughput, stored.p99_ttft_ms, stored.mean_e2el_ms) == (132.0, 129.8, 300.0)
    assert stored.result["std_ttft_ms"] == 14.14 and stored.result["date"] == "20250312-101500"
    assert not {"ttfts", "itls", "input_lens", "generated_texts"} & set(stored.result)
    assert stored.profile == {
        "name": "imported",
        "num_prompts": 4,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 2,
    }

    records = crud.list_request_records(db_session, profile_result_id=stored.id)
    assert [record.ttft_ms for record in records] == [100.0, 120.0, 110.0, 0.0]
    assert records[1].itl_ms == [19.0, 30.0]
    assert [record.success for record in records] == [True, True, True, False]
    assert records[3].error == "HTTP 500: overloaded" and records[0].output_tokens == 10


def test_json_lines_one_run_per_line_in_order(db_session: Session) -> None:
    runs = import_files(db_session, [DATA / "vllm_results.jsonl"])
    figures = [crud.list_profile_results(db_session, run_id=run.id)[0] for run in runs]
    assert [(f.request_throughput, f.mean_tpot_ms) for f in figures] == [(4.0, 12.5), (7.93, 15.75)]
    assert [run.profiles[0]["request_rate"] for run in runs] == [4.0, 8.0]
    assert "failed" not in figures[0].result and figures[0].failed is None


def test_list_of_results_and_perflab_requests(db_session: Session) -> None:
    requests = [
        {"index": 0, "ttft_ms": 5.0, "itl_ms": [1.0], "success": True, "output_tokens_source": "usage"},
        {"index": 1, "ttft_ms": 6.0, "itl_ms": [], "success": True},
    ]
    results = [
        {"completed": 2, "duration": 1.0, "bench_args": ["bench", "--rate", "2"], "requests": requests},
        {"completed": 1, "duration": 2.0},
    ]
    content = json.dumps(results)
    first, second = import_content(db_session, name="uploads/two.json", content=content.encode())
    assert first.imported_from == "two.json" and first.bench_commands == ["bench --rate 2"]
    [stored] = crud.list_profile_results(db_session, run_id=first.id)
    records = crud.list_request_records(db_session, profile_result_id=stored.id)
    assert [(r.index, r.ttft_ms, r.output_tokens_source) for r in records] == [
        (0, 5.0, "usage"),
        (1, 6.0, None),
    ]
    assert crud.list_profile_results(db_session, run_id=second.id)[0].duration == 2.0


def test_guidellm_report_maps_names_to_vllm(db_session: Session) -> None:
    rate_run, concurrent_run = import_files(db_session, [DATA / "guidellm_report.json"])
    rate = crud.list_profile_results(db_session, run_id=rate_run.id)[0].result
    assert rate["completed"] == 200 and rate["failed"] == 2 and rate["duration"] == 20.0
    assert rate["total_input_tokens"] == 20000 and rate["total_output_tokens"] == 10000
    assert rate["request_throughput"] == 10.0
    assert rate["output_throughput"] == 500.0 and rate["total_token_throughput"] == 1500.0
    assert (rate["mean_ttft_ms"], rate["median_ttft_ms"], rate["p99_ttft_ms"], rate["p99.9_ttft_ms"]) == (
        120.0,
        110.0,
        250.0,
        260.0,
    )
    # guidellm's inter-token latency is vLLM's TPOT; its request latency (s) is E2EL (ms); no ITL
    assert (rate["mean_tpot_ms"], rate["p95_tpot_ms"], rate["std_tpot_ms"]) == (22.5, 33.0, 1.5)
    assert (rate["mean_e2el_ms"], rate["p99_e2el_ms"]) == (1250.0, 1900.0)
    assert not any(key.endswith("_itl_ms") for key in rate)
    assert rate["request_rate"] == 10.0 and rate["model_id"] == "Qwen/Qwen3-14B"
    assert rate["max_output_tokens_per_s"] == 123456.5
    assert rate_run.model == "Qwen/Qwen3-14B" and rate_run.label == "guidellm constant 10 req/s"

    concurrent = crud.list_profile_results(db_session, run_id=concurrent_run.id)[0]
    assert concurrent.result["max_concurrency"] == 64 and concurrent.mean_tpot_ms == 40.0
    assert concurrent_run.label == "guidellm concurrent 64"
    assert concurrent.total_token_throughput == 3000.0


def test_text_block_variants_and_plain_serving_command(db_session: Session) -> None:
    [run] = import_content(db_session, name="capture.log", content=TERMINAL_CAPTURE.replace("\n", "\r\n"))
    assert run.serve_commands == [
        "CUDA_VISIBLE_DEVICES=0,1 vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2 --kv-cache-dtype fp8"
    ]
    assert (run.engine, run.model, run.config["tp"], run.config["kv_cache_dtype"]) == (
        "vllm",
        "Qwen/Qwen3-8B",
        2,
        "fp8",
    )
    assert run.config["env"] == {"CUDA_VISIBLE_DEVICES": "0,1"}
    [stored] = crud.list_profile_results(db_session, run_id=run.id)
    result = stored.result
    assert (result["completed"], result["failed"], result["request_rate"], result["request_goodput"]) == (
        498,
        2,
        10.0,
        9.1,
    )
    assert result["total_token_throughput"] == 3937.5 and stored.success_rate == 498 / 500
    assert (result["std_ttft_ms"], result["p50_ttft_ms"], result["p99.9_ttft_ms"]) == (9.87, 41.0, 120.4)
    assert (stored.mean_e2el_ms, stored.median_e2el_ms, stored.p99_e2el_ms) == (3050.0, 3000.0, 4100.25)
    assert stored.text_block.startswith("============ Serving Benchmark Result")
    assert stored.text_block.rstrip().endswith("=" * 50)


def test_commented_blocks_and_absent_fields_stay_absent() -> None:
    commented = "\n".join(f"# {line}" for line in TERMINAL_CAPTURE.splitlines()[5:])
    without_optional = "\n".join(
        line
        for line in TERMINAL_CAPTURE.splitlines()[5:]
        if not line.startswith(("Failed", "Request goodput"))
    )
    [from_comments] = parse_content("script.sh", commented)
    [plain] = parse_content("x.txt", without_optional)
    assert from_comments.result["completed"] == 498 and from_comments.result["p99_e2el_ms"] == 4100.25
    assert "failed" not in plain.result and "request_goodput" not in plain.result


@pytest.mark.parametrize("name", ["result.txt", "result.json", "result"])
def test_format_is_detected_from_content_not_name(name: str) -> None:
    json_text = (DATA / "vllm_results.jsonl").read_text()
    assert [item.source_format for item in parse_content(name, json_text)] == ["vllm-json", "vllm-json"]
    assert [item.source_format for item in parse_content(name, TERMINAL_CAPTURE)] == ["vllm-text"]


# Printed by vLLM 0.32.0 with --max-concurrency 8 --percentile-metrics ttft,client_queue_time
# --metric-percentiles 99 against a server with speculative decoding.
VLLM_0_32_BLOCK = """\
============ Serving Benchmark Result ============
Successful requests:                     40
Failed requests:                         0
Maximum request concurrency:             8
Benchmark duration (s):                  12.50
Total input tokens:                      5560
Total generated tokens:                  1280
Request throughput (req/s):              3.20
Output token throughput (tok/s):         102.40
Peak output token throughput (tok/s):    160.00
Peak concurrent requests:                24.00
Total token throughput (tok/s):          547.20
---------------Time to First Token----------------
Mean TTFT (ms):                          120.00
Median TTFT (ms):                        110.00
P99 TTFT (ms):                           300.00
---------------Client-side Queueing---------------
Mean Client Queue Time (ms):             900.00
Median Client Queue Time (ms):           850.00
P99 Client Queue Time (ms):              2000.00
---------------Speculative Decoding---------------
Acceptance rate (%):                     61.50
Acceptance length:                       2.23
Drafts:                                  410
Draft tokens:                            820
Accepted tokens:                         504
==================================================
"""


def test_vllm_0_32_block_with_new_labels_and_sections() -> None:
    [item] = parse_content("bench.log", VLLM_0_32_BLOCK)
    result = item.result
    assert result["total_token_throughput"] == 547.2 and result["max_concurrent_requests"] == 24.0
    assert (result["mean_client_queue_time_ms"], result["p99_client_queue_time_ms"]) == (900.0, 2000.0)
    assert (result["spec_decode_acceptance_rate"], result["spec_decode_acceptance_length"]) == (61.5, 2.23)
    assert (result["spec_decode_num_drafts"], result["spec_decode_accepted_tokens"]) == (410, 504)
    # The label older vLLM versions (and the seeds) print reads the same.
    [older] = parse_content("old.log", VLLM_0_32_BLOCK.replace("Total token", "Total Token"))
    assert older.result["total_token_throughput"] == 547.2


def test_vllm_033_server_timing_arrays_become_request_fields(db_session: Session) -> None:
    # vllm bench serve 0.33.0 --save-detailed against a server with --enable-per-request-metrics: the
    # arrays are in seconds, null for a request the server sent no timings for.
    result = json.loads((DATA / "vllm_save_result.json").read_text())
    result["server_queue_times"] = [0.002, 0.0105, None, None]
    result["server_ttfts"] = [0.09, 0.1, None, None]
    result["start_times"] = [5000.25, 5000.5, 5001.0, "x"]  # time.perf_counter() at each send
    [run] = import_content(db_session, name="v033.json", content=json.dumps(result).encode())
    [stored] = crud.list_profile_results(db_session, run_id=run.id)
    assert not {"server_queue_times", "server_ttfts"} & set(stored.result)
    records = crud.list_request_records(db_session, profile_result_id=stored.id)
    assert [record.server_queue_ms for record in records] == [2.0, 10.5, None, None]
    assert [record.server_ttft_ms for record in records] == [90.0, 100.0, None, None]
    assert [record.start_s for record in records] == [0.0, 0.25, 0.75, None]
    assert "start_times" not in stored.result


def test_server_timing_array_of_the_wrong_type_is_one_line(db_session: Session) -> None:
    result = {"completed": 1, "duration": 1.0, "server_ttfts": "0.1"}
    with pytest.raises(ImportFileError, match="field server_ttfts is .*expected a list"):
        parse_content("bad.json", json.dumps(result).encode())
