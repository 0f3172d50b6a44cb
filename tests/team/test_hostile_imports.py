"""Hostile result files to import, written the way an attacker or a broken tool would: nesting that
overflows the JSON decoder, numbers too large for the database, text the database refuses, shapes no
parser expects, too many results, too many bytes. Each gives one line of error naming the file, on
the command line (``python -m perflab import``) and on the Runs page, and stores nothing; a good file
beside them is still imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from perflab.importers import limits
from tests.team.test_bad_input import GOOD, cli, good_result, row_counts
from tests.ui.conftest import run_app, texts

REPO = Path(__file__).resolve().parents[2]
DEEP = 100_000


def _text_block(successful: str) -> str:
    return (
        "============ Serving Benchmark Result ============\n"
        f"Successful requests:                     {successful}\n"
        "Benchmark duration (s):                  10.00\n"
        "Total input tokens:                      1000\n"
        "Total generated tokens:                  1000\n"
        "==================================================\n"
    )


def _nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


# file name → (content, what its one line of error says after "NAME")
HOSTILE: dict[str, tuple[str, str]] = {
    "deep_array.json": ("[" * DEEP + "]" * DEEP, ":1: the JSON nests too deeply to read"),
    "deep_object.json": ('{"a": ' * DEEP + "1" + "}" * DEEP, ":1: the JSON nests too deeply to read"),
    "deep_line.jsonl": (
        good_result() + "\n" + "[" * DEEP + "]" * DEEP,
        ":2: the JSON nests too deeply to read",
    ),
    "deep_field.json": (good_result(extra=_nested(40)), ":1: field extra[0]"),
    "huge_count.json": (
        good_result(completed=10**30),
        ":1: field completed is 1000000000000000000000000000000, out of range",
    ),
    "huge_tokens.json": (
        good_result(total_input_tokens=-(10**20)),
        ":1: field total_input_tokens is -100000000000000000000",
    ),
    "huge_count.txt": (_text_block("1" + "0" * 30), ":1: field completed is 1000000000000000000000000000000"),
    "endless_digits.json": (
        good_result().replace('"completed": 4', '"completed": ' + "9" * 5000),
        ":1: the JSON holds a value perflab cannot read",
    ),
    "nul_in_model.json": (good_result(model_id="Qwen\u0000evil"), ":1: field model_id holds a NUL character"),
    "lone_surrogate.json": (good_result(label="\ud800"), ":1: label holds a lone surrogate"),
    "requests_not_a_list.json": (
        good_result(requests=5),
        ":1: field requests is 5, expected a list of request records",
    ),
    "request_bad_field.json": (
        good_result(requests=[{"index": 0, "ttft_ms": "fast"}]),
        ":1: requests[0].ttft_ms is 'fast', expected a number",
    ),
    "array_not_a_list.json": (good_result(ttfts=5), ":1: field ttfts is 5, expected a list"),
    "headline_text.json": (
        good_result(mean_ttft_ms="fast"),
        ":1: field mean_ttft_ms is 'fast', expected a finite number",
    ),
    "infinite_duration.json": (
        good_result(duration=float("inf")),
        ":1: field duration is inf, expected a finite number",
    ),
    "request_index_overflow.json": (
        good_result(requests=[{"index": 1e300}]),
        ":1: requests[0].index is 1e+300, expected a whole number of at most 64 bits",
    ),
    "too_many_results.json": (
        json.dumps([GOOD] * 1001),
        ": 1001 results; perflab imports at most 1000 per file",
    ),
    "guidellm_infinite.json": (
        '{"benchmarks": [{"duration": 10, "metrics": {"request_totals": {"successful": 1e999}}}]}',
        ": unexpected content (OverflowError: cannot convert float infinity to integer)",
    ),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hostile files on disk, and one of more bytes than perflab imports (sparse, never read)."""
    directory = tmp_path_factory.mktemp("hostile")
    for name, (content, _) in HOSTILE.items():
        (directory / name).write_text(content, encoding="utf-8")
    with (directory / "too_big.json").open("wb") as handle:
        handle.truncate(limits.MAX_FILE_BYTES + 1)
    return directory


