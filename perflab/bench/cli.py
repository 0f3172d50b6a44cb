"""``python -m perflab bench``: benchmark an OpenAI-compatible server from the command line.

It takes ``vllm bench serve``'s flags (vLLM 0.32.0) with their meaning, so a command line written for
vLLM runs unchanged after ``python -m perflab bench``, and perflab's own spellings (``--dataset``,
``--input-len``, ``--warmup``, ``--percentiles``, ``--save-result FILE``, …) beside them. A vLLM flag
perflab does not offer is a one-line error naming it (``perflab.bench.vllm_flags``).

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
from typing import Any, Dict, List, Optional

from perflab.bench.datasets import SharedPrefixSpec, dataset_kinds
from perflab.bench.datasets.base import GROUP_DISTRIBUTIONS
from perflab.bench.errors import BenchError
from perflab.bench.metrics import CONCURRENCY_DEFINITIONS, DEFAULT_PERCENTILES, INPUT_TOKEN_DEFINITIONS
from perflab.bench.options import (
    FLUSH_CACHE_TIMEOUT_S,
    PER_TOKEN_LIMIT_S,
    SAMPLING_PARAMETERS,
    TTFT_ALLOWANCE_S,
    BenchOptions,
    parse_goodput,
    parse_pairs,
    parse_percentile_metrics,
    parse_percentiles,
)
from perflab.bench.report import format_failures, format_text_block, nothing_sent, partial_note
from perflab.bench.runner import run_benchmark
from perflab.bench.stopping import BenchStopped
from perflab.bench.vllm_flags import (
    TOKENIZER_MODES,
    VLLM_VERSION,
    add_unsupported_flags,
    result_filename,
    unsupported_choice,
)

EXIT_STOPPED = 3
NOTHING_SENT = "no request could be sent (is the server reachable?)"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_PERCENTILES_TEXT = ",".join(str(int(p)) for p in DEFAULT_PERCENTILES)
DATASET_OUTPUT_FLAGS = {
    "random": "random_output_len",
    "sharegpt": "sharegpt_output_len",
    "custom": "custom_output_len",
    "generated-shared-prefix": "gsp_output_len",
    "sharegpt-multi-turn": "sharegpt_output_len",
    "agentic-trace": "sharegpt_output_len",
}

EPILOG = f"""\
vllm bench serve (vLLM {VLLM_VERSION}) command lines run unchanged after "python -m perflab bench":
its flags keep their meaning, and each perflab spelling is an alias (--dataset-name/--dataset,
--random-input-len/--input-len, --random-output-len, --sharegpt-output-len and --custom-output-len
for their dataset/--output-len for all, --random-range-ratio/--range-ratio,
--random-prefix-len/--prefix-len, --num-warmups/--warmup, --metric-percentiles/--percentiles,
--disable-tqdm/--no-progress). A vLLM flag perflab does not offer is an error naming it.

--save-result alone is vLLM's switch: the JSON goes to --result-filename, else to
LABEL-RATEqps[-concurrencyN]-MODEL-DATE.json, inside --result-dir when given. --save-result FILE
(a value right after it) writes to FILE, as perflab always did. --append-result adds the result as a
new line instead. perflab always saves per-request data (--save-detailed is accepted).

