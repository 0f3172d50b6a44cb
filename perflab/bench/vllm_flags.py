"""``vllm bench serve`` compatibility: what its flags, backends and datasets mean to ``perflab bench``.

Follows vLLM 0.32.0 (``vllm/benchmarks/serve.py`` ``add_cli_args`` and
``vllm/benchmarks/datasets/datasets.py`` ``add_dataset_parser``). Every flag of that parser is either
accepted by ``perflab bench`` with the same meaning (see ``perflab.bench.cli``) or listed in
``UNSUPPORTED_FLAGS``, which the CLI turns into a one-line error naming the flag instead of argparse's
generic "unrecognized arguments".
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, Optional, Sequence

VLLM_VERSION = "0.32.0"

# vLLM's --backend names perflab sends, and the endpoint kind each one speaks.
BACKEND_ENDPOINTS: Dict[str, str] = {"openai": "completions", "vllm": "completions", "openai-chat": "chat"}
# The default --endpoint of each endpoint kind (vLLM's default is /v1/completions).
ENDPOINT_PATHS: Dict[str, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
# The backend recorded for a run whose command named no --backend.
DEFAULT_BACKENDS: Dict[str, str] = {"chat": "openai-chat", "completions": "openai"}
OTHER_BACKENDS = (
    "openai-responses",
    "openai-audio",
    "openai-embeddings",
    "openai-embeddings-chat",
    "openai-embeddings-clip",
    "openai-embeddings-vlm2vec",
    "infinity-embeddings",
    "infinity-embeddings-clip",
    "vllm-pooling",
    "vllm-rerank",
)
OTHER_DATASETS = (
    "burstgpt",
    "random-mm",
    "random-rerank",
    "hf",
    "custom_audio",
    "custom_image",
    "prefix_repetition",
    "spec_bench",
    "speed_bench",
    "timed_trace",
)
# Metric names vLLM accepts in --percentile-metrics that perflab does not report.
OTHER_PERCENTILE_METRICS = ("client_queue_time", "e2el_including_client_queue")
# vLLM's --tokenizer-mode values that load the tokenizer the way perflab does.
TOKENIZER_MODES = ("auto", "hf")

# vLLM 0.32.0 flags perflab bench does not offer, with what to use instead where there is something.
UNSUPPORTED_FLAGS: Dict[str, str] = {
    "--use-beam-search": "",
    "--logprobs": "",
    "--probe-request-rate": "",
    "--profile": "",
    "--self-timed": "",
    "--no-self-timed": "",
    "--lora-modules": "",
    "--lora-assignment": "",
    "--ramp-up-strategy": "perflab ramps linearly with --ramp-up-seconds",
    "--ramp-up-start-rps": "perflab ramps linearly with --ramp-up-seconds",
    "--ramp-up-end-rps": "perflab ramps linearly with --ramp-up-seconds",
    "--ready-check-timeout-sec": "",
    "--chat-template-kwargs": "",
    "--skip-tokenizer-init": "",
    "--insecure": "",
    "--plot-timeline": "",
    "--timeline-itl-thresholds": "",
    "--plot-dataset-stats": "",
    "--no-stream": "",
    "--no-oversample": "",
    "--skip-chat-template": "",
    "--enable-multimodal-chat": "",
    "--disable-shuffle": "",
    "--custom-ensure-client-side-data": "",
    "--spec-bench-output-len": "",
    "--spec-bench-category": "",
    "--timed-trace-chunk-hash-size": "",
    "--timed-trace-sec-multiplier": "",
    "--timed-trace-label-timestamp": "",
    "--timed-trace-label-input-length": "",
    "--timed-trace-label-output-length": "",
    "--timed-trace-label-hash-ids": "",
    "--blazedit-min-distance": "",
    "--blazedit-max-distance": "",
    "--asr-max-audio-len-sec": "",
    "--asr-min-audio-len-sec": "",
    "--random-batch-size": "",
    "--no-reranker": "",
    "--random-mm-base-items-per-request": "",
    "--random-mm-num-mm-items-range-ratio": "",
    "--random-mm-limit-mm-per-prompt": "",
    "--random-mm-bucket-config": "",
    "--hf-subset": "",
    "--hf-split": "",
    "--hf-name": "",
    "--hf-output-len": "",
    "--bfcl-categories": "",
    "--prefix-repetition-prefix-len": "",
    "--prefix-repetition-suffix-len": "",
    "--prefix-repetition-num-prefixes": "",
    "--prefix-repetition-output-len": "",
    "--speed-bench-dataset-subset": "",
    "--speed-bench-output-len": "",
    "--speed-bench-category": "",
}


def unsupported_message(flag: str) -> str:
    """``vllm bench serve flag --profile is not supported by perflab bench`` (plus a hint)."""
    hint = UNSUPPORTED_FLAGS.get(flag, "")
    return f"vllm bench serve flag {flag} is not supported by perflab bench" + (f"; {hint}" if hint else "")


class UnsupportedFlag(argparse.Action):
    """Stops parsing at a vLLM flag perflab does not offer, naming it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: Optional[str] = None,
    ) -> None:
        parser.error(unsupported_message(option_string or self.option_strings[0]))


def add_unsupported_flags(parser: argparse.ArgumentParser) -> None:
    """Register every flag of ``UNSUPPORTED_FLAGS`` (hidden from --help) so using one is a clear error."""
    for flag in UNSUPPORTED_FLAGS:
        parser.add_argument(
            flag,
            action=UnsupportedFlag,
            nargs="*",
            dest="unsupported_" + flag.lstrip("-").replace("-", "_"),
            help=argparse.SUPPRESS,
        )


def unsupported_choice(what: str, value: str, supported: Sequence[str]) -> str:
    """The message for a vLLM backend, dataset or metric name perflab does not offer."""
    return (
        f"vllm bench serve {what} {value!r} is not supported by perflab bench "
        f"(supported: {', '.join(supported)})"
    )


def result_filename(
    *,
    label: Optional[str],
    backend: str,
    request_rate: float,
    max_concurrency: Optional[int],
    model_id: str,
    date: str,
    result_dir: Optional[str] = None,
    result_filename: Optional[str] = None,
) -> str:
    """Where ``--save-result`` writes without a file name: vLLM's
    ``{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json``, or ``--result-filename``, inside
    ``--result-dir`` when one is given."""
    name = result_filename
    if name is None:
        concurrency = f"-concurrency{max_concurrency}" if max_concurrency is not None else ""
        base_model = model_id.split("/")[-1]
        name = f"{label or backend}-{float(request_rate)}qps{concurrency}-{base_model}-{date}.json"
    return os.path.join(result_dir, name) if result_dir else name
