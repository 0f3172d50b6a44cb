"""``python -m perflab db upgrade|current|downgrade`` on both databases."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from db import session as db_session

REPO = Path(__file__).resolve().parents[2]


def perflab_db(*args: str, env_url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PERFLAB_DATABASE_URL", None)
    if env_url is not None:
        env["PERFLAB_DATABASE_URL"] = env_url
    return subprocess.run(
        [sys.executable, "-m", "perflab", "db", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_db_commands_round_trip(database_url: str) -> None:
    head = db_session.head_revision()
    current = perflab_db("current", env_url=database_url)
    assert current.returncode == 0, current.stderr
    assert f"revision {head} (up to date)" in current.stdout

    down = perflab_db("downgrade", "base", "--url", database_url)
    assert down.returncode == 0, down.stderr
    assert "revision none (empty)" in down.stdout
    assert db_session.current_revision(database_url) is None

    up = perflab_db("upgrade", "--url", database_url)
    assert up.returncode == 0 and f"revision {head} (up to date)" in up.stdout
    assert db_session.current_revision(database_url) == head


def test_db_errors_are_one_line(database_url: str) -> None:
    unknown = perflab_db("upgrade", "zzzz", "--url", database_url)
    assert unknown.returncode == 1 and "Can't locate revision" in unknown.stderr
    unreachable = perflab_db("current", "--url", "postgresql://perflab:secret@127.0.0.1:1/none")
    assert unreachable.returncode == 1
    assert "postgresql+psycopg://perflab:***@127.0.0.1:1/none" in unreachable.stderr
    assert "secret" not in unreachable.stderr and "Traceback" not in unreachable.stderr
    missing = perflab_db("downgrade", "--url", database_url)
    assert missing.returncode == 2 and "needs a target revision" in missing.stderr
