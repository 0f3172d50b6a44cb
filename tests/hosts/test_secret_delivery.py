"""A host's secrets reach commands run with standard input and streamed ones, on both transports,
without being on their command line; the secret env file for containers is private from its first
byte (the end-to-end check of command lines is tests/security/test_secrets_off_argv.py)."""

from __future__ import annotations

import os
import secrets
import stat
import sys
from pathlib import Path

import pytest

from perflab.containers.launch import env_file_path
from perflab.remote.private_files import write_env_file
from perflab.remote.process import run_dir
from perflab.transport import open_transport
from tests.hosts.conftest import HostFactory
from tests.security.test_secrets_off_argv import SECRET_VARIABLE, host_secrets


@pytest.fixture
def secret_value(monkeypatch: pytest.MonkeyPatch) -> str:
    value = f"sk-perflab-{secrets.token_hex(12)}"
    monkeypatch.setenv(SECRET_VARIABLE, value)
    return value


def test_secrets_reach_commands_with_stdin_and_streams(
    make_host: HostFactory, secret_value: str, tmp_path: Path
) -> None:
    token_file = tmp_path / "hf-token"
    token_file.write_text("hf_file_token\n")
    host = make_host(secrets=host_secrets(token_file), env={"PLAIN": "visible"})
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
    with open_transport(make_host(secrets=host_secrets(token_file))) as transport:
        directory = run_dir(transport, "run-1-abcdef")
        Path(directory).mkdir(parents=True)
        path = write_env_file(transport, env_file_path(directory, "perflab-run-1-0"), transport.secret_env)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert Path(path).read_text() == (
        f"VLLM_API_KEY={secret_value}\nOPENAI_API_KEY={secret_value}\nHF_TOKEN=hf_file_token\n"
    )


def test_a_multi_line_secret_is_refused(make_host: HostFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VARIABLE, "first\nHF_TOKEN=smuggled")
    host = make_host(secrets={"VLLM_API_KEY": {"env": SECRET_VARIABLE}})
    with open_transport(host) as transport, pytest.raises(ValueError, match="VLLM_API_KEY must be a single"):
        transport.run(["true"], timeout=10)
