"""Commands that only read (``report``, ``study list|show``, ``db current``) or change what is stored
(``study pause``) name the database they use and never create one: pointed at a SQLite file that does
not exist, each says so, naming the file, and leaves nothing behind; pointed at a database without
the study, the error names the database."""

from __future__ import annotations

from pathlib import Path

import pytest

from db import session as db_session
from perflab.cli import main


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "1", "--out", "{out}"],
        ["study", "list"],
        ["study", "show", "1"],
        ["study", "pause", "1"],
        ["db", "current"],
    ],
    ids=["report", "study-list", "study-show", "study-pause", "db-current"],
)
def test_a_missing_database_is_named_and_not_created(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "elsewhere" / "var" / "perflab.db"
    monkeypatch.setenv("PERFLAB_DATABASE_URL", f"sqlite:///{missing}")
    monkeypatch.chdir(tmp_path)
    assert main([part.replace("{out}", str(tmp_path / "report")) for part in argv]) == 1
    error = capsys.readouterr().err
    assert f"database SQLite {missing} does not exist" in error and "Traceback" not in error
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "var").exists()
    assert not (tmp_path / "report").exists()


def test_a_study_that_is_not_stored_names_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "perflab.db"
    db_session.upgrade(f"sqlite:///{path}")
    monkeypatch.setenv("PERFLAB_DATABASE_URL", f"sqlite:///{path}")
    assert main(["report", "1", "--out", str(tmp_path / "report")]) == 2
    assert capsys.readouterr().err == f"error: study 1 does not exist in database SQLite {path}\n"
    assert main(["study", "show", "1"]) == 2
    assert capsys.readouterr().err == f"error: study 1 does not exist in database SQLite {path}\n"
    assert main(["study", "list"]) == 0
    assert capsys.readouterr().out == f"No studies in database SQLite {path}.\n"
