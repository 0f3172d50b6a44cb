"""Hub downloads from a hostile hub (a real process on loopback): every one ends with a one-line
``HubError`` naming the bound, nothing is left in the cache, and the app's download state ends
finished with that error."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab.hub import client
from perflab.hub.client import HubError, HubFile, fetch
from perflab.hub.downloads import Downloads

pytestmark = pytest.mark.timeout(120)
FILE = HubFile(repo="owner/data", path="train.json")


def blobs(cache: Path) -> list[Path]:
    return [path for path in cache.rglob("*") if path.is_file()]


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("hub_longer", "the hub sent more than the 16 bytes it announced; nothing was kept"),
        ("hub_gzip", "the hub sent a 'gzip'-encoded body though none was asked for"),
        ("hub_size_superscript", "the hub announced an unusable size '²'"),
        ("hub_size_huge", "the hub announced an unusable size '99999999999999999999'"),
        ("hub_long_etag", "the hub gave an unusable ETag (400 characters"),
    ],
)
def test_hostile_answers_are_one_line_errors(hostile, tmp_path: Path, mode: str, message: str) -> None:
    with pytest.raises(HubError) as raised:
        fetch(FILE, cache_dir=tmp_path, endpoint=hostile(mode))
    assert str(raised.value).startswith(f"{FILE.ref}: {message}")
    assert "\n" not in str(raised.value) and blobs(tmp_path) == []


def test_a_trickle_is_stopped_below_the_minimum_rate(
    hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "RATE_GRACE_S", 2.0)
    with pytest.raises(HubError, match=r"ran slower than 32 KiB/s \(\d+ bytes in \d+ s\) and was stopped"):
        fetch(FILE, cache_dir=tmp_path, endpoint=hostile("hub_trickle"))
    assert blobs(tmp_path) == []


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root only; skipped elsewhere)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_is_an_error_and_the_app_download_ends_with_it(hostile, full_disk: Path) -> None:
    endpoint = hostile("hub_4mib")
    with pytest.raises(HubError, match=r"cannot write the cache in .*: \[Errno 28\] No space left on device"):
        fetch(FILE, cache_dir=full_disk, endpoint=endpoint)
    assert blobs(full_disk) == []


def test_the_app_download_always_ends_finished(
    hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFLAB_HF_ENDPOINT", hostile("hub_size_superscript"))
    downloads = Downloads()
    downloads.start(FILE, cache_dir=tmp_path)
    for _ in range(600):
        state = downloads.state(FILE)
        if state is not None and state.finished:
            break
        time.sleep(0.05)
    assert state is not None and state.finished and state.result is None
    assert state.error == f"{FILE.ref}: the hub announced an unusable size '²'"
    assert not downloads.start(FILE, cache_dir=tmp_path).finished  # it can be fetched again
