"""The Hosts page's model: failure sentences, stored probes, and probing a real (simulated) host."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session

from db import crud
from db import session as db_session
from perflab.inventory import HostConfig, Inventory
from perflab.probe.status import HostError
from perflab.views import hosts


@pytest.fixture
def sqlite_session(sqlite_database_url: str) -> Iterator[Session]:
    """A session on this module's SQLite file (probing is the subject here, not the database)."""
    with db_session.new_session(db_session.get_engine(sqlite_database_url)) as session:
        yield session


def test_error_sentences_name_the_failure() -> None:
    assert hosts.error_text(HostError(kind="auth", message="Host 'a' refused the key.", hint="Add it.")) == (
        "Login refused: Host 'a' refused the key. Add it."
    )
    key = hosts.error_text(HostError(kind="host_key", message="Unknown key.", fingerprint="SHA256:abc"))
    assert key == "Unknown host key: Unknown key. (key fingerprint SHA256:abc)"
    assert hosts.error_text(HostError(kind="mystery", message="x")) == "Probe failed: x"


def test_probe_store_and_reload(sqlite_session: Session, tmp_path: Path) -> None:
    config = HostConfig(
        name="sim",
        transport="local",
        workdir=str(tmp_path / "work"),
        labels=("demo",),
        simulate={"accelerator": "A100", "count": 2},
    )
    inventory = Inventory(path=tmp_path / "hosts.yaml", hosts=(config,))
    [fresh] = hosts.load_hosts(sqlite_session, inventory)
    assert (
        fresh.reachability() == "not probed yet" and fresh.probe is None and fresh.title == "sim (simulated)"
    )
    probed = hosts.probe_and_store(sqlite_session, config)
    assert probed.reachability() == "reachable" and probed.last_error is None
    [reloaded] = hosts.load_hosts(sqlite_session, inventory)
    assert reloaded.probe is not None and len(reloaded.probe.accelerators) == 2
    assert reloaded.status.accelerator_summary().startswith("2× NVIDIA A100")
    frame = hosts.accelerators_frame(reloaded.probe)
    assert list(frame["GPU"]) == [0, 1] and frame["Memory total (MiB)"].notna().all()
    lines = hosts.system_lines(reloaded.probe)
    assert lines[2].startswith("RAM: ") and lines[3].startswith("Python: 3.")
    assert lines[4].startswith("Container runtimes: ")
    stored = crud.get_host(sqlite_session, name="sim")
    assert stored is not None and stored.simulated and stored.transport == "local"


def test_failed_probe_keeps_the_last_good_one(sqlite_session: Session, tmp_path: Path) -> None:
    crud.record_probe(
        sqlite_session,
        name="gpu-a",
        reachable=True,
        probe={
            "host": "gpu-a",
            "simulated": False,
            "python": {"command": "python3"},
            "probed_at": "2025-01-01T00:00:00Z",
            "duration_s": 1.0,
        },
    )
    config = HostConfig(
        name="gpu-a",
        address="127.0.0.1",
        port=1,
        connect_timeout_s=2,
        connect_attempts=1,
        known_hosts=str(tmp_path / "known_hosts"),
    )
    view = hosts.probe_and_store(sqlite_session, config)
    assert view.reachability() == "unreachable"
    assert view.last_error is not None and view.last_error.startswith("Unreachable: ")
    assert view.probe is not None and view.probe.host == "gpu-a"
    assert hosts.host_choices(Inventory(path=tmp_path, hosts=(config,))) == {"gpu-a": config}
