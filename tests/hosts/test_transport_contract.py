"""The Transport contract, run against both implementations: local subprocesses and a real sshd."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest

from perflab.transport import CommandTimeout, Transport, open_transport
from tests.fixtures.polling import wait_until
from tests.hosts.conftest import HostFactory

PY = sys.executable
# Long enough for a loaded machine to start the command and let it write its pid (it then sleeps 60 s).
STOP_AFTER_S = 4.0


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int, failure: str = "the process is still running") -> None:
    """Until process ``pid`` is gone (10 s at most: then ``failure``)."""
    wait_until(lambda: not pid_alive(pid), 10.0, interval_s=0.05, failure=f"{failure} (pid {pid})")


def test_run_returns_status_stdout_and_stderr(transport: Transport) -> None:
    result = transport.run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=20)
    assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok


def test_run_applies_host_env_call_env_and_cwd(make_host: HostFactory, tmp_path: Path) -> None:
    host = make_host(env={"PERFLAB_A": "from host", "PERFLAB_B": "host"})
    with open_transport(host) as transport:
        result = transport.run(
            [PY, "-c", "import os; print(os.environ['PERFLAB_A'], os.environ['PERFLAB_B'], os.getcwd())"],
            timeout=20,
            env={"PERFLAB_B": "call"},
            cwd=str(tmp_path),
        )
    assert result.stdout == f"from host call {tmp_path}\n"


def test_run_passes_stdin(transport: Transport) -> None:
    result = transport.run(["cat"], timeout=20, stdin="line one\nline two\n")
    assert result.stdout == "line one\nline two\n"


def test_missing_program_and_directory_have_shell_statuses(transport: Transport, tmp_path: Path) -> None:
    assert transport.run(["perflab-no-such-program"], timeout=20).exit_status == 127
    assert transport.run(["true"], timeout=20, cwd=str(tmp_path / "absent")).exit_status == 125


def test_run_timeout_stops_the_command(transport: Transport, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with pytest.raises(CommandTimeout) as caught:
        transport.run(
            ["sh", "-c", 'echo $$ > "$1"; exec sleep 60', "sh", str(pid_file)], timeout=STOP_AFTER_S
        )
    assert "'sh' on host" in str(caught.value) and "ran longer than 4 s" in str(caught.value)
    wait_gone(int(pid_file.read_text()), "the timed-out command is still running")


def test_stream_yields_lines_in_order_then_exit_status(transport: Transport) -> None:
    script = (
        "import sys\nfor i in range(200):\n    print('line', i, flush=True)\n"
        "sys.stderr.write('done\\n')\nsys.exit(4)"
    )
    with transport.stream([PY, "-c", script], timeout=30) as stream:
        lines = list(stream)
    assert [line for line in lines if line != "done"] == [f"line {i}" for i in range(200)]
    assert lines.count("done") == 1, "stderr is merged in (its order against stdout is not defined)"
    assert stream.exit_status == 4


def test_stream_delivers_lines_while_the_command_runs(transport: Transport, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    script = (
        "import os, time\nprint('first', flush=True)\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)\nprint('second')"
    )
    with transport.stream([PY, "-c", script], timeout=30) as stream:
        assert next(stream) == "first"
        gate.touch()
        assert list(stream) == ["second"]
    assert stream.exit_status == 0


def test_stream_timeout_stops_the_command(transport: Transport, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    argv = ["sh", "-c", 'echo $$ > "$1"; echo started; exec sleep 60', "sh", str(pid_file)]
    seen: list[str] = []
    with pytest.raises(CommandTimeout), transport.stream(argv, timeout=STOP_AFTER_S) as stream:
        for line in stream:
            seen.append(line)
    assert seen == ["started"]
    wait_gone(int(pid_file.read_text()))


def test_closing_a_stream_early_stops_the_command(transport: Transport, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "while True:\n    print('tick', flush=True); time.sleep(0.05)"
    )
    with transport.stream([PY, "-c", script], timeout=30) as stream:
        assert next(stream) == "tick"
    wait_gone(int(pid_file.read_text()))


def test_files_round_trip(transport: Transport, tmp_path: Path) -> None:
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(300_000))
    remote = f"{transport.workdir}/nested/dir/copy.bin"
    transport.upload(source, remote, mode=0o750)
    assert os.stat(remote).st_mode & 0o777 == 0o750
    transport.download(remote, tmp_path / "back" / "copy.bin")
    assert (tmp_path / "back" / "copy.bin").read_bytes() == source.read_bytes()
    transport.write_text(f"{transport.workdir}/notes/readme.txt", "héllo\nworld\n")
    assert transport.read_text(f"{transport.workdir}/notes/readme.txt") == "héllo\nworld\n"
    with pytest.raises(FileNotFoundError):
        transport.read_text(f"{transport.workdir}/notes/absent.txt")


def test_paths_resolve_from_home(transport: Transport) -> None:
    home = transport.home()
    assert home == os.path.expanduser("~")
    assert transport.resolve_path("~/x/y") == f"{home}/x/y"
    assert transport.resolve_path("rel/z") == f"{home}/rel/z"
    assert transport.resolve_path("/abs/./p") == "/abs/p"


def test_forward_reaches_a_port_on_the_host(transport: Transport, http_server: int) -> None:
    with (
        transport.forward(http_server) as local_port,
        httpx.Client(base_url=f"http://127.0.0.1:{local_port}") as client,
    ):
        answers = [client.get(f"/req{i}").text for i in range(20)]
    assert answers == [f"hello from /req{i}" for i in range(20)]
