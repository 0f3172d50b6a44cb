"""``python -m perflab sim``: serve a simulated engine, or answer as an engine CLI shim.

- ``sim serve --port P --model NAME [...]`` serves the OpenAI API. With ``--fixed-ttft-ms`` and
  ``--fixed-itl-ms`` every request gets exactly those timings (``--time-scale`` does not apply to
  them); otherwise the performance model of ``--engine`` on ``--accelerator`` sets them. ``--port 0``
  picks a free port; the ``Uvicorn running on http://HOST:PORT`` line says which.
- ``sim shim TOOL ARGV...`` behaves like ``vllm``, ``sglang`` (``python3 -m sglang.launch_server``),
  ``trtllm-serve``, ``mindieservice_daemon``, ``nvidia-smi`` or ``npu-smi`` on a simulated host.

The agent zipapp calls :func:`main` with the same arguments.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence

from perflab.sim.engines import SHIM_TOOLS, run_shim
from perflab.sim.hardware import accelerator_names
from perflab.sim.profiles import PROFILES


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def configure_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--model", required=True, help="model id or path (its size drives model mode)")
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument(
        "--engine",
        choices=sorted(PROFILES),
        default="vllm",
        help="engine to imitate: metric names, error format, performance profile",
    )
    parser.add_argument("--fixed-ttft-ms", type=_non_negative_float, default=None)
    parser.add_argument("--fixed-itl-ms", type=_non_negative_float, default=None)
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--tokenizer", default="", help="tokenizer.json (needs the tokenizers package)")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--reasoning-parser", default=None)
    parser.add_argument("--access-log", action="store_true", help="log one line per request")
    model = parser.add_argument_group("model mode")
    model.add_argument("--accelerator", default="H100", help=f"one of {accelerator_names()}")
    model.add_argument("--tp", type=int, default=1)
    model.add_argument("--dp", type=int, default=1)
    model.add_argument("--ep", type=int, default=1)
    model.add_argument("--quantization", default=None)
    model.add_argument("--kv-cache-dtype", default=None)
    model.add_argument("--max-num-batched-tokens", type=int, default=None)
    model.add_argument("--max-num-seqs", type=int, default=None)
    model.add_argument(
        "--enable-prefix-caching", dest="prefix_caching", action=argparse.BooleanOptionalAction, default=None
    )
    model.add_argument(
        "--enable-chunked-prefill",
        dest="chunked_prefill",
        action=argparse.BooleanOptionalAction,
        default=None,
    )
    model.add_argument(
        "--speculative-config", default=None, help='JSON, e.g. {"method":"mtp","num_speculative_tokens":2}'
    )
    model.add_argument("--performance-mode", default=None)
    model.add_argument("--gpu-memory-utilization", dest="mem_fraction", type=float, default=None)
    model.add_argument("--attention-backend", default=None)
    model.add_argument(
        "--time-scale",
        type=_positive_float,
        default=1.0,
        help="divide every simulated duration by this factor",
    )


def configure(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="sim_command", metavar="{serve,shim}")
    commands.required = True
    configure_serve(commands.add_parser("serve", help="serve a simulated engine"))
    shim = commands.add_parser("shim", help="behave like an engine or device CLI", add_help=False)
    shim.add_argument("tool", choices=sorted(SHIM_TOOLS))
    shim.add_argument("argv", nargs=argparse.REMAINDER)


def run(args: argparse.Namespace) -> int:
    if args.sim_command == "shim":
        return run_shim(args.tool, list(args.argv))
    from perflab.sim.serve import run_serve  # the server stack loads only for ``serve``

    return run_serve(args)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m perflab sim …`` and of the agent zipapp's ``sim`` command."""
    parser = argparse.ArgumentParser(prog="perflab sim", description="simulated engines")
    configure(parser)
    arguments: List[str] = list(sys.argv[1:] if argv is None else argv)
    return run(parser.parse_args(arguments))
