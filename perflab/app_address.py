"""Where the web app serving a database can be opened, for the links commands print.

The app records its address beside the SQLite file it serves (``perflab.db`` → ``perflab.db.app``:
``{"url": …, "host": …}``) when it first draws a page, from the port and base path it really runs on
(``streamlit run app.py --server.port 8502`` included). A command reading the same database takes
that address while something on this machine still accepts connections there; otherwise
the port and base path of the app's settings file, ``.streamlit/config.toml`` of the checkout (or
``STREAMLIT_SERVER_PORT``), on ``localhost``. ``PERFLAB_APP_URL`` overrides both
(:func:`perflab.settings.app_url`), as it must for a team's app on another machine or a PostgreSQL
database, which has no file to record beside.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import tomllib
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from db.home import REPO_ROOT

STREAMLIT_CONFIG = REPO_ROOT / ".streamlit" / "config.toml"
PORT_ENV = "STREAMLIT_SERVER_PORT"
DEFAULT_PORT = 8501
RECORD_SUFFIX = ".app"
# Addresses that mean "every interface": the app is opened as localhost.
WILDCARD_ADDRESSES = frozenset({"", "0.0.0.0", "::"})
MAX_RECORD_BYTES = 4096
CONNECT_TIMEOUT_S = 0.5


def record_path(database_url: str) -> Path | None:
    """The file beside a SQLite database where its app records its address (None for others)."""
    try:
        parsed = make_url(database_url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    database = Path(parsed.database).expanduser()
    return database.with_name(database.name + RECORD_SUFFIX)


def served_url(*, address: str | None, port: int, base_path: str | None) -> str:
    """``http://localhost:8502/lab`` for an app listening on ``address``:``port`` under ``base_path``."""
    host = "localhost" if (address or "") in WILDCARD_ADDRESSES else address
    if host and ":" in host:
        host = f"[{host}]"
    path = "/" + base_path.strip("/") if base_path and base_path.strip("/") else ""
    return f"http://{host}:{port}{path}"


def record(database_url: str, url: str) -> None:
    """Record that this process serves ``database_url``'s app at ``url`` (nothing for a database
    without a file; a directory that cannot be written leaves commands on their fallback)."""
    path = record_path(database_url)
    if path is None:
        return
    payload = {"url": url, "host": socket.gethostname()}
    try:
        path.write_text(json.dumps(payload) + "\n", encoding="utf-8")
    except OSError:
        return


def _listening(url: str) -> bool:
    """Whether something accepts connections at ``url``'s host and port (the app is still up)."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname or "localhost", port), timeout=CONNECT_TIMEOUT_S):
            return True
    except (OSError, ValueError):
        return False


def recorded(database_url: str) -> str | None:
    """The address recorded for ``database_url`` by an app of this machine that still answers there,
    else None."""
    path = record_path(database_url)
    if path is None or not path.is_file():
        return None
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            return None
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(payload, dict):
        return None
    url, host = payload.get("url"), payload.get("host")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    if host != socket.gethostname() or not _listening(url):
        return None
    return url.rstrip("/")


def configured() -> str:
    """The address the app's settings give it: ``.streamlit/config.toml``'s ``[server]`` port (or
    ``STREAMLIT_SERVER_PORT``) and base path, on localhost."""
    server: dict[str, object] = {}
    try:
        with STREAMLIT_CONFIG.open("rb") as handle:
            section = tomllib.load(handle).get("server")
        server = section if isinstance(section, dict) else {}
    except (OSError, tomllib.TOMLDecodeError):
        pass
    port: object = os.environ.get(PORT_ENV, "").strip() or server.get("port")
    try:
        number = int(port)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        number = DEFAULT_PORT
    base = server.get("baseUrlPath")
    return served_url(address=None, port=number, base_path=base if isinstance(base, str) else None)
