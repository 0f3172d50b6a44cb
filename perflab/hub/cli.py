"""``python -m perflab datasets fetch NAME|hf://datasets/OWNER/REPO[@REV]/PATH``: fetch a hub dataset
into the hub cache (``PERFLAB_HUB_CACHE``) with progress on stderr; prints the cached file's path.

``sharegpt`` (or the dump's file name) names the ShareGPT dump the ShareGPT profiles use. Exit
status: 0 fetched or already cached, 1 the hub refused or could not be reached or the checksum did
not match (one line saying which), 2 a name that is not a hub dataset.
"""

from __future__ import annotations

import argparse
import sys

PROGRESS_STEP = 0.05


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="action")
    fetch_parser = actions.add_parser("fetch", help="fetch a hub dataset into the cache")
    fetch_parser.add_argument(
        "name", help="sharegpt, ShareGPT_V3_unfiltered_cleaned_split.json or hf://datasets/OWNER/REPO/PATH"
    )


class _Progress:
    """Prints a line each time another 5 % (or, without a known size, 64 MiB) has arrived."""

    def __init__(self) -> None:
        self.next_mark = 0.0

    def __call__(self, done: int, total: int | None) -> None:
        from perflab.views.formatting import format_bytes

        mark = done / total if total else done / (64 * 1024 * 1024)
        if mark >= self.next_mark:
            shown = f"{format_bytes(done)} of {format_bytes(total)}" if total else format_bytes(done)
            print(f"downloading: {shown}", file=sys.stderr, flush=True)
            self.next_mark = mark + (PROGRESS_STEP if total else 1.0)


def run(args: argparse.Namespace) -> int:
    from perflab.hub.catalog import hub_file
    from perflab.hub.client import HubError, fetch, hub_endpoint, hub_token
    from perflab.settings import hub_cache_dir
    from perflab.views.formatting import format_bytes

    try:
        file = hub_file(args.name)
    except HubError as problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if file is None:
        print(f"error: {args.name!r} is not a hub dataset (use sharegpt or hf://datasets/…)", file=sys.stderr)
        return 2
    try:
        got = fetch(
            file,
            cache_dir=hub_cache_dir(),
            endpoint=hub_endpoint(),
            token=hub_token(),
            on_progress=_Progress(),
        )
    except HubError as problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    state = "downloaded" if got.downloaded else "already cached"
    print(f"{file.ref}: {state}, {format_bytes(got.size)}, sha256 {got.sha256}", file=sys.stderr)
    print(got.path)
    return 0
