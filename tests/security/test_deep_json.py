"""JSON a user types or uploads outside imports, nested deeper than the decoder goes: the Launch form's
and ``perflab run``'s speculative config, and uploaded datasets (JSON lines and ShareGPT arrays) give a
one-line error instead of a ``RecursionError``."""

from __future__ import annotations

import dataclasses

import pytest

from perflab.cli import main
from perflab.datasets import DatasetUploadError, parse_upload
from perflab.views import launch

DEEP = "[" * 100_000 + "]" * 100_000


def test_the_launch_form_refuses_a_deep_speculative_config() -> None:
    form = dataclasses.replace(
        launch.ConfigForm(engine="vllm", model="m"), speculative_config='{"a": ' + DEEP + "}"
    )
    with pytest.raises(launch.LaunchInputError) as caught:
        launch.build_config(form)
    message = str(caught.value)
    assert message.startswith('speculative config: expected a JSON object, got \'{"a": [[[')
    assert message.endswith("(200007 characters) (nested too deeply)") and "\n" not in message


def test_perflab_run_refuses_a_deep_speculative_config(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--host", "local-sim", "--engine", "vllm", "--model", "m", "--profile", "short"]
    argv += ["--speculative-config", DEEP]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --speculative-config '[[[[") and err.endswith(": nested too deeply\n")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "deep.jsonl",
            '{"prompt": "hi"}\n{"prompt": ' + DEEP + "}\n",
            "deep.jsonl:2: invalid JSON: nested too deeply",
        ),
        (
            "deep.json",
            '[{"conversations": []},\n' + DEEP + "]",
            "deep.json:2: invalid JSON: nested too deeply",
        ),
    ],
)
def test_an_uploaded_dataset_nested_too_deeply_is_one_line(name: str, content: str, message: str) -> None:
    with pytest.raises(DatasetUploadError) as caught:
        parse_upload(name, content.encode())
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
