"""``vllm bench serve`` of the real vLLM (CPU build) against a real server, imported field-exact: its
``--save-result`` JSON keeps every number as vLLM wrote it, and its printed "Serving Benchmark Result"
block gives the same figures at the printed precision."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.importers import import_files
from tests.fixtures.real_vllm import RealVllmServer, serve_env, vllm_bin

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]

_NUMBER = re.compile(r"^[^:]+:\s+(-?\d+(?:\.\d+)?)\s*$")


def _bench(server: RealVllmServer, directory: Path) -> tuple[dict, str]:
    """Run ``vllm bench serve`` from the venv; its saved JSON and its printed result block."""
    argv = [
        str(vllm_bin()),
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        server.base_url,
        "--model",
        server.model,
        "--tokenizer",
        str(server.model_dir),
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "8",
        "--num-prompts",
        "10",
        "--max-concurrency",
        "2",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(directory),
        "--result-filename",
        "bench.json",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=serve_env(), timeout=600, cwd=directory)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    start = done.stdout.index("============ Serving Benchmark Result ============")
    end = done.stdout.index("==================================================", start + 60)
    block = done.stdout[start : end + 50]
    return json.loads((directory / "bench.json").read_text()), block


def test_vllm_bench_serve_json_and_text_import_field_exact(
    real_vllm_server: RealVllmServer, runs_db: Engine, tmp_path: Path
) -> None:
    saved, block = _bench(real_vllm_server, tmp_path)
    assert saved["completed"] == 10
    text_file = tmp_path / "bench.txt"
    text_file.write_text(block + "\n")
    with new_session(runs_db) as session:
        json_run, text_run = import_files(session, [tmp_path / "bench.json", text_file])
        json_result = crud.list_profile_results(session, run_id=json_run.id)[0]
        from_json = json_result.result
        json_records = crud.list_request_records(session, profile_result_id=json_result.id)
        from_text = crud.list_profile_results(session, run_id=text_run.id)[0].result

    numbers = {key: value for key, value in saved.items() if isinstance(value, (int, float))}
    numbers = {key: value for key, value in numbers.items() if not isinstance(value, bool)}
    assert {"completed", "duration", "mean_ttft_ms", "p99_itl_ms", "output_throughput"} <= set(numbers)
    for key, value in numbers.items():
        assert from_json.get(key) == value, key
    # vLLM's per-request arrays become request records, one a request, with its own lengths and TTFT.
    assert [record.input_tokens for record in json_records] == saved["input_lens"]
    assert [record.output_tokens for record in json_records] == saved["output_lens"]
    assert [record.ttft_ms for record in json_records] == pytest.approx([t * 1000 for t in saved["ttfts"]])

    printed = [match.group(1) for line in block.splitlines() if (match := _NUMBER.match(line))]
    assert len(printed) >= 20, block
    compared = 0
    for key, value in from_text.items():
        if key in numbers and isinstance(value, (int, float)):
            decimals = 0 if isinstance(value, int) else 2
            assert value == pytest.approx(round(numbers[key], decimals), abs=10**-decimals / 2), key
            compared += 1
    assert compared >= 20
