"""Bad input gets a clear error naming the file and line, and a file that fails stores nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import Session

from db import crud
from db.models import Run
from perflab.importers import ImportFailed, ImportFileError, import_files, parse_content, read_file
from perflab.importers import store as import_store

GOOD_BLOCK = """\
============ Serving Benchmark Result ============
Successful requests:                     10
Benchmark duration (s):                  2.00
Total Token throughput (tok/s):          100.00
==================================================
"""


def parse_error(content: str | bytes, name: str = "bad.txt") -> ImportFileError:
    with pytest.raises(ImportFileError) as caught:
        parse_content(name, content)
    return caught.value


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ("intro\n\n" + GOOD_BLOCK.replace("10\n", "many\n"), 3, "no 'Successful requests' line"),
        (
            GOOD_BLOCK.replace("Total Token", "Total input tokens:  12.5\nTotal Token"),
            1,
            "expected a whole number",
        ),
        (
            GOOD_BLOCK + "\n" + GOOD_BLOCK.replace("2.00", "2.00\nBenchmark duration (s): 3"),
            7,
            "appears twice",
        ),
        (GOOD_BLOCK.replace("=" * 50, ""), 1, "no closing '=====' line"),
        (GOOD_BLOCK.replace("=" * 50, "") + GOOD_BLOCK, 1, "no closing '=====' line"),
        ('{"completed": 1,\n "duration": }', 2, "invalid JSON"),
        ('{"completed": 1, "duration": 1}\n{"completed": 2, "duration"\n', 2, "invalid JSON"),
        ('{"duration": 1.0}', 1, "no completed field"),
        (
            '{"completed": 1, "duration": 1, "total_token_throughput": "fast"}',
            1,
            "total_token_throughput is 'fast'",
        ),
    ],
)
def test_parse_errors_name_the_line(content: str, line: int, message: str) -> None:
    error = parse_error(content)
    assert error.line == line
    assert message in str(error) and str(error).startswith(f"bad.txt:{line}: ")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "the file is empty"),
        ("just some notes\n", "no benchmark results found"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary content"),
        (b"ok\n\xff\xfe", "not UTF-8 text"),
        (json.dumps({"benchmarks": []}), "the guidellm report has no benchmarks"),
        (json.dumps({"benchmarks": [{"duration": 3}]}), "benchmark 1 of the guidellm report has no metrics"),
        (json.dumps([{"completed": 1, "duration": 1}, 5]), "item 2 is a JSON int"),
    ],
)
def test_unrecognised_content_is_refused_clearly(content: str | bytes, message: str) -> None:
    assert message in str(parse_error(content))


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ImportFileError, match=r"nothere\.json: cannot read"):
        read_file(tmp_path / "nothere.json")


def count_runs(session: Session) -> int:
    return session.execute(sa.select(sa.func.count()).select_from(Run)).scalar_one()


def test_one_bad_file_stores_nothing_at_all(db_session: Session, tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text(GOOD_BLOCK)
    bad = tmp_path / "bad.txt"
    bad.write_text(GOOD_BLOCK + "\n" + GOOD_BLOCK.replace("10\n", "ten\n"))
    with pytest.raises(ImportFailed) as caught:
        import_files(db_session, [good, bad])
    assert [(Path(error.name).name, error.line) for error in caught.value.errors] == [("bad.txt", 7)]
    assert count_runs(db_session) == 0


def test_a_storage_error_midway_removes_the_file_runs(
    db_session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "three.txt"
    path.write_text("\n".join([GOOD_BLOCK] * 3))
    stored_results = []

    def add_then_fail(session: Session, **arguments: object) -> object:
        if len(stored_results) == 2:
            raise sa.exc.OperationalError("INSERT", {}, Exception("disk full"))
        stored_results.append(arguments["run_id"])
        return crud.add_profile_result(session, **arguments)

    monkeypatch.setattr(import_store.crud, "add_profile_result", add_then_fail)
    with pytest.raises(sa.exc.OperationalError):
        import_files(db_session, [path])
    assert count_runs(db_session) == 0
