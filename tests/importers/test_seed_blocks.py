"""Importing every benchmark block of the five seed documents stores the printed numbers.

The expected values are read from the seed text here with a label table of this test's own, so
the importer's parser is checked against an independent reading of the same blocks.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest
from sqlmodel import Session

from db import crud
from db.models import Run
from perflab.importers import import_files

SEEDS = Path(__file__).resolve().parents[1] / "data" / "seeds"
SEED_FILES = sorted(SEEDS.glob("*.txt"))
BLOCK = re.compile(r"=+ Serving Benchmark Result =+(.*?)={40,}", re.DOTALL)

# printed label → (stored field, factor); a latency "(s)" line is stored as E2EL in ms
LABELS: dict[str, tuple[str, int]] = {
    "Successful requests": ("completed", 1),
    "Maximum request concurrency": ("max_concurrency", 1),
    "Benchmark duration (s)": ("duration", 1),
    "Total input tokens": ("total_input_tokens", 1),
    "Total generated tokens": ("total_output_tokens", 1),
    "Request throughput (req/s)": ("request_throughput", 1),
    "Output token throughput (tok/s)": ("output_throughput", 1),
    "Peak output token throughput (tok/s)": ("max_output_tokens_per_s", 1),
    "Peak concurrent requests": ("max_concurrent_requests", 1),
    "Total Token throughput (tok/s)": ("total_token_throughput", 1),
    "Mean Latency(s)": ("mean_e2el_ms", 1000),
    "Median Latency(s)": ("median_e2el_ms", 1000),
    "P95 Latency(s)": ("p95_e2el_ms", 1000),
    "P99 Latency(s)": ("p99_e2el_ms", 1000),
}
for _metric in ("TTFT", "TPOT", "ITL"):
    for _stat in ("Mean", "Median", "P95", "P99"):
        LABELS[f"{_stat} {_metric} (ms)"] = (f"{_stat.lower()}_{_metric.lower()}_ms", 1)

EXPECTED_RUNS = {
    "000_7382f1cb439cecdf.txt": (15, 0),
    "001_df97046e8f66ab3a.txt": (15, 2),
    "002_89d6b111a291c7d5.txt": (15, 0),
    "003_2a9b959132c66de7.txt": (15, 0),
    "004_66c74e108a0d1776.txt": (13, 1),
}


def printed_blocks(path: Path) -> list[dict[str, float]]:
    """Each block of a seed as {field: value}, read with this test's label table."""
    blocks = []
    for body in BLOCK.findall(path.read_text(encoding="utf-8")):
        values = {}
        for label, (field, factor) in LABELS.items():
            match = re.search(re.escape(label) + r":\s+([\d.]+)", body)
            if match:
                values[field] = float(Decimal(match.group(1)) * factor)
        blocks.append(values)
    return blocks


@pytest.fixture
def imported(db_session: Session) -> dict[str, list[Run]]:
    runs = import_files(db_session, SEED_FILES, queued_by="seed-test")
    by_file: dict[str, list[Run]] = {}
    for run in runs:
        by_file.setdefault(run.imported_from, []).append(run)
    return by_file


def test_every_block_of_every_seed_is_stored_with_its_printed_numbers(
    db_session: Session, imported: dict[str, list[Run]]
) -> None:
    assert sorted(imported) == sorted(EXPECTED_RUNS)
    total_blocks = 0
    for path in SEED_FILES:
        runs = imported[path.name]
        done = [run for run in runs if run.status == "done"]
        failed = [run for run in runs if run.status == "failed"]
        assert (len(done), len(failed)) == EXPECTED_RUNS[path.name], path.name
        expected_blocks = printed_blocks(path)
        assert len(expected_blocks) == len(done), path.name
        for run, expected in zip(done, expected_blocks, strict=True):
            assert (run.source, run.queued_by) == ("imported", "seed-test")
            stored = crud.list_profile_results(db_session, run_id=run.id)
            assert len(stored) == 1
            result = stored[0].result
            numbers = {key: value for key, value in result.items() if isinstance(value, (int, float))}
            assert numbers == expected, f"{path.name}: {run.label}"
            assert stored[0].total_token_throughput == expected["total_token_throughput"]
            assert stored[0].mean_tpot_ms == expected["mean_tpot_ms"]
            assert stored[0].completed == expected["completed"]
            assert "Serving Benchmark Result" in stored[0].text_block
        total_blocks += len(expected_blocks)
    assert total_blocks == 73


