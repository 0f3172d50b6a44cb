"""perflab's import graph, read from the source's syntax trees: no module reaches itself again, and each
package imports only what its floor in docs/architecture.md (section Layers) allows.

Every ``import`` counts wherever it stands: at module level, inside a function (a deferred import is
still a dependency, only a later one) and under ``if TYPE_CHECKING:`` (the modules still need each
other to be read, and the guard is one edit away from a real import). ``from a import b`` counts as an
import of the module ``a.b`` when there is one, else of ``a``. A circle is a strongly connected part of
the graph; the failure names each one with the import lines that close it.

A package is a top-level module (``perflab/auth.py``) or a top-level package (``perflab/study/``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "perflab"
ARCHITECTURE = REPO / "docs" / "architecture.md"
_LAYER_LINE = re.compile(r"^(\d+)\s+(\w+/\S*)\s*(.*)$")


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


def package_of(module: str, root: Path) -> str:
    """``perflab.study.plan`` → ``perflab/study/``, ``perflab.auth`` → ``perflab/auth.py``."""
    parts = module.split(".")
    if len(parts) == 1:
        return f"{parts[0]}/__init__.py"
    top = f"{parts[0]}/{parts[1]}"
    return f"{top}/" if (root / top).is_dir() else f"{top}.py"


@dataclass(frozen=True)
class Floor:
    """A package's line in the Layers section: its floor and the packages of that floor it imports."""

    level: int
    beside: frozenset[str]


def documented_floors(text: str) -> dict[str, Floor]:
    """The Layers section's lines, by package (``perflab/engines/``)."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    floors: dict[str, Floor] = {}
    for line in section.splitlines():
        match = _LAYER_LINE.match(line)
        if match:
            level, package, beside = match.groups()
            names = {name.strip() for name in beside.split(",") if name.strip()}
            floors[package] = Floor(int(level), frozenset(names))
    return floors


def _short(package: str) -> str:
    """``perflab/engines/`` → ``engines`` (as a Layers line names the packages beside it)."""
    return package.split("/", 1)[1].removesuffix("/").removesuffix(".py")


def layer_breaches(arrows: list[Import], floors: dict[str, Floor], root: Path) -> list[str]:
    """Each import between packages that goes up a floor, or sideways to a package its line does not
    name, and each package without a line."""
    problems: set[str] = set()
    for arrow in arrows:
        importer, imported = package_of(arrow.importer, root), package_of(arrow.imported, root)
        for package in (importer, imported):
            if package not in floors:
                problems.add(f"{package} has no line in the Layers section of docs/architecture.md")
        if importer == imported or importer not in floors or imported not in floors:
            continue
        mine, theirs = floors[importer], floors[imported]
        if theirs.level > mine.level or (theirs.level == mine.level and _short(imported) not in mine.beside):
            where = f"{arrow.importer.replace('.', '/')}.py:{arrow.line}"
            problems.add(
                f"{where} imports {arrow.imported}: {importer} (floor {mine.level}) may not import "
                f"{imported} (floor {theirs.level})"
            )
    return sorted(problems)


def test_each_package_imports_only_what_its_floor_allows() -> None:
    floors = documented_floors(ARCHITECTURE.read_text(encoding="utf-8"))
    levels = {_short(package): floor.level for package, floor in floors.items()}
    for package, floor in floors.items():
        for name in floor.beside:
            assert levels.get(name) == floor.level, f"{package} names {name}, not a package of its floor"
    breaches = layer_breaches(imports_of(module_files(REPO, PACKAGE)), floors, REPO)
    assert not breaches, "\n".join(breaches)


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


def test_an_import_up_a_floor_or_to_an_unnamed_neighbour_is_a_breach(tmp_path: Path) -> None:
    modules = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "from pkg import top\n",
            "pkg/mid/__init__.py": "",
            "pkg/mid/a.py": "from pkg import low, side\n",
            "pkg/side.py": "from pkg.mid import a\n",
            "pkg/top.py": "",
        },
    )
    floors = documented_floors(
        "\n## Layers\n```\n0 pkg/__init__.py\n0 pkg/low.py\n1 pkg/mid/ side\n1 pkg/side.py\n"
        "2 pkg/top.py\n```\n## Next\n0 pkg/never.py\n"
    )
    assert set(floors) == {"pkg/__init__.py", "pkg/low.py", "pkg/mid/", "pkg/side.py", "pkg/top.py"}
    assert layer_breaches(imports_of(modules), floors, tmp_path) == [
        "pkg/low.py:1 imports pkg.top: pkg/low.py (floor 0) may not import pkg/top.py (floor 2)",
        "pkg/side.py:1 imports pkg.mid.a: pkg/side.py (floor 1) may not import pkg/mid/ (floor 1)",
    ]
