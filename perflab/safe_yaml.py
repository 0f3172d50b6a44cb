"""YAML a user gives (hosts.yaml, study specs and their uploads, the Studies form's stages), read
within a budget.

PyYAML's ``safe_load`` runs no code, but an alias (``*name``) stands for its whole anchored node, so a
file of a few lines can describe a document of billions of nodes (an "alias bomb") that later copies
and serialisations expand, and deep nesting overflows the composer's recursion. Here a document is:

- at most :data:`MAX_BYTES` of text;
- at most :data:`MAX_DEPTH` collections deep, nesting that aliases add included;
- at most :data:`MAX_NODES` nodes once every alias is expanded;
- free of aliases that contain themselves;
- free of keys written twice in one mapping (YAML forbids them; PyYAML would keep the last silently);
  keys that mean the same value (``1`` and ``0x1``) are the same key, merged keys (``<<: *defaults``)
  may be overridden as usual;
- free of whole numbers that do not fit 64 bits (Python would refuse to read one of more than 4,300
  digits with a traceback; no field of perflab takes more than 64 bits);
- free of NUL characters in its text (``"\0"``, ``"\u0000"``), which PostgreSQL cannot store.

The text is first scanned as a stream of parser events (no recursion, no tree), then composed into
the node tree (aliases are shared nodes there, not copies), whose expanded size is measured with each
shared node counted once per use but walked once. A document over budget raises
:class:`YamlBudgetError`, a :class:`yaml.MarkedYAMLError` whose mark gives the line, so callers that
word YAML errors by ``file:line`` (:func:`perflab.problems.syntax_problem`) need nothing more.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import yaml

from perflab.bench.user_files import read_capped

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 100_000

_Loader = yaml.SafeLoader
INT_TAG = "tag:yaml.org,2002:int"
MERGE_TAG = "tag:yaml.org,2002:merge"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Characters of an integer scalar read at all: 64 bits in binary with a sign and a few underscores.
MAX_INT_CHARS = 80


class YamlBudgetError(yaml.MarkedYAMLError):
    """The document is larger, deeper or more aliased than perflab reads."""

    def __init__(self, problem: str, mark: yaml.Mark | None = None) -> None:
        super().__init__(problem=problem, problem_mark=mark)


@dataclass(frozen=True)
class Document:
    """A parsed YAML document: its Python ``data`` and its node tree ``root`` (for ``file:line``)."""

    data: Any
    root: yaml.Node | None


def read_file(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of the YAML file at ``path``: a regular file of at most :data:`MAX_BYTES`, read
    no further (:class:`~perflab.bench.user_files.UserFileError` for a FIFO, a device, a larger file;
    :class:`OSError`, :class:`UnicodeDecodeError` as usual)."""
    return read_capped(os.fspath(path), MAX_BYTES).decode("utf-8")


def compose(text: str) -> yaml.Node | None:
    """The node tree of one YAML document (None for an empty one) once it fits the budget."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_BYTES:
        raise YamlBudgetError(f"{size} bytes is more than perflab reads ({MAX_BYTES} bytes at most)")
    _scan(text)
    root = yaml.compose(text, Loader=_Loader)
    if root is not None:
        _Expansion().measure(root, depth=1)
    return root


def load(text: str) -> Document:
    """Parse one YAML (or JSON) document within the budget; :class:`yaml.YAMLError` when it cannot."""
    root = compose(text)
    if root is None:
        return Document(None, None)
    loader = _Loader("")
    try:
        return Document(loader.construct_document(root), root)
    finally:
        loader.dispose()


def _scan(text: str) -> None:
    """Refuse too deep nesting and too many nodes from the event stream, before any tree is built."""
    depth = 0
    nodes = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > MAX_NODES:
                raise YamlBudgetError(f"more than {MAX_NODES} values", event.start_mark)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlBudgetError(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Expansion:
    """Sizes of the document as its aliases expand it: nodes counted per use, each node walked once."""

    def __init__(self) -> None:
        self._sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, height)
        self._open: set[int] = set()
        self._constructor = yaml.constructor.SafeConstructor()

    def measure(self, node: yaml.Node, depth: int, used_at: yaml.Mark | None = None) -> tuple[int, int]:
        """(expanded node count, height) of ``node`` placed at ``depth`` inside the collection starting
        at ``used_at`` (where an alias to it is reported); raises when over budget."""
        key = id(node)
        where = used_at or node.start_mark
        if key in self._open:
            raise YamlBudgetError("an alias refers to a node that contains it", where)
        known = self._sizes.get(key)
        if known is None:
            known = self._walk(node, depth)
            self._sizes[key] = known
        count, height = known
        if depth - 1 + height > MAX_DEPTH:
            raise YamlBudgetError(f"aliases nest the document more than {MAX_DEPTH} levels deep", where)
        return count, height

    def _walk(self, node: yaml.Node, depth: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise YamlBudgetError(
                f"aliases nest the document more than {MAX_DEPTH} levels deep", node.start_mark
            )
        if isinstance(node, yaml.ScalarNode):
            self._check_scalar(node)
            return 1, 1
        if isinstance(node, yaml.MappingNode):
            self._check_keys(node)
        children: list[yaml.Node] = (
            [part for pair in node.value for part in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
        )
        key = id(node)
        self._open.add(key)
        count, height = 1, 1
        for child in children:
            child_count, child_height = self.measure(child, depth + 1, node.start_mark)
            count += child_count
            height = max(height, child_height + 1)
            if count > MAX_NODES:
                raise YamlBudgetError(
                    f"aliases expand the document to more than {MAX_NODES} values", node.start_mark
                )
        self._open.discard(key)
        return count, height

    def _check_scalar(self, node: yaml.ScalarNode) -> None:
        """Refuse a NUL character and a whole number that does not fit 64 bits."""
        if "\0" in node.value:
            raise YamlBudgetError(
                "a text holds a NUL character, which perflab does not store", node.start_mark
            )
        if node.tag != INT_TAG:
            return
        digits = node.value.replace("_", "")
        if (
            len(digits) > MAX_INT_CHARS
            or not INT64_MIN <= self._constructor.construct_yaml_int(node) <= INT64_MAX
        ):
            raise YamlBudgetError(
                f"the whole number {digits[:20]}{'…' if len(digits) > 20 else ''} ({len(digits)} characters) "
                "does not fit 64 bits",
                node.start_mark,
            )

    def _check_keys(self, node: yaml.MappingNode) -> None:
        """Refuse a key written twice in one mapping (merge keys aside)."""
        seen: set[tuple[str, object]] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == MERGE_TAG:
                continue
            self._check_scalar(key_node)
            value = self._constructor.construct_object(key_node)
            key = (type(value).__name__, value)
            if key in seen:
                raise YamlBudgetError(
                    f"the key {key_node.value!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
