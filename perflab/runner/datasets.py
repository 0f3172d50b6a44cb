"""The dataset file a profile needs, found in the database (uploaded datasets), on the app machine or
on the Hugging Face hub.

A ShareGPT or custom profile names its dataset by ``dataset_ref``: a stored dataset's id, content hash
or name, a file under a dataset directory declared for the host (:mod:`perflab.dataset_dirs`), or a
hub file (the ShareGPT dump's file name, which is also what a ShareGPT profile without a ref means, or
``hf://datasets/<owner>/<name>/<path>``), fetched into the hub cache (:mod:`perflab.hub`, a declared
location); with the hub unreachable the ShareGPT dump falls back to perflab's ShareGPT-format sample,
and the note saying so goes with the result. The file is handed to the remote benchmark, which
uploads it to the host once per content; nothing else of the app's machine is ever sent.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePath

from sqlalchemy.engine import Engine

from db import crud
from db.models import Dataset
from db.session import new_session
from perflab.dataset_dirs import DatasetNotDeclared, declared_dataset_file
from perflab.hub.catalog import hub_file, resolve_hub_dataset
from perflab.hub.client import HubError, Progress
from perflab.inventory import HostConfig
from perflab.profiles import SHAREGPT_FILE, BenchmarkProfile
from perflab.runner.errors import RunFailed
from perflab.settings import hub_cache_dir

DATASET_FLAG = "--dataset-path"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _stored_id(engine: Engine, ref: str) -> int | None:
    if ref.isdigit():
        return int(ref)
    with new_session(engine) as session:
        for dataset in crud.list_datasets(session):
            if dataset.name == ref or (_SHA256.match(ref) and dataset.content_hash == ref):
                return dataset.id
    return None


def _stored(engine: Engine, ref: str) -> tuple[Dataset, bytes] | None:
    """The stored dataset ``ref`` names, with its content."""
    dataset_id = _stored_id(engine, ref)
    if dataset_id is None:
        return None
    with new_session(engine) as session:
        dataset = crud.get_dataset(session, dataset_id=dataset_id)
        return (dataset, dataset.content) if dataset is not None else None


def _hub_dataset(
    profile: BenchmarkProfile, ref: str, notes: list[str] | None, on_download: Progress | None
) -> Path | None:
    try:
        file = hub_file(ref)
        if file is None:
            return None
        resolved = resolve_hub_dataset(file, cache_dir=hub_cache_dir(), on_progress=on_download)
    except HubError as problem:
        raise RunFailed("dataset_missing", f"profile '{profile.name}': {problem}") from None
    if resolved.note and notes is not None:
        notes.append(resolved.note)
    return resolved.path


def _is_hub_ref(ref: str) -> bool:
    try:
        return hub_file(ref) is not None
    except HubError:
        return False


def dataset_problem(engine: Engine, profile: BenchmarkProfile, host: HostConfig | None) -> str | None:
    """Why ``profile``'s dataset cannot be sent to ``host`` (neither stored, nor a declared file, nor a
    hub file), or None; checked when a run is stored and before it starts, before anything is sent."""
    if not profile.needs_dataset_file:
        return None
    ref = profile.dataset_ref or SHAREGPT_FILE
    if _stored_id(engine, ref) is not None or _is_hub_ref(ref):
        return None
    try:
        declared_dataset_file(ref, host)
    except DatasetNotDeclared as exc:
        return f"profile '{profile.name}': {exc}"
    return None


def dataset_files(
    engine: Engine,
    profile: BenchmarkProfile,
    directory: Path,
    host: HostConfig,
    notes: list[str] | None = None,
    on_download: Progress | None = None,
) -> dict[str, Path]:
    """``{"--dataset-path": local file}`` for ``profile`` (empty for generated datasets): a stored dataset
    written into ``directory``, a file under a dataset directory declared for ``host``, or a hub file
    (``on_download(bytes, total)`` while it is fetched); a remark on the file (the sample standing in
    for the ShareGPT dump) is appended to ``notes``."""
    if not profile.needs_dataset_file:
        return {}
    ref = profile.dataset_ref or SHAREGPT_FILE
    stored = _stored(engine, ref)
    if stored is not None:
        # The benchmark tells a dataset's format by its file suffix (imported here: the module loads
        # the bench's dataset readers, which the runner needs only for a stored dataset).
        from perflab.datasets import dataset_file_name

        dataset, content = stored
        file_name = PurePath(dataset_file_name(dataset.name, dataset.format))
        stem = _UNSAFE.sub("_", file_name.stem) or "dataset"
        path = directory / f"{stem}-{dataset.id}{file_name.suffix}"
        path.write_bytes(content)
        return {DATASET_FLAG: path}
    try:
        return {DATASET_FLAG: declared_dataset_file(ref, host)}
    except DatasetNotDeclared as exc:
        hub = _hub_dataset(profile, ref, notes, on_download)
        if hub is not None:
            return {DATASET_FLAG: hub}
        raise RunFailed("dataset_missing", f"profile '{profile.name}': {exc}") from None
