"""The ``sim serve`` command: one simulated engine from command-line options.

Fixed mode (``--fixed-ttft-ms``/``--fixed-itl-ms``) or the performance model of ``--engine`` on
``--accelerator``; both serve the same OpenAI API (:mod:`perflab.sim.api`) until SIGTERM. Kept apart
from :mod:`perflab.sim.cli` so the device and engine shims start without importing the server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Optional

from perflab.sim.api import ApiConfig, OpenAIApp, vllm_dev_mode
from perflab.sim.clock import SimClock
from perflab.sim.deployment import Knobs, describe, resolve_deployment, speculative_from_json
from perflab.sim.engine import Engine, fixed_engine, model_engine
from perflab.sim.failures import EngineFailure
from perflab.sim.hardware import accelerator_names, find_accelerator
from perflab.sim.perfmodel import plan_memory
from perflab.sim.profiles import PROFILES
from perflab.sim.server import Console, install_stop_signals, serve_until_stopped
from perflab.sim.tokenizer import load_tokenizer

FIXED_MAX_MODEL_LEN = 131072
# Options whose destination is the Knobs attribute of the same name.
KNOB_OPTIONS = (
    "tp",
    "dp",
    "ep",
    "quantization",
    "kv_cache_dtype",
    "max_num_batched_tokens",
    "max_num_seqs",
    "prefix_caching",
    "chunked_prefill",
    "performance_mode",
    "max_model_len",
    "mem_fraction",
    "attention_backend",
    "reasoning_parser",
)


def _knobs(args: argparse.Namespace) -> Knobs:
    knobs = Knobs(args.model)
    knobs.served_names = list(args.served_model_name or [])
    for name in KNOB_OPTIONS:
        setattr(knobs, name, getattr(args, name))
    if args.speculative_config:
        knobs.spec_method, knobs.spec_tokens = speculative_from_json(args.speculative_config)
    return knobs


async def _serve(args: argparse.Namespace, knobs: Optional[Knobs], tokenizer, console: Console) -> int:
    loop = asyncio.get_running_loop()
    stop = install_stop_signals(loop)
    served = list(args.served_model_name or [args.model])
    if knobs is None:
        engine: Engine = fixed_engine(loop, args.fixed_ttft_ms / 1000.0, args.fixed_itl_ms / 1000.0)
        now = loop.time
        config = ApiConfig(
            served,
            args.model,
            args.max_model_len or FIXED_MAX_MODEL_LEN,
            args.engine,
            PROFILES[args.engine].version,
            args.api_key,
            bool(args.reasoning_parser),
            dev_mode=vllm_dev_mode(os.environ),
        )
        console.line(f"perflab sim: fixed timings ttft={args.fixed_ttft_ms} ms itl={args.fixed_itl_ms} ms")
    else:
        accel = find_accelerator(args.accelerator)
        if accel is None:
            console.line(f"error: unknown --accelerator {args.accelerator!r}; known: {accelerator_names()}")
            return 2
        dep = resolve_deployment(args.engine, knobs, accel)
        plan = plan_memory(dep)
        clock = SimClock(loop)
        engine = model_engine(clock, dep, plan, args.time_scale)
        now = clock.present
        config = ApiConfig(
            dep.served_names,
            args.model,
            dep.max_model_len,
            args.engine,
            dep.profile.version,
            args.api_key,
            bool(args.reasoning_parser),
            need_prompt_ids=True,  # tokenized with or without prefix caching: the same CPU cost for both
            max_batch_size=dep.max_num_seqs,
            dev_mode=vllm_dev_mode(os.environ),
        )
        summary = " ".join(f"{key}={value}" for key, value in describe(dep).items())
        console.line(f"perflab sim: {summary} kv_cache_tokens={plan.kv_tokens} time_scale={args.time_scale}")
    app = OpenAIApp(
        config,
        engine,
        tokenizer,
        now,
        access_log=(lambda text: console.line(f"INFO:     {text}")) if args.access_log else None,
    )
    await serve_until_stopped(app, args.host, args.port, console, stop)
    return 0


def run_serve(args: argparse.Namespace) -> int:
    console = Console()
    if (args.fixed_ttft_ms is None) != (args.fixed_itl_ms is None):
        print("error: --fixed-ttft-ms and --fixed-itl-ms go together", file=sys.stderr)
        return 2
    try:
        tokenizer = load_tokenizer(args.tokenizer)
        knobs = None if args.fixed_ttft_ms is not None else _knobs(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(args, knobs, tokenizer, console))
    except EngineFailure as failure:
        print("\n".join(failure.lines), file=sys.stderr)
        return failure.exit_code
    except OSError as exc:
        print(
            f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address ('{args.host}', "
            f"{args.port}): {(exc.strerror or str(exc)).lower()}",
            file=sys.stderr,
        )
        return 1
