"""Names that look like flags: a model, served-model or dataset name starting with ``-`` would be read
as an engine or bench flag (``vllm serve --trust-remote-code``, ``-h``), so every path refuses it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from perflab.cli import main
from perflab.engines import EngineConfig, get_adapter
from perflab.runner.profile_spec import parse_profile
from perflab.study.spec import StudySpecError, parse_spec

SPEC = """\
name: smuggle
model: {model}
hosts: [a]
baseline: {{engine: vllm, served_model_name: {served}}}
tuning_profile: short
stages: [{{name: s, dimension: prefix_cache, candidates: [true]}}]
"""


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "--trust-remote-code"},
        {"model": "-h"},
        {"model": "Qwen/Qwen3-8B", "served_model_name": "--trust-remote-code"},
        {"model": "Qwen/Qwen3-8B", "speculative_config": {"method": "eagle", "model": "--trust-remote-code"}},
    ],
)
def test_engine_config_refuses_flag_like_names(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="starts with '-'"):
        EngineConfig(engine="vllm", **fields)


def test_the_model_stays_the_positional_argument_of_vllm_serve() -> None:
    argv = get_adapter("vllm").serve_argv(EngineConfig(engine="vllm", model="org/m-1"), port=8000)
    assert argv[:3] == ["vllm", "serve", "org/m-1"]
    assert "--trust-remote-code" not in argv


@pytest.mark.parametrize(
    ("flag", "value"), [("--model", "--trust-remote-code"), ("--model", "-h"), ("--served-model-name", "-h")]
)
def test_run_command_refuses_a_flag_as_a_name(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--host", "local", "--engine", "vllm", "--profile", "short"]
    if flag != "--model":
        args += ["--model", "Qwen/Qwen3-8B"]
    code = main([*args, f"{flag}={value}"])

    err = capsys.readouterr().err
    assert code == 2
    assert f"'{value}' starts with '-'" in err and "Traceback" not in err


def test_profile_refuses_a_flag_as_dataset() -> None:
    with pytest.raises(ValueError, match="dataset_ref '--help' starts with '-'"):
        parse_profile("custom:path=--help,n=5")


@pytest.mark.parametrize(
    ("model", "served", "line"),
    [("--trust-remote-code", "ok", 2), ("Qwen/Qwen3-8B", "--trust-remote-code", 4)],
)
def test_study_spec_refuses_a_flag_as_a_name(model: str, served: str, line: int) -> None:
    with pytest.raises(StudySpecError) as raised:
        parse_spec(SPEC.format(model=model, served=served), name="s.yaml")
    assert f"s.yaml:{line}:" in str(raised.value)
    assert "'--trust-remote-code' starts with '-'" in str(raised.value)
