"""Where perflab reads secrets: environment variables and files on the app machine, nowhere else.

- a host's SSH password and key passphrase: ``auth.password_env`` / ``auth.passphrase_env`` in
  hosts.yaml (read when connecting, :mod:`perflab.transport.connections`);
- a host's secret variables: ``secrets: {HF_TOKEN: {env: VARIABLE}}`` or ``{HF_TOKEN: {file: PATH}}``
  in hosts.yaml, set for every command on that host like ``env:`` (:func:`host_secret_env`);
- the web app's shared password: ``PERFLAB_PASSWORD_FILE`` or ``PERFLAB_PASSWORD``
  (:func:`configured_shared_password`; :mod:`perflab.auth` decides what its absence means);
- the database password, part of ``PERFLAB_DATABASE_URL``.

:func:`known_values` gathers every one of them that is set, and every secret-named variable
(:mod:`perflab.secret_names`), so :mod:`perflab.redact` can mask them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.secret_names import is_secret_name

if TYPE_CHECKING:
    from perflab.inventory import HostConfig, SecretSource

DATABASE_URL_ENV = "PERFLAB_DATABASE_URL"
PASSWORD_ENV = "PERFLAB_PASSWORD"
PASSWORD_FILE_ENV = "PERFLAB_PASSWORD_FILE"


class SecretUnavailable(ValueError):
    """A configured secret cannot be read (variable not set, file missing or empty)."""


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


def configured_shared_password(environ: Mapping[str, str] | None = None) -> str | None:
    """The web app's shared password: the first line of the file ``PERFLAB_PASSWORD_FILE`` names, else
    ``PERFLAB_PASSWORD``; None when neither is set, :class:`SecretUnavailable` when the file cannot be
    read."""
    env = os.environ if environ is None else environ
    path = env.get(PASSWORD_FILE_ENV, "").strip()
    if path:
        return read_secret_file(path)
    return env.get(PASSWORD_ENV, "") or None


def _shared_password(environ: Mapping[str, str]) -> str:
    try:
        return configured_shared_password(environ) or ""
    except SecretUnavailable:
        return ""


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
    env = os.environ if environ is None else environ
    found = {value for name, value in env.items() if is_secret_name(name)}
    found |= {_shared_password(env), _database_password(env)}
    for host in hosts:
        found.update(_host_values(host, env))
    return {value for value in found if value}
