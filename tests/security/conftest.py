"""Fixtures of the secret tests: a real OpenSSH sshd on 127.0.0.1 that accepts password logins, for a
local user this fixture creates with a password set by ``chpasswd`` (root only; skipped otherwise);
``run_to_end``: one run on a (simulated) host, stored and executed in this thread."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db.models import Run
from perflab.engines import EngineConfig
from perflab.inventory import HostConfig
from perflab.profiles import BenchmarkProfile
from perflab.runner import RunnerOptions, execute_run, submit_run
from tests.fixtures.loopback_sshd import start_sshd
from tests.fixtures.runs import inventory_of, stored_run
from tests.fixtures.sshd import SSHD


@dataclass(frozen=True)
class PasswordSshd:
    """An sshd accepting ``user``/``password``, and a directory that user owns for perflab's work."""

    port: int
    user: str
    password: str
    known_hosts: Path
    workdir: Path


def _run(*argv: str, stdin: str | None = None) -> None:
    subprocess.run(argv, input=stdin, text=True, check=True, capture_output=True)


@pytest.fixture(scope="module")
def password_sshd() -> Iterator[PasswordSshd]:
    if os.geteuid() != 0 or shutil.which("useradd") is None or not os.path.exists(SSHD):
        pytest.skip("needs root, useradd and OpenSSH's sshd (as in CI)")
    user = f"plscan{secrets.token_hex(3)}"
    password = f"ssh-{secrets.token_urlsafe(12)}"
    directory = Path(tempfile.mkdtemp(prefix="perflab-password-sshd-"))
    directory.chmod(0o755)
    _run("useradd", "--create-home", "--shell", "/bin/sh", user)
    server = None
    try:
        _run("chpasswd", stdin=f"{user}:{password}\n")
        server = start_sshd(directory, authorized_keys=directory / "authorized_keys", passwords=True)
        workdir = directory / "work"
        workdir.mkdir()
        shutil.chown(workdir, user=user)
        shutil.chown(directory / "session-home", user=user)
        yield PasswordSshd(server.port, user, password, server.known_hosts, workdir)
    finally:
        from perflab.transport import close_all

        close_all()
        if server is not None:
            server.stop()
        subprocess.run(["userdel", "--force", "--remove", user], capture_output=True, check=False)
        shutil.rmtree(directory, ignore_errors=True)


FAST = RunnerOptions(ready_poll_s=0.2, sample_interval_s=0.5, stop_grace_s=5.0, ready_timeout_s=60.0)


def run_to_end(
    engine: Engine,
    host: HostConfig,
    config: EngineConfig,
    profiles: Sequence[BenchmarkProfile],
    *,
    check_host: bool = False,
) -> Run:
    """Store a claimed run of ``config`` on ``host`` (checked against the host's entry with
    ``check_host``, as the Launch page and ``perflab run`` do; else as a study's runs are) and execute
    it; the run as stored at its end."""
    stored = submit_run(
        engine, host_name=host.name, config=config, profiles=profiles, worker_id="security",
        host=host if check_host else None,
    )  # fmt: skip
    execute_run(stored.id, engine=engine, inventory=inventory_of(host), worker_id="security", options=FAST)
    return stored_run(engine, stored.id)
