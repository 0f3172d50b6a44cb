"""Reading an engine's ``--help`` output: which flags it accepts, which take a value, and their choices.

Two formats are read, both by their option lines (two spaces, then a dash; the usage block and the
help text below an option are indented further and ignored):

- argparse (``vllm serve --help=all``, ``python -m sglang.launch_server --help``):
  ``  --kv-cache-dtype {auto,fp8,…}``, ``  --api-server-count API_SERVER_COUNT, -asc API_SERVER_COUNT``,
  ``  --enable-log-requests, --no-enable-log-requests`` — each spelling with its own metavar or
  ``{choices}``;
- click (``trtllm-serve serve --help``): ``  --tensor_parallel_size, --tp_size INTEGER``,
  ``  --backend [pytorch|tensorrt|_autodeploy]``, ``  --flag / --no-flag`` — the metavar or
  ``[choices]`` after the last spelling.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_OPTION_LINE = re.compile(r"^  (-\S.*)$")
_COLUMN_GAP = re.compile(r"\s{2,}")
_ARGPARSE_CHOICES = re.compile(r"^\{([^{}]*)\}")
_CLICK_CHOICES = re.compile(r"^\[([^\[\]]*\|[^\[\]]*)\]")


@dataclass(frozen=True)
class FlagSpec:
    """One flag of an engine's command line: whether it takes a value, and its choices if listed."""

    takes_value: bool
    choices: tuple[str, ...] | None = None


HelpFlags = Mapping[str, FlagSpec]


def _choices(metavar: str) -> tuple[str, ...] | None:
    for pattern, separator in ((_ARGPARSE_CHOICES, ","), (_CLICK_CHOICES, "|")):
        match = pattern.match(metavar)
        if match:
            return tuple(choice.strip() for choice in match.group(1).split(separator) if choice.strip())
    return None


def parse_help(text: str) -> dict[str, FlagSpec]:
    """``{flag spelling: FlagSpec}`` for every option line of an argparse or click help output."""
    flags: dict[str, FlagSpec] = {}
    for line in text.splitlines():
        match = _OPTION_LINE.match(line.rstrip())
        if match is None:
            continue
        invocation = _COLUMN_GAP.split(match.group(1), maxsplit=1)[0]
        pieces = [piece.strip() for piece in re.split(r",\s+|\s+/\s+", invocation) if piece.strip()]
        names: list[str] = []
        metavar = ""
        for piece in pieces:
            name, _, rest = piece.partition(" ")
            if not name.startswith("-"):
                break
            names.append(name)
            metavar = rest.strip() or metavar
        spec = FlagSpec(takes_value=bool(metavar), choices=_choices(metavar))
        for name in names:
            flags.setdefault(name, spec)
    return flags
