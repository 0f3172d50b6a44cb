"""``python -m perflab.agent [DEST_DIR]``: build the agent zipapp and print its path."""

from __future__ import annotations

import argparse
from pathlib import Path

from perflab.agent.build import build_agent


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m perflab.agent", description=__doc__)
    parser.add_argument(
        "dest_dir", nargs="?", default="var/agent", help="where to write it (default var/agent)"
    )
    print(build_agent(Path(parser.parse_args().dest_dir)))


main()
