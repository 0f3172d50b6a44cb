"""``python -m perflab study …``: create, list, show, pause, resume, cancel and run studies.

- ``create --spec study.yaml``: store a queued study (workers execute it);
- ``run --spec study.yaml [--wait]``: create it and, with ``--wait``, execute it in this process with
  a worker, printing progress until it ends (exit 0 when done, 1 when it failed, was cancelled or is
  incomplete, with the reason on stderr);
- ``list``, ``show ID`` (``--json``: the study's result, :func:`perflab.report.export.report_json`;
  ``--timeout``: give up after that many seconds), ``pause ID``, ``resume ID``, ``cancel ID``;
- ``measure-missing ID``: an ``incomplete`` study (candidates the infrastructure kept from being
  measured) measures those candidates again and goes on (a worker executes it).

A bad spec or host prints every problem (file, line, field or host) and exits 2. The parser and
``list`` import only the database layer; the other actions import the study machinery when they run.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from perflab.cli_database import add_url_option, command_engine, database_name

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

# ``study show`` gives up after this long by default (a study is read, nothing is proposed or run).
SHOW_TIMEOUT_S = 60.0
MAX_SHOW_TIMEOUT_S = 24 * 3600.0
STATUS_CHANGES = {
    "pause": "pause a study",
    "resume": "resume a paused study",
    "cancel": "cancel a study and its runs",
    "measure-missing": "measure again the candidates of an incomplete study",
}


def configure(parser: argparse.ArgumentParser) -> None:
    add_url_option(parser)
    commands = parser.add_subparsers(dest="action", required=True, metavar="action")
    for name, help_text in (("create", "store a queued study"), ("run", "create a study and run it here")):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--spec", required=True, help="study spec, YAML or JSON")
        sub.add_argument("--hosts", help="hosts file (default: $PERFLAB_HOSTS or <repo>/hosts.yaml)")
        sub.add_argument("--queued-by", help="who started the study (default: $USER)")
    run_parser = commands.choices["run"]
    run_parser.add_argument("--wait", action="store_true", help="execute it in this process until it ends")
    run_parser.add_argument("--timeout", type=float, default=24 * 3600.0, help="seconds to wait (--wait)")
    run_parser.add_argument("--poll", type=float, default=1.0, help="seconds between progress checks")
    list_parser = commands.add_parser("list", help="list studies")
    list_parser.add_argument("--json", action="store_true")
    show_parser = commands.add_parser("show", help="a study's stages, candidates and decisions")
    show_parser.add_argument("study_id", type=int, metavar="ID")
    show_parser.add_argument("--json", action="store_true", help="the study's result as JSON")
    show_parser.add_argument(
        "--timeout", type=_seconds, default=SHOW_TIMEOUT_S, help="seconds to give up after (default: 60)"
    )
    for name, help_text in STATUS_CHANGES.items():
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("study_id", type=int, metavar="ID")


def _create(engine: Engine, args: argparse.Namespace) -> int:
    from perflab.auth import cli_user
    from perflab.inventory import default_inventory_path, load_inventory
    from perflab.study.coordinator import create_study
    from perflab.study.headless import wait_for_study
    from perflab.study.spec import load_spec
    from perflab.study.text import progress_lines

    spec = load_spec(args.spec)
    inventory = load_inventory(args.hosts or default_inventory_path())
    study = create_study(engine, spec, inventory=inventory, queued_by=cli_user(args.queued_by))
    print(f"study {study.id}: {study.name} [{study.status}]", flush=True)
    if args.action == "create" or not args.wait:
        return 0

    def report(progress: object) -> None:
        print("\n".join(progress_lines(progress)), flush=True)

    final = wait_for_study(
        engine,
        study.id,
        hosts_path=args.hosts,
        timeout_s=args.timeout,
        poll_s=args.poll,
        on_progress=report,
    )
    if final.status == "done":
        return 0
    print(f"error: {_why_not_done(engine, study.id)}", file=sys.stderr)
    return 1


def _why_not_done(engine: Engine, study_id: int) -> str:
    """Why a finished study did not end ``done``: its failure, what it left unmeasured, or its status."""
    from db import session as db_session
    from perflab.study.progress import load_progress
    from perflab.study.text import incomplete_text

    with db_session.new_session(engine) as session:
        progress = load_progress(session, study_id=study_id)
    plan, status = progress.plan, progress.study.status
    if plan.failure:
        reason = plan.failure
    elif plan.status == "incomplete":
        reason = incomplete_text(plan)
    else:
        reason = f"it was {status}"
    return f"study {study_id} ended {status}: {reason}"


def _list(engine: Engine, args: argparse.Namespace) -> int:
    from db import crud
    from db import session as db_session

    with db_session.new_session(engine) as session:
        studies = crud.list_studies(session)
    if args.json:
        rows = [
            {
                "id": s.id,
                "name": s.name,
                "status": s.status,
                "phase": (s.state or {}).get("phase"),
                "recommended_command": s.recommended_command,
                "created_at": s.created_at.isoformat(),
            }
            for s in studies
        ]
        print(json.dumps(rows, indent=2))
        return 0
    if not studies:
        print(f"No studies in database {database_name(args.url)}.")
        return 0
    print(f"{'ID':>5}  {'STATUS':<10}  {'PHASE':<12}  NAME")
    for study in studies:
        phase = (study.state or {}).get("phase") or ""
        # the phase says more than the status only while the study is under way
        shown = phase if phase and phase != study.status else "—"
        print(f"{study.id:>5}  {study.status:<10}  {shown:<12}  {study.name}")
    return 0


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 < seconds <= MAX_SHOW_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"expected seconds between 0 and {MAX_SHOW_TIMEOUT_S:g}, got {text}")
    return seconds


@contextmanager
def deadline(seconds: float, what: str) -> Iterator[None]:
    """Raise :class:`StudyTimeout` in this (the main) thread once ``seconds`` have passed."""
    from perflab.study.headless import StudyTimeout

    def expired(signum: int, frame: object) -> None:
        raise StudyTimeout(f"{what} took longer than {seconds:g} s (--timeout)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _show(engine: Engine, args: argparse.Namespace) -> int:
    from db import session as db_session
    from perflab.report.export import report_json
    from perflab.report.from_study import study_report
    from perflab.study.progress import load_progress
    from perflab.study.text import progress_lines

    with deadline(args.timeout, f"showing study {args.study_id}"), db_session.new_session(engine) as session:
        if args.json:
            text = json.dumps(
                report_json(study_report(session, study_id=args.study_id)), indent=2, default=str
            )
        else:
            text = "\n".join(progress_lines(load_progress(session, study_id=args.study_id)))
    print(text)
    return 0


def _change(engine: Engine, args: argparse.Namespace) -> int:
    from perflab.study.coordinator import cancel_study, measure_missing, pause_study, resume_study

    changes = {
        "pause": pause_study,
        "resume": resume_study,
        "cancel": cancel_study,
        "measure-missing": measure_missing,
    }
    change = changes[args.action]
    study = change(engine, args.study_id)
    print(f"study {study.id}: {study.status}")
    return 0


def run(args: argparse.Namespace) -> int:
    from perflab import settings

    # Only create and run store a new study: the other actions never create a database.
    engine = command_engine(args.url, create=args.action in ("create", "run"))
    try:
        settings.check()
    except settings.SettingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return _list(engine, args) if args.action == "list" else _act(engine, args)


def _act(engine: Engine, args: argparse.Namespace) -> int:
    """Every action but ``list``; a problem of the spec, hosts, study or settings is printed, exit 2."""
    from db import crud
    from perflab import settings
    from perflab.inventory import InventoryError
    from perflab.study.coordinator import StudyStateError
    from perflab.study.headless import StudyTimeout
    from perflab.study.hosts import StudyHostError
    from perflab.study.spec import StudySpecError

    handlers = {"create": _create, "run": _create, "show": _show}
    try:
        return handlers.get(args.action, _change)(engine, args)
    except (StudySpecError, InventoryError) as error:
        print("\n".join(f"error: {problem}" for problem in error.problems), file=sys.stderr)
        return 2
    except crud.NotFound as error:
        print(f"error: {error} in database {database_name(args.url)}", file=sys.stderr)
        return 2
    except (StudyHostError, StudyStateError, StudyTimeout, settings.SettingError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
