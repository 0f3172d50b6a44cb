"""The ``perflab <command>`` dispatcher (the installed ``perflab`` command, or ``python -m perflab``).

Each command lives in its own module exposing ``configure(parser)`` and ``run(args) -> int`` (and
``PASSED_ON``, the name of the attribute that gets the arguments its parser does not know, for a
command that hands them to another program); the module is imported only when its command is used,
so ``python -m perflab bench`` never loads the database or the web stack. A command that cannot go
on raises :class:`CommandError`: its message is printed to stderr and its ``exit_status`` returned.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("perflab.bench.cli", "benchmark an OpenAI-compatible server"),
    "sim": ("perflab.sim.cli", "serve a simulated engine (OpenAI API, Prometheus metrics)"),
    "hosts": ("perflab.hosts_cli", "list and probe the hosts of hosts.yaml"),
    "run": ("perflab.runner.cli", "launch one engine config on a host and benchmark it"),
    "worker": ("perflab.worker.cli", "execute queued runs and studies"),
    "app": ("perflab.worker.serve", "serve the web app, its worker started with the server"),
    "import": ("perflab.importers.cli", "store existing benchmark results as runs"),
    "study": ("perflab.study.cli", "run an optimization study"),
    "report": ("perflab.report.cli", "export a study report"),
    "db": ("perflab.db_cli", "create or upgrade the database schema"),
    "datasets": ("perflab.hub.cli", "fetch a Hugging Face hub dataset into the cache"),
}


class CommandError(Exception):
    """A command cannot go on; the message says why (printed as is) and ``exit_status`` is returned."""

    exit_status = 1


def program_name() -> str:
    """``perflab`` when started as the installed command, else ``python -m perflab``."""
    return "perflab" if Path(sys.argv[0]).name == "perflab" else "python -m perflab"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=program_name(),
        description="perflab: measure and tune LLM serving configurations.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n"
        + "\n".join(f"  {name:<8} {help_text}" for name, (_, help_text) in COMMANDS.items()),
    )
    parser.add_argument("command", choices=sorted(COMMANDS), metavar="command")
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    top = build_parser().parse_args(argv if argv is not None else sys.argv[1:])
    module_name, help_text = COMMANDS[top.command]
    module = importlib.import_module(module_name)
    sub = argparse.ArgumentParser(prog=f"{program_name()} {top.command}", description=help_text)
    module.configure(sub)
    args, extra = sub.parse_known_args(top.args)
    passed_on = getattr(module, "PASSED_ON", None)
    if extra and passed_on is None:
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    if passed_on is not None:
        setattr(args, passed_on, extra)
    try:
        return int(module.run(args) or 0)
    except CommandError as error:
        print(str(error), file=sys.stderr)
        return error.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
