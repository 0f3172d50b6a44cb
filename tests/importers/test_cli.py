"""``python -m perflab import`` as a user runs it, against a real database file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from db import crud
from db import session as db_session

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO / "tests" / "data" / "seeds"
DATA = REPO / "tests" / "data" / "imports"


def perflab(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFLAB_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "perflab", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def test_json_output_lists_stored_runs_in_file_order(url: str) -> None:
    done = perflab(
        "import", "--json", str(SEEDS / "004_66c74e108a0d1776.txt"), str(DATA / "vllm_results.jsonl"), url=url
    )
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)
    assert len(records) == 14 + 2
    assert [record["run_id"] for record in records] == sorted(record["run_id"] for record in records)
    first = records[0]
    assert (first["status"], first["source"], first["imported_from"]) == (
        "done",
        "imported",
        "004_66c74e108a0d1776.txt",
    )
    assert (first["total_token_throughput"], first["mean_tpot_ms"], first["completed"]) == (
        1227.19,
        318.03,
        1000,
    )
    assert first["serve_command"] == "vllm serve Qwen/Qwen3-30B-A3B -tp 2"
    crash = records[2]
    assert (crash["status"], crash["failure_message"]) == ("failed", "Crash, not supported for the model")
    assert "total_token_throughput" not in crash
    assert records[-1]["request_rate"] == 8.0 and records[-1]["imported_from"] == "vllm_results.jsonl"

    with db_session.new_session(db_session.get_engine(url)) as session:
        assert crud.list_runs(session, source="imported").total == 16


def test_bad_file_is_reported_and_the_others_are_stored(url: str, tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"completed": 3,\n  "duration": oops}\n')
    done = perflab("import", "--label", "batch 7", str(bad), str(DATA / "vllm_save_result.json"), url=url)
    assert done.returncode == 1
    assert f"{bad}:2: invalid JSON" in done.stderr
    assert "Traceback" not in done.stderr
    assert "vllm_save_result.json: stored 1 run (1)" in done.stdout
    with db_session.new_session(db_session.get_engine(url)) as session:
        page = crud.list_runs(session)
        assert [(row.label, row.imported_from) for row in page.rows] == [("batch 7", "vllm_save_result.json")]
