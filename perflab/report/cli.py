"""``python -m perflab report``: export a study's report, or a report of any runs (imported ones too).

- ``report STUDY_ID --out DIR|FILE.zip``: report.md, charts/*.png, results.csv and results.json;
- ``report --runs 3,7,12 --out …``: the same for runs laid out by their labels
  (:mod:`perflab.report.from_runs`), with ``--gpus-per-node`` to count replicas of printed blocks.
"""

from __future__ import annotations

import argparse
import sys

from perflab.cli_database import add_url_option, command_engine, database_name


def _run_ids(text: str) -> list[int]:
    words = text.replace(",", " ").split()
    if not words or not all(word.isdigit() and int(word) > 0 for word in words):
        raise argparse.ArgumentTypeError(f"expected run ids like 3,7,12, got {text!r}")
    return [int(word) for word in words]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("study_id", nargs="?", type=int, metavar="STUDY_ID", help="the study to report")
    parser.add_argument("--runs", type=_run_ids, help="report these runs instead of a study (3,7,12)")
    parser.add_argument("--out", required=True, help="a directory, or a file name ending in .zip")
    parser.add_argument("--no-charts", action="store_true", help="leave the PNG charts out (faster)")
    parser.add_argument("--title", help="the report's title (--runs)")
    parser.add_argument("--tuning-title", default="Tuning profile", help="name of the tuning case (--runs)")
    parser.add_argument("--gpus-per-node", type=int, help="accelerators per node, to count replicas (--runs)")
    parser.add_argument(
        "--decimals", type=int, default=1, choices=(0, 1, 2, 3), help="decimals of the percentages"
    )
    add_url_option(parser)


def run(args: argparse.Namespace) -> int:
    from db import crud
    from db import session as db_session
    from perflab.report.export import write_report
    from perflab.report.from_runs import RunLayoutError, build_report_from_runs
    from perflab.report.from_study import study_report
    from perflab.study.spec import StudySpecError

    if (args.study_id is None) == (args.runs is None):
        print("error: give either a STUDY_ID or --runs (not both)", file=sys.stderr)
        return 2
    with db_session.new_session(command_engine(args.url, create=False)) as session:
        try:
            if args.runs is not None:
                report = build_report_from_runs(
                    session,
                    args.runs,
                    title=args.title,
                    tuning_title=args.tuning_title,
                    gpus_per_node=args.gpus_per_node,
                    decimals=args.decimals,
                )
            else:
                report = study_report(session, study_id=args.study_id, decimals=args.decimals)
        except crud.NotFound as error:
            print(f"error: {error} in database {database_name(args.url)}", file=sys.stderr)
            return 2
        except (RunLayoutError, StudySpecError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    for path in write_report(report, args.out, charts=not args.no_charts):
        print(path)
    return 0
