"""Serve commands as text → engine configs: the importer side of the display command.

:func:`parse_serve_command` reads a command the way the seeds print it (``vllm serve …``,
``python3 -m sglang.launch_server …``, ``trtllm-serve …``, ``mindie serve …``, optionally preceded by
``KEY=value`` assignments and broken over lines with ``\\``), or a disaggregated configuration's commands,
one per line (every worker's, then the router's). JSON values may appear unquoted, as in
seed 002's ``--speculative-config={"method":"mtp","num_speculative_tokens":4}``: a ``{…}`` object that starts
a word or follows ``=`` is kept intact instead of being shell-unquoted. :func:`parse_serve_args` reads a
bare "Backend Parameters" block for a known engine and model, and :func:`extract_serve_commands` finds
every serve command in a seed-format markdown document.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath

from perflab.engines.config import EngineConfig
from perflab.engines.disagg_import import assemble, read_router, router_engine, take_role
from perflab.engines.errors import EngineConfigError
from perflab.engines.registry import get_adapter

PROGRAMS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("vllm", "serve"), "vllm"),
    (("python3", "-m", "sglang.launch_server"), "sglang"),
    (("python", "-m", "sglang.launch_server"), "sglang"),
    (("trtllm-serve", "serve"), "trtllm"),
    (("trtllm-serve",), "trtllm"),
    (("mindie", "serve"), "mindie"),
)
# engines that share another engine's command line (vLLM-Ascend is launched with `vllm serve`)
SAME_PROGRAM = {"vllm-ascend": "vllm"}

_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_COMMAND_START = re.compile(
    r"(?:^|(?<=\s))(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*"
    r"(?:vllm\s+serve|python3?\s+-m\s+sglang\.launch_server|trtllm-serve|mindie\s+serve)(?=\s|$)"
)
_COMMAND_END = re.compile(r"```|\n")
# A line that starts another command of a disaggregated configuration: a serve program or a router's.
_LINE_START = re.compile(
    r"^\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:vllm\s+serve|python3?\s+-m\s+(?:sglang\.launch_server|"
    r"sglang_router\.launch_router)|trtllm-serve|mindie\s+serve|vllm-router)(?=\s|$)"
)
_PLACEHOLDER = "__perflab_json_{}__"


class ServeCommandError(ValueError):
    """A serve command that cannot be read; the message quotes the command."""


def _json_end(text: str, start: int) -> int | None:
    """Index just past the JSON object opening at ``start``, or None if its braces never balance."""
    depth = 0
    in_string = False
    index = start
    while index < len(text):
        char = text[index]
        if in_string:
            if char == "\\":
                index += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


def _protect(text: str) -> tuple[str, list[str]]:
    """Drop ``\\`` line continuations and swap unquoted JSON objects for placeholders."""
    out: list[str] = []
    objects: list[str] = []
    quote: str | None = None
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            out.append(char)
            if char == quote:
                quote = None
            elif char == "\\" and quote == '"' and index + 1 < len(text):
                out.append(text[index + 1])
                index += 1
            index += 1
            continue
        if char in "'\"":
            quote = char
        elif char == "\\" and index + 1 < len(text) and text[index + 1].isspace():
            out.append(" ")
            index += 2
            continue
        elif char == "{" and (not out or out[-1].isspace() or out[-1] == "="):
            end = _json_end(text, index)
            if end is not None:
                out.append(_PLACEHOLDER.format(len(objects)))
                objects.append(text[index:end])
                index = end
                continue
        out.append(char)
        index += 1
    return "".join(out), objects


def split_command(text: str) -> list[str]:
    """Shell words of ``text`` (comment lines dropped, continuations joined, bare JSON kept intact)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    protected, objects = _protect("\n".join(lines))
    try:
        words = shlex.split(protected)
    except ValueError as exc:
        raise ServeCommandError(f"cannot split {text.strip()!r}: {exc}") from None
    for number, obj in enumerate(objects):
        placeholder = _PLACEHOLDER.format(number)
        words = [word.replace(placeholder, obj) for word in words]
    return words


