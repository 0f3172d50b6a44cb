"""Declarative command-line flags: one table per engine turns typed knobs into argv and back.

A :class:`Flag` ties one :class:`~perflab.engines.config.EngineConfig` field to the engine's own flag name
(and the aliases users type). :class:`FlagTable` renders a knob value into argv items and parses argv items
back into knob values, so the serve command and its importer can never disagree about a flag name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

FlagKind = Literal["value", "negatable", "switch", "off_switch"]
SHOWN_CHARS = 60


def format_value(value: Any) -> str:
    """Render a knob value the way the seeds print it: integral floats without '.0', JSON compact."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"expected an integer, got {text!r}") from None


def parse_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {text!r}") from None


def shown(text: str) -> str:
    """``repr(text)``, cut short for a one-line message."""
    return repr(text) if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]!r}… ({len(text)} characters)"


def parse_json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"expected a JSON object, got {shown(text)} ({exc.msg})") from None
    except RecursionError:
        raise ValueError(f"expected a JSON object, got {shown(text)} (nested too deeply)") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {shown(text)}")
    return value


def option_value(tokens: Sequence[str], index: int, inline: str | None) -> tuple[str | None, int]:
    """The value of an option whose name ended before ``tokens[index]``: its ``=value`` (``inline``) or
    the next word; returns the value (None when there is none) and the index after it."""
    if inline is not None:
        return inline, index
    if index < len(tokens):
        return tokens[index], index + 1
    return None, index


@dataclass(frozen=True)
class Flag:
    """One typed knob rendered as one engine flag.

    ``value`` flags take an argument; ``negatable`` flags render ``name`` for True and ``negative`` for
    False; ``switch`` flags render ``name`` for True and nothing for False (False is the engine default);
    ``off_switch`` flags render ``name`` for False and nothing for True (True is the engine default, as
    SGLang's ``--disable-radix-cache`` for prefix caching).
    """

    knob: str
    name: str
    aliases: tuple[str, ...] = ()
    kind: FlagKind = "value"
    negative: str | None = None
    convert: Callable[[str], Any] = str
    other_negatives: tuple[str, ...] = ()

    def negatives(self) -> tuple[str, ...]:
        """Every spelling that sets the knob False (``negative`` first)."""
        return (self.negative, *self.other_negatives) if self.negative else self.other_negatives

    def spellings(self) -> tuple[str, ...]:
        return (self.name, *self.aliases, *self.negatives())

    def render(self, value: Any) -> list[str]:
        if self.kind == "value":
            return [self.name, format_value(value)]
        if self.kind == "off_switch":
            return [] if value else [self.name]
        if value:
            return [self.name]
        return [self.negative] if self.kind == "negatable" and self.negative else []


@dataclass
class ParsedArgs:
    """What :meth:`FlagTable.parse` found: knob values, positional words, and flags it does not own."""

    values: dict[str, Any] = field(default_factory=dict)
    positionals: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FlagTable:
    """The flags of one engine, looked up by knob for rendering and by spelling for parsing."""

    flags: tuple[Flag, ...]

    def for_knob(self, knob: str) -> Flag | None:
        return next((flag for flag in self.flags if flag.knob == knob), None)

    def knobs(self) -> frozenset[str]:
        return frozenset(flag.knob for flag in self.flags)

    def spellings(self) -> frozenset[str]:
        return frozenset(name for flag in self.flags for name in flag.spellings())

    def parse(
        self,
        tokens: Sequence[str],
        switches_taking_no_value: Iterable[str] = (),
        switch_prefixes: tuple[str, ...] = (),
    ) -> ParsedArgs:
        """Split argv items into knob values, positionals and unknown flags (kept verbatim, in order).

        An unknown ``--flag`` swallows the next item as its value unless that item starts with ``-``, or
        the flag is listed in ``switches_taking_no_value`` or starts with one of ``switch_prefixes``. As
        the engines' parsers do, the last of repeated flags wins.
        """
        by_spelling = {name: flag for flag in self.flags for name in flag.spellings()}
        bare_switches = set(switches_taking_no_value)
        parsed = ParsedArgs()
        index = 0
        while index < len(tokens):
            token = tokens[index]
            index += 1
            if not token.startswith("-") or token == "-":
                parsed.positionals.append(token)
                continue
            name, has_inline, inline = token.partition("=")
            flag = by_spelling.get(name)
            if flag is None:
                parsed.unknown.append(token)
                takes_value = (
                    not has_inline and name not in bare_switches and not name.startswith(switch_prefixes)
                )
                if takes_value and index < len(tokens) and not tokens[index].startswith("-"):
                    parsed.unknown.append(tokens[index])
                    index += 1
                continue
            if flag.kind != "value":
                if has_inline:
                    raise ValueError(f"{name} takes no value, got {token!r}")
                parsed.values[flag.knob] = flag.kind != "off_switch" and name not in flag.negatives()
                continue
            raw, index = option_value(tokens, index, inline if has_inline else None)
            if raw is None:
                raise ValueError(f"{name} needs a value")
            try:
                parsed.values[flag.knob] = flag.convert(raw)
            except ValueError as exc:
                raise ValueError(f"cannot read {name}: {exc}") from None
        return parsed
