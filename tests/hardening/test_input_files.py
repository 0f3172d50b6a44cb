"""Files a user names are read only when they are regular files, and within a size cap: ``perflab
import`` of ``/dev/zero`` through a symbolic link and of a FIFO ends at once with one line each (no
reading gigabytes, no waiting for a writer), and the other files are still imported."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from perflab.bench.user_files import UserFileError, read_capped
from perflab.cli import main

REPO = Path(__file__).resolve().parents[2]
IMPORTABLE = sorted((REPO / "tests" / "data" / "imports").glob("*.json"))[0]


@pytest.mark.timeout(60)
def test_import_refuses_devices_and_fifos_and_imports_the_rest(
    runs_db: Engine, unreadable_inputs: list[tuple[Path, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    url = runs_db.url.render_as_string(hide_password=False)

    code = main(["import", *(str(path) for path, _ in unreadable_inputs), str(IMPORTABLE), "--url", url])

    captured = capsys.readouterr()
    assert code == 1
    assert captured.err.splitlines() == [
        f"error: {path}: is {what}, not a regular file" for path, what in unreadable_inputs
    ]
    assert captured.out.startswith(f"{IMPORTABLE}: stored ")


def test_a_file_is_read_up_to_its_cap_only(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_bytes(b"x" * 1000)
    assert read_capped(str(path), 1000) == b"x" * 1000
    with pytest.raises(
        UserFileError, match=r"^1000 bytes is larger than perflab reads here \(999 bytes at most\)$"
    ):
        read_capped(str(path), 999)
    with pytest.raises(UserFileError, match="is a directory"):
        read_capped(str(tmp_path), 10)
