"""Asking the installed engine itself: its own argument parser, config checks and registries.

An adapter with a :attr:`~perflab.engines.base.EngineAdapter.check_program` (a file under
``perflab/engines/programs/``) has it run by the Python of the engine's own program on the host, or in
the image (:func:`program_text`: the program, carrying the ``argv_check`` module it imports, arrives on
standard input). :data:`WRAPPER` finds the program on ``PATH``: a Python interpreter itself (SGLang's
``python3 -m sglang.launch_server``) runs the text directly; a script (``vllm``) has its ``#!`` line
read and that interpreter started with ``-``; the launch argv's words follow as arguments — no user text
in a shell string. The program answers one JSON line (:class:`EngineAnswer`): the engine's version, the
flags and values it refuses in its own words, the values it parsed for perflab's typed knobs (the last
flag wins, ``--disable-X`` counts) and its registries of knob values. When the engine cannot be
imported there, the caller falls back to the engine's help text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from typing import Any

from perflab.engines.base import EngineAdapter
from perflab.transport.base import Transport
from perflab.transport.errors import TransportError

CHECK_TIMEOUT_S = 300.0
NOT_IMPORTABLE = "the engine could not be imported there"
NOT_PYTHON = "is not a Python program"
NO_ANSWER = "the engine's check printed no answer"
# $1: the engine's program; $2: "interpreter" (it is Python itself) or "script"; the rest: the words after
# it. Exit 127: the program is not on PATH; 126: a script whose first line names no Python.
WRAPPER = r"""
program=$1; kind=$2; shift 2
path=$(command -v "$program") || exit 127
if [ "$kind" = interpreter ]; then exec "$path" - "$@"; fi
IFS= read -r first < "$path" || exit 126
case "$first" in
  '#!'*python*) ;;
  *) exit 126 ;;
esac
interpreter=${first#??}
set -f
exec $interpreter - "$@"
"""


@dataclass(frozen=True)
class EngineProblem:
    """One flag or value the engine refused: the flag, its value in the argv, the engine's message."""

    flag: str | None
    value: str | None
    message: str

    def words(self, who: str) -> str:
        subject = f"{self.flag} {self.value!r}" if self.flag and self.value is not None else self.flag
        return f"{who} refuses {subject}: {self.message}" if subject else f"{who}: {self.message}"


@dataclass(frozen=True)
class EngineAnswer:
    """What the installed engine said about one argv."""

    version: str | None
    problems: tuple[EngineProblem, ...] = ()
    effective: Mapping[str, Any] | None = None
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    vocabulary: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def answer_json(answer: EngineAnswer) -> dict[str, Any]:
    """``answer`` as JSON-able data (:func:`answer_from_json` reads it back)."""
    return asdict(answer)


def answer_from_json(data: Mapping[str, Any]) -> EngineAnswer:
    return EngineAnswer(
        version=data.get("version"),
        problems=tuple(EngineProblem(**problem) for problem in data.get("problems") or ()),
        effective=data.get("effective"),
        options={knob: tuple(names) for knob, names in (data.get("options") or {}).items()},
        vocabulary={knob: tuple(values) for knob, values in (data.get("vocabulary") or {}).items()},
    )


def read_answer(text: str, dests: Mapping[str, str]) -> EngineAnswer | str:
    """The answer in the program's output (its last line), knob names from ``dests`` (engine
    dest → perflab knob); or why there is none."""
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        data = json.loads(lines[-1]) if lines else None
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        return NO_ANSWER
    if "import_error" in data:
        return f"{NOT_IMPORTABLE} ({str(data['import_error'])[:300]})"
    try:
        return _answer(data, dests)
    except (AttributeError, TypeError, ValueError):
        return NO_ANSWER


def _answer(data: Mapping[str, Any], dests: Mapping[str, str]) -> EngineAnswer:
    problems = tuple(
        EngineProblem(
            flag=item.get("flag"),
            value=None if item.get("value") is None else str(item["value"]),
            message=str(item.get("message", "")),
        )
        for item in data.get("problems") or ()
    )
    raw = data.get("effective")
    effective = {dests[dest]: value for dest, value in raw.items() if dest in dests} if raw else None
    options = {
        dests[dest]: tuple(names) for dest, names in (data.get("options") or {}).items() if dest in dests
    }
    vocabulary = {
        knob: tuple(str(value) for value in values) for knob, values in (data.get("vocabulary") or {}).items()
    }
    return EngineAnswer(data.get("version"), problems, effective, options, vocabulary)


def with_plugin_words(answer: EngineAnswer, adapter: EngineAdapter) -> EngineAnswer:
    """``answer`` accepting the values the adapter's platform plug-in registers at start-up."""
    problems = tuple(
        problem
        for problem in answer.problems
        if not any(
            problem.flag == flag and problem.value in values for flag, values in adapter.plugin_words.values()
        )
    )
    vocabulary = dict(answer.vocabulary)
    for knob, (_, values) in adapter.plugin_words.items():
        if knob in vocabulary:
            vocabulary[knob] = (
                *vocabulary[knob],
                *(value for value in values if value not in vocabulary[knob]),
            )
    return replace(answer, problems=problems, vocabulary=vocabulary)


def program_text(check_program: str) -> str:
    """The text sent to the engine's Python: ``argv_check`` made importable, then ``check_program``."""
    programs = resources.files("perflab.engines.programs")
    shared = programs.joinpath("argv_check.py").read_text("utf-8")
    own = programs.joinpath(check_program).read_text("utf-8")
    loader = (
        "import sys, types\n"
        "argv_check = types.ModuleType('argv_check')\n"
        f"exec(compile({shared!r}, 'argv_check.py', 'exec'), argv_check.__dict__)\n"
        "sys.modules['argv_check'] = argv_check\n"
    )
    return loader + own


def ask_engine(
    transport: Transport, adapter: EngineAdapter, argv: Sequence[str], *, prefix: Sequence[str] = ()
) -> EngineAnswer | str:
    """Run the adapter's check program for ``argv`` (the launch argv, program included) with the
    engine's own Python; the answer, or why the engine could not be asked."""
    assert adapter.check_program is not None
    program = program_text(adapter.check_program)
    words = list(argv[len(adapter.program) :])
    kind = "interpreter" if adapter.program[1:2] == ("-m",) else "script"
    command = [*prefix, "sh", "-c", WRAPPER, "perflab-check", adapter.program[0], kind, *words]
    try:
        result = transport.run(command, timeout=CHECK_TIMEOUT_S, stdin=program)
    except TransportError as exc:
        return f"the engine's check could not run: {exc}"
    if result.exit_status == 127:
        return f"{adapter.program[0]} is not on the PATH"
    if result.exit_status == 126:
        return f"{adapter.program[0]} {NOT_PYTHON}"
    answer = read_answer(result.stdout, adapter.engine_dests)
    if isinstance(answer, EngineAnswer):
        answer = with_plugin_words(answer, adapter)
        if answer.effective is not None:
            answer = replace(answer, effective=adapter.knobs_read(answer.effective))
    if isinstance(answer, str) and not result.ok:
        last = (result.stderr or result.stdout).strip().splitlines()
        return f"the engine's check exited {result.exit_status}" + (f": {last[-1]}" if last else "")
    return answer
