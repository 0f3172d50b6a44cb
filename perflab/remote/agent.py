"""Ship the perflab agent (a self-contained zipapp with the benchmark and the simulator) to hosts.

The zipapp is built once per app process (:func:`perflab.agent.build_agent`, named after its content
hash) and uploaded to ``<workdir>/agent/<that name>`` only when the host lacks that exact file.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import tempfile
import threading
from pathlib import Path

import perflab
from perflab.transport.base import Transport

AGENT_DIR = "agent"
_CHECK_TIMEOUT_S = 30.0

_lock = threading.Lock()
_built: Path | None = None


def checkout_dir() -> str:
    """The directory holding this app's ``perflab`` package (what ``PYTHONPATH`` needs to run it)."""
    return str(Path(perflab.__file__).resolve().parents[1])


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def local_agent() -> Path:
    """The agent zipapp of this app process (built on first use)."""
    global _built
    with _lock:
        if _built is None or not _built.exists():
            from perflab.agent import build_agent

            _built = build_agent(Path(tempfile.gettempdir()) / f"perflab-agent-{os.getuid()}")
        return _built


def upload_once(transport: Transport, local: str | os.PathLike[str], remote: str) -> None:
    """Upload ``local`` to ``remote`` (mode 0644) unless the host has that file already: for files
    named after their content (the agent, benchmark datasets)."""
    if not transport.run(["test", "-f", remote], timeout=_CHECK_TIMEOUT_S).ok:
        transport.upload(local, remote, mode=0o644)


def ensure_agent(transport: Transport) -> str:
    """The agent's path on the host, uploading it first if the host lacks this exact build."""
    agent = local_agent()
    remote = posixpath.join(transport.workdir, AGENT_DIR, agent.name)
    upload_once(transport, agent, remote)
    return remote