def test_failed_launches_are_failed_runs_with_their_message(imported: dict[str, list[Run]]) -> None:
    failed = [
        (run.engine, run.model, run.failure_message, run.failure_class, run.serve_commands)
        for runs in imported.values()
        for run in runs
        if run.status == "failed"
    ]
    assert failed == [
        (
            "trtllm",
            "Qwen/Qwen3-32B-FP8",
            "RuntimeError: Unsupported SM version for FP8 block scaling GEMM",
            "unsupported_hardware",
            ["trtllm-serve Qwen/Qwen3-32B-FP8"],
        ),
        (
            "trtllm",
            "Qwen/Qwen3-32B-AWQ",
            "KeyError: 'weight'",
            "weights_format",
            ["trtllm-serve Qwen/Qwen3-32B-AWQ"],
        ),
        (
            "mindie",
            "Qwen/Qwen3-30B-A3B",  # the serving command's bare name, made canonical
            "Crash, not supported for the model",
            "crash",
            ["mindie serve Qwen3-30B-A3B --enable-prefix-caching"],
        ),
    ]


def test_serving_commands_and_configs_are_kept(imported: dict[str, list[Run]]) -> None:
    first = imported["000_7382f1cb439cecdf.txt"]
    assert first[0].serve_commands == ["vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507 -tp 8"]
    assert (first[0].engine, first[0].model, first[0].config["tp"]) == (
        "vllm",
        "Qwen/Qwen3-235B-A22B-Instruct-2507",
        8,
    )
    assert first[1].engine == "sglang" and first[1].config["tp"] == 8
    # the second block under one serving script differs by the flag its "# --flag value" comment names
    batched = [run for run in first if "max-num-batched-tokens" in (run.label or "")]
    assert [run.config["max_num_batched_tokens"] for run in batched] == [4096, 8192]
    assert batched[1].serve_commands == [
        "vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 -tp 4 --max-num-batched-tokens 8192"
    ]
    backends = [run for run in imported["003_2a9b959132c66de7.txt"] if "Attention" in (run.label or "")]
    assert [run.config["attention_backend"] for run in backends] == ["fa3", "flashinfer", "triton"]

    flattened = imported["002_89d6b111a291c7d5.txt"]
    # Bare "Backend Parameters": the engine of the heading (else the document's one engine) and the model
    # of its setup, made the full command, read into a config.
    assert flattened[0].serve_commands == [
        "vllm serve Qwen/Qwen3.5-35B-A3B --reasoning-parser=qwen3 --max-model-len=32768"
    ]
    assert flattened[1].serve_commands == [
        "python3 -m sglang.launch_server --model-path Qwen/Qwen3.5-35B-A3B --reasoning-parser=qwen3 "
        "--context-length=32768"
    ]
    assert (flattened[0].engine, flattened[1].engine, flattened[2].engine) == ("vllm", "sglang", "vllm")
    assert (flattened[0].config or {})["reasoning_parser"] == "qwen3" and flattened[
        0
    ].model == "Qwen/Qwen3.5-35B-A3B"
    assert flattened[0].accelerator == "NVIDIA H200"


def test_labels_find_the_seed_cases(imported: dict[str, list[Run]]) -> None:
    labels = [run.label for run in imported["001_df97046e8f66ab3a.txt"]]
    assert labels[:3] == [
        "Choosing the Inference Engine · vLLM",
        "Choosing the Inference Engine · SGLang",
        "Choosing the Inference Engine · TensorRT-LLM",
    ]
    assert "Other Benchmark Cases · Optimized · random 128 input" in labels
    flattened = [run.label for run in imported["002_89d6b111a291c7d5.txt"]]
    assert flattened[-2:] == ["Generation Heavy Profile · Baseline", "Generation Heavy Profile · Optimized"]


def test_seed_001_conclusion_percentages_follow_from_the_runs(
    db_session: Session, imported: dict[str, list[Run]]
) -> None:
    """Seed 001's table: baseline vLLM vs optimized TensorRT-LLM, total token throughput.

    (Its "Very Long Prompt" row prints -13.8% although its own blocks, 1798.45 → 1580.36, give -12.1%.)
    """
    runs = {run.label: run for run in imported["001_df97046e8f66ab3a.txt"]}

    def throughput(label: str) -> float:
        return crud.first_results(db_session, run_ids=[runs[label].id])[runs[label].id].total_token_throughput

    cases = {
        "ShareGPT": (
            "Choosing the Inference Engine · vLLM",
            "Choosing the Inference Engine · TensorRT-LLM",
            18.7,
        ),
        "Short": (
            "Other Benchmark Cases · Baseline · random 128 input",
            "Other Benchmark Cases · Optimized · random 128 input",
            33.1,
        ),
        "Medium": (
            "Other Benchmark Cases · Baseline · random 2K input",
            "Other Benchmark Cases · Optimized · random 2K input",
            7.7,
        ),
        "Long": (
            "Other Benchmark Cases · Baseline · random 4K input",
            "Other Benchmark Cases · Optimized · random 4K input",
            10.9,
        ),
    }
    for case, (baseline, optimized, printed) in cases.items():
        change = (throughput(optimized) / throughput(baseline) - 1) * 100
        assert round(change, 1) == printed, case
