"""Which models, systems, backends and table versions an AIConfigurator installation covers.

AIConfigurator ships its support matrix as data: ``aiconfigurator_core/systems/support_matrix/
<system>.csv``, one row per (hub id, system, backend, table version, mode) with a ``PASS``/``FAIL``
status from its own test runs. perflab reads it (bounded, with the ``csv`` module) and predicts a
model only where that matrix says ``PASS`` for the aggregated mode, with the newest such table version,
and only when the installation also ships the model's configuration
(``aiconfigurator_core/model_configs/<org>--<name>_config.json``), so AIConfigurator never fetches a
model's configuration from the hub.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from perflab.predict.case import NotCovered
from perflab.predict.installation import Installation

MAX_MATRIX_BYTES = 16 * 1024 * 1024
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
_SYSTEM = re.compile(r"^[a-z0-9_]{1,40}$")


def _version_key(version: str) -> tuple[tuple[int, str], ...]:
    """``0.5.16`` after ``0.5.14``, ``1.3.0rc23`` after ``1.3.0rc20``."""
    return tuple(
        (int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"[.]|(?<=\d)(?=rc)", version)
    )


def matrix_rows(installation: Installation, system: str) -> list[dict[str, str]]:
    """The support matrix rows of ``system`` (empty when the installation has none for it)."""
    if not _SYSTEM.match(system):
        return []
    path = installation.core_dir / "systems" / "support_matrix" / f"{system}.csv"
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_MATRIX_BYTES + 1)
    except OSError:
        return []
    if len(raw) > MAX_MATRIX_BYTES:
        return []
    return list(csv.DictReader(io.StringIO(raw.decode(errors="replace"))))


def model_config_path(installation: Installation, model: str) -> Path:
    org, name = model.split("/", 1)
    return installation.core_dir / "model_configs" / f"{org}--{name}_config.json"


def tables_version(installation: Installation, model: str, system: str, backend: str) -> str:
    """The newest table version whose aggregated estimate of ``model`` on ``system`` with ``backend``
    passed AIConfigurator's own tests; raises :class:`NotCovered` (one line) when there is none."""
    if not _HUB_ID.match(model):
        raise NotCovered(f"{model!r} is not a hub id AIConfigurator lists")
    rows = matrix_rows(installation, system)
    if not rows:
        raise NotCovered(f"{installation.source} has no tables for {system}")
    backend_rows = [row for row in rows if row.get("Backend") == backend]
    if not backend_rows:
        raise NotCovered(f"{installation.source} has no {backend} tables for {system}")
    passed = [
        str(row.get("Version"))
        for row in backend_rows
        if row.get("HuggingFaceID") == model and row.get("Mode") == "agg" and row.get("Status") == "PASS"
    ]
    if not passed or not model_config_path(installation, model).is_file():
        raise NotCovered(f"{installation.source} does not list {model} for {backend} on {system}")
    return max(passed, key=_version_key)
