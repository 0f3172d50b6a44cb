"""The text block matches ``vllm bench serve`` (vLLM 0.32.0) line for line; the options round-trip
through argv."""

from __future__ import annotations

import argparse
import math

from perflab.bench import cli
from perflab.bench.options import BenchOptions
from perflab.bench.report import format_failures, format_text_block


def result(**overrides):
    values = {
        "completed": 998,
        "failed": 2,
        "max_concurrency": 64,
        "request_rate": 10.0,
        "duration": 100.004,
        "total_input_tokens": 217393,
        "total_output_tokens": 196004,
        "request_throughput": 9.98,
        "request_goodput": None,
        "output_throughput": 1960.03,
        "max_output_tokens_per_s": 3297.0,
        "max_concurrent_requests": 64,
        "total_token_throughput": 4133.9,
        "percentiles": [50.0, 99.0],
    }
    for index, name in enumerate(("ttft", "tpot", "itl", "e2el")):
        values.update(
            {
                f"mean_{name}_ms": 10.0 * (index + 1),
                f"median_{name}_ms": 9.5 * (index + 1),
                f"std_{name}_ms": 1.0,
                f"p50_{name}_ms": 9.5 * (index + 1),
                f"p99_{name}_ms": 30.125,
            }
        )
    values.update(overrides)
    return values


EXPECTED_LINES = [
    "============ Serving Benchmark Result ============",
    "Successful requests:                     998       ",
    "Failed requests:                         2         ",
    "Maximum request concurrency:             64        ",
    "Request rate configured (RPS):           10.00     ",
    "Benchmark duration (s):                  100.00    ",
    "Total input tokens:                      217393    ",
    "Total generated tokens:                  196004    ",
    "Request throughput (req/s):              9.98      ",
    "Output token throughput (tok/s):         1960.03   ",
    "Peak output token throughput (tok/s):    3297.00   ",
    "Peak concurrent requests:                64.00     ",
    "Total token throughput (tok/s):          4133.90   ",
    "---------------Time to First Token----------------",
    "Mean TTFT (ms):                          10.00     ",
    "Median TTFT (ms):                        9.50      ",
    "P50 TTFT (ms):                           9.50      ",
    "P99 TTFT (ms):                           30.12     ",
    "-----Time per Output Token (excl. 1st token)------",
    "Mean TPOT (ms):                          20.00     ",
    "Median TPOT (ms):                        19.00     ",
    "P50 TPOT (ms):                           19.00     ",
    "P99 TPOT (ms):                           30.12     ",
    "---------------Inter-token Latency----------------",
    "Mean ITL (ms):                           30.00     ",
    "Median ITL (ms):                         28.50     ",
    "P50 ITL (ms):                            28.50     ",
    "P99 ITL (ms):                            30.12     ",
    "----------------End-to-end Latency----------------",
    "Mean E2EL (ms):                          40.00     ",
    "Median E2EL (ms):                        38.00     ",
    "P50 E2EL (ms):                           38.00     ",
    "P99 E2EL (ms):                           30.12     ",
    "==================================================",
]
EXPECTED = "\n".join(EXPECTED_LINES) + "\n"


def test_text_block_has_vllm_labels_order_and_padding():
    assert format_text_block(result()) == EXPECTED


def test_text_block_prints_the_sections_of_the_chosen_percentile_metrics():
    # vLLM 0.32's default --percentile-metrics ttft,tpot,itl: no E2EL section.
    text = format_text_block(result(percentile_metrics=["ttft", "tpot", "itl"]))
    assert text == EXPECTED.replace("\n".join(EXPECTED_LINES[-6:-1]) + "\n", "")
    assert "E2EL" not in text and text.endswith(
        "P99 ITL (ms):                            30.12     \n" + "=" * 50 + "\n"
    )
    only_e2el = format_text_block(result(percentile_metrics=["e2el"]))
    assert "TTFT" not in only_e2el and "Mean E2EL (ms):" in only_e2el


def test_text_block_omits_unset_lines_and_adds_goodput():
    text = format_text_block(result(max_concurrency=None, request_rate="inf", request_goodput=4.5))
    assert "Maximum request concurrency" not in text and "Request rate configured" not in text
    lines = text.splitlines()
    assert lines[lines.index(next(line for line in lines if line.startswith("Request throughput"))) + 1] == (
        "Request goodput (req/s):                 4.50      "
    )


def test_failure_summary_lists_reasons_with_a_first_message():
    text = format_failures(
        {
            "completed": 1,
            "failed": 3,
            "failure_reasons": {"timeout": 1, "http_500": 2},
            "requests": [
                {"reason": None, "error": None},
                {"reason": "http_500", "error": "HTTP 500: down"},
                {"reason": "timeout", "error": "no complete response"},
                {"reason": "http_500", "error": "x"},
            ],
        }
    )
    assert text.splitlines() == [
        "Failed requests by reason (3 of 4):",
        "  http_500: 2 (first: HTTP 500: down)",
        "  timeout: 1 (first: no complete response)",
    ]
    assert format_failures({"completed": 3, "failed": 0, "failure_reasons": {}}) == ""


def test_options_round_trip_through_argv():
    options = BenchOptions(
        base_urls=["http://a:1", "http://b:2"],
        model="m",
        endpoint="completions",
        dataset="custom",
        dataset_path="p.jsonl",
        input_len=10,
        output_len=5,
        num_prompts=7,
        request_rate=2.5,
        burstiness=math.inf,
        max_concurrency=3,
        seed=9,
        warmup=1,
        percentiles=(50.0, 99.9),
        goodput={"ttft": 100.0, "e2el": 2000.0},
        tokenizer="tok.json",
        range_ratio=0.25,
        prefix_len=4,
        ramp_up_seconds=2.0,
        timeout=30.0,
        ignore_eos=False,
        temperature=0.7,
        label="x",
        progress="none",
        backend="openai",
        served_model_name="served",
        percentile_metrics=("ttft", "e2el"),
        trust_remote_code=True,
        sampling={"top_p": 0.9, "top_k": 20},
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        extra_headers={"x-team": "perf"},
        request_id_prefix="run-",
        input_tokens="prompt",
        peak_concurrency="exact",
    )
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    again = cli.options_from_args(parser.parse_args(options.to_argv() + ["--no-progress"]))
    assert again == options
    assert "--api-key" not in BenchOptions(base_urls=["http://a"], model="m", api_key="k").to_argv()
