"""Session datasets read from files: every turn of ShareGPT conversations, and agentic traces.

- ``sharegpt-multi-turn``: a ShareGPT conversation's turns, taken in pairs as the single-turn dataset
  takes its first pair (a prompt, then its recorded reply), are a session's turns: each prompt is a
  turn's message, each recorded reply's length its output length (``--output-len`` fixes it); the
  server's real replies go into the history. A conversation ends at its first empty prompt, at
  ``--agentic-max-turns``, or before its history (prompts and replies) would pass
  ``MAX_SESSION_TOKENS``; its first turn passes the ShareGPT filters of the single-turn dataset.
  Conversations are shuffled with the seed.
- ``agentic-trace`` (SGLang 0.5.23's format): a ``.json`` file ``{"conversations": [[turn, …], …]}``
  or a ``.jsonl`` file with one conversation per line (a list of turns, or ``{"turns": [...]}``). A
  turn is ``{"messages": [{"role": "system"|"user"|"tool", "content": "…"}, …]}`` — only the messages
  it adds, never the assistant's, which the server gives — with an optional ``output_len``; otherwise
  ``--output-len``, else SGLang's 220 tokens. Conversations are used in file order.
"""

from __future__ import annotations

import random
from typing import Any, List, Optional

from perflab.bench.datasets.base import (
    Dataset,
    DatasetSpec,
    Message,
    Session,
    Turn,
    cycle_to,
    lengths_source,
)
from perflab.bench.datasets.jsonscan import iter_json_lines, json_value, read_text
from perflab.bench.datasets.sharegpt import (
    MAX_PROMPT_TOKENS,
    MIN_TOKENS,
    estimated_length,
    read_conversations,
)
from perflab.bench.errors import DatasetError
from perflab.bench.tokenizer import Tokenizer

MAX_SESSION_TOKENS = 4096
AGENTIC_OUTPUT_LEN = 220
TURN_ROLES = ("system", "user", "tool")


def _session_of(texts: List[str], spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> Optional[Session]:
    """The session of one ShareGPT conversation (its texts alternate prompt, reply), or None when its
    first turn fails the filters."""
    turns: List[Turn] = []
    history = 0
    for index in range(0, len(texts) - 1, 2):
        if spec.max_turns is not None and len(turns) == spec.max_turns:
            break
        prompt, reply = texts[index], texts[index + 1]
        prompt_len = estimated_length(tokenizer, prompt)
        output_len = spec.output_len if spec.output_len is not None else estimated_length(tokenizer, reply)
        if not turns and (
            prompt_len < MIN_TOKENS or prompt_len > MAX_PROMPT_TOKENS or output_len < MIN_TOKENS
        ):
            return None
        history += prompt_len + output_len
        if not prompt.strip() or history > MAX_SESSION_TOKENS:
            break
        turns.append(Turn([{"role": "user", "content": prompt}], prompt_len, max(output_len, 1)))
    return Session(turns) if turns else None


def sharegpt_sessions_dataset(spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> Dataset:
    path = spec.path or ""
    conversations = read_conversations(path)
    random.Random(spec.seed).shuffle(conversations)
    sessions: List[Session] = []
    for _, texts in conversations:
        if len(sessions) == spec.count:
            break
        session = _session_of(texts, spec, tokenizer)
        if session is not None:
            sessions.append(session)
    if not sessions:
        raise DatasetError(
            path, "no conversation passes the ShareGPT filters (4..1024 tokens in its first turn)"
        )
    notes: List[str] = []
    if tokenizer is None:
        notes.append("no tokenizer: ShareGPT lengths were estimated at 4 characters per token")
    chosen = cycle_to(sessions, spec.count, path, notes, unit="conversations", uses="sessions")
    return Dataset([], lengths_source(tokenizer, "estimate"), notes, chosen)


def _messages(path: str, line: int, where: str, value: Any) -> List[Message]:
    if not isinstance(value, list) or not value:
        raise DatasetError(path, "must be a non-empty list of messages", line=line, field=where)
    messages: List[Message] = []
    for position, message in enumerate(value):
        field = f"{where}[{position}]"
        if not isinstance(message, dict):
            raise DatasetError(path, "must be an object with role and content", line=line, field=field)
        role, content = message.get("role"), message.get("content")
        if role not in TURN_ROLES:
            raise DatasetError(
                path,
                f"role must be one of {', '.join(TURN_ROLES)} (the server gives the assistant's turns), "
                f"not {role!r}",
                line=line,
                field=field,
            )
        if not isinstance(content, str) or not content.strip():
            raise DatasetError(path, "content must be a non-empty string", line=line, field=field)
        messages.append({"role": role, "content": content})
    return messages


def _turns(
    path: str, line: int, where: str, value: Any, spec: DatasetSpec, tokenizer: Optional[Tokenizer]
) -> List[Turn]:
    if isinstance(value, dict):
        value, where = value.get("turns"), f"{where}.turns"
    if not isinstance(value, list) or not value:
        raise DatasetError(path, "a conversation must be a non-empty list of turns", line=line, field=where)
    turns: List[Turn] = []
    for position, turn in enumerate(value[: spec.max_turns] if spec.max_turns else value):
        field = f"{where}[{position}]"
        if not isinstance(turn, dict):
            raise DatasetError(path, "a turn must be an object with messages", line=line, field=field)
        messages = _messages(path, line, f"{field}.messages", turn.get("messages"))
        output_len = turn.get("output_len")
        if output_len is not None and (
            isinstance(output_len, bool) or not isinstance(output_len, int) or output_len < 1
        ):
            raise DatasetError(
                path,
                f"must be a positive integer, not {output_len!r}",
                line=line,
                field=f"{field}.output_len",
            )
        if spec.output_len is not None:
            output_len = spec.output_len
        text = "\n".join(message["content"] for message in messages)
        count = tokenizer.count(text) if tokenizer is not None else None
        turns.append(Turn(messages, count, output_len or AGENTIC_OUTPUT_LEN))
    return turns


def _conversations(path: str, text: str) -> List[tuple]:
    """``(line, where, conversation)`` of each conversation in a ``.json`` or ``.jsonl`` file."""
    if path.lower().endswith(".jsonl"):
        return [(line, "conversation", value) for line, value in iter_json_lines(path, text)]
    data = json_value(path, text)
    conversations = data.get("conversations") if isinstance(data, dict) else None
    if not isinstance(conversations, list) or not conversations:
        raise DatasetError(path, "expected an object with a non-empty list 'conversations'", line=1)
    return [(1, f"conversations[{index}]", conversation) for index, conversation in enumerate(conversations)]


def read_agentic_sessions(spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> List[Session]:
    """The first ``spec.count`` conversations of the agentic trace ``spec.path``, in file order (the
    app's uploads are checked with this reader)."""
    path = spec.path or ""
    if not path.lower().endswith((".json", ".jsonl")):
        raise DatasetError(path, "agentic traces must be .json or .jsonl files")
    sessions = [
        Session(_turns(path, line, where, conversation, spec, tokenizer))
        for line, where, conversation in _conversations(path, read_text(path))[: spec.count]
    ]
    if not sessions:
        raise DatasetError(path, "the file holds no conversations")
    return sessions


def agentic_trace_dataset(spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> Dataset:
    path = spec.path or ""
    sessions = read_agentic_sessions(spec, tokenizer)
    notes: List[str] = []
    chosen = cycle_to(sessions, spec.count, path, notes, unit="conversations", uses="sessions")
    return Dataset([], lengths_source(tokenizer, "unverified"), notes, chosen)