Where perflab's defaults differ from vLLM's: --endpoint chat (vLLM: /v1/completions; a --backend
alone picks its endpoint), ignore_eos sent for every dataset (vLLM: random datasets only;
--no-ignore-eos turns it off), --temperature 0 (vLLM: the server's default), percentiles
50,90,95,99 of ttft,tpot,itl,e2el (vLLM: 99 of ttft,tpot,itl), custom output length 128 where a row
gives none (vLLM: 256 for every row). Input tokens and peak concurrency follow vLLM's definitions
(--input-tokens usage, --peak-concurrency per-second); the result records which were used and keeps
both values (total_prompt_input_tokens, total_usage_input_tokens, max_overlapping_requests,
max_requests_per_second_bucket). Against perflab's simulated engines (model mode) every figure comes
from the simulator's own clock (timing_source "simulated"), so the machine's load does not change it;
--wall-clock times them as a real engine instead.

Workloads vLLM 0.32's bench lacks follow SGLang 0.5.23's bench_serving (--dataset-name
generated-shared-prefix with --gsp-*, agentic-trace with --agentic-max-turns, mooncake with
--use-trace-timestamps and --mooncake-slowdown-factor, --flush-cache); think time between a
session's turns follows AIPerf (--conversation-turn-delay-mean/-stddev, ms) and --max-seconds
guidellm. For a session workload --num-prompts counts sessions and --max-concurrency caps the
sessions in flight.

perflab's own flags carry its name: --perflab-min-duration and --perflab-min-requests send the
workload again in rounds of --num-prompts fresh prompts until the rounds have measured that long and
that many requests, so a faster server is not measured over less time than a slower one.
"""


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or inf") from None
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive (or inf)")
    return value


def _range_ratio(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        if text.lstrip().startswith("{"):
            raise argparse.ArgumentTypeError(
                "separate input/output range ratios are not supported by perflab bench; give one number"
            ) from None
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _json_object(text: str) -> Dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _add_server(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("server")
    group.add_argument(
        "--base-url",
        action="append",
        dest="base_urls",
        metavar="URL",
        help="server root, e.g. http://127.0.0.1:8000; repeat to spread requests over replicas "
        "(default http://HOST:PORT)",
    )
    group.add_argument("--host", default=DEFAULT_HOST, help=f"without --base-url (default {DEFAULT_HOST})")
    group.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"without --base-url (default {DEFAULT_PORT})"
    )
    group.add_argument(
        "--model", default=None, help="model id or local path (default: the first model the server lists)"
    )
    group.add_argument(
        "--served-model-name", default=None, help="model name sent in requests (default --model)"
    )
    group.add_argument(
        "--backend",
        default=None,
        help="vLLM backend name: openai or vllm (completions), openai-chat (chat completions)",
    )
    group.add_argument(
        "--endpoint",
        default=None,
        help="chat, completions, or a path such as /v1/chat/completions (default: the backend's, else chat)",
    )
    group.add_argument(
        "--api-key",
        default=None,
        help="bearer token (default: $OPENAI_API_KEY; prefer the variable: a flag's value is in the "
        "process list for every user of the machine)",
    )
    group.add_argument("--header", nargs="*", default=[], metavar="KEY=VALUE", help="extra request headers")
    group.add_argument(
        "--request-id-prefix", default=None, help="send x-request-id PREFIX<n> with each request"
    )
    group.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"per-request limit in seconds (default: {TTFT_ALLOWANCE_S:g} s plus {PER_TOKEN_LIMIT_S:g} s "
        "per output token asked for)",
    )


def _add_dataset(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("dataset")
    group.add_argument(
        "--dataset",
        "--dataset-name",
        dest="dataset",
        default="random",
        help=f"one of {', '.join(dataset_kinds())} (default random)",
    )
    group.add_argument("--dataset-path", help="ShareGPT JSON, or a custom .jsonl/.csv/.txt file")
    group.add_argument(
        "--input-len", type=int, default=None, help="random: prompt tokens (overrides --random-input-len)"
    )
    group.add_argument(
        "--random-input-len", type=int, default=1024, help="random: prompt tokens (default 1024)"
    )
    group.add_argument(
        "--output-len",
        type=int,
        default=None,
        help="max_tokens per request for every dataset (random/custom default 128; ShareGPT: the reply)",
    )
    group.add_argument("--random-output-len", type=int, default=None, help="random: max_tokens per request")
    group.add_argument(
        "--sharegpt-output-len", type=int, default=None, help="ShareGPT: max_tokens per request"
    )
    group.add_argument(
        "--custom-output-len",
        type=int,
        default=None,
        help="custom: max_tokens where a row gives none (-1: the rows' own)",
    )
    group.add_argument(
        "--range-ratio",
        "--random-range-ratio",
        dest="range_ratio",
        type=_range_ratio,
        default=0.0,
        help="random: lengths drawn from [len·(1−r), len·(1+r)]",
    )
    group.add_argument(
        "--prefix-len",
        "--random-prefix-len",
        dest="prefix_len",
        type=int,
        default=0,
        help="random: shared prefix tokens",
    )
    group.add_argument("--num-prompts", type=int, default=1000)
    group.add_argument("--seed", type=int, default=0)
    group.add_argument("--tokenizer", help="tokenizer.json, or a directory holding a tokenizer")
    group.add_argument("--tokenizer-mode", default="auto", help="auto or hf (both load the same tokenizer)")
    group.add_argument(
        "--trust-remote-code", action="store_true", help="let a model directory's tokenizer code run"
    )


def _add_workloads(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "sessions, shared prefixes, traces and the prefix cache (SGLang 0.5.23's names; think time AIPerf's)"
    )
    group.add_argument("--gsp-num-groups", type=int, default=64, help="shared-prefix groups (default 64)")
    group.add_argument(
        "--gsp-prompts-per-group",
        type=int,
        default=None,
        help="requests (or sessions) per group: sets --num-prompts to groups × this",
    )
    group.add_argument(
        "--gsp-system-prompt-len", type=int, default=2048, help="tokens of each group's system prompt (2048)"
    )
    group.add_argument("--gsp-question-len", type=int, default=128, help="tokens of each question (128)")
    group.add_argument("--gsp-output-len", type=int, default=None, help="max_tokens per request or turn")
    group.add_argument(
        "--gsp-num-turns", type=int, default=1, help="turns per session; above 1 each request is a session"
    )
    group.add_argument(
        "--gsp-group-distribution",
        choices=GROUP_DISTRIBUTIONS,
        default="uniform",
        help="how requests pick their group: uniform, or zipf (group 0 the hottest)",
    )
    group.add_argument("--gsp-zipf-alpha", type=float, default=None, help="Zipf exponent (> 0)")
    group.add_argument(
        "--agentic-max-turns", dest="max_turns", type=int, default=None, help="cap each session's turns"
    )
    group.add_argument(
        "--conversation-turn-delay-mean",
        type=float,
        default=0.0,
        help="sessions: mean think time between a reply and the next turn, ms (default 0)",
    )
    group.add_argument(
        "--conversation-turn-delay-stddev",
        type=float,
        default=0.0,
        help="sessions: its standard deviation, ms",
    )
    group.add_argument(
        "--use-trace-timestamps",
        action="store_true",
        help="mooncake: send each request at its trace time (else at --request-rate)",
    )
    group.add_argument(
        "--mooncake-slowdown-factor",
        type=float,
        default=1.0,
        help="mooncake: multiply the trace's times (2 = twice as slow, 0.5 = twice as fast)",
    )
    group.add_argument(
        "--mooncake-block-size", type=int, default=512, help="mooncake: tokens per hash id (default 512)"
    )
    group.add_argument(
        "--max-seconds", type=float, default=None, help="send no request due later than this (duration cap)"
    )
    group.add_argument(
        "--flush-cache",
        action="store_true",
        help="empty the servers' prefix caches after the warm-up (vLLM POST /reset_prefix_cache, served "
        "only with VLLM_SERVER_DEV_MODE=1; SGLang POST /flush_cache); the result's cache_reset says what "
        "was done",
    )
    group.add_argument(
        "--flush-cache-timeout",
        type=float,
        default=FLUSH_CACHE_TIMEOUT_S,
        help=f"seconds SGLang waits for an idle server before flushing (default {FLUSH_CACHE_TIMEOUT_S:g})",
    )
    group.add_argument(
        "--perflab-min-duration",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="perflab's own: send the workload again, fresh prompts each round, until the rounds have "
        "measured this long (the pauses between rounds left out); the result's rounds say how many",
    )
    group.add_argument(
        "--perflab-min-requests",
        type=int,
        default=0,
        metavar="N",
        help="perflab's own: rounds likewise until N requests completed",
    )


def _add_traffic(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("traffic")
    group.add_argument(
        "--request-rate", type=_rate, default=math.inf, help="requests per second (default inf)"
    )
    group.add_argument(
        "--burstiness",
        type=_rate,
        default=1.0,
        help="gamma shape of arrivals: 1 Poisson, <1 burstier, inf constant",
    )
    group.add_argument(
        "--ramp-up-seconds",
        type=float,
        default=0.0,
        help="grow the rate linearly from 0 to --request-rate over this time",
    )
    group.add_argument("--max-concurrency", type=int, default=None)
    group.add_argument(
        "--warmup",
        "--num-warmups",
        dest="warmup",
        type=int,
        default=0,
        help="requests sent first and left out of the statistics",
    )


def _add_sampling(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sampling (sent in each request)")
    group.add_argument(
        "--ignore-eos",
        dest="ignore_eos",
        action="store_const",
        const=True,
        default=True,
        help="send ignore_eos (the default)",
    )
    group.add_argument(
        "--no-ignore-eos",
        dest="ignore_eos",
        action="store_false",
        help="do not send ignore_eos (outputs may end early)",
    )
    group.add_argument("--temperature", type=float, default=0.0)
    for name, kind in SAMPLING_PARAMETERS.items():
        group.add_argument("--" + name.replace("_", "-"), type=kind, default=None)
    group.add_argument(
        "--extra-body", type=_json_object, default=None, help="JSON object merged into each request body"
    )


def _add_results(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("results")
    group.add_argument(
        "--percentiles",
        "--metric-percentiles",
        dest="percentiles",
        default=DEFAULT_PERCENTILES_TEXT,
        help=f"comma-separated, default {DEFAULT_PERCENTILES_TEXT}",
    )
    group.add_argument(
        "--percentile-metrics",
        default="ttft,tpot,itl,e2el",
        help="latency sections printed, comma-separated (default ttft,tpot,itl,e2el; all are saved)",
    )
    group.add_argument(
        "--goodput",
        nargs="+",
        default=[],
        metavar="NAME:MS",
        help="SLOs for goodput, e.g. ttft:500 tpot:50 e2el:20000",
    )
    group.add_argument(
        "--input-tokens",
        choices=INPUT_TOKEN_DEFINITIONS,
        default="usage",
        help="what total_input_tokens counts: usage = the server's usage.prompt_tokens (vLLM's, the "
        "default), prompt = the prompt's own tokens",
    )
    group.add_argument(
        "--peak-concurrency",
        choices=CONCURRENCY_DEFINITIONS,
        default="per-second",
        help="what max_concurrent_requests counts: per-second = requests active in the fullest 1-second "
        "bucket (vLLM's, the default), exact = the most requests in flight at one instant",
    )
    group.add_argument(
        "--wall-clock",
        action="store_true",
        help="time a simulated engine by when its tokens arrive, as a real one, not by its simulated "
        "clock (the figures then include the load of the machines)",
    )
    group.add_argument("--label", default=None)
    group.add_argument(
        "--save-result",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="write the JSON result: to FILE when given, else to vLLM's file name (see below)",
    )
    group.add_argument("--append-result", action="store_true", help="add the JSON result as a line")
    group.add_argument("--result-dir", default=None, help="directory of the saved result")
    group.add_argument("--result-filename", default=None, help="file name of the saved result")
    group.add_argument(
        "--save-detailed", action="store_true", help="accepted: perflab always saves per-request data"
    )
    group.add_argument(
        "--metadata", nargs="*", default=[], metavar="KEY=VALUE", help="extra fields of the JSON result"
    )
    group.add_argument("--result-text", metavar="FILE", help="write the text block here")
    progress = group.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress-json", action="store_true", help="one PERFLAB_PROGRESS JSON line per second on stderr"
    )
    progress.add_argument("--no-progress", "--disable-tqdm", dest="no_progress", action="store_true")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    _add_server(parser)
    _add_dataset(parser)
    _add_workloads(parser)
    _add_traffic(parser)
    _add_sampling(parser)
    _add_results(parser)
    add_unsupported_flags(parser)


def _base_urls(args: argparse.Namespace) -> List[str]:
    """``--base-url`` as given, else ``http://HOST:PORT`` (vLLM ignores --host/--port beside a base URL)."""
    if args.base_urls:
        return list(args.base_urls)
    host = f"[{args.host}]" if ":" in args.host and not args.host.startswith("[") else args.host
    return [f"http://{host}:{args.port}"]


def _output_len(args: argparse.Namespace) -> Optional[int]:
    """``--output-len`` for every dataset, else the flag of the dataset in use (-1: the dataset's own)."""
    value = args.output_len
    if value is None:
        flag = DATASET_OUTPUT_FLAGS.get(args.dataset)
        value = getattr(args, flag) if flag else None
    return None if value == -1 else value


def options_from_args(args: argparse.Namespace) -> BenchOptions:
    """``BenchOptions`` from parsed arguments (``BenchError`` for values argparse cannot check)."""
    progress = "json" if args.progress_json else "none" if args.no_progress else "bar"
    if args.tokenizer_mode not in TOKENIZER_MODES:
        raise BenchError(unsupported_choice("tokenizer mode", args.tokenizer_mode, TOKENIZER_MODES))
    sampling = {name: getattr(args, name) for name in SAMPLING_PARAMETERS if getattr(args, name) is not None}
    return BenchOptions(
        base_urls=_base_urls(args),
        model=args.model or "",
        endpoint=args.endpoint,
        backend=args.backend,
        served_model_name=args.served_model_name,
        dataset=args.dataset,
        dataset_path=args.dataset_path,
        input_len=args.input_len if args.input_len is not None else args.random_input_len,
        output_len=_output_len(args),
        num_prompts=args.num_prompts
        if args.gsp_prompts_per_group is None
        else args.gsp_num_groups * args.gsp_prompts_per_group,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        max_concurrency=args.max_concurrency,
        seed=args.seed,
        warmup=args.warmup,
        percentiles=parse_percentiles(args.percentiles),
        percentile_metrics=parse_percentile_metrics(args.percentile_metrics),
        goodput=parse_goodput(args.goodput),
        tokenizer=args.tokenizer,
        trust_remote_code=args.trust_remote_code,
        api_key=args.api_key or os.environ.get("OPENAI_API_KEY") or None,
        range_ratio=args.range_ratio,
        prefix_len=args.prefix_len,
        ramp_up_seconds=args.ramp_up_seconds,
        timeout=args.timeout,
        ignore_eos=args.ignore_eos,
        temperature=args.temperature,
        sampling=sampling,
        extra_body=args.extra_body or {},
        extra_headers=parse_pairs(args.header or [], "--header"),
        request_id_prefix=args.request_id_prefix,
        input_tokens=args.input_tokens,
        peak_concurrency=args.peak_concurrency,
        wall_clock=args.wall_clock,
        label=args.label,
        progress=progress,
        shared_prefix=SharedPrefixSpec(
            num_groups=args.gsp_num_groups,
            system_prompt_len=args.gsp_system_prompt_len,
            question_len=args.gsp_question_len,
            num_turns=args.gsp_num_turns,
            distribution=args.gsp_group_distribution,
            zipf_alpha=args.gsp_zipf_alpha,
        ),
        max_turns=args.max_turns,
        turn_delay_mean_ms=args.conversation_turn_delay_mean,
        turn_delay_stddev_ms=args.conversation_turn_delay_stddev,
        use_trace_timestamps=args.use_trace_timestamps,
        slowdown_factor=args.mooncake_slowdown_factor,
        max_seconds=args.max_seconds,
        block_size=args.mooncake_block_size,
        flush_cache=args.flush_cache,
        flush_cache_timeout=args.flush_cache_timeout,
        min_duration_s=args.perflab_min_duration,
        min_requests=args.perflab_min_requests,
    )


def result_path(args: argparse.Namespace, result: Dict[str, Any]) -> Optional[str]:
    """Where the JSON result goes (None: nowhere), from --save-result/--append-result and their
    --result-dir/--result-filename."""
    if args.save_result is None and not args.append_result:
        if args.result_dir or args.result_filename:
            print(
                "perflab bench: note: --result-dir/--result-filename take effect with --save-result",
                file=sys.stderr,
            )
        return None
    if args.save_result:
        return os.path.join(args.result_dir, args.save_result) if args.result_dir else args.save_result
    return result_filename(
        label=args.label,
        backend=result["backend"],
        request_rate=args.request_rate,
        max_concurrency=args.max_concurrency,
        model_id=result["model_id"],
        date=result["date"],
        result_dir=args.result_dir,
        result_filename=args.result_filename,
    )


def _save_result(path: str, result: Dict[str, Any], append: bool) -> None:
    """Write (or, with ``append``, add as one more line) the JSON result, creating its directory."""
    try:
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        separator = ""
        if append and os.path.isfile(path) and os.path.getsize(path):
            with open(path, "rb") as existing:
                existing.seek(-1, os.SEEK_END)
                separator = "" if existing.read(1) == b"\n" else "\n"
        with open(path, "a" if append else "w", encoding="utf-8") as handle:
            handle.write(separator + json.dumps(result) + "\n")
    except OSError as exc:
        raise BenchError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise BenchError(f"cannot write {path}: {exc.strerror or exc}") from exc


def run(args: argparse.Namespace) -> int:
    try:
        options = options_from_args(args)
        metadata = parse_pairs(args.metadata or [], "--metadata")
        if args.save_result and args.result_filename:
            raise BenchError("give the result file either as --save-result FILE or as --result-filename")
        result = run_benchmark(options, handle_signals=True)
        text = format_text_block(result)
        if result.get("partial"):
            text += partial_note(result) + "\n"
        for key, value in metadata.items():
            result.setdefault(key, value)
        path = result_path(args, result)
        if path is not None:
            _save_result(path, result, args.append_result)
        if args.result_text:
            _write(args.result_text, text)
    except BenchError as exc:
        print(f"perflab bench: error: {exc}", file=sys.stderr)
        return 2
    except BenchStopped as exc:
        print(f"perflab bench: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    sent_none = nothing_sent(result)
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
