"""What a vLLM release changed against perflab's fallback tables and recorded help, read from its wheel.

Given ``--wheel PATH`` (or ``--version X``: ``pip download --no-deps vllm==X`` into a temporary
directory; the wheel is never installed), reads the release's own source and lists:

- **values**: the registries perflab keeps as offline fallback (:mod:`perflab.engines.vocabulary`) —
  ``AttentionBackendEnum`` members, ``CacheDType``, ``QuantizationMethods``, ``SpeculativeMethod`` (with
  the Literals it nests), ``PerformanceMode`` — added and removed;
- **spellings**: whether ``vllm/utils/argparse_utils.py`` pairs ``--enable-X`` with ``--disable-X``
  (EnableDisableAction) and hides ``--no-enable-X`` from help;
- **flags**: ``EngineArgs`` fields (each a ``--field-name`` flag) new against the recorded help
  (``tests/data/help/vllm-0.32.0.txt``), recorded flags the source no longer names, and perflab's own
  spellings found nowhere;
- **metric names** and **failure strings** perflab reads (the adapter's Prometheus gauges, the literal
  text of its vLLM-specific failure signatures) that the release's source no longer contains.

Run from the repository root: ``python benchmarks/engine_drift.py --version 0.33.0``. Prints the list.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
import zipfile
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
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"vllm=={version}", "-d", str(into)], check=True
    )
    return next(into.glob("vllm-*.whl"))


def report(wheel: Path) -> list[str]:
    lines: list[str] = []
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())

        def read(path: str) -> str:
            return archive.read(path).decode("utf-8", "replace") if path in names else ""

        info = next((name.split("/")[0] for name in names if name.endswith(".dist-info/METADATA")), "vllm-?")
        version = info.removeprefix("vllm-").removesuffix(".dist-info")
        lines.append(f"vLLM {version} ({wheel.name}) against perflab's tables (vLLM {vocabulary.VLLM_VERSION})")
        for knob, path in SOURCES.items():
            source = read(path)
            values = (
                enum_members(source, "AttentionBackendEnum")
                if knob == "attention_backend"
                else literal_strings(source, LITERALS[knob])
            )
            if not values:
                lines.append(f"  values {knob}: not found in {path} (moved?)")
                continue
            added = sorted(set(values) - set(TABLES[knob]))
            removed = sorted(set(TABLES[knob]) - set(values))
            lines.append(f"  values {knob}: +{len(added)} {added}  -{len(removed)} {removed}")
        paired = "EnableDisableAction" in read("vllm/utils/argparse_utils.py")
        if paired:
            lines.append(
                "  spellings: --enable-X pairs with --disable-X (EnableDisableAction); --no-enable-X still parses, "
                "hidden from help"
            )
        engine_flags = engine_args_flags(read("vllm/engine/arg_utils.py"))
        text = "\n".join(read(name) for name in sorted(names) if name.endswith(".py"))
        recorded = {flag for flag in parse_help(RECORDED_HELP.read_text(encoding="utf-8")) if flag.startswith("--")}
        gone = sorted(
            flag
            for flag in recorded
            if not flag.startswith("--no-") and flag[2:].replace("-", "_") not in text and flag not in text
        )
        lines.append(f"  flags new in EngineArgs (not in the recorded help): {sorted(engine_flags - recorded)}")
        lines.append(f"  flags of the recorded help the source no longer names: {gone}")
        ours = sorted(
            name
            for flag in VllmAdapter.flags.flags
            for name in flag.spellings()
            if name.startswith("--") and name not in recorded and name not in engine_flags and name not in text
            and not (paired and name.startswith("--disable-") and "--enable-" + name[10:] in recorded)
        )
        lines.append(f"  perflab spellings found neither in the recorded help nor in the source: {ours}")
        metrics = VllmAdapter.metrics
        assert metrics is not None
        for metric in (metrics.running, metrics.waiting, metrics.kv_cache_usage):
            bare = metric.split(":", 1)[1]
            lines.append(f"  metric {metric}: {'present' if bare in text else 'NOT FOUND'}")
        for signature in VllmAdapter.signatures[len(COMMON_SIGNATURES) :]:
            fragment = literal_text(signature.pattern.pattern)
            if fragment and fragment not in text:
                lines.append(f"  failure string no longer in the source: {fragment!r} ({signature.failure_class})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--wheel", type=Path, help="a vllm wheel file")
    source.add_argument("--version", help="a vllm version to download (pip download --no-deps)")
    args = parser.parse_args()
    if args.wheel is not None:
        print("\n".join(report(args.wheel)))
        return
    with tempfile.TemporaryDirectory(prefix="engine-drift-") as folder:
        print("\n".join(report(download(args.version, Path(folder)))))


if __name__ == "__main__":
    main()
