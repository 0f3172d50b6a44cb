"""Files on the app's machine that a host of hosts.yaml names, checked without connecting anywhere.

A host's SSH key (``auth.key_file``) and the files of its secrets (``secrets: {NAME: {file: …}}``) are
read on the app's machine when perflab connects; a missing or unreadable one would only show when a
probe or a run tries to use it. :func:`host_file_problems`
finds it from the config alone, so ``hosts list`` and the Hosts page name it up front:
``host 'gpu-a' field 'auth.key_file': /root/.ssh/gpu-a does not exist``.
:func:`inventory_file_problems` adds the ``hosts.yaml:LINE:`` of the field, as hosts.yaml's own
problems read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import yaml

from perflab import safe_yaml
from perflab.inventory import HostConfig, Inventory
from perflab.problems import yaml_location

KEY_FILE_FIELD = "auth.key_file"


@dataclass(frozen=True)
class HostFileProblem:
    """A file a host's ``field`` names that cannot be used, and why (``/path does not exist``)."""

    host: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"host '{self.host}' field '{self.field}': {self.reason}"


def _unreadable_reason(path: str) -> str | None:
    """Why the file at ``path`` (``~`` expanded) cannot be read on this machine, or None if it can."""
    expanded = os.path.expanduser(path)
    if not os.path.exists(expanded):
        return f"{expanded} does not exist"
    if not os.path.isfile(expanded):
        return f"{expanded} is not a file"
    try:
        with open(expanded, "rb"):
            pass
    except OSError as exc:
        return f"{expanded} cannot be read: {exc.strerror or exc}"
    return None


def _named_files(host: HostConfig) -> list[tuple[str, str]]:
    """``(field, path)`` of every file ``host`` names on this machine: its SSH key, its secrets' files."""
    named = [(KEY_FILE_FIELD, host.auth.key_file)] if host.transport == "ssh" and host.auth.key_file else []
    named += [(f"secrets.{name}.file", source.file) for name, source in host.secrets.items() if source.file]
    return named


def host_file_problems(host: HostConfig) -> list[HostFileProblem]:
    """The files ``host`` names on this machine that are missing or unreadable."""
    return [
        HostFileProblem(host.name, field, reason)
        for field, path in _named_files(host)
        if (reason := _unreadable_reason(path)) is not None
    ]


def _document(inventory: Inventory) -> yaml.Node | None:
    """The YAML node tree of the inventory's file (None when it cannot be read again)."""
    try:
        return safe_yaml.compose(inventory.path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def inventory_file_problems(inventory: Inventory) -> dict[str, list[str]]:
    """Host name → its problems as ``hosts.yaml:LINE: host 'x' field 'auth.key_file': why``, for every
    host of ``inventory`` that has one (in file order)."""
    found = {
        index: problems for index, host in enumerate(inventory) if (problems := host_file_problems(host))
    }
    if not found:
        return {}
    label = inventory.path.name
    root = _document(inventory)
    return {
        inventory.hosts[index].name: [
            f"{_where(label, root, ('hosts', index, *problem.field.split('.')))}: {problem}"
            for problem in problems
        ]
        for index, problems in found.items()
    }


def _where(label: str, root: yaml.Node | None, loc: tuple[object, ...]) -> str:
    return yaml_location(label, root, loc) if root is not None else label
