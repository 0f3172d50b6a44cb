"""perflab's import graph, read from the source's syntax trees: no module reaches itself again.

Every ``import`` counts wherever it stands: at module level, inside a function (a deferred import is
still a dependency, only a later one) and under ``if TYPE_CHECKING:`` (the modules still need each
other to be read, and the guard is one edit away from a real import). ``from a import b`` counts as an
import of the module ``a.b`` when there is one, else of ``a``. A circle is a strongly connected part of
the graph; the failure names each one with the import lines that close it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "perflab"


@dataclass(frozen=True)
class Import:
    """One import statement's arrow: ``importer`` (at ``line``) needs ``imported``."""

    importer: str
    imported: str
    line: int


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name → source file, for every module of ``package`` under ``root``."""
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _known_module(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ``modules`` that importing ``name`` loads last (``a.b.Name`` → ``a.b``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.Import | ast.ImportFrom, module: str, modules: dict[str, Path]) -> set[str | None]:
    if isinstance(node, ast.Import):
        return {_known_module(alias.name, modules) for alias in node.names}
    source = node.module or ""
    if node.level:
        package = module.split(".") if modules[module].name == "__init__.py" else module.split(".")[:-1]
        source = ".".join([*package[: len(package) - node.level + 1], *filter(None, [node.module])])
    # ``from a import b``: the submodule a.b when there is one, else the module a.
    return {
        f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else _known_module(source, modules)
        for alias in node.names
    }


def imports_of(modules: dict[str, Path]) -> list[Import]:
    """Every arrow between two modules of ``modules``, one per importer, imported module and line."""
    found: set[Import] = set()
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found |= {
                    Import(module, target, node.lineno)
                    for target in _targets(node, module, modules)
                    if target is not None and target != module
                }
    return sorted(found, key=lambda arrow: (arrow.importer, arrow.line, arrow.imported))


def circles(arrows: list[Import]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan's algorithm), each sorted."""
    graph: dict[str, set[str]] = {}
    for arrow in arrows:
        graph.setdefault(arrow.importer, set()).add(arrow.imported)
        graph.setdefault(arrow.imported, set())
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative depth-first search: (node, its successors still to see).
        work = [(start, iter(sorted(graph[start])))]
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            successor = next(successors, None)
            if successor is not None:
                if successor not in order:
                    order[successor] = low[successor] = len(order)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                elif successor in on_stack:
                    low[node] = min(low[node], order[successor])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return sorted(groups)


def describe(group: list[str], arrows: list[Import]) -> str:
    """A circle and the import lines inside it."""
    members = set(group)
    lines = [
        f"    {arrow.importer.replace('.', '/')}.py:{arrow.line} imports {arrow.imported}"
        for arrow in arrows
        if arrow.importer in members and arrow.imported in members
    ]
    return "  " + " ↔ ".join(group) + "\n" + "\n".join(lines)


def test_perflab_has_no_import_circles() -> None:
    arrows = imports_of(module_files(REPO, PACKAGE))
    found = circles(arrows)
    assert not found, f"{len(found)} import circle(s) in {PACKAGE}/:\n" + "\n".join(
        describe(group, arrows) for group in found
    )


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return module_files(root, "pkg")


@pytest.mark.parametrize(
    "closing_import",
    [
        "from pkg.a import A\n",  # module level
        "def late():\n    from pkg.a import A\n",  # inside a function
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n",
        "from . import a\n",  # relative, naming the submodule
        "from .a import A\n",  # relative, naming a name of the submodule
        "import pkg.a\n",
    ],
)
def test_a_circle_is_found_whatever_the_form_of_its_import(tmp_path: Path, closing_import: str) -> None:
    modules = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.sub.b import B\nA = 1\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "import os\nfrom pkg import c\nB = 2\n",
            "pkg/c.py": closing_import,
        },
    )
    arrows = imports_of(modules)
    assert circles(arrows) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    assert "pkg/sub/b.py:2 imports pkg.c" in describe(circles(arrows)[0], arrows)


def test_imports_that_only_go_down_are_no_circle(tmp_path: Path) -> None:
    modules = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "import json\n",
            "pkg/mid.py": "from pkg import low\nfrom pkg.low import json\n",
            "pkg/top.py": "from pkg import low, mid\nimport pkg.mid\n",
        },
    )
    arrows = imports_of(modules)
    assert {(arrow.importer, arrow.imported) for arrow in arrows} == {
        ("pkg.mid", "pkg.low"),
        ("pkg.top", "pkg.low"),
        ("pkg.top", "pkg.mid"),
    }
    assert circles(arrows) == []
