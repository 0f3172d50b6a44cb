"""``python -m perflab app [streamlit options]``: the web app, its worker started with the server.

``streamlit run app.py`` starts the app's in-process worker on the first page view: after a restart
(a crash, a reboot) queued runs and running studies would wait until someone opens a page. This
command runs the same server in this process — Streamlit's own ``run`` of ``app.py``, taking every
option it takes (``--server.port 8502``, ``--server.address …``) — and starts the worker as soon as
the server's settings are loaded, so runs go on and studies advance with no browser open. The pages
then find that worker (:func:`perflab.worker.app.start_app_worker` keeps one per process).

The worker starts under the pages' own rules: not with ``PERFLAB_APP_WORKER=0``, not while the
environment's settings cannot be used, and not when the server listens beyond this machine without a
login (:func:`perflab.auth.exposure_problem`) or with a login it cannot check (``password`` mode
without a password); then it says why on stderr, and the pages explain the same.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)
APP = Path(__file__).resolve().parents[2] / "app.py"
# How long the worker waits for the server to load its settings before giving up.
SERVER_START_TIMEOUT_S = 120.0


# The arguments this command does not know itself go to `streamlit run` (see perflab.cli).
PASSED_ON = "streamlit_options"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "Every other option is one of `streamlit run`'s, e.g. --server.port 8502."


def worker_blocker(address: str | None) -> str | None:
    """Why the app's worker must not start for a server on ``address``, or None when it may."""
    from perflab import auth, settings

    if not settings.app_worker_enabled():
        return f"{settings.APP_WORKER_ENV}=0"
    try:
        settings.check()
        access = auth.access_settings()
        if access.mode == "password":
            auth.shared_password()
    except (settings.SettingError, auth.AccessConfigError) as problem:
        return str(problem)
    return auth.exposure_problem(access, address)


def start_with_server() -> None:
    """Once the server in this process has loaded its settings, start the app's worker (or say why
    not)."""
    from streamlit import config, runtime

    from db import session as db_session
    from perflab.worker.app import start_app_worker

    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not runtime.exists():
        if time.monotonic() > deadline:
            logger.error("the app's worker is not started: the server did not start")
            return
        time.sleep(0.1)
    problem = worker_blocker(config.get_option("server.address"))
    if problem is not None:
        logger.warning("the app's worker is not started: %s", problem)
        return
    engine = db_session.get_engine(db_session.database_url())
    db_session.upgrade(engine)
    start_app_worker(engine)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    logging.getLogger("perflab").setLevel(logging.INFO)
    threading.Thread(target=start_with_server, name="app-worker-start", daemon=True).start()
    from streamlit.web import cli as streamlit_cli

    streamlit_cli.main.main(
        args=["run", str(APP), *args.streamlit_options], prog_name="streamlit", standalone_mode=False
    )
    return 0
