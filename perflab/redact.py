"""Keeping secrets out of everything perflab stores, shows, logs and exports.

A secret is recognised two ways, and replaced by ``***``:

- by value: every secret perflab knows of (:func:`perflab.secrets.known_values`: the hosts' SSH
  passwords and key passphrases, the hosts' ``secrets:`` variables, the app's shared password,
  secret-named variables of the app's environment, the database password), also URL- and
  JSON-escaped; values shorter than :data:`MIN_VALUE_LENGTH` characters are left to the shapes below;
- by shape, whatever the value: secret-named assignments and flags (``HF_TOKEN=…``, ``--api-key …``,
  ``'api_key': '…'``), ``Authorization``/``Bearer`` credentials, passwords in URLs
  (``https://user:…@host``) and the well-known token formats (``hf_…``, ``sk-…``, ``ghp_…``).

Redaction happens where outside text enters perflab's database (the runner's store, crash recovery,
host probes, imports) and in every log record (:func:`install_log_redaction`). Engine configs never
carry secrets at all: :func:`check_config` refuses one that would (the engine gets them from the
host's ``secrets:`` in hosts.yaml instead).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from perflab.engines import EngineConfig, EngineConfigError
from perflab.inventory import HostConfig, InventoryError, default_inventory_path, load_inventory
from perflab.secret_names import is_secret_name
from perflab.secrets import known_values

MASK = "***"
MIN_VALUE_LENGTH = 6

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_VALUE = r"""(?:'[^']*'|"[^"]*"|[^\s'"]+)"""
_ASSIGNMENT = re.compile(rf"(?<![\w-])({_NAME})=({_VALUE})")
_FLAG = re.compile(rf"(?<![\w-])(--?[A-Za-z][\w-]*)(=|[ \t]+)(?!--)({_VALUE})")
_QUOTED_KEY = re.compile(r"""(['"])([\w-]+)\1(\s*[:=]\s*)(['"])((?:(?!\4).)*)\4""")
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:)([^@\s/]+)(@)")
_CREDENTIAL = re.compile(
    r"(\bBearer\s+|\b(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?:(?i:basic|bearer|token)\s+)?)"
    r"(?!(?i:basic|bearer|token)\b)([A-Za-z0-9._~+/=-]{6,})"
)
_TOKEN_FORMATS = re.compile(r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,})\b")


class SecretInConfig(EngineConfigError):
    """An engine config that would carry a secret (stored with the run, shown on its page)."""


def _escaped_forms(value: str) -> set[str]:
    return {value, quote(value, safe=""), json.dumps(value)[1:-1]}


class Redactor:
    """Replaces known secret values and secret-shaped text by ``***`` in text and JSON-able data."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        forms = {
            form
            for value in values
            if len(value) >= MIN_VALUE_LENGTH
            for form in _escaped_forms(value)
            if len(form) >= MIN_VALUE_LENGTH
        }
        self._values = (
            re.compile("|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True)))
            if forms
            else None
        )

    def text(self, text: str) -> str:
        """``text`` with every secret masked."""
        if self._values is not None:
            text = self._values.sub(MASK, text)
        text = _ASSIGNMENT.sub(_mask_named(1, 2), text)
        text = _FLAG.sub(_mask_named(1, 3), text)
        text = _QUOTED_KEY.sub(_mask_named(2, 5), text)
        text = _URL_PASSWORD.sub(lambda match: f"{match.group(1)}{MASK}{match.group(3)}", text)
        text = _CREDENTIAL.sub(lambda match: f"{match.group(1)}{MASK}", text)
        return _TOKEN_FORMATS.sub(MASK, text)

    def data(self, value: Any) -> Any:
        """A copy of JSON-able ``value`` with every string masked, the string value of every
        secret-named key replaced whole, and the value after a secret flag in a list."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {
                key: MASK
                if isinstance(item, str) and item and isinstance(key, str) and is_secret_name(key)
                else self.data(item)
                for key, item in value.items()
            }
        if isinstance(value, (list, tuple)):
            return self._items(value)
        return value

    def _items(self, items: Sequence[Any]) -> list[Any]:
        """A list's items masked; in an argv, the value after a secret flag (``--api-key KEY``) too."""
        masked: list[Any] = []
        after_flag = False
        for item in items:
            masked.append(MASK if after_flag and isinstance(item, str) else self.data(item))
            after_flag = (
                isinstance(item, str) and item.startswith("-") and "=" not in item and is_secret_name(item)
            )
        return masked

    def optional(self, text: str | None) -> str | None:
        """:meth:`text` for a value that may be None."""
        return None if text is None else self.text(text)


