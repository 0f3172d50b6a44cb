"""Who may use the web app: the access mode, the shared password, the loopback rule and the viewer.

Settings, from the environment:

- ``PERFLAB_AUTH``: ``none`` (no login), ``password`` (one shared password for a small team; each
  person types a name, recorded as ``queued_by``) or ``oidc`` (Streamlit's ``st.login`` against an
  OpenID Connect provider configured in the ``[auth]`` section of ``.streamlit/secrets.toml``; the
  user's email is recorded). Unset means ``none``, which the app accepts only while its server listens
  on a loopback address; anywhere else it shows how to enable a login instead of the app.
- ``PERFLAB_PASSWORD_FILE`` (preferred: the first line of a file) or ``PERFLAB_PASSWORD``: the shared
  password of ``password`` mode.
- ``PERFLAB_LOGIN_MAX_FAILURES`` (default 10) and ``PERFLAB_LOGIN_WINDOW_S`` (default 900): wrong
  passwords an address may send within the window before its logins are locked; ten times as many
  from all addresses together lock every login (:mod:`perflab.login_guard`).

With a login on, everyone can read the run, compare and study pages (shared links), and only a
logged-in viewer can act: queue, re-run, cancel, import, upload, delete, probe, start or change studies.
"""

from __future__ import annotations

import getpass
import hmac
import importlib.util
import ipaddress
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from perflab.login_guard import LoginGuard, LoginPolicy, duration_text
from perflab.secrets import PASSWORD_ENV, PASSWORD_FILE_ENV, SecretUnavailable, configured_shared_password

AUTH_ENV = "PERFLAB_AUTH"
MODES: tuple[str, ...] = ("none", "password", "oidc")
OIDC_KEYS: tuple[str, ...] = (
    "redirect_uri",
    "cookie_secret",
    "client_id",
    "client_secret",
    "server_metadata_url",
)
MAX_NAME_LENGTH = 64
MAX_FAILURES_ENV = "PERFLAB_LOGIN_MAX_FAILURES"
WINDOW_ENV = "PERFLAB_LOGIN_WINDOW_S"
LOCAL_CLIENT = "this machine"
_GUARDS: dict[LoginPolicy, LoginGuard] = {}
_GUARDS_LOCK = threading.Lock()

HOW_TO_ENABLE = f"""\
Pick one and restart perflab:

- **A shared password** (small teams): write it to a file only you can read and start perflab with
  `{AUTH_ENV}=password {PASSWORD_FILE_ENV}=/path/to/file` (or `{PASSWORD_ENV}=…`).
- **Single sign-on** (OpenID Connect): set `{AUTH_ENV}=oidc` and fill the `[auth]` section of
  `.streamlit/secrets.toml` with `{"`, `".join(OIDC_KEYS)}` (never commit that file).
- **Only this machine**: listen on loopback, `streamlit run app.py --server.address localhost`.
- **No login on purpose** (e.g. behind a proxy that authenticates): `{AUTH_ENV}=none`.
"""


class AccessConfigError(ValueError):
    """The access settings cannot be used (unknown mode, missing password or OIDC settings)."""


class LoginRefused(ValueError):
    """A login attempt failed; the message says what to fix without revealing the password."""


@dataclass(frozen=True)
class AccessSettings:
    """The access mode, and whether ``PERFLAB_AUTH`` chose it (unset means ``none`` by default)."""

    mode: str
    chosen: bool

    @property
    def login_enabled(self) -> bool:
        return self.mode != "none"


@dataclass(frozen=True)
class Viewer:
    """The person behind a browser session: ``name`` when logged in, under access ``mode``."""

    mode: str
    name: str | None = None

    @property
    def logged_in(self) -> bool:
        return self.name is not None

    @property
    def may_write(self) -> bool:
        """Whether this viewer may queue, change or delete anything."""
        return self.mode == "none" or self.logged_in


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def access_settings(environ: Mapping[str, str] | None = None) -> AccessSettings:
    """The mode of ``PERFLAB_AUTH``; :class:`AccessConfigError` for a value perflab does not know."""
    text = _env(environ).get(AUTH_ENV, "").strip().lower()
    if not text:
        return AccessSettings("none", chosen=False)
    if text not in MODES:
        raise AccessConfigError(f"{AUTH_ENV}={text!r} is not one of {', '.join(MODES)}.")
    return AccessSettings(text, chosen=True)


