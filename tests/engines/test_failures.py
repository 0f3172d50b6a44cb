"""Failure classification and readiness on recorded engine logs (tests/data/logs/<engine>/<case>.log).

A file's name says what it shows: ``<class>[_detail].log`` must classify as that failure class (on its
engine's adapter), ``ready*.log`` must contain a readiness line and classify as no failure. The first
line of every file is a ``# source:`` comment naming where the excerpt comes from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab.engines import FAILURE_CLASSES, get_adapter, timeout_failure

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
LOG_FILES = sorted(LOGS.glob("*/*.log"))


def _read(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# source:"), f"{path} must start with a '# source:' line"
    return "\n".join(lines[1:])


def _expected_class(path: Path) -> str:
    matches = [name for name in FAILURE_CLASSES if path.stem == name or path.stem.startswith(name + "_")]
    assert matches, f"{path.name} names no failure class"
    return max(matches, key=len)


FAILURE_LOGS = [path for path in LOG_FILES if not path.stem.startswith("ready")]
READY_LOGS = [path for path in LOG_FILES if path.stem.startswith("ready")]


def test_every_engine_has_recorded_logs() -> None:
    assert {path.parent.name for path in LOG_FILES} == {"vllm", "sglang", "trtllm", "mindie", "vllm-ascend"}
    classes = {_expected_class(path) for path in FAILURE_LOGS}
    assert classes == set(FAILURE_CLASSES) - {"timeout"}


@pytest.mark.parametrize("path", FAILURE_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_failure_log_is_classified(path: Path) -> None:
    adapter = get_adapter(path.parent.name)
    text = _read(path)
    failure = adapter.classify_failure(text)
    assert failure is not None
    assert failure.failure_class == _expected_class(path)
    assert failure.evidence_line in text.splitlines()
    assert failure.message.startswith(f"{adapter.display_name}: ")
    assert not any(adapter.is_ready_line(line) for line in text.splitlines())


@pytest.mark.parametrize("path", READY_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_ready_log_has_a_ready_line_and_no_failure(path: Path) -> None:
    adapter = get_adapter(path.parent.name)
    text = _read(path)
    ready = [line for line in text.splitlines() if adapter.is_ready_line(line)]
    assert len(ready) == 1
    assert adapter.classify_failure(text) is None


def test_root_cause_wins_over_the_engine_core_wrapper() -> None:
    failure = get_adapter("vllm").classify_failure(_read(LOGS / "vllm" / "oom_engine_core.log"))
    assert failure is not None
    assert failure.failure_class == "oom"
    assert "No available memory for the cache blocks" in failure.evidence_line


def test_message_drops_the_logger_prefix() -> None:
    failure = get_adapter("vllm").classify_failure(_read(LOGS / "vllm" / "unsupported_hardware.log"))
    assert failure is not None
    assert failure.message.startswith("vLLM: the accelerator lacks a kernel or data type")
    assert failure.message.endswith(
        'ValueError("type fp8e4nv not supported in this architecture. The supported fp8 dtypes are '
        "('fp8e4b15', 'fp8e5')\")', please check the stack trace above for the root cause"
    )


def test_oom_outranks_nccl_noise() -> None:
    log = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB.\n"
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, unhandled system "
        "error\n"
    )
    failure = get_adapter("vllm").classify_failure(log)
    assert failure is not None and failure.failure_class == "oom"


def test_crash_fallback_uses_the_last_root_exception() -> None:
    log = "Traceback (most recent call last):\nZeroDivisionError: division by zero\nINFO shutting down\n"
    failure = get_adapter("sglang").classify_failure(log)
    assert failure is not None
    assert (failure.failure_class, failure.evidence_line) == ("crash", "ZeroDivisionError: division by zero")


def test_clean_log_has_no_failure() -> None:
    assert get_adapter("trtllm").classify_failure("INFO loading weights\nINFO done\n") is None


def test_timeout_failure_quotes_the_last_log_line() -> None:
    failure = timeout_failure("SGLang", 600, "[2026-03-11 13:53:21 TP0] Load weight end. elapsed=23.18 s\n\n")
    assert failure.failure_class == "timeout"
    assert failure.message == (
        "SGLang: the engine did not become ready before the deadline (600 s); last log line: "
        "Load weight end. elapsed=23.18 s"
    )


@pytest.mark.parametrize(
    ("engine", "line", "failure_class"),
    [
        # vLLM's FP8 block-quantisation check (seed 000: "TP8 only is not compatible for the model weight")
        ("vllm", "ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight "
         "quantization block_n = 128.", "weights_format"),
        ("trtllm", "[TensorRT-LLM][ERROR] Executor creation failed due to insufficient GPU memory.", "oom"),
        ("sglang", "FileNotFoundError: [Errno 2] No such file or directory: '/models/q/config.json'",
         "model_not_found"),
        ("vllm", "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'int8'", "unknown_argument"),
    ],
)  # fmt: skip
def test_single_line_signatures(engine: str, line: str, failure_class: str) -> None:
    failure = get_adapter(engine).classify_failure(line)
    assert failure is not None and failure.failure_class == failure_class


def test_message_is_the_error_line_not_the_traceback_source_line() -> None:
    """Real vLLM 0.32 log: the frame's source ``    raise HFValidationError(`` precedes the error line."""
    text = _read(LOGS / "vllm" / "model_not_found_hub_validation.log")
    assert "    raise HFValidationError(" in text.splitlines()
    failure = get_adapter("vllm").classify_failure(text)
    assert failure is not None
    assert failure.failure_class == "model_not_found"
    assert failure.evidence_line.startswith("huggingface_hub.errors.HFValidationError: Repo id must be")
    assert failure.message.endswith("'/tmp/does-not-exist-model'. Use `repo_type` argument if needed.")


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "mindie"])
def test_traceback_frames_and_source_lines_are_never_the_message(engine: str) -> None:
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.12/site-packages/engine/worker.py", line 88, in allocate',
            "    raise torch.OutOfMemoryError(",
            "        f'CUDA out of memory. Tried to allocate {size}'",
            "    )",
            "  ^^^^^^^^^^^^^^^^^^^^^^^",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ]
    )
    failure = get_adapter(engine).classify_failure(log)
    assert failure is not None
    assert failure.failure_class == "oom"
    assert failure.evidence_line == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
