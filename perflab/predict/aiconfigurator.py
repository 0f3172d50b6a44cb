"""AIConfigurator's ``cli estimate`` for one :class:`~perflab.predict.case.Case`: its argv, its run and
its printed estimate read back.

The command follows AIConfigurator 0.12.0 (``aiconfigurator cli estimate``; ``aisimulate cli
estimate`` takes the same arguments in 0.12): an aggregated (in-flight batching) estimate at a fixed
batch, ``--model-path`` a hub id of its own support matrix (:mod:`perflab.predict.support`, so it never
reaches for the network), ``--system``, ``--backend`` and ``--perf-db-version`` (the tables it follows),
``--isl``/``--osl``, ``--batch-size``, ``--ctx-tokens``, ``--tp-size``, and for an MoE model
``--attention-dp-size``, ``--moe-tp-size``, ``--moe-ep-size``; ``--kvcache-quant-mode fp8`` for an fp8
KV cache. Every value is a validated number or a name from a fixed table, passed as an argv list (no
shell). The run has a deadline, its environment keeps the Hugging Face hub offline, and its output is
bounded. The estimate block it prints (``TTFT: … ms``, ``TPOT: … ms``, ``tokens/s/gpu: …``, ``seq/s: …``,
``Backend: vllm (0.24.0)``) is parsed line by line; a missing or non-finite figure is an error, never a
guess.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass

from perflab.predict.case import Case
from perflab.predict.installation import Installation

ESTIMATE_TIMEOUT_S = 300.0
MAX_OUTPUT_BYTES = 1024 * 1024
# The figures of the printed estimate perflab reads, by label; their units are the command's.
_FIELDS = {
    "TTFT": "ttft_ms",
    "TPOT": "tpot_ms",
    "Request Latency": "request_latency_ms",
    "tokens/s": "tokens_per_s",
    "tokens/s/gpu": "tokens_per_s_per_gpu",
    "seq/s": "seq_per_s",
    "Concurrency": "concurrency",
}
_LINE = re.compile(r"^\s{2}(?P<label>[A-Za-z/ ]+?):\s+(?P<value>[-+0-9.,eE]+|inf|nan)(?:\s*ms)?\s*$")
_BACKEND = re.compile(r"^\s{2}Backend:\s+(?P<backend>[a-z]+)\s+\((?P<version>[0-9A-Za-z.+-]{1,40})\)\s*$")
_ERROR = re.compile(r"^(?:Error: |aiconfigurator \w+: error: )(?P<message>.+)$")


class EstimateError(Exception):
    """AIConfigurator ran but gave no estimate; the message says why, in one line."""


@dataclass(frozen=True)
class Estimate:
    """AIConfigurator's figures for one case (its units: ms, output tokens/s)."""

    ttft_ms: float
    tpot_ms: float
    request_latency_ms: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    seq_per_s: float
    concurrency: float
    backend_version: str
    seconds: float  # how long the command ran


def estimate_argv(installation: Installation, case: Case, tables_version: str) -> list[str]:
    """The command line that estimates ``case`` with the ``tables_version`` tables of its backend."""
    argv = [
        str(installation.command),
        "cli",
        "estimate",
        "--no-color",
        "--log-level",
        "WARNING",
        "--estimate-mode",
        "agg",
        "--model-path",
        case.model,
        "--system",
        case.system,
        "--backend",
        case.backend,
        "--perf-db-version",
        tables_version,
        "--isl",
        str(case.isl),
        "--osl",
        str(case.osl),
        "--batch-size",
        str(case.batch),
        "--ctx-tokens",
        str(case.ctx_tokens),
        "--tp-size",
        str(case.tp),
    ]
    if case.moe_tp is not None and case.moe_ep is not None:
        argv += ["--attention-dp-size", str(case.attention_dp)]
        argv += ["--moe-tp-size", str(case.moe_tp), "--moe-ep-size", str(case.moe_ep)]
    if case.kv_fp8:
        argv += ["--kvcache-quant-mode", "fp8"]
    return argv


def _environment() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONWARNINGS="ignore::DeprecationWarning",
        PYTHONUNBUFFERED="1",
    )
    return env


def run_estimate(
    installation: Installation, case: Case, tables_version: str, *, timeout_s: float = ESTIMATE_TIMEOUT_S
) -> Estimate:
    """Run the estimate of ``case``; raises :class:`EstimateError` (one line) when it gives none."""
    started = time.monotonic()
    with subprocess.Popen(
        estimate_argv(installation, case, tables_version),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=_environment(),
        start_new_session=True,
    ) as process:
        try:
            output, _ = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise EstimateError(f"AIConfigurator gave no estimate within {timeout_s:g} s") from None
    text = output[-MAX_OUTPUT_BYTES:].decode(errors="replace")
    if process.returncode != 0:
        raise EstimateError(failure_line(text, process.returncode))
    return parse_estimate(text, seconds=time.monotonic() - started)


def failure_line(text: str, status: int) -> str:
    """The one line that says why the command failed: its own error line, else its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        found = _ERROR.match(line)
        if found:
            return f"AIConfigurator: {found['message'][:300]}"
    last = lines[-1][:300] if lines else "no output"
    return f"AIConfigurator exited with status {status}: {last}"


def parse_estimate(text: str, *, seconds: float = 0.0) -> Estimate:
    """The figures of the estimate block in ``text``; raises :class:`EstimateError` when one is missing,
    not a finite number, or the block names no backend version."""
    start = text.rfind("Performance Estimate (agg)")
    if start < 0:
        raise EstimateError("AIConfigurator printed no aggregated estimate")
    values: dict[str, float] = {}
    version = None
    for line in text[start:].splitlines():
        backend = _BACKEND.match(line)
        if backend:
            version = backend["version"]
            continue
        found = _LINE.match(line)
        if found and found["label"] in _FIELDS:
            name = _FIELDS[found["label"]]
            try:
                values.setdefault(name, float(found["value"].replace(",", "")))
            except ValueError:
                continue
    missing = [label for label, name in _FIELDS.items() if name not in values]
    if missing or version is None:
        raise EstimateError(f"AIConfigurator's estimate lacks {', '.join(missing) or 'the backend version'}")
    bad = [name for name, value in values.items() if not math.isfinite(value) or value < 0]
    if bad or values["tokens_per_s"] <= 0 or values["tpot_ms"] <= 0:
        raise EstimateError(f"AIConfigurator's estimate has no usable {', '.join(bad) or 'throughput'}")
    return Estimate(**values, backend_version=version, seconds=seconds)
