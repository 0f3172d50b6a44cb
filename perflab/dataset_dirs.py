"""Which files of the app machine a benchmark profile may send to a host.

A profile names its dataset by a stored dataset (id, content hash or name: what was uploaded on the
Datasets page) or by a file. A file is sent to the host, so only files under the dataset directories
the administrator declared may be named — ``PERFLAB_DATASET_DIRS`` (the app's setting, for every host),
the hub cache where :mod:`perflab.hub` keeps what it fetched (``PERFLAB_HUB_CACHE``) and a host's
``dataset_dirs:`` in hosts.yaml — never ``/etc/passwd`` or the app's SSH keys. A relative
name is looked up in each declared directory in turn; an absolute one (or ``~/…``) must lie inside one
once symbolic links are resolved. :func:`declared_dataset_dirs` is the one list of those directories.
"""

from __future__ import annotations

import os
from pathlib import Path

from perflab.inventory import HostConfig
from perflab.settings import dataset_dirs, hub_cache_dir


class DatasetNotDeclared(ValueError):
    """A profile names a file that is not under a declared dataset directory (or does not exist)."""


def declared_dataset_dirs(host: HostConfig | None) -> list[Path]:
    """The directories whose files may be sent to ``host`` (resolved): the app's
    ``PERFLAB_DATASET_DIRS``, the hub cache (``PERFLAB_HUB_CACHE``: files fetched from the Hugging Face
    hub), then the host's ``dataset_dirs``."""
    host_dirs = (Path(path).expanduser() for path in (host.dataset_dirs if host else ()))
    declared = [*dataset_dirs(), hub_cache_dir(), *host_dirs]
    return [Path(os.path.realpath(directory)) for directory in declared]


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def declared_dataset_file(ref: str, host: HostConfig | None) -> Path:
    """The file ``ref`` names under a declared dataset directory (symbolic links resolved);
    :class:`DatasetNotDeclared` says why there is none. Nothing is read or sent."""
    directories = declared_dataset_dirs(host)
    named = Path(ref).expanduser()
    candidates = [named] if named.is_absolute() else [directory / named for directory in directories]
    for candidate in candidates:
        resolved = Path(os.path.realpath(candidate))
        if any(_inside(resolved, directory) for directory in directories) and resolved.is_file():
            return resolved
    where = ", ".join(str(directory) for directory in directories) or "none declared"
    raise DatasetNotDeclared(
        f"dataset '{ref}' is neither a stored dataset (id, content hash or name), a hub file "
        f"(hf://datasets/<owner>/<name>/<path>) nor a file under a declared dataset directory ({where}); "
        "upload it on the Datasets page, or have the administrator declare its directory in "
        "PERFLAB_DATASET_DIRS or the host's dataset_dirs"
    )
