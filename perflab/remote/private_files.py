"""Files only the host's login user may read: secrets handed to a process through a file, not argv.

:func:`write_env_file` writes ``NAME=value`` lines (the ``--env-file`` format of Docker and Podman:
one variable a line, the value taken verbatim) with mode 0600. The content travels on the command's
stdin and the file is created under ``umask 077``, so the secret is never on a command line and
never readable by others, not even for a moment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from perflab.transport.base import Transport, env_lines

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TIMEOUT_S = 30.0
# write PATH: stdin → PATH with mode 0600 (through a temporary name, then renamed over).
_WRITE = 'umask 077 && cat > "$1.part" && chmod 600 "$1.part" && mv -f -- "$1.part" "$1"'


def env_file_text(values: Mapping[str, str]) -> str:
    """``NAME=value`` lines; ValueError for a name that is not a variable or a multi-line value."""
    for name, value in values.items():
        if not _NAME.match(name):
            raise ValueError(f"{name!r} is not a valid environment variable name")
        if any(ch in value for ch in "\r\n\0"):
            raise ValueError(f"the value of {name} spans several lines; an env file holds one line each")
    return env_lines(values)


def write_env_file(transport: Transport, path: str, values: Mapping[str, str]) -> str:
    """Write ``values`` to ``path`` on the host (mode 0600, parent must exist); returns the path."""
    transport.run(
        ["sh", "-c", _WRITE, "perflab-private", path],
        timeout=_TIMEOUT_S,
        stdin=env_file_text(values),
        check=True,
    )
    return path
