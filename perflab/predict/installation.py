"""Where NVIDIA's AIConfigurator is installed, and what it is: found without importing it here.

AIConfigurator 0.12 (PyPI ``aiconfigurator``, with its tables in ``aiconfigurator-core``) is perflab's
``predict`` extra. perflab runs it only as a program — its ``cli estimate`` command, which 0.12 keeps
with the same arguments under both executable names, ``aiconfigurator`` and its successor
``aisimulate`` — so its 1.1 GB of dependencies never load into the app's process, each prediction can
be stopped at a deadline, and the app stays responsive while one runs.

The command is ``$PERFLAB_AICONFIGURATOR`` (a path to ``aisimulate`` or ``aiconfigurator``), else one
of those beside the running Python (the extra installed into perflab's own environment). The Python
beside the command says, in a short subprocess that imports nothing of AIConfigurator, the installed
versions and where ``aiconfigurator_core`` keeps its tables (:func:`find_installation`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

COMMAND_ENV = "PERFLAB_AICONFIGURATOR"
# The executable names of AIConfigurator 0.12's estimate command, the supported one first.
COMMAND_NAMES = ("aisimulate", "aiconfigurator")
# The release whose command, arguments and printed estimate this package follows.
SUPPORTED_VERSION = "0.12.0"
DESCRIBE_TIMEOUT_S = 60.0
MAX_DESCRIPTION_BYTES = 64 * 1024

# Run by the installation's own Python: the versions of its distributions and the directory of
# aiconfigurator_core (found, not imported).
_DESCRIBE = """
import importlib.metadata as metadata, importlib.util, json
versions = {}
for name in ("aisimulate", "aiconfigurator", "aiconfigurator-core"):
    try:
        versions[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
spec = importlib.util.find_spec("aiconfigurator_core")
core = list(spec.submodule_search_locations or []) if spec is not None else []
print(json.dumps({"versions": versions, "core": core[:1]}))
"""


class NotInstalled(Exception):
    """AIConfigurator cannot be used here; the message says why, in one line."""


@dataclass(frozen=True)
class Installation:
    """A usable AIConfigurator: its estimate command, its Python, version and table directory."""

    command: Path
    python: Path
    version: str
    core_dir: Path

    @property
    def source(self) -> str:
        return f"AIConfigurator {self.version}"


def _candidates() -> list[Path]:
    configured = os.environ.get(COMMAND_ENV, "").strip()
    if configured:
        return [Path(configured).expanduser()]
    here = Path(sys.executable).parent
    return [here / name for name in COMMAND_NAMES]


def find_installation() -> Installation:
    """The AIConfigurator to predict with; raises :class:`NotInstalled` (one line) when there is none."""
    configured = bool(os.environ.get(COMMAND_ENV, "").strip())
    for command in _candidates():
        if command.is_file() and os.access(command, os.X_OK):
            return _describe(command)
        if configured:
            raise NotInstalled(f"{COMMAND_ENV}={command} is not an executable file")
    raise NotInstalled(
        "AIConfigurator is not installed (pip install 'perflab[predict]', or set "
        f"{COMMAND_ENV} to its aisimulate or aiconfigurator command)"
    )


def _describe(command: Path) -> Installation:
    python = command.parent / "python"
    if not python.is_file():
        raise NotInstalled(f"no Python beside {command} to ask for its version")
    try:
        done = subprocess.run(
            [str(python), "-I", "-c", _DESCRIBE],
            capture_output=True,
            timeout=DESCRIBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NotInstalled(f"{python} could not say which AIConfigurator it has: {error}") from None
    try:
        described = json.loads(done.stdout[:MAX_DESCRIPTION_BYTES].decode(errors="replace"))
        versions = {str(key): str(value) for key, value in dict(described["versions"]).items()}
        core = [Path(str(path)) for path in described["core"]]
    except (ValueError, KeyError, TypeError):
        raise NotInstalled(f"{python} could not say which AIConfigurator it has") from None
    version = versions.get("aisimulate") or versions.get("aiconfigurator")
    if version is None or not core:
        raise NotInstalled(f"the Python beside {command} has no AIConfigurator")
    if version != SUPPORTED_VERSION or versions.get("aiconfigurator-core", version) != SUPPORTED_VERSION:
        raise NotInstalled(
            f"AIConfigurator {version} is installed; perflab predicts with {SUPPORTED_VERSION} "
            f"(pip install 'aiconfigurator=={SUPPORTED_VERSION}')"
        )
    return Installation(command, python, version, core[0])
