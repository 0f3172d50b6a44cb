"""Writing a file so that no reader ever sees part of it, whoever else writes it at the same time.

:func:`write_atomically` writes to a temporary file of a name no other writer can hold (``mkstemp`` in
the target's own directory, so the rename stays on one file system), flushes it to disk and renames it
over the target with ``os.replace``, which POSIX makes atomic: a reader opens the old whole file or the
new whole file. Several processes or threads writing one path at once each rename their own complete
file; the last rename wins and none fails. A write that fails removes its temporary file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` (its directory created) with ``data`` in one step (see the module)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
