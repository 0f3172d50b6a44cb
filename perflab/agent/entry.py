"""``__main__`` of the agent zipapp: runs ``bench`` or ``sim`` with the same arguments as perflab.

This file is copied into the archive as ``__main__.py``; it must run on Python 3.9.
"""

from __future__ import annotations

import sys

AGENT_COMMANDS = ("bench", "sim")
MIN_PYTHON = (3, 9)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if sys.version_info < MIN_PYTHON:
        print(
            f"perflab agent needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer, this is "
            f"{sys.version.split()[0]}",
            file=sys.stderr,
        )
        return 2
    if not args or args[0] not in AGENT_COMMANDS:
        print(f"usage: python3 {sys.argv[0]} {{{','.join(AGENT_COMMANDS)}}} [arguments]", file=sys.stderr)
        return 2
    from perflab.cli import main as perflab_main

    return perflab_main(args)


if __name__ == "__main__":
    sys.exit(main())