def _split_env(words: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    index = 0
    while index < len(words) and _ENV_ASSIGNMENT.match(words[index]):
        key, _, value = words[index].partition("=")
        env[key] = value
        index += 1
    return env, list(words[index:])


def _detect(words: Sequence[str]) -> tuple[str, list[str]]:
    head = [PurePosixPath(words[0]).name, *words[1:]] if words else []
    for prefix, engine in PROGRAMS:
        if tuple(head[: len(prefix)]) == prefix:
            return engine, list(words[len(prefix) :])
    known = "; ".join(" ".join(prefix) for prefix, _ in PROGRAMS)
    raise ServeCommandError(f"not a serve command: {' '.join(words[:3])!r} (expected one of: {known})")


def command_texts(text: str) -> list[str]:
    """The commands of ``text``: a new one at each line that starts a serve or router program (a line
    continued with ``\\`` belongs to its command)."""
    lines = text.splitlines()
    starts = [
        index
        for index, line in enumerate(lines)
        if _LINE_START.match(line) and (index == 0 or not lines[index - 1].rstrip().endswith("\\"))
    ]
    if len(starts) <= 1:
        return [text]
    bounds = [0, *starts[1:], len(lines)]
    return ["\n".join(lines[start:end]) for start, end in zip(bounds, bounds[1:], strict=False)]


def parse_serve_command(text: str, *, engine: str | None = None) -> EngineConfig:
    """The config a printed serve command describes; several commands, one per line (every worker's of
    a prefill/decode disaggregated configuration and its router's, as its display command lists them),
    describe one disaggregated config (:mod:`perflab.engines.disagg_import`).

    ``engine`` picks between engines that share a command line (``vllm-ascend`` for ``vllm serve`` on an
    Ascend host); it must otherwise agree with the command.
    """
    texts = command_texts(text)
    if len(texts) > 1:
        return _parse_disaggregated(texts, engine)
    env, words = _split_env(split_command(text))
    if router_engine(words) is not None:
        raise ServeCommandError(f"{text.strip()!r} is a router's command: give every worker's command too")
    detected, args = _detect(words)
    if engine is not None and engine != detected and SAME_PROGRAM.get(engine) != detected:
        raise ServeCommandError(f"{text.strip()!r} is a {detected} command, not {engine}")
    if _worker_role(detected, args, env):
        raise ServeCommandError(
            f"{text.strip()!r} is one worker of a disaggregated configuration: give every worker's "
            "command and the router's, one per line"
        )
    adapter = get_adapter(engine or detected)
    try:
        return adapter.parse_args(args, env=env)
    except (ValueError, EngineConfigError) as exc:
        raise ServeCommandError(f"cannot read {text.strip()!r}: {exc}") from None


def _worker_role(engine: str, args: list[str], env: dict[str, str]) -> bool:
    """Whether a command's flags make it a prefill or decode worker (a KV connector perflab does not
    launch disaggregated, such as an offloading one, stays an aggregated engine's flag)."""
    if engine not in ("sglang", "vllm"):
        return False
    try:
        return take_role(engine, args, env)[2] is not None
    except ValueError:
        return False


def _parse_disaggregated(texts: list[str], engine: str | None) -> EngineConfig:
    """The disaggregated config of its workers' commands and its router's."""
    workers = []
    router: tuple[str, list[str]] | None = None
    try:
        for text in texts:
            env, words = _split_env(split_command(text))
            found = router_engine(words)
            if found is not None:
                if router is not None:
                    raise ValueError("two router commands")
                router = found
                continue
            detected, args = _detect(words)
            if engine is not None and engine != detected:
                raise ValueError(f"{text.strip()!r} is a {detected} command, not {engine}")
            if detected not in ("sglang", "vllm"):
                raise ValueError(f"{detected} has no prefill/decode disaggregation perflab launches")
            args, env, role = take_role(detected, args, env)
            if role is None:
                raise ValueError(f"{text.strip()!r} has no prefill or decode role")
            workers.append((detected, get_adapter(detected).parse_args(args, env=env), role))
        if router is None:
            raise ValueError("no router command (sglang_router.launch_router or vllm-router)")
        engines = {found for found, _, _ in workers} | {router[0]}
        if len(engines) != 1:
            raise ValueError(f"the commands are of different engines: {', '.join(sorted(engines))}")
        return assemble(router[0], [(config, role) for _, config, role in workers], read_router(*router))
    except (ValueError, EngineConfigError) as exc:
        raise ServeCommandError(f"cannot read the disaggregated configuration's commands: {exc}") from None


def parse_serve_args(text: str, *, engine: str, model: str) -> EngineConfig:
    """The config of bare engine arguments (a "Backend Parameters" block) for ``engine`` and ``model``."""
    adapter = get_adapter(engine)
    try:
        return adapter.parse_args([*adapter.model_words(model), *split_command(text)])
    except (ValueError, EngineConfigError) as exc:
        raise ServeCommandError(f"cannot read {engine} arguments {text.strip()!r}: {exc}") from None


def extract_serve_commands(document: str) -> list[str]:
    """Every serve command in a seed-format document, in order, each joined onto one line."""
    joined = re.sub(r"\\[ \t]*\r?\n[ \t]*", " ", document)
    commands = []
    for match in _COMMAND_START.finditer(joined):
        end = _COMMAND_END.search(joined, match.start())
        raw = joined[match.start() : end.start() if end else len(joined)]
        commands.append(" ".join(re.sub(r"\\\s", " ", raw).split()))
    return commands
