"""Where perflab reads secrets — environment variables and files on the app machine, nowhere else —
and which names denote one.

- a host's SSH password and key passphrase: ``auth.password_env`` / ``auth.passphrase_env`` in
  hosts.yaml (read when connecting, :mod:`perflab.transport.connections`);
- a host's secret variables: ``secrets: {HF_TOKEN: {env: VARIABLE}}`` or ``{HF_TOKEN: {file: PATH}}``
  in hosts.yaml, set for every command on that host like ``env:`` (:func:`host_secret_env`);
- the web app's shared password: ``PERFLAB_PASSWORD_FILE`` or ``PERFLAB_PASSWORD`` (:mod:`perflab.auth`);
- the database password, part of ``PERFLAB_DATABASE_URL``.

:func:`known_values` gathers every one of them that is set, so :mod:`perflab.redact` can mask them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perflab.inventory import HostConfig, SecretSource

# Names of variables, flags and keys that hold secrets: anywhere in the name for the unambiguous words,
# as the last word for TOKEN (so MAX_TOKENS, TOKENIZER and BOS_TOKEN_ID stay readable).
_SECRET_WORDS = re.compile(r"PASSWORD|PASSWD|PASSPHRASE|SECRET|API_?KEY|PRIVATE_KEY|CREDENTIAL|(?:^|_)TOKEN$")
# Names that say where a secret is, not what it is (PERFLAB_PASSWORD_FILE, password_env).
_LOCATION_SUFFIX = re.compile(r"_(?:FILE|PATH|ENV|DIR|NAME)$")
DATABASE_URL_ENV = "PERFLAB_DATABASE_URL"


class SecretUnavailable(ValueError):
    """A configured secret cannot be read (variable not set, file missing or empty)."""


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or key name holds a secret (``HF_TOKEN``, ``--api-key``, ``db_password``)."""
    upper = name.strip("-").upper().replace("-", "_")
    return bool(_SECRET_WORDS.search(upper)) and not _LOCATION_SUFFIX.search(upper)


def read_secret_file(path: str | os.PathLike[str]) -> str:
    """The secret in a file: its first line without the line break; :class:`SecretUnavailable` if the
    file cannot be read or that line is empty."""
    location = Path(path).expanduser()
    try:
        text = location.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretUnavailable(
            f"cannot read the file {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    value = text.splitlines()[0].strip() if text.strip() else ""
    if not value:
        raise SecretUnavailable(f"the file {path} is empty")
    return value


def read_source(source: SecretSource, environ: Mapping[str, str] | None = None) -> str:
    """The value a ``secrets:`` entry points at; :class:`SecretUnavailable` says why there is none."""
    if source.file is not None:
        return read_secret_file(source.file)
    variable = str(source.env)
    value = (os.environ if environ is None else environ).get(variable, "")
    if not value:
        raise SecretUnavailable(f"the environment variable {variable} is not set")
    return value


def host_secret_env(host: HostConfig) -> dict[str, str]:
    """The host's ``secrets:`` as variables for its commands; :class:`SecretUnavailable` names the host,
    the variable and where it was to be read."""
    values: dict[str, str] = {}
    for name, source in host.secrets.items():
        try:
            values[name] = read_source(source)
        except SecretUnavailable as exc:
            raise SecretUnavailable(
                f"host '{host.name}' field 'secrets.{name}': {exc} (set it on the machine perflab runs on)"
            ) from None
    return values


def _host_values(host: HostConfig, environ: Mapping[str, str]) -> list[str]:
    found = [
        environ.get(variable, "")
        for variable in (host.auth.password_env, host.auth.passphrase_env)
        if variable is not None
    ]
    for source in host.secrets.values():
        try:
            found.append(read_source(source, environ))
        except SecretUnavailable:
            continue
    found += [value for name, value in host.env.items() if is_secret_name(name)]
    return found


def _database_password(environ: Mapping[str, str]) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    url = environ.get(DATABASE_URL_ENV, "")
    try:
        return str(make_url(url).password or "") if url else ""
    except ArgumentError:
        return ""


def known_values(hosts: Iterable[HostConfig] = (), environ: Mapping[str, str] | None = None) -> set[str]:
    """Every secret value this process can see: secret-named environment variables, the app's shared
    password, the database password, and the secrets of ``hosts`` (e.g. an inventory)."""
    from perflab.auth import shared_password_value

    env = os.environ if environ is None else environ
    found = {value for name, value in env.items() if is_secret_name(name)}
    found |= {shared_password_value(env), _database_password(env)}
    for host in hosts:
        found.update(_host_values(host, env))
    return {value for value in found if value}
