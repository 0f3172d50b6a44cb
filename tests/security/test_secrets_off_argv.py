"""A host's ``secrets:`` reach its commands — engines and the on-host benchmark included — without ever
being on a command line, where any user of the host reads them (``ps``, ``/proc/*/cmdline``).

The end-to-end test runs a real run over the real sshd on loopback to a simulated host whose engine
(a real process) demands the API key and whose benchmark sends it, while a thread reads every
process's command line throughout the run."""

from __future__ import annotations

import os
import secrets
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.inventory import HostConfig, Inventory
from perflab.remote.process import run_dir, write_secret_env_file
from perflab.runner import RunnerOptions, execute_run, submit_run
from perflab.runner.profile_spec import parse_profile
from perflab.transport import open_transport
from tests.fixtures.runs import SimHostFactory, free_port_block
from tests.hosts.conftest import HostFactory, make_host  # noqa: F401 - the fixture, for both transports

FAST = RunnerOptions(ready_poll_s=0.2, sample_interval_s=0.5, stop_grace_s=5.0, ready_timeout_s=60.0)
SECRET_VARIABLE = "PERFLAB_TEST_SECRET_KEY"


@pytest.fixture
def secret_value(monkeypatch: pytest.MonkeyPatch) -> str:
    value = f"sk-perflab-{secrets.token_hex(12)}"
    monkeypatch.setenv(SECRET_VARIABLE, value)
    return value


def _host_secrets(token_file: Path) -> dict[str, object]:
    return {
        "VLLM_API_KEY": {"env": SECRET_VARIABLE},
        "OPENAI_API_KEY": {"env": SECRET_VARIABLE},
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


def test_no_secret_is_on_a_command_line_during_a_run_over_ssh(
    runs_db: Engine, sim_host: SimHostFactory, scan_for: tuple[Path, CommandLineScan]
) -> None:
    token_file, scan = scan_for
    host = sim_host("ssh-secrets", secrets=_host_secrets(token_file))
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    profiles = [parse_profile("short:n=20"), parse_profile("random:in=64,out=8,n=20,rate=20,name=paced")]
    stored = submit_run(runs_db, host_name=host.name, config=config, profiles=profiles, worker_id="w")

    status = execute_run(
        stored.id, engine=runs_db, inventory=Inventory(path=Path("h.yaml"), hosts=(host,)), worker_id="w",
        options=FAST,
    )  # fmt: skip

    with new_session(runs_db) as session:
        run = crud.require_run(session, run_id=stored.id)
        results = crud.list_profile_results(session, run_id=stored.id)
    assert status == "done", run.failure_message
    # The engine demanded VLLM_API_KEY and the on-host benchmark sent OPENAI_API_KEY: both arrived.
    assert [(result.completed, result.failed) for result in results] == [(20, 0), (20, 0)]
    assert all(result.bench_mode == "on-host" for result in results)
    assert scan.scans > 20
    assert scan.found == []


def test_secrets_reach_commands_with_stdin_and_streams(
    make_host: HostFactory, secret_value: str, tmp_path: Path
) -> None:
    token_file = tmp_path / "hf-token"
    token_file.write_text("hf_file_token\n")
    host = make_host(secrets=_host_secrets(token_file), env={"PLAIN": "visible"})
    read = "import os, sys; print(os.environ['VLLM_API_KEY'], os.environ['HF_TOKEN'], os.environ['PLAIN'])"
    with open_transport(host) as transport:
        ran = transport.run([sys.executable, "-c", read + "; print(sys.stdin.read())"], timeout=30,
                            stdin="caller's input\n")  # fmt: skip
        streamed = list(transport.stream([sys.executable, "-c", read], timeout=30))
    assert ran.stdout == f"{secret_value} hf_file_token visible\ncaller's input\n\n"
    assert streamed == [f"{secret_value} hf_file_token visible"]


def test_secret_env_file_is_private_from_its_first_byte(
    make_host: HostFactory, secret_value: str, tmp_path: Path
) -> None:
    token_file = tmp_path / "hf-token"
    token_file.write_text("hf_file_token\n")
    with open_transport(make_host(secrets=_host_secrets(token_file))) as transport:
        directory = run_dir(transport, "run-1-abcdef")
        path = write_secret_env_file(transport, directory)
    assert path is not None
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert Path(path).read_text() == (
        f"VLLM_API_KEY={secret_value}\nOPENAI_API_KEY={secret_value}\nHF_TOKEN=hf_file_token\n"
    )
    with open_transport(make_host(name="plain")) as transport:
        assert write_secret_env_file(transport, run_dir(transport, "run-2-abcdef")) is None


def test_a_multi_line_secret_is_refused(make_host: HostFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VARIABLE, "first\nHF_TOKEN=smuggled")
    host: HostConfig = make_host(secrets={"VLLM_API_KEY": {"env": SECRET_VARIABLE}})
    with open_transport(host) as transport, pytest.raises(ValueError, match="VLLM_API_KEY must be a single"):
        transport.run(["true"], timeout=10)
