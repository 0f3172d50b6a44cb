"""A host's ``secrets:`` reach its commands — engines and the on-host benchmark included — without ever
being on a command line, where any user of the host reads them (``ps``, ``/proc/*/cmdline``).

The end-to-end test runs a real run over the real sshd on loopback to a simulated host whose engine
(a real process) demands the API key and whose benchmark sends it, while a thread reads every
process's command line throughout the run."""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.runner.evidence import MIN_COMPLETED
from perflab.runner.profile_spec import parse_profile
from tests.fixtures.runs import SimHostFactory, free_port_block, sized_count
from tests.security.conftest import run_to_end

SECRET_VARIABLE = "PERFLAB_TEST_SECRET_KEY"


@pytest.fixture
def secret_value(monkeypatch: pytest.MonkeyPatch) -> str:
    value = f"sk-perflab-{secrets.token_hex(12)}"
    monkeypatch.setenv(SECRET_VARIABLE, value)
    return value


def host_secrets(token_file: Path, variable: str = SECRET_VARIABLE) -> dict[str, object]:
    """``secrets:`` of a host: the engine's and the benchmark's API key from ``variable``, a hub token
    from ``token_file``."""
    return {
        "VLLM_API_KEY": {"env": variable},
        "OPENAI_API_KEY": {"env": variable},
        "HF_TOKEN": {"file": str(token_file)},
    }


class CommandLineScan:
    """Reads ``/proc/*/cmdline`` of every process over and over until stopped; keeps what matched."""

    def __init__(self, needles: list[str]) -> None:
        self._needles = [needle.encode() for needle in needles]
        self.found: list[str] = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> CommandLineScan:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as handle:
                        cmdline = handle.read()
                except OSError:
                    continue
                if any(needle in cmdline for needle in self._needles):
                    self.found.append(cmdline.replace(b"\0", b" ").decode(errors="replace")[:200])
            self.scans += 1


@pytest.fixture
def scan_for(secret_value: str, tmp_path: Path) -> Iterator[tuple[Path, CommandLineScan]]:
    token = f"hf_{secrets.token_hex(16)}"
    token_file = tmp_path / "hf-token"
    token_file.write_text(token + "\n")
    with CommandLineScan([secret_value, token]) as scan:
        yield token_file, scan


@pytest.mark.parametrize("kind", ["ssh", "local"])
def test_no_secret_is_on_a_command_line_during_a_run(
    runs_db: Engine, sim_host: SimHostFactory, scan_for: tuple[Path, CommandLineScan], kind: str
) -> None:
    token_file, scan = scan_for
    host = sim_host(f"{kind}-secrets", kind=kind, secrets=host_secrets(token_file))
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    profiles = [parse_profile("short:n=20"), parse_profile("random:in=64,out=8,n=20,rate=20,name=paced")]
    run = run_to_end(runs_db, host, config, profiles)

    with new_session(runs_db) as session:
        results = crud.list_profile_results(session, run_id=run.id)
    assert run.status == "done", run.failure_message
    # The engine demanded VLLM_API_KEY and the on-host benchmark sent OPENAI_API_KEY: both arrived, so
    # every request of every round (20 a round, as many rounds as the floor of evidence asks) succeeded.
    assert len(results) == 2
    for result in results:
        assert result.failed == 0 and result.completed == sized_count(result.result, 20) >= MIN_COMPLETED
    assert all(result.bench_mode == "on-host" for result in results)
    assert scan.scans > 20
    assert scan.found == []
