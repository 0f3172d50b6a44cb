"""The spool on a full disk (a real 64 KiB tmpfs): a write it cannot take raises a one-line
``SpoolUnwritable`` and leaves no torn line; a run's store then says the writes are lost instead of
raising; a torn line left by a crash is skipped on replay."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from db.session import get_engine
from perflab.runner import spool
from perflab.runner.store import RunStore
from tests.fixtures.sshd import free_port


@pytest.fixture
def full_spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``PERFLAB_SPOOL_DIR`` on a 64 KiB tmpfs holding one write, then filled to the last byte."""
    mount = tmp_path / "spool"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    monkeypatch.setenv("PERFLAB_SPOOL_DIR", str(mount))
    spool.append(7, "update", {"progress": "first"})
    subprocess.run(["dd", "if=/dev/zero", f"of={mount / 'filler'}", "bs=4k"], capture_output=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_spool_disk_refuses_a_write_without_a_torn_line(full_spool: Path) -> None:
    before = (full_spool / "run-7.jsonl").read_bytes()
    refused = r"the spool .*run-7\.jsonl cannot be written \(No space left on device\)"
    with pytest.raises(spool.SpoolUnwritable, match=refused):
        spool.append(7, "add_result", {"result": {"completed": 1, "text": "x" * 20000}})
    assert (full_spool / "run-7.jsonl").read_bytes() == before
    assert spool.pending(7) == [{"op": "update", "args": {"progress": "first"}}]


def test_a_store_with_neither_database_nor_spool_says_the_writes_are_lost(full_spool: Path) -> None:
    engine = get_engine(f"postgresql+psycopg://perflab@127.0.0.1:{free_port()}/none?connect_timeout=2")
    store = RunStore(engine, 8)
    store.add_samples([{"t_s": 0.0, "source": "engine", "values": {"x": "y" * 20000}}])  # no raise
    assert store.unavailable is not None
    assert store.unavailable.startswith("the database could not be used and the spool ")
    assert store.unavailable.endswith(
        "cannot be written (No space left on device): the run's writes since are lost"
    )


def test_a_torn_line_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLAB_SPOOL_DIR", str(tmp_path))
    spool.append(9, "update", {"progress": "whole"})
    with open(tmp_path / "run-9.jsonl", "a") as handle:
        handle.write('{"op": "add_resu')
    assert spool.pending(9) == [{"op": "update", "args": {"progress": "whole"}}]