def shared_password(environ: Mapping[str, str] | None = None) -> str:
    """The shared password of ``password`` mode (file first); :class:`AccessConfigError` without one."""
    try:
        value = configured_shared_password(_env(environ))
    except SecretUnavailable as exc:
        raise AccessConfigError(f"{PASSWORD_FILE_ENV}: {exc}.") from None
    if value is None:
        raise AccessConfigError(
            f"{AUTH_ENV}=password needs the shared password: put it in a file named by "
            f"{PASSWORD_FILE_ENV} (or in the variable {PASSWORD_ENV})."
        )
    return value


def password_matches(given: str, expected: str) -> bool:
    """Compare passwords in time independent of where they differ."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def user_name(text: str) -> str:
    """The name a person typed to log in, tidied; :class:`LoginRefused` when it cannot be used."""
    name = " ".join(text.split())
    if not name:
        raise LoginRefused("Type your name: it is recorded with the runs you queue.")
    if len(name) > MAX_NAME_LENGTH or not name.isprintable():
        raise LoginRefused(f"Use a name of at most {MAX_NAME_LENGTH} printable characters.")
    return name


def login_policy(environ: Mapping[str, str] | None = None) -> LoginPolicy:
    """How many wrong passwords an address may send within how long (``PERFLAB_LOGIN_MAX_FAILURES``,
    ``PERFLAB_LOGIN_WINDOW_S``); :class:`AccessConfigError` for values perflab cannot use."""
    env = _env(environ)
    default = LoginPolicy()
    try:
        policy = LoginPolicy(
            max_failures=int(env.get(MAX_FAILURES_ENV, "").strip() or default.max_failures),
            window_s=float(env.get(WINDOW_ENV, "").strip() or default.window_s),
        )
    except ValueError:
        policy = LoginPolicy(max_failures=0)
    if policy.max_failures < 1 or not 0 < policy.window_s < math.inf:
        raise AccessConfigError(
            f"{MAX_FAILURES_ENV} must be a whole number >= 1 and {WINDOW_ENV} a number of seconds > 0."
        )
    return policy


def login_guard(environ: Mapping[str, str] | None = None) -> LoginGuard:
    """This process's failed-login counts under the configured policy."""
    policy = login_policy(environ)
    with _GUARDS_LOCK:
        return _GUARDS.setdefault(policy, LoginGuard(policy))


def check_login(
    name: str, password: str, address: str | None, environ: Mapping[str, str] | None = None
) -> str:
    """The viewer's name when ``password`` is the shared password; :class:`LoginRefused` otherwise.
    ``address`` is the client's (None: this machine); while it, or the whole server, has had too many
    wrong passwords the attempt is refused before the password is compared (:mod:`perflab.login_guard`)."""
    who = user_name(name)
    expected = shared_password(environ)
    guard = login_guard(environ)
    client = address or LOCAL_CLIENT
    refusal = guard.admit(client)
    if refusal is not None:
        raise LoginRefused(refusal)
    if not password_matches(password, expected):
        left = guard.failures_left(client)
        if left <= 0:
            locked = duration_text(guard.policy.window_s)
            raise LoginRefused(f"Wrong password. Logins from your address are now locked for {locked}.")
        tries = "try" if left == 1 else "tries"
        raise LoginRefused(f"Wrong password ({left} more wrong {tries} lock logins from your address).")
    guard.forgive(client)
    return who


def is_loopback(address: str | None) -> bool:
    """Whether a server bound to ``address`` is reachable from this machine only (unset or empty
    means every interface)."""
    if not address:
        return False
    host = address.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_problem(settings: AccessSettings, address: str | None) -> str | None:
    """Why the app must not serve without a login (None when it may)."""
    if settings.chosen or is_loopback(address):
        return None
    where = f"the address {address}" if address else "every network interface"
    return (
        f"This perflab server listens on {where}, so anyone who can reach it could queue runs on your "
        f"hosts, and no login is configured ({AUTH_ENV} is not set)."
    )


def oidc_problem(auth_section: Mapping[str, object] | None) -> str | None:
    """What ``oidc`` mode lacks: Authlib, or keys of the ``[auth]`` secrets section (None: ready)."""
    if importlib.util.find_spec("authlib") is None:
        return f"{AUTH_ENV}=oidc needs the Authlib package (pip install 'Authlib>=1.3.2')."
    missing = [key for key in OIDC_KEYS if not (auth_section or {}).get(key)]
    if missing:
        return (
            f"{AUTH_ENV}=oidc needs the [auth] section of .streamlit/secrets.toml with {', '.join(missing)}."
        )
    return None


def cli_user(explicit: str | None = None) -> str:
    """Who runs a command-line tool: ``--queued-by`` when given, else ``$USER`` or the login name."""
    return (explicit or "").strip() or os.environ.get("USER", "").strip() or getpass.getuser()
