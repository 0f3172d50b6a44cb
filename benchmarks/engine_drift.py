"""What a vLLM release changed against perflab's fallback tables and recorded help, read from its wheel.

Given ``--wheel PATH`` (or ``--version X``: ``pip download --no-deps vllm==X`` into a temporary
directory; the wheel is never installed) and optionally the release to compare with (``--base-wheel`` /
``--base-version``), reads the releases' own source and lists:

- **values**: the registries perflab keeps as offline fallback (:mod:`perflab.engines.vocabulary`) —
  ``AttentionBackendEnum`` members, ``CacheDType``, ``QuantizationMethods``, ``SpeculativeMethod`` (with
  the Literals it nests), ``PerformanceMode`` — added and removed;
- **spellings**: whether ``vllm/utils/argparse_utils.py`` pairs ``--enable-X`` with ``--disable-X``
  (EnableDisableAction) and hides ``--no-enable-X`` from help;
- **flags**: ``EngineArgs`` fields (each a ``--field-name`` flag) new or gone against the base release
  (else against the recorded help, ``tests/data/help/vllm-0.32.0.txt``), recorded flags the source no
  longer names, and perflab's own spellings the release does not parse;
- **metric names** and **failure strings** perflab reads (the adapter's Prometheus gauges, the literal
  text of its vLLM-specific failure signatures) that the release's source no longer contains.

Run from the repository root:
``python benchmarks/engine_drift.py --version 0.33.0 --base-version 0.32.0``. Prints the list.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflab.engines import vocabulary  # noqa: E402
from perflab.engines.failures import COMMON_SIGNATURES  # noqa: E402
from perflab.engines.helptext import parse_help  # noqa: E402
from perflab.engines.vllm import VllmAdapter  # noqa: E402

RECORDED_HELP = Path(__file__).resolve().parents[1] / "tests" / "data" / "help" / "vllm-0.32.0.txt"
SOURCES = {
    "attention_backend": "vllm/v1/attention/backends/registry.py",
    "kv_cache_dtype": "vllm/config/cache.py",
    "quantization": "vllm/model_executor/layers/quantization/__init__.py",
    "speculative_config": "vllm/config/speculative.py",
    "performance_mode": "vllm/config/vllm.py",
}
LITERALS = {
    "kv_cache_dtype": "CacheDType",
    "quantization": "QuantizationMethods",
    "speculative_config": "SpeculativeMethod",
    "performance_mode": "PerformanceMode",
}
TABLES = {
    "attention_backend": vocabulary.VLLM_ATTENTION_BACKENDS,
    "kv_cache_dtype": vocabulary.VLLM_KV_CACHE_DTYPES,
    "quantization": vocabulary.VLLM_QUANTIZATION_METHODS,
    "speculative_config": vocabulary.VLLM_SPECULATIVE_METHODS,
    "performance_mode": vocabulary.VLLM_PERFORMANCE_MODES,
}


def _assignments(tree: ast.Module) -> dict[str, ast.expr]:
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def literal_strings(source: str, name: str) -> list[str]:
    """The strings of module-level ``name = Literal[...]``, following nested Literal names."""
    names = _assignments(ast.parse(source))

    def walk(node: ast.expr) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.Name) and node.id in names:
            return walk(names[node.id])
        if isinstance(node, ast.Subscript):
            inner = node.slice
            items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            return [value for item in items for value in walk(item)]
        return []

    return walk(names[name]) if name in names else []


def enum_members(source: str, cls: str) -> list[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [
                target.id
                for item in node.body
                if isinstance(item, ast.Assign)
                for target in item.targets
                if isinstance(target, ast.Name) and target.id.isupper() and target.id != "CUSTOM"
            ]
    return []


def engine_args_flags(source: str) -> set[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == "EngineArgs":
            return {
                "--" + item.target.id.replace("_", "-")
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and not item.target.id.startswith("_")
            }
    return set()


def literal_text(pattern: str) -> str:
    """The longest run of plain text in a failure signature's regex (what its source must contain)."""
    runs = re.split(r"\\.|[\[\](){}?*+|^$]|\.\*|\\[sdwS]", pattern)
    return max((run.strip() for run in runs), key=len, default="")


def download(version: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"vllm=={version}", "-d", str(into)],
        check=True,
    )
    return next(into.glob("vllm-*.whl"))


@dataclass
class Facts:
    """What one wheel's source says."""

    version: str
    values: dict[str, list[str]]
    engine_flags: set[str]
    paired: bool
    text: str


