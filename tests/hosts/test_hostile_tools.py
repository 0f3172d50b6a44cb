"""Host tools that flood their output or print garbage: commands are stopped at the output cap with
what was kept for the message, the probe turns both into problems of the host, never a traceback; a
file larger than a transport reads is refused before it is held in memory."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from perflab.probe import probe_host
from perflab.transport import FileTooLarge, OutputTooLarge, Transport, open_transport
from perflab.transport.base import MAX_LINE_BYTES, MAX_OUTPUT_BYTES
from tests.fixtures.bounded import RSS_LIMIT_KB, run_measured
from tests.hosts.conftest import HostFactory
from tests.hosts.test_probe_host import SYSTEM_PATH, tool

pytestmark = pytest.mark.timeout(120)
REPO = Path(__file__).resolve().parents[2]
FLOOD = "yes '0, NVIDIA H100 80GB HBM3, GPU-0, 81559 MiB, 0 MiB, 0 %, 30, 550.54.15, 9.0'"


def test_hosts_probe_against_a_flooding_nvidia_smi_stays_bounded(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "nvidia-smi", f"echo 'index, name, uuid'\n{FLOOD}")
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(
        f"hosts:\n  - name: flood\n    transport: local\n    workdir: {tmp_path / 'work'}\n"
        f"    env: {{PATH: '{bin_dir}:{SYSTEM_PATH}'}}\n"
    )
    argv = [sys.executable, "-m", "perflab", "hosts", "--file", str(hosts), "probe", "--json"]
    status, peak_kb = run_measured(argv, tmp_path / "out.json", {**os.environ, "PYTHONPATH": str(REPO)})
    probed = json.loads((tmp_path / "out.json").read_text())
    assert status == 0 and peak_kb < RSS_LIMIT_KB
    problems = [problem["message"] for problem in probed[0]["probe"]["problems"]]
    assert problems[0].startswith("nvidia-smi printed more than 16 MiB and was stopped (it ended: '0, NVIDIA")


def test_run_stops_a_flooding_command_and_keeps_its_end(make_host: HostFactory) -> None:
    with open_transport(make_host()) as transport:
        with pytest.raises(OutputTooLarge) as raised:
            transport.run(["sh", "-c", "echo start; yes flood"], timeout=60)
        assert raised.value.limit == MAX_OUTPUT_BYTES
        kept = raised.value.kept
        assert "flood\nflood\n" in kept and "start" not in kept and len(kept) <= 2000
        assert "printed more than 16 MiB and was stopped" in str(raised.value)
        # A flood on stderr is bounded the same way; output within the cap is all there.
        with pytest.raises(OutputTooLarge):
            transport.run(["sh", "-c", "yes err >&2"], timeout=60)
        result = transport.run(["sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' x"], timeout=60)
        assert result.stdout == "x" * 5_000_000


def test_read_text_refuses_a_file_past_its_limit(transport: Transport) -> None:
    mib = 1024 * 1024
    path = Path(transport.workdir) / "result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * mib)
    assert transport.read_text(str(path), limit=mib) == "x" * mib
    path.write_bytes(b"x" * (mib + 1))
    with pytest.raises(FileTooLarge) as raised:
        transport.read_text(str(path), limit=mib)
    host = transport.host.name
    assert str(raised.value) == f"'{path}' on host '{host}' is larger than 1 MiB and was not read."


def test_stream_cuts_an_endless_line_into_bounded_lines(make_host: HostFactory) -> None:
    with open_transport(make_host()) as transport:
        argv = ["sh", "-c", "head -c 2500000 /dev/zero | tr '\\0' y; echo; echo end"]
        with transport.stream(argv, timeout=60) as lines:
            got = list(lines)
    assert [len(line) for line in got] == [MAX_LINE_BYTES, MAX_LINE_BYTES, 2_500_000 - 2 * MAX_LINE_BYTES, 3]


def test_random_bytes_from_nvidia_smi_are_a_probe_problem(make_host: HostFactory, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    (tmp_path / "garbage").write_bytes(b'name,index\n\x9f"a\nb\r\x00' + bytes(range(256)) * 40)
    tool(bin_dir, "nvidia-smi", f"cat {tmp_path / 'garbage'}")
    host = make_host(env={"PATH": f"{bin_dir}:{SYSTEM_PATH}"}, python=sys.executable)
    with open_transport(host) as transport:
        result = probe_host(transport)
    assert result.accelerators == []
    assert [problem.tool for problem in result.problems][0] == "nvidia-smi"
    assert result.problems[0].message.startswith("Unexpected nvidia-smi output: ")
