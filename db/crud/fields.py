"""Checks shared by the crud functions for caller-supplied column values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlmodel import SQLModel


def check_columns(model: type[SQLModel], fields: Mapping[str, Any], *, forbidden: Iterable[str] = ()) -> None:
    """Raise ValueError naming any key of ``fields`` that is not a column of ``model`` or is forbidden."""
    columns = set(model.model_fields)
    blocked = set(forbidden)
    unknown = sorted(set(fields) - columns)
    if unknown:
        raise ValueError(f"{model.__name__} has no column(s): {', '.join(unknown)}")
    refused = sorted(set(fields) & blocked)
    if refused:
        raise ValueError(f"{model.__name__} column(s) {', '.join(refused)} cannot be set here")


def check_choice(name: str, value: Any, choices: Iterable[str]) -> None:
    """Raise ValueError unless ``value`` is one of ``choices``."""
    allowed = tuple(choices)
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