def read_facts(wheel: Path) -> Facts:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())

        def read(path: str) -> str:
            return archive.read(path).decode("utf-8", "replace") if path in names else ""

        info = next((name.split("/")[0] for name in names if name.endswith(".dist-info/METADATA")), "vllm-?")
        values = {}
        for knob, path in SOURCES.items():
            source = read(path)
            values[knob] = (
                enum_members(source, "AttentionBackendEnum")
                if knob == "attention_backend"
                else literal_strings(source, LITERALS[knob])
            )
        return Facts(
            version=info.removeprefix("vllm-").removesuffix(".dist-info"),
            values=values,
            engine_flags=engine_args_flags(read("vllm/engine/arg_utils.py")),
            paired="EnableDisableAction" in read("vllm/utils/argparse_utils.py"),
            text="\n".join(read(name) for name in sorted(names) if name.endswith(".py")),
        )


def _difference(new: list[str], old: Sequence[str]) -> str:
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    return f"+{len(added)} {added}  -{len(removed)} {removed}"


def report(facts: Facts, base: Facts | None = None) -> list[str]:
    against = f"vLLM {base.version}'s wheel and " if base else ""
    lines = [
        f"vLLM {facts.version} against {against}perflab's fallback tables (vLLM {vocabulary.VLLM_VERSION})"
    ]
    for knob, values in facts.values.items():
        if not values:
            lines.append(f"  values {knob}: not found in {SOURCES[knob]} (moved?)")
            continue
        if base is not None:
            lines.append(f"  values {knob} vs {base.version}: {_difference(values, base.values[knob])}")
        lines.append(f"  values {knob} vs perflab's table: {_difference(values, TABLES[knob])}")
    if facts.paired and not (base and base.paired):
        lines.append(
            "  spellings: --enable-X pairs with --disable-X (EnableDisableAction); "
            "--no-enable-X still parses, hidden from help"
        )
    recorded = {
        flag for flag in parse_help(RECORDED_HELP.read_text(encoding="utf-8")) if flag.startswith("--")
    }
    if base is not None:
        lines.append(f"  flags new in EngineArgs: {sorted(facts.engine_flags - base.engine_flags)}")
        lines.append(f"  flags gone from EngineArgs: {sorted(base.engine_flags - facts.engine_flags)}")
    else:
        lines.append(
            f"  flags in EngineArgs, not in the recorded help: {sorted(facts.engine_flags - recorded)}"
        )
    gone = sorted(
        flag
        for flag in recorded
        if not flag.startswith("--no-")
        and flag[2:].replace("-", "_") not in facts.text
        and flag not in facts.text
    )
    lines.append(f"  flags of the recorded help the source no longer names: {gone}")
    ours = sorted(
        name
        for flag in VllmAdapter.flags.flags
        for name in flag.spellings()
        if name.startswith("--")
        and name not in recorded
        and name not in facts.engine_flags
        and name not in facts.text
        and not (facts.paired and name.startswith("--disable-") and "--enable-" + name[10:] in recorded)
    )
    lines.append(f"  perflab spellings this release does not parse: {ours}")
    metrics = VllmAdapter.metrics
    assert metrics is not None
    for metric in (metrics.running, metrics.waiting, metrics.kv_cache_usage):
        lines.append(
            f"  metric {metric}: {'present' if metric.split(':', 1)[1] in facts.text else 'NOT FOUND'}"
        )
    for signature in VllmAdapter.signatures[len(COMMON_SIGNATURES) :]:
        fragment = literal_text(signature.pattern.pattern)
        found = "present" if fragment in facts.text else "NOT FOUND"
        lines.append(f"  failure string {fragment!r} ({signature.failure_class}): {found}")
    return lines


def _wheel(path: Path | None, version: str | None, folder: Path) -> Path | None:
    if path is not None:
        return path
    return download(version, folder) if version else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--wheel", type=Path, help="a vllm wheel file")
    source.add_argument("--version", help="a vllm version to download (pip download --no-deps)")
    base = parser.add_mutually_exclusive_group()
    base.add_argument("--base-wheel", type=Path, help="the release to compare with (a wheel file)")
    base.add_argument("--base-version", help="the release to compare with (downloaded)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="engine-drift-") as folder:
        new = _wheel(args.wheel, args.version, Path(folder) / "new")
        old = _wheel(args.base_wheel, args.base_version, Path(folder) / "base")
        assert new is not None
        print("\n".join(report(read_facts(new), read_facts(old) if old else None)))


if __name__ == "__main__":
    main()
