"""``python -m perflab bench``: benchmark an OpenAI-compatible server from the command line.

Prints the "Serving Benchmark Result" block on stdout (and failure reasons after it), notes and
progress on stderr. Exit status: 0 when the benchmark ran (even with failed requests), 2 for bad
arguments or an unreadable dataset/tokenizer, 1 when no request could be sent at all, 3 when it was
stopped early — by SIGTERM/SIGINT, or because a server went away mid-run — after writing a result
marked ``partial`` over the requests that had ended (none is written if no request had ended).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from perflab.bench.datasets.base import DATASET_KINDS
from perflab.bench.errors import BenchError
from perflab.bench.metrics import DEFAULT_PERCENTILES
from perflab.bench.options import DEFAULT_TIMEOUT_S, ENDPOINTS, BenchOptions, parse_goodput, parse_percentiles
from perflab.bench.report import format_failures, format_text_block, partial_note
from perflab.bench.runner import run_benchmark
from perflab.bench.stopping import BenchStopped

EXIT_STOPPED = 3
NOTHING_SENT = "no request could be sent (is the server reachable?)"


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or inf") from None
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive (or inf)")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base-url",
        action="append",
        required=True,
        dest="base_urls",
        metavar="URL",
        help="server root, e.g. http://127.0.0.1:8000; repeat to spread requests over replicas",
    )
    parser.add_argument("--model", required=True, help="model name sent in each request")
    parser.add_argument(
        "--endpoint", choices=ENDPOINTS, default="chat", help="/v1/chat/completions (chat) or /v1/completions"
    )
    parser.add_argument("--dataset", choices=DATASET_KINDS, default="random")
    parser.add_argument("--dataset-path", help="ShareGPT JSON, or a custom .jsonl/.csv/.txt file")
    parser.add_argument("--input-len", type=int, default=1024, help="random: prompt tokens (default 1024)")
    parser.add_argument(
        "--output-len",
        type=int,
        default=None,
        help="max_tokens per request (random/custom default 128; ShareGPT: the reference reply)",
    )
    parser.add_argument(
        "--range-ratio", type=float, default=0.0, help="random: lengths drawn from [len·(1−r), len·(1+r)]"
    )
    parser.add_argument("--prefix-len", type=int, default=0, help="random: shared prefix tokens")
    parser.add_argument("--num-prompts", type=int, default=1000)
    parser.add_argument(
        "--request-rate", type=_rate, default=math.inf, help="requests per second (default inf)"
    )
    parser.add_argument(
        "--burstiness",
        type=_rate,
        default=1.0,
        help="gamma shape of arrivals: 1 Poisson, <1 burstier, inf constant",
    )
    parser.add_argument(
        "--ramp-up-seconds",
        type=float,
        default=0.0,
        help="grow the rate linearly from 0 to --request-rate over this time",
    )
    parser.add_argument("--max-concurrency", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--warmup", type=int, default=0, help="requests sent first and left out of the statistics"
    )
    parser.add_argument(
        "--percentiles",
        default=",".join(str(int(p)) for p in DEFAULT_PERCENTILES),
        help="comma-separated, default 50,90,95,99",
    )
    parser.add_argument(
        "--goodput",
        nargs="+",
        default=[],
        metavar="NAME:MS",
        help="SLOs for goodput, e.g. ttft:500 tpot:50 e2el:20000",
    )
    parser.add_argument("--tokenizer", help="tokenizer.json, or a directory holding a tokenizer")
    parser.add_argument(
        "--api-key",
        default=None,
        help="bearer token (default: $OPENAI_API_KEY; prefer the variable: a flag's value is in the "
        "process list for every user of the machine)",
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="per-request limit in seconds"
    )
    parser.add_argument(
        "--no-ignore-eos",
        dest="ignore_eos",
        action="store_false",
        help="do not send ignore_eos (outputs may end early)",
    )
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--label", default=None)
    parser.add_argument("--save-result", metavar="FILE", help="write the JSON result here")
    parser.add_argument("--result-text", metavar="FILE", help="write the text block here")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress-json", action="store_true", help="one PERFLAB_PROGRESS JSON line per second on stderr"
    )
    progress.add_argument("--no-progress", action="store_true")


def options_from_args(args: argparse.Namespace) -> BenchOptions:
    """``BenchOptions`` from parsed arguments (``BenchError`` for values argparse cannot check)."""
    progress = "json" if args.progress_json else "none" if args.no_progress else "bar"
    return BenchOptions(
        base_urls=list(args.base_urls),
        model=args.model,
        endpoint=args.endpoint,
        dataset=args.dataset,
        dataset_path=args.dataset_path,
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.num_prompts,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        max_concurrency=args.max_concurrency,
        seed=args.seed,
        warmup=args.warmup,
        percentiles=parse_percentiles(args.percentiles),
        goodput=parse_goodput(args.goodput),
        tokenizer=args.tokenizer,
        api_key=args.api_key or os.environ.get("OPENAI_API_KEY") or None,
        range_ratio=args.range_ratio,
        prefix_len=args.prefix_len,
        ramp_up_seconds=args.ramp_up_seconds,
        timeout=args.timeout,
        ignore_eos=args.ignore_eos,
        temperature=args.temperature,
        label=args.label,
        progress=progress,
    )


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise BenchError(f"cannot write {path}: {exc.strerror or exc}") from exc


def run(args: argparse.Namespace) -> int:
    try:
        options = options_from_args(args)
        result = run_benchmark(options, handle_signals=True)
        text = format_text_block(result)
        if result.get("partial"):
            text += partial_note(result) + "\n"
        if args.save_result:
            _write(args.save_result, json.dumps(result) + "\n")
        if args.result_text:
            _write(args.result_text, text)
    except BenchError as exc:
        print(f"perflab bench: error: {exc}", file=sys.stderr)
        return 2
    except BenchStopped as exc:
        print(f"perflab bench: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    sent_none = not any(
        record["error"] is None or record["reason"] != "connect_error" for record in result["requests"]
    )
    try:
        for note in result["notes"]:
            print(f"perflab bench: note: {note}", file=sys.stderr)
        sys.stdout.write(text + format_failures(result))
        sys.stdout.flush()
        if result.get("partial"):
            print(f"perflab bench: stopped early: {result['partial_reason']}", file=sys.stderr)
        elif sent_none:
            print(f"perflab bench: error: {NOTHING_SENT}", file=sys.stderr)
    except BrokenPipeError:
        _discard_output()
    if result.get("partial"):
        return EXIT_STOPPED
    return 1 if sent_none else 0


def _discard_output() -> None:
    """Whoever read our output went away (e.g. its SSH connection dropped): send the rest nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        os.dup2(devnull, stream.fileno())