@pytest.mark.parametrize("name", [*HOSTILE, "too_big.json"])
def test_hostile_files_on_the_command_line(
    name: str, corpus: Path, suite_database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, good = corpus / name, tmp_path / "good.json"
    good.write_text(good_result(label=f"beside {name}"))  # a text of its own: not a re-import
    expected = HOSTILE[name][1] if name in HOSTILE else ": 67108865 bytes is larger than perflab imports"
    rows = row_counts(suite_database_url)

    code, out, err = cli(capsys, "import", "--url", suite_database_url, str(path))

    assert code == 1 and out == ""
    assert err.startswith(f"error: {path}{expected}") and err.count("\n") == 1, err[:500]
    assert row_counts(suite_database_url) == rows

    code, out, err = cli(capsys, "import", "--url", suite_database_url, str(path), str(good))

    assert code == 1 and err.startswith(f"error: {path}{expected}") and err.count("\n") == 1
    assert out.startswith(f"{good}: stored 1 run")
    assert row_counts(suite_database_url)["run"] == rows["run"] + 1


@pytest.fixture
def runs_page(suite_database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[AppTest]:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts: []\n")
    monkeypatch.setenv("PERFLAB_DATABASE_URL", suite_database_url)
    monkeypatch.setenv("PERFLAB_HOSTS", str(hosts))
    monkeypatch.setenv("PERFLAB_APP_WORKER", "0")
    yield run_app("pages/runs.py")


def test_hostile_files_uploaded_on_the_runs_page(
    runs_page: AppTest, corpus: Path, suite_database_url: str, tmp_path: Path
) -> None:
    rows = row_counts(suite_database_url)
    good = tmp_path / "good.json"
    good.write_text(good_result(label="beside the hostile uploads"))
    uploads: list[tuple[str, bytes, str]] = [
        (name, (corpus / name).read_bytes(), "application/octet-stream") for name in HOSTILE
    ]
    uploads.append((good.name, good.read_bytes(), "application/json"))
    runs_page.session_state["runs_import"] = True  # the import box, opened
    runs_page.run()
    runs_page.file_uploader(key="import_files").set_value(uploads)
    runs_page.run()
    runs_page.button(key="import_button").click().run()

    assert not runs_page.exception, runs_page.exception
    errors = texts(runs_page.error)
    assert len(errors) == len(HOSTILE)
    for (name, (_, expected)), error in zip(HOSTILE.items(), errors, strict=True):
        assert error.startswith(f"{name}{expected}") and "\n" not in error, error[:300]
    [success] = texts(runs_page.success)
    assert success.startswith(f"{good.name}: imported 1 run")
    assert row_counts(suite_database_url)["run"] == rows["run"] + 1


def test_the_command_prints_one_line_in_its_own_process(corpus: Path, tmp_path: Path) -> None:
    """Outside pytest's log capture too: a file no parser check foresaw is one line on stderr."""
    path = corpus / "guidellm_infinite.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "perflab",
            "import",
            "--url",
            f"sqlite:///{tmp_path / 'perflab.db'}",
            str(path),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"error: {path}: unexpected content (OverflowError")
    assert result.stderr.count("\n") == 1, result.stderr


def test_an_import_within_the_limits_keeps_what_json_columns_cannot_hold_as_text(
    corpus: Path, suite_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = corpus / "detailed.json"
    arrays = {
        "ttfts": [0.02, float("nan")],
        "itls": [[0.01], []],
        "input_lens": [100, 100],
        "output_lens": [2, 1],
    }
    path.write_text(good_result(request_rate=float("inf"), max_output_tokens_per_s=float("nan"), **arrays))

    code, out, err = cli(capsys, "import", "--url", suite_database_url, "--json", str(path))

    assert code == 0 and err == ""
    [record] = json.loads(out)
    assert record["request_rate"] == "Infinity" and record["max_output_tokens_per_s"] == "NaN"
    assert record["completed"] == GOOD["completed"]
