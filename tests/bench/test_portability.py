"""The shipped bench stays Python 3.9 source and imports nothing from perflab outside itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "perflab"
BENCH_MODULES = sorted((ROOT / "bench").rglob("*.py"))
SHIPPED = BENCH_MODULES + [ROOT / "agent" / "entry.py"]


def imported_modules(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: str(path.relative_to(ROOT)))
def test_parses_as_python_39(path):
    ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 9))


@pytest.mark.parametrize("path", BENCH_MODULES, ids=lambda path: str(path.relative_to(ROOT)))
def test_bench_module_rules(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), "every module starts with a docstring"
    futures = [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.module == "__future__"]
    assert futures and any(alias.name == "annotations" for alias in futures[0].names)
    for module in imported_modules(tree):
        if module == "perflab" or module.startswith("perflab."):
            assert module in ("perflab", "perflab.bench") or module.startswith("perflab.bench."), module
    assert "tokenizers" not in {node.names[0].name for node in tree.body if isinstance(node, ast.Import)}