def _mask_named(name_group: int, value_group: int) -> Callable[[re.Match[str]], str]:
    """A substitution that masks the value of a match whose name is a secret name."""

    def replace(match: re.Match[str]) -> str:
        if not is_secret_name(match.group(name_group)) or match.group(value_group) == MASK:
            return match.group(0)
        start, end = match.span(value_group)
        offset = match.start()
        whole = match.group(0)
        return whole[: start - offset] + MASK + whole[end - offset :]

    return replace


def config_problems(env: Mapping[str, str], extra_args: Sequence[str]) -> list[tuple[str, str]]:
    """``(field, why)`` for every secret an engine config's environment or extra arguments would
    carry (empty: the config may be stored)."""
    stored = "secrets are never stored with a run"
    problems = [
        (
            "env",
            f"{name} is a secret and {stored}; set it for the host in hosts.yaml with "
            f"secrets: {{{name}: {{env: VARIABLE}}}} or {{{name}: {{file: PATH}}}}",
        )
        for name in env
        if is_secret_name(name)
    ]
    for arg in extra_args:
        flag = arg.split("=", 1)[0]
        if flag.startswith("-") and is_secret_name(flag):
            problems.append(
                (
                    "extra_args",
                    f"{flag} carries a secret and {stored}; pass it in a variable the engine reads "
                    f"(such as VLLM_API_KEY or HF_TOKEN) set for the host in hosts.yaml under secrets:",
                )
            )
    return problems


def check_config(config: EngineConfig) -> None:
    """Raise :class:`SecretInConfig` when ``config`` holds a secret-named variable or flag."""
    problems = config_problems(config.env, config.extra_args)
    if problems:
        field, why = problems[0]
        raise SecretInConfig(config.engine, field, f"{field}: {why}")


# ----- the process-wide redactor (logs, pages) -------------------------------------------------------


def _environment_key() -> tuple[tuple[str, str], ...]:
    return tuple(sorted(os.environ.items()))


def hosts_redactor(hosts: Iterable[HostConfig]) -> Redactor:
    """A redactor for the secrets of ``hosts`` (e.g. an inventory) and of this process's environment."""
    return Redactor(known_values(hosts))


@functools.lru_cache(maxsize=4)
def _redactor_for(hosts_file: str, mtime_ns: int, environment: tuple[tuple[str, str], ...]) -> Redactor:
    try:
        inventory = load_inventory(hosts_file)
    except InventoryError:
        inventory = None
    return Redactor(known_values(inventory or (), dict(environment)))


def process_redactor(hosts_file: str | os.PathLike[str] | None = None) -> Redactor:
    """The redactor for the secrets this process knows now: its environment and the hosts file
    (default ``$PERFLAB_HOSTS`` or the repository's hosts.yaml); rebuilt when either changes."""

    path = str(hosts_file or default_inventory_path())
    try:
        mtime_ns = os.stat(path).st_mtime_ns
    except OSError:
        mtime_ns = 0
    return _redactor_for(path, mtime_ns, _environment_key())


class _RedactingFactory:
    """A log record factory that masks secrets in the message and the exception text."""

    def __init__(self, wrapped: Callable[..., logging.LogRecord], hosts_file: str | None) -> None:
        self.wrapped = wrapped
        self.hosts_file = hosts_file

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.wrapped(*args, **kwargs)
        redactor = process_redactor(self.hosts_file)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = str(record.msg)
        record.msg = redactor.text(message)
        record.args = None
        if record.exc_info:
            record.exc_text = redactor.text(logging.Formatter().formatException(record.exc_info))
        return record


_install_lock = threading.Lock()


def install_log_redaction(hosts_file: str | os.PathLike[str] | None = None) -> None:
    """Mask secrets in every log record this process creates from now on, knowing the secrets of
    ``hosts_file`` (default: the configured hosts file); installing again only updates that file."""
    with _install_lock:
        current = logging.getLogRecordFactory()
        path = str(hosts_file) if hosts_file is not None else None
        if isinstance(current, _RedactingFactory):
            current.hosts_file = path or current.hosts_file
        else:
            logging.setLogRecordFactory(_RedactingFactory(current, path))
