"""Reading an engine's ``--help`` output: which flags it accepts, which take a value, and their choices.

Two formats are read, both by their option lines (two spaces, then a dash; the usage block and the
help text below an option are indented further and ignored):

- argparse (``vllm serve --help=all``, ``python -m sglang.launch_server --help``):
  ``  --kv-cache-dtype {auto,fp8,…}``, ``  --api-server-count API_SERVER_COUNT, -asc API_SERVER_COUNT``,
  ``  --enable-log-requests, --no-enable-log-requests`` — each spelling with its own metavar or
  ``{choices}``; vLLM 0.33 lists ``  --enable-prefix-caching, --disable-prefix-caching`` and hides the
  ``--no-enable-X`` / ``--no-disable-X`` spellings it still parses (``vllm/utils/argparse_utils.py``
  EnableDisableAction), which are read as listed too; it shows the known values of a knob that also
  takes registered ones as a Python list (``  --kv-cache-dtype ['auto', 'bfloat16', …]``), read as its
  choices;
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
# vLLM 0.33: a Literal-or-registered value shows its known values as a Python list metavar.
_LIST_METAVAR = re.compile(r"^(--?\S+) (\['[^\]]*'\])$")


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


def _hidden_negations(names: list[str]) -> list[str]:
    """``--no-enable-X`` and ``--no-disable-X`` of a listed ``--enable-X, --disable-X`` pair."""
    pairs = [name[len("--enable-") :] for name in names if name.startswith("--enable-")]
    return [
        f"--no-{side}-{rest}"
        for rest in pairs
        if f"--disable-{rest}" in names
        for side in ("enable", "disable")
    ]


def parse_help(text: str) -> dict[str, FlagSpec]:
    """``{flag spelling: FlagSpec}`` for every option line of an argparse or click help output."""
    flags: dict[str, FlagSpec] = {}
    for line in text.splitlines():
        match = _OPTION_LINE.match(line.rstrip())
        if match is None:
            continue
        invocation = _COLUMN_GAP.split(match.group(1), maxsplit=1)[0]
        listed = _LIST_METAVAR.match(invocation)
        if listed is not None:
            values = tuple(re.findall(r"'([^']*)'", listed.group(2)))
            flags.setdefault(listed.group(1), FlagSpec(takes_value=True, choices=values or None))
            continue
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
        for name in (*names, *_hidden_negations(names)):
            flags.setdefault(name, spec)
    return flags
