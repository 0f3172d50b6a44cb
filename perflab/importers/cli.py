"""``python -m perflab import FILE… [--json] [--label L] [--queued-by NAME] [--url URL]``: store existing
benchmark results as runs.

Each file is parsed completely first; a file that fails is reported (file and line) and stores
nothing, the others are still imported. A file imported before (same text) is reported with the
runs it became and stored no second time. The exit status is 1 if any file failed.
"""

from __future__ import annotations

import argparse
import json
import sys

from perflab.cli_database import add_url_option, command_engine


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="vllm bench JSON/text results or guidellm reports"
    )
    parser.add_argument("--json", action="store_true", help="print the stored runs as a JSON list")
    parser.add_argument("--label", help="label for every imported run (default: from each result's context)")
    parser.add_argument("--queued-by", help="who imported the runs (default: $USER)")
    add_url_option(parser)


def run(args: argparse.Namespace) -> int:
    from db import session as db_session
    from perflab.auth import cli_user
    from perflab.importers.model import ImportFileError
    from perflab.importers.store import AlreadyImported, read_file, run_record, store_parsed

    engine = command_engine(args.url)
    records = []
    failed = 0
    with db_session.new_session(engine) as session:
        for path in args.files:
            try:
                parsed = read_file(path)
            except ImportFileError as error:
                print(f"error: {error}", file=sys.stderr)
                failed += 1
                continue
            try:
                runs = store_parsed(session, parsed, queued_by=cli_user(args.queued_by), label=args.label)
            except AlreadyImported as known:
                print(str(known), file=sys.stderr)
                continue
            if args.json:
                records.extend(run_record(session, stored) for stored in runs)
            else:
                ids = ", ".join(str(stored.id) for stored in runs)
                print(f"{path}: stored {len(runs)} run{'s' if len(runs) != 1 else ''} ({ids})")
    if args.json:
        print(json.dumps(records, indent=2, ensure_ascii=False, default=str))
    return 1 if failed else 0
