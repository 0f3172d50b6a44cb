"""How problems in a file or form a user wrote are worded: ``file:line`` of a place in a YAML document,
a YAML syntax error, pydantic's validation errors in plain words, and problems ordered by line.

hosts.yaml (:mod:`perflab.inventory`) and study specs (:mod:`perflab.study.spec`) report every problem
at once this way, e.g. ``hosts.yaml:12: host 'gpu-a' field 'port': must be an integer``.
"""

from __future__ import annotations

from typing import Any

import yaml

from perflab.safe_yaml import YamlBudgetError

_TYPE_MESSAGES = {
    "int_parsing": "must be an integer",
    "int_type": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "missing": "is required",
    "extra_forbidden": "is not a known field",
}
_BOUNDS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}


def yaml_location(label: str, root: yaml.Node | None, loc: tuple[Any, ...]) -> str:
    """``label:line`` of the deepest node of ``loc`` (mapping keys and list indexes) that exists in the
    document ``root`` (``yaml.compose``'s node tree)."""
    node: yaml.Node | None = root
    line = root.start_mark.line + 1 if root is not None else 1
    for key in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == str(key):
                    child = value_node
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            child = node.value[key]
        if child is None:
            break
        node = child
        line = child.start_mark.line + 1
    return f"{label}:{line}"


def syntax_problem(label: str, error: yaml.YAMLError, formats: str = "YAML") -> str:
    """``label:line: not valid YAML: why`` for a parse error (``formats`` names what was expected), or
    ``label:line: not read: why`` for a document over :mod:`perflab.safe_yaml`'s budget."""
    mark = getattr(error, "problem_mark", None)
    where = f"{label}:{mark.line + 1}" if mark is not None else label
    verdict = "not read" if isinstance(error, YamlBudgetError) else f"not valid {formats}"
    return f"{where}: {verdict}: {getattr(error, 'problem', None) or error}"


def line_of(problem: str) -> int:
    """The line number of a ``file:line: ...`` problem (0 if it has none), to sort problems by line."""
    parts = problem.split(":", 2)
    return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else 0


def plain_message(error: Any) -> str:
    """One of pydantic's errors (an item of ``ValidationError.errors()``) in plain words: ``must be an
    integer``, ``must be >= 1``, ``is not a known field``, or the validator's own message."""
    kind = error.get("type", "")
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    context = error.get("ctx") or {}
    if kind == "literal_error":
        return f"must be one of {context.get('expected', '')}"
    if kind in _BOUNDS:
        limit = next(iter(context.values()), "")
        return f"must be {_BOUNDS[kind]} {limit}"
    if kind == "string_too_short":
        return "must not be empty"
    message = str(error.get("msg", "is invalid"))
    return message.removeprefix("Value error, ")
