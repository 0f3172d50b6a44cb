"""Validation of OpenAI-style request bodies into :class:`GenerationParams`.

Errors raise :class:`ApiError` with the HTTP status and the message vLLM gives for the same
mistake (unknown model → 404, malformed body → 400, prompt over ``max_model_len`` → 400 with
vLLM's context-length message).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence


class ApiError(Exception):
    """A request the server refuses, with its status code and OpenAI error type."""

    def __init__(
        self, status: int, message: str, error_type: str = "BadRequestError", param: Optional[str] = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type
        self.param = param


class GenerationParams:
    """What one chat or completion request asks for."""

    __slots__ = (
        "kind",
        "model",
        "prompt_text",
        "prompt_token_ids",
        "max_tokens",
        "min_tokens",
        "ignore_eos",
        "stream",
        "include_usage",
    )

    def __init__(
        self,
        kind: str,
        model: Optional[str],
        prompt_text: str,
        prompt_token_ids: Optional[List[int]],
        max_tokens: Optional[int],
        min_tokens: int,
        ignore_eos: bool,
        stream: bool,
        include_usage: bool,
    ) -> None:
        self.kind = kind
        self.model = model
        self.prompt_text = prompt_text
        self.prompt_token_ids = prompt_token_ids
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.ignore_eos = ignore_eos
        self.stream = stream
        self.include_usage = include_usage


def parse_json_object(body: bytes) -> Dict[str, Any]:
    try:
        data = json.loads(body.decode("utf-8") if body else "")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, f"JSON decode error: {exc}") from exc
    if not isinstance(data, dict):
        raise ApiError(400, "Input should be a valid dictionary or object to extract fields from")
    return data


def _optional_int(data: Dict[str, Any], key: str, minimum: int) -> Optional[int]:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{key}: Input should be a valid integer", param=key)
    if value < minimum:
        raise ApiError(400, f"{key} must be at least {minimum}, got {value}.", param=key)
    return value


def _bool(data: Dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApiError(400, f"{key}: Input should be a valid boolean", param=key)
    return value


def message_text(messages: Any) -> str:
    """The text a chat request is counted by: message contents joined with newlines."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: Field required and must be a non-empty list", param="messages")
    parts = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(400, f"messages.{index}: each message needs a string 'role'", param="messages")
        content = message.get("content")
        if content is None:
            continue
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for part in content:
                if (
                    not isinstance(part, dict)
                    or part.get("type") != "text"
                    or not isinstance(part.get("text"), str)
                ):
                    raise ApiError(
                        400, f"messages.{index}.content: only text parts are supported", param="messages"
                    )
                parts.append(part["text"])
        else:
            raise ApiError(400, f"messages.{index}.content: Input should be a valid string", param="messages")
    return "\n".join(parts)


def completion_prompt(prompt: Any) -> tuple:
    """``(text, token_ids)`` of a completions prompt: a string, or a list of token ids."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt, None
    if (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
    ):
        return "", list(prompt)
    raise ApiError(
        400, "prompt: expected a string, a list of token ids, or a one-element list of those", param="prompt"
    )


def parse_generation(kind: str, data: Dict[str, Any]) -> GenerationParams:
    """Validate a ``/v1/chat/completions`` (``kind='chat'``) or ``/v1/completions`` body."""
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "model: Input should be a valid string", param="model")
    if data.get("n", 1) not in (1, None):
        raise ApiError(400, "n: only n=1 is supported by the simulator", param="n")
    if kind == "chat":
        text, token_ids = message_text(data.get("messages")), None
        max_tokens = _optional_int(data, "max_completion_tokens", 1)
        if max_tokens is None:
            max_tokens = _optional_int(data, "max_tokens", 1)
    else:
        if "prompt" not in data:
            raise ApiError(400, "prompt: Field required", param="prompt")
        text, token_ids = completion_prompt(data["prompt"])
        max_tokens = _optional_int(data, "max_tokens", 1)
    stream_options = data.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise ApiError(400, "stream_options: Input should be a valid dictionary", param="stream_options")
    stream = _bool(data, "stream")
    if stream_options and not stream:
        raise ApiError(400, "Stream options can only be defined when `stream=True`.", param="stream_options")
    return GenerationParams(
        kind=kind,
        model=model,
        prompt_text=text,
        prompt_token_ids=token_ids,
        max_tokens=max_tokens,
        min_tokens=_optional_int(data, "min_tokens", 0) or 0,
        ignore_eos=_bool(data, "ignore_eos"),
        stream=stream,
        include_usage=bool(stream_options.get("include_usage")),
    )


def check_model(requested: Optional[str], served: Sequence[str]) -> str:
    """The served name a request addresses (the first one when it names none)."""
    if requested is None or requested == "":
        return served[0]
    if requested not in served:
        raise ApiError(404, f"The model `{requested}` does not exist.", "NotFoundError", "model")
    return requested


def check_context(prompt_tokens: int, max_tokens: Optional[int], max_model_len: int) -> int:
    """The effective max_tokens; raises vLLM's errors when the request does not fit the context."""
    if prompt_tokens >= max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, your request has "
            f"{prompt_tokens} input tokens. Please reduce the length of the input messages.",
        )
    if max_tokens is None:
        return max_model_len - prompt_tokens
    if prompt_tokens + max_tokens > max_model_len:
        raise ApiError(
            400,
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum "
            f"context length is {max_model_len} tokens and your request has {prompt_tokens} input tokens "
            f"({max_tokens} > {max_model_len} - {prompt_tokens}).",
        )
    return max_tokens
