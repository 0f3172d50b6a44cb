"""``python -m perflab db upgrade|current|downgrade``: manage the database schema.

The database is ``--url`` when given, else ``PERFLAB_DATABASE_URL``, else the SQLite file
``var/perflab.db``.
"""

from __future__ import annotations

import argparse
import sys

from perflab.cli_database import add_url_option, command_url, database_problem, missing_database


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", choices=("upgrade", "current", "downgrade"), help="what to do with the schema"
    )
    parser.add_argument(
        "revision",
        nargs="?",
        help="target revision (upgrade: default head; downgrade: required, e.g. base or -1)",
    )
    add_url_option(parser)


def run(args: argparse.Namespace) -> int:
    import sqlalchemy as sa
    from alembic.util import CommandError

    from db import session as db_session

    url = command_url(args.url)
    label = db_session.describe(url)
    missing = missing_database(url) if args.action == "current" else None
    if missing is not None:  # reading the revision must not create the database
        print(missing, file=sys.stderr)
        return 1
    try:
        if args.action == "upgrade":
            db_session.upgrade(url, args.revision or "head")
        elif args.action == "downgrade":
            if not args.revision:
                print("downgrade needs a target revision, e.g. `base` or `-1`", file=sys.stderr)
                return 2
            db_session.downgrade(url, args.revision)
        current = db_session.current_revision(url)
    except sa.exc.ArgumentError as error:
        print(f"invalid database URL: {error}", file=sys.stderr)
        return 2
    except (sa.exc.SQLAlchemyError, ImportError) as error:
        print(database_problem(url, error), file=sys.stderr)
        return 1
    except CommandError as error:
        print(f"database {label}: {error}", file=sys.stderr)
        return 1
    head = db_session.head_revision()
    state = "up to date" if current == head else f"head is {head}"
    print(f"{label}: revision {current or 'none (empty)'} ({state})")
    return 0
