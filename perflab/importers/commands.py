"""Serving commands found in imported documents, and the engine config they describe.

A command is ``vllm serve …``, ``python3 -m sglang.launch_server …``, ``trtllm-serve …`` or
``mindie serve …`` (optionally after ``KEY=value`` assignments, continued over lines with ``\\``).
Seed 002 prints bare engine arguments instead ("Backend Parameters"). :func:`complete_commands` makes
each the serve command it stands for — the engine's program, the model as served, every argument as
written — so a result's command (and a report's recommended one) can be run as it is:

- the engine is the one the nearest heading names, else the one engine of the document's serve
  commands;
- the model is that of the document's serve command with the same configuration (the write-up's
  recommended "Serving Command" for its optimized blocks), else, under a heading that names
  quantization (seed 002's "Prefix Cache && Quantization"), the one quantized variant of the stated
  model the document's serve commands name (``Qwen/Qwen3.5-35B-A3B`` → ``Qwen/Qwen3.5-35B-A3B-FP8``),
  else the model of the document's "Model" section.

Arguments whose engine or model the document does not say stay bare.

A benchmark block's ``# --flag value`` case comment names the flag its run changed; the command
that applies to that block is the printed one with that flag set to the comment's value.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from perflab.engines import EngineConfig, get_adapter, parse_serve_args, parse_serve_command
from perflab.importers.facts import document_facts
from perflab.importers.markdown import Document

_COMMAND_START = re.compile(
    r"(?:^|(?<=[\s`]))(?:[A-Za-z_][A-Za-z0-9_]*=\S*[ \t]+)*"
    r"(?:vllm[ \t]+serve|python3?[ \t]+-m[ \t]+sglang\.launch_server|sglang[ \t]+serve"
    r"|trtllm-serve|mindie[ \t]+serve)"
    r"(?=\s|$)",
    re.MULTILINE,
)
_COMMAND_END = re.compile(r"```|(?<!\\)\n")
_CONTINUATION = re.compile(r"\\[ \t]*(?:\r?\n[ \t]*)?")
_ENGINE_NAMES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bvllm[- ]ascend\b", re.IGNORECASE), "vllm-ascend"),
    (re.compile(r"\b(?:tensorrt[- ]llm|trt[- ]?llm)\b", re.IGNORECASE), "trtllm"),
    (re.compile(r"\bsglang\b", re.IGNORECASE), "sglang"),
    (re.compile(r"\bmindie\b", re.IGNORECASE), "mindie"),
    (re.compile(r"\bvllm\b", re.IGNORECASE), "vllm"),
)
_QUANTIZATION = re.compile(r"\bquanti[sz]", re.IGNORECASE)


@dataclass(frozen=True)
class FoundCommand:
    """A serving command (or bare engine arguments) and where it was found."""

    offset: int
    text: str
    args_only: bool = False
    engine: str | None = None


def _one_line(text: str) -> str:
    return " ".join(_CONTINUATION.sub(" ", text).split())


def engine_named_in(text: str) -> str | None:
    """The engine a heading or title names (``vLLM``, ``SGLang``, ``TensorRT-LLM``, …), if exactly one."""
    found = set()
    remaining = text
    for pattern, engine in _ENGINE_NAMES:
        if pattern.search(remaining):
            found.add(engine)
            remaining = pattern.sub(" ", remaining)
    return found.pop() if len(found) == 1 else None


def _args_fence_text(content: str) -> str | None:
    lines = [
        line.strip() for line in content.splitlines() if line.strip() and not line.strip().startswith("#")
    ]
    joined = _one_line(" ".join(lines))
    return joined if joined.startswith("-") else None


def find_commands(document: Document) -> list[FoundCommand]:
    """Every serving command and bare-arguments fence of ``document``, in order.

    In a document with code fences only fenced commands count (prose mentions are ignored).
    """
    text = document.text
    found = []
    for match in _COMMAND_START.finditer(text):
        if document.fences and not document.in_fence(match.start()):
            continue
        end = _COMMAND_END.search(text, match.start())
        found.append(
            FoundCommand(match.start(), _one_line(text[match.start() : end.start() if end else len(text)]))
        )
    for fence in document.fences:
        content = document.fence_content(fence)
        if _COMMAND_START.search(content) or "Serving Benchmark Result" in content:
            continue
        args = _args_fence_text(content)
        if args is not None:
            heading = document.heading_before(fence.start)
            engine = engine_named_in(heading.text) if heading else None
            found.append(FoundCommand(fence.content_start, args, args_only=True, engine=engine))
    return sorted(found, key=lambda command: command.offset)


def _flag_settings(comment: str) -> list[tuple[str, str | None, str]]:
    """``--flag value`` / ``--flag=value`` / ``--flag`` words of a case comment as (flag, value, joiner)."""
    try:
        words = shlex.split(comment)
    except ValueError:
        return []
    settings = []
    index = 0
    while index < len(words):
        word = words[index]
        if not word.startswith("-"):
            return []
        if "=" in word:
            flag, _, value = word.partition("=")
            settings.append((flag, value, "="))
        elif index + 1 < len(words) and not words[index + 1].startswith("-"):
            settings.append((word, words[index + 1], " "))
            index += 1
        else:
            settings.append((word, None, ""))
        index += 1
    return settings


def apply_case_flags(command: str, comment: str | None) -> str:
    """``command`` with the flags of a ``--flag value`` case comment set (replaced or appended)."""
    if not comment:
        return command
    for flag, value, joiner in _flag_settings(comment):
        rendered = flag if value is None else f"{flag}{joiner}{shlex.quote(value)}"
        if value is None:
            if not re.search(rf"(?<!\S){re.escape(flag)}(?!\S)", command):
                command = f"{command} {rendered}"
            continue
        pattern = re.compile(rf"(?<!\S){re.escape(flag)}(?:=|\s+)(?:\"[^\"]*\"|'[^']*'|[^\s\\]+)")
        if pattern.search(command):
            command = pattern.sub(lambda _match, text=rendered: text, command, count=1)
        else:
            command = f"{command} {rendered}"
    return command


def config_from_command(command: str) -> EngineConfig | None:
    """The engine config a full serving command describes, or None if it cannot be read."""
    try:
        return parse_serve_command(command)
    except ValueError:  # ServeCommandError, EngineConfigError and pydantic's ValidationError
        return None


def _same_config(command: EngineConfig, engine: str, args: str) -> bool:
    try:
        return parse_serve_args(args, engine=engine, model=command.model) == command
    except ValueError:
        return False


def _served_model(
    found: FoundCommand, engine: str, heading: str, commands: list[EngineConfig], stated: str | None
) -> str | None:
    """The model bare arguments ran (the module's rules), or None when the document does not say."""
    same = [command.model for command in commands if _same_config(command, engine, found.text)]
    if same:
        return same[0]
    if stated and _QUANTIZATION.search(heading):
        variants = {command.model for command in commands if command.model.startswith(f"{stated}-")}
        if len(variants) == 1:
            return variants.pop()
    return stated


def _completed(
    document: Document, found: FoundCommand, configs: list[EngineConfig], stated: str | None
) -> FoundCommand:
    """Bare arguments as the full serve command they stand for, or as they are when the document does not
    say their engine or model."""
    engines = {config.engine for config in configs}
    engine = found.engine or (next(iter(engines)) if len(engines) == 1 else None)
    if engine is None:
        return found
    heading = document.heading_before(found.offset)
    own = [config for config in configs if config.engine == engine]
    model = _served_model(found, engine, heading.text if heading else "", own, stated)
    if model is None:
        return found
    adapter = get_adapter(engine)
    text = f"{shlex.join([*adapter.program, *adapter.model_words(model)])} {found.text}"
    return FoundCommand(found.offset, text, engine=engine)


def complete_commands(document: Document, commands: list[FoundCommand]) -> list[FoundCommand]:
    """``commands`` with each bare-arguments block made the full serve command it stands for, where the
    document says its engine and model (see the module's rules)."""
    configs = [
        config
        for command in commands
        if not command.args_only and (config := config_from_command(command.text)) is not None
    ]
    stated = document_facts(document.text).model
    return [_completed(document, found, configs, stated) if found.args_only else found for found in commands]
