"""Classifying why an engine failed to start, from its log.

A failed launch is a result too (the seeds list "Unsupported SM version for FP8 block scaling GEMM" and
"KeyError: 'weight'" in their tables), so the runner stores a :class:`FailureInfo`: a class from
:data:`FAILURE_CLASSES`, a readable message and the log line that proves it.

Each adapter owns a tuple of :class:`Signature` (the shared ones below plus its engine's own). Memory
that other processes took between placement and start (vLLM's "Free memory on device … less than desired
GPU memory utilization") is ``gpus_unavailable``: the infrastructure, which studies retry, never a result
about the configuration. Several signatures often match one log (a CUDA OOM in a worker is followed by
NCCL teardown noise and a generic "Engine core initialization failed"), so classes are ranked by
:data:`CLASS_PRIORITY`, root causes first; within a class the earliest matching line is the evidence.
A log with no signature falls back to ``crash`` with the last exception line that is not a known
wrapper message, or else the first error line (MindIE logs errors without tracebacks).

Only error lines can be evidence: the frames of a Python traceback (``  File "…", line N, in f``), the
source line printed under each frame (``    raise HFValidationError(``) and the caret lines under it
are skipped, so the message is the exception line itself
(``huggingface_hub.errors.HFValidationError: Repo id must be …``), whatever the engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

FAILURE_CLASSES: tuple[str, ...] = (
    "oom",
    "unsupported_hardware",
    "unknown_argument",
    "model_not_found",
    "port_in_use",
    "collective_comm",
    "weights_format",
    "gpus_unavailable",
    "transfer_backend_missing",
    "kv_peer_unreachable",
    "router_missing",
    "crash",
    "timeout",
)

CLASS_PRIORITY: tuple[str, ...] = (
    "router_missing",
    "transfer_backend_missing",
    "unknown_argument",
    "port_in_use",
    "model_not_found",
    "unsupported_hardware",
    "weights_format",
    "gpus_unavailable",
    "oom",
    "collective_comm",
    "kv_peer_unreachable",
)

SUMMARIES: dict[str, str] = {
    "oom": "out of accelerator memory while starting (lower max_num_seqs, max_model_len or "
    "gpu_memory_utilization, or use more GPUs)",
    "unsupported_hardware": "the accelerator lacks a kernel or data type this config needs "
    "(FP8, an attention backend, a quantization method)",
    "unknown_argument": "the engine rejected a command-line argument",
    "model_not_found": "the model could not be found locally or downloaded",
    "port_in_use": "the serving port is already in use",
    "transfer_backend_missing": "the KV transfer library of a disaggregated worker is not on the host",
    "kv_peer_unreachable": "a disaggregated decode worker could not reach its prefill worker",
    "router_missing": "the router of the disaggregated workers is not installed on the host",
    "collective_comm": "collective communication between devices (NCCL/HCCL) failed",
    "weights_format": "the checkpoint's weights do not match what the engine expects",
    "gpus_unavailable": "other processes held the accelerators' memory when the engine started "
    "(infrastructure, not the configuration)",
    "crash": "the engine exited with an error",
    "timeout": "the engine did not become ready before the deadline",
}

_MAX_MESSAGE = 400
_MAX_EVIDENCE = 2000
_LOG_PREFIX = re.compile(
    r"^(?:\[[^\]]*\]\s*)*(?::\s*)?"  # "[2025-03-10T15:07:20Z] ", "[… TP0] ", MindIE's "[file:line] : "
    r"(?:\([^)]*pid=\d+\)\s*)*"  # "(EngineCore pid=259) "
    r"(?:\[rank\d+\]:\s*)?"
    r"(?:(?:ERROR|WARNING|INFO|DEBUG)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[?[\w.\-]+(?::\d+)?\]\s*)?"
)
_EXCEPTION_LINE = re.compile(r"(?:^|[\s\]:(])((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception))(?:[:(]|\s*$)")
_ERROR_LINE = re.compile(
    r"\[ERROR\]|\bERROR\b|\[fail\]|^Error: |hit an exception|Traceback \(most recent call last\)"
)
_TRACEBACK_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
_RAISED_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::|$)")
_WRAPPER_MESSAGES = re.compile(
    r"Engine core initialization failed|EngineDeadError|Worker failed with error|See root cause above"
    r"|See stack trace \(above\)|Failed core proc"
)


@dataclass(frozen=True)
class FailureInfo:
    """Why a launch failed: the class, a readable message and the log line it was read from."""

    failure_class: str
    message: str
    evidence_line: str


@dataclass(frozen=True)
class Signature:
    """A log line pattern that identifies one failure class."""

    failure_class: str
    pattern: re.Pattern[str]

    @classmethod
    def of(cls, failure_class: str, regex: str, *, ignore_case: bool = False) -> Signature:
        if failure_class not in CLASS_PRIORITY:
            raise ValueError(f"unknown failure class {failure_class!r}")
        return cls(failure_class, re.compile(regex, re.IGNORECASE if ignore_case else 0))


COMMON_SIGNATURES: tuple[Signature, ...] = (
    Signature.of("unknown_argument", r"error: unrecognized arguments:"),
    Signature.of("unknown_argument", r"error: argument \S+: invalid (?:choice|\w+ value):"),
    Signature.of("unknown_argument", r"error: the following arguments are required:"),
    Signature.of("port_in_use", r"address already in use", ignore_case=True),
    Signature.of("port_in_use", r"EADDRINUSE"),
    Signature.of("model_not_found", r"is not a local folder and is not a valid model identifier"),
    Signature.of("model_not_found", r"Invalid repository ID or local directory specified"),
    Signature.of("model_not_found", r"RepositoryNotFoundError|Repository Not Found for url"),
    Signature.of("model_not_found", r"HFValidationError|Repo id must be in the form"),
    Signature.of("model_not_found", r"We couldn't connect to 'https://huggingface\.co'"),
    Signature.of("model_not_found", r"No such file or directory: \S*config\.json"),
    Signature.of("unsupported_hardware", r"Unsupported SM version"),
    Signature.of("unsupported_hardware", r"fp8e4nv (?:not supported|data type is not supported)"),
    Signature.of("unsupported_hardware", r"is not supported for the current GPU\. Minimum capability"),
    Signature.of("unsupported_hardware", r"no kernel image is available for execution on the device"),
    Signature.of("unsupported_hardware", r"only supports Hopper GPUs or newer"),
    Signature.of("weights_format", r"KeyError: '[^']*weight[^']*'"),
    Signature.of("weights_format", r"SafetensorError|Error while deserializing header"),
    Signature.of("weights_format", r"is not divisible by weight quantization block_n"),
    Signature.of("oom", r"OutOfMemoryError"),
    Signature.of("oom", r"No available memory for the cache blocks"),
    Signature.of("oom", r"larger than the available KV cache memory"),
    Signature.of("oom", r"Available memory is insufficient"),
    Signature.of("oom", r"\bout of memory\b", ignore_case=True),
    Signature.of("collective_comm", r"NCCL error|DistBackendError|ncclSystemError|ncclInternalError"),
    Signature.of("collective_comm", r"HCCL function error|HcclCommInitRootInfo\S* fail|call hccl api failed"),
)

# Prefill/decode disaggregation (SGLang 0.5.23 disaggregation/nixl/conn.py, common/conn.py, decode.py and
# distributed/device_communicators/mooncake_transfer_engine.py; vLLM 0.33.0 kv_connector/v1/nixl/
# base_worker.py and mooncake/mooncake_connector.py), and the routers' programs (sglang-router, vllm-router)
DISAGG_SIGNATURES: tuple[Signature, ...] = (
    Signature.of("transfer_backend_missing", r"Please install (?:NIXL|mooncake|memfabric_hybrid)"),
    # vLLM 0.32/0.33 nixl/base_worker.py and mooncake/mooncake_connector.py
    Signature.of("transfer_backend_missing", r"RuntimeError: (?:NIXL|Mooncake) is not available"),
    Signature.of("kv_peer_unreachable", r"Could not fetch prefill parallel info from"),
    Signature.of("kv_peer_unreachable", r"NIXL transfer failure: handshake_failed"),
    Signature.of("kv_peer_unreachable", r"Failed to connect to bootstrap server"),
    Signature.of(
        "kv_peer_unreachable", r"Failed to get prefill server info|Error fetching prefill server info"
    ),
    Signature.of("router_missing", r"No module named '?(?:sglang_router|vllm_router)"),
    Signature.of("router_missing", r"vllm-router: (?:command )?not found"),
)


def condense(line: str) -> str:
    """The message part of a log line: logger prefixes removed, length capped."""
    text = _LOG_PREFIX.sub("", line.strip()).strip()
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def _evidence(line: str) -> str:
    text = line.rstrip()
    return text if len(text) <= _MAX_EVIDENCE else text[: _MAX_EVIDENCE - 1] + "…"


def _failure(failure_class: str, engine: str, line: str) -> FailureInfo:
    message = f"{engine}: {SUMMARIES[failure_class]}: {condense(line)}"
    return FailureInfo(failure_class, message, _evidence(line))


def _fallback_line(lines: list[str]) -> str | None:
    exceptions = [line for line in lines if _EXCEPTION_LINE.search(line)]
    root_causes = [line for line in exceptions if not _WRAPPER_MESSAGES.search(line)]
    if root_causes:
        return root_causes[-1]
    if exceptions:
        return exceptions[-1]
    errors = [line for line in lines if _ERROR_LINE.search(line.strip())]
    return errors[0] if errors else None


def evidence_lines(log_text: str) -> list[str]:
    """The non-empty lines of a log without traceback frames, their source lines and caret markers.

    A frame line (after any logger prefix) is ``File "path", line N, in name``; the lines after it are
    the source code Python prints for that frame (several for a statement spanning lines), up to the
    next frame or the exception line (``Name: message``) that ends the traceback.
    """
    kept: list[str] = []
    in_frame = False
    for line in log_text.splitlines():
        text = _LOG_PREFIX.sub("", line.strip()).strip()
        if not text:
            continue
        if _TRACEBACK_FRAME.match(text):
            in_frame = True
            continue
        if _CARETS.match(text) or (in_frame and not _RAISED_LINE.match(text)):
            continue
        in_frame = False
        kept.append(line)
    return kept


def classify(log_text: str, signatures: Iterable[Signature], engine: str) -> FailureInfo | None:
    """The most root-cause failure that ``log_text`` shows, or None when it shows no error at all."""
    lines = evidence_lines(log_text)
    patterns = tuple(signatures)
    first_match: dict[str, str] = {}
    for line in lines:
        for signature in patterns:
            if signature.failure_class not in first_match and signature.pattern.search(line):
                first_match[signature.failure_class] = line
    for failure_class in CLASS_PRIORITY:
        if failure_class in first_match:
            return _failure(failure_class, engine, first_match[failure_class])
    fallback = _fallback_line(lines)
    return _failure("crash", engine, fallback) if fallback is not None else None


def timeout_failure(engine: str, deadline_s: float, log_text: str) -> FailureInfo:
    """The failure the runner records when the engine is still not ready at its deadline."""
    lines = evidence_lines(log_text)
    last = lines[-1] if lines else ""
    message = f"{engine}: {SUMMARIES['timeout']} ({deadline_s:g} s)"
    if last:
        message += f"; last log line: {condense(last)}"
    return FailureInfo("timeout", message, _evidence(last))
