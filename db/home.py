"""Where perflab keeps ``var/`` and finds ``hosts.yaml`` (:data:`REPO_ROOT`), apart from
:mod:`db.session` so that reading the hosts file or the app's address loads no SQLAlchemy."""

from __future__ import annotations

from pathlib import Path


def home_dir() -> Path:
    """Where perflab keeps ``var/`` and finds ``hosts.yaml``: the source checkout it runs from, else (a
    copy installed with ``pip install .``) the directory it was started in."""
    checkout = Path(__file__).resolve().parents[1]
    return checkout if (checkout / "app.py").is_file() else Path.cwd()


REPO_ROOT = home_dir()
