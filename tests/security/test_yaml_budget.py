"""YAML a user gives is read within a budget: an alias bomb, deep nesting, self-referring aliases and
oversized files are refused with ``file:line`` before anything expands them, in the study spec
parser (CLI and Studies page upload), the Studies form's stages and hosts.yaml."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from perflab import safe_yaml
from perflab.inventory import InventoryError, load_inventory
from perflab.study.spec import StudySpecError, parse_spec
from perflab.study.views import spec_from_upload
from tests.fixtures.study_data import form_spec

REPO = Path(__file__).resolve().parents[2]
MEMORY_CAP = 768 * 1024 * 1024


def _nested_anchors(indent: str, levels: int = 9) -> str:
    """Anchors that each repeat the previous one nine times: 9**levels values from a few lines."""
    lines = [f"{indent}a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{indent}a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


BOMB_SPEC = (
    "name: bomb\n"
    "model: m\n"
    "hosts: [local-sim]\n"
    "baseline:\n"
    "  engine: vllm\n"
    "  speculative_config:\n"
    "    method: ngram\n"
    "    num_speculative_tokens: 2\n"
    "    prompt_lookup_max: 4\n"
    "    extra:\n" + _nested_anchors("      ") + "stages:\n"
    "  - name: Engine\n"
    "    dimension: engine\n"
    "    candidates: [sglang]\n"
)


def test_the_alias_bomb_spec_is_refused_quickly_in_little_memory() -> None:
    assert len(BOMB_SPEC) < 1500
    tracemalloc.start()
    try:
        with pytest.raises(StudySpecError) as caught:
            parse_spec(BOMB_SPEC, name="bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (problem,) = caught.value.problems
    assert problem.startswith("bomb.yaml:")
    assert "not read: aliases expand the document to more than 100000 values" in problem
    assert peak < 100 * 1024 * 1024
    # the Studies page's upload goes through the same parser
    with pytest.raises(StudySpecError, match=r"^up.yaml:\d+: not read: aliases expand"):
        spec_from_upload("up.yaml", BOMB_SPEC.encode())


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def test_study_create_refuses_the_bomb_with_one_line_under_a_memory_cap(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.yaml"
    spec.write_text(BOMB_SPEC)
    database = tmp_path / "perflab.db"
    result = subprocess.run(
        [sys.executable, "-m", "perflab", "study", "--url", f"sqlite:///{database}"]
        + ["create", "--spec", str(spec)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=_cap_memory,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert f"{spec}:" in result.stderr and "not read: aliases expand" in result.stderr


def test_the_studies_form_stages_are_read_within_the_budget() -> None:
    stages = "- name: Flags\n  candidates:\n    - label: x\n      set:\n        env:\n" + _nested_anchors(
        "          "
    )
    with pytest.raises(StudySpecError, match=r"stages:\d+: not read: aliases expand"):
        form_spec(model="m", validation_profiles=["short"], stages_yaml=stages)


def test_hosts_yaml_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  - name: a\n    kind: local\n    env:\n" + _nested_anchors("      "))
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    (problem,) = caught.value.problems
    assert problem.startswith("hosts.yaml:") and "not read: aliases expand" in problem


@pytest.mark.parametrize(
    ("text", "line", "why"),
    [
        ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", 1, "nested more than 64 levels deep"),
        ("a: &a\n  - *a\n", 1, "an alias refers to a node that contains it"),
        ("x: &x " + "[" * 40 + "]" * 40 + "\ny: " + "[" * 40 + "*x" + "]" * 40 + "\n", 2, "levels deep"),
        ("- 1\n" * 100_001, 100_000, "more than 100000 values"),
        ("k: " + "v" * (safe_yaml.MAX_BYTES + 1) + "\n", None, "bytes is more than perflab reads"),
    ],
    ids=["deep", "self-alias", "deep-through-alias", "many-values", "too-many-bytes"],
)
def test_documents_over_budget_are_refused_with_their_line(text: str, line: int | None, why: str) -> None:
    with pytest.raises(StudySpecError) as caught:
        parse_spec(text, name="spec.yaml")
    (problem,) = caught.value.problems
    where = f"spec.yaml:{line}: " if line is not None else "spec.yaml: "
    assert problem.startswith(where + "not read: ") and why in problem


def test_ordinary_anchors_and_merge_keys_still_read() -> None:
    document = safe_yaml.load("base: &b {tp: 2, ep: 1}\nmore: {<<: *b, ep: 2}\nsame: *b\n")
    assert document.data == {
        "base": {"tp": 2, "ep": 1},
        "more": {"tp": 2, "ep": 2},
        "same": {"tp": 2, "ep": 1},
    }
    assert document.root is not None and document.root.start_mark.line == 0
    assert safe_yaml.load("").data is None
