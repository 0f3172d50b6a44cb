"""Build the agent zipapp deterministically from this checkout and the installed dependencies.

The archive holds ``__main__.py`` (``perflab.agent.entry``), ``perflab/__init__.py``,
``perflab/cli.py``, the ``perflab/bench`` and ``perflab/sim`` packages, and the pure-Python packages
the bench imports (httpx and idna), copied from the installed site-packages with their license files
under ``licenses/``. The bench drives ``StreamingTransport`` itself, so httpcore, h11, anyio, sniffio
and certifi are never imported and are left out — which also keeps the archive runnable on Python
3.9 whatever versions of those are installed here. Entries are sorted and carry a fixed timestamp and
mode, so the same sources give the same bytes and the same name.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import io
import os
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import perflab

PERFLAB_ROOT = Path(perflab.__file__).resolve().parent
AGENT_PACKAGES = ("bench", "sim")
AGENT_MODULES = ("__init__.py", "cli.py")
DEPENDENCIES = ("httpx", "idna")
SHEBANG = b"#!/usr/bin/env python3\n"
FIXED_DATE = (1980, 1, 1, 0, 0, 0)
NAME_PREFIX = "perflab-agent-"

Entry = tuple[str, Path]


def _tree(root: Path, prefix: str) -> Iterator[Entry]:
    """Every file under ``root`` except caches and hidden files, as (archive name, path)."""
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [name for name in subdirs if name != "__pycache__" and not name.startswith(".")]
        for name in files:
            if name.endswith((".pyc", ".pyo")) or name.startswith("."):
                continue
            path = Path(directory, name)
            yield f"{prefix}/{path.relative_to(root).as_posix()}", path


def _dependency(name: str) -> Iterator[Entry]:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the agent needs the {name} package installed here to bundle it")
    yield from _tree(Path(list(spec.submodule_search_locations)[0]), name)
    for file in importlib.metadata.distribution(name).files or []:
        if "licen" in file.name.lower() or file.name.upper().startswith(("COPYING", "NOTICE")):
            yield f"licenses/{name}/{file.name}", Path(str(file.locate()))


def agent_entries() -> list[Entry]:
    """What goes into the archive, sorted by archive name."""
    entries: list[Entry] = [("__main__.py", PERFLAB_ROOT / "agent" / "entry.py")]
    entries += [(f"perflab/{module}", PERFLAB_ROOT / module) for module in AGENT_MODULES]
    for package in AGENT_PACKAGES:
        entries += _tree(PERFLAB_ROOT / package, f"perflab/{package}")
    for name in DEPENDENCIES:
        entries += _dependency(name)
    return sorted(entries)


def agent_bytes() -> bytes:
    """The zipapp: a shebang line followed by a deterministic zip archive."""
    buffer = io.BytesIO()
    buffer.write(SHEBANG)
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, path in agent_entries():
            info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes(), compresslevel=9)
    return buffer.getvalue()


def agent_name(content: bytes) -> str:
    return f"{NAME_PREFIX}{hashlib.sha256(content).hexdigest()[:16]}.pyz"


def build_agent(dest_dir: Path) -> Path:
    """Write the agent into ``dest_dir`` (created if needed) and return its path.

    The file name carries the content hash; an existing file of that name is left as it is.
    """
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    content = agent_bytes()
    target = dest_dir / agent_name(content)
    if target.exists() and target.stat().st_size == len(content):
        return target
    handle, temporary = tempfile.mkstemp(dir=dest_dir, prefix=".agent-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(content)
        os.chmod(temporary, 0o755)
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return target
