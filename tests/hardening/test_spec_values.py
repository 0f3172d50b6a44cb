"""Values that used to pass creation and fail later are refused at the edge, naming the file and line
(or the field): NaN and infinite numbers in a study spec, whole numbers of thousands of digits in a
spec or hosts.yaml, NUL characters in text (a study name PostgreSQL cannot store), duplicate YAML
keys, a spec or hosts file that is a device or a FIFO."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.cli import main
from perflab.study.spec import StudySpecError, load_spec, spec_from_data

HOSTS = "hosts:\n  - name: local-sim\n    transport: local\n    simulate: {accelerator: H100, count: 8}\n"
SPEC = """\
name: values
model: Qwen/Qwen3-8B
hosts: [local-sim]
baseline: {engine: vllm}
stages: [{name: Engine, dimension: engine, candidates: [sglang]}]
"""
HUGE = "9" * 5001


@pytest.mark.parametrize(
    ("extra", "refusal"),
    [
        ("slos: {mean_tpot_ms: .nan}\n", "study.yaml:6: slos.mean_tpot_ms: Input should be a finite number"),
        ("slos: {p99_ttft_ms: .inf}\n", "study.yaml:6: slos.p99_ttft_ms: Input should be a finite number"),
        (
            "stages: [{name: S, search: {knobs: {max_num_seqs: [64, 128]}, budget: {gpu_hours: .inf}}}]\n",
            "study.yaml:6: not read: the key 'stages' appears twice in one mapping",
        ),
        (
            f"gpus: {HUGE}\n",
            "study.yaml:6: not read: the whole number 99999999999999999999… (5001 characters)",
        ),
        ("gpus: 4096\n", "study.yaml:6: gpus: must be <= 1024"),
        ('goal: "tuned\\0"\n', "study.yaml:6: not read: a text holds a NUL character"),
        ("model: other\n", "study.yaml:6: not read: the key 'model' appears twice in one mapping"),
    ],
)
def test_study_create_refuses_the_value_with_its_line(
    runs_db: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, refusal: str
) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(HOSTS)
    spec = tmp_path / "study.yaml"
    spec.write_text(SPEC + extra)
    url = runs_db.url.render_as_string(hide_password=False)

    code = main(["study", "--url", url, "create", "--spec", str(spec), "--hosts", str(hosts)])

    err = capsys.readouterr().err
    assert code == 2, err
    assert f"error: {spec.parent}/{refusal}" in err and "Traceback" not in err
    with new_session(runs_db) as session:
        assert crud.list_studies(session) == []


def test_a_search_budget_of_infinite_gpu_hours_is_refused(tmp_path: Path) -> None:
    spec = SPEC.replace(
        "stages: [{name: Engine, dimension: engine, candidates: [sglang]}]",
        "stages: [{name: S, search: {knobs: {max_num_seqs: [64, 128]}, budget: {gpu_hours: .inf}}}]",
    )
    path = tmp_path / "study.yaml"
    path.write_text(spec)
    with pytest.raises(StudySpecError) as refused:
        load_spec(path)
    assert refused.value.problems == [
        f"{path}:5: stages[0].search.budget.gpu_hours: Input should be a finite number"
    ]


def test_a_nul_in_a_form_s_study_name_is_refused_before_any_database_sees_it() -> None:
    data = {
        "name": "tuned\0",
        "model": "Qwen/Qwen3-8B",
        "hosts": ["local-sim"],
        "baseline": {"engine": "vllm"},
        "stages": [{"name": "Engine", "dimension": "engine", "candidates": ["sglang"]}],
    }
    with pytest.raises(StudySpecError) as refused:
        spec_from_data(data)
    assert refused.value.problems == [
        "study spec: name: text holds a NUL character, which perflab does not store"
    ]
    data["name"] = "tuned"
    data["stages"][0]["name"] = "E\0"  # type: ignore[index]
    with pytest.raises(StudySpecError, match=r"stages\[0\]\.name: text holds a NUL character"):
        spec_from_data(data)


@pytest.mark.parametrize(
    ("host_fields", "refusal"),
    [
        (
            f"    port: {HUGE}\n",
            "hosts.yaml:4: not read: the whole number 99999999999999999999… (5001 characters)",
        ),
        ("    simulate: {accelerator: H100, count: 8, time_scale: .inf}\n", "hosts.yaml:4:"),
        (
            "    workdir: /tmp/a\n    workdir: /tmp/b\n",
            "hosts.yaml:5: not read: the key 'workdir' appears twice",
        ),
    ],
)
def test_hosts_yaml_refuses_the_value_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host_fields: str, refusal: str
) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts:\n  - name: gpu-a\n    transport: local\n" + host_fields)

    code = main(["hosts", "--file", str(hosts), "list"])

    err = capsys.readouterr().err
    assert code == 2 and err.startswith(refusal) and "Traceback" not in err, err
    if "time_scale" in host_fields:
        assert "Input should be a finite number" in err


@pytest.mark.timeout(30)
def test_spec_and_hosts_files_that_are_devices_or_fifos_are_refused_at_once(
    runs_db: Engine, unreadable_inputs: list[tuple[Path, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    url = runs_db.url.render_as_string(hide_password=False)
    for path, kind in unreadable_inputs:
        assert main(["study", "--url", url, "create", "--spec", str(path), "--hosts", str(path)]) == 2
        assert f"{path}: cannot read: is {kind}, not a regular file" in capsys.readouterr().err
        assert main(["hosts", "--file", str(path), "list"]) == 2
        assert capsys.readouterr().err == f"{path}: cannot read: is {kind}, not a regular file\n"
