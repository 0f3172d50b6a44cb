"""A study spec is checked when it is created against what its hosts have installed (their last probe):
the installed vLLM's own answer where an earlier check recorded it, its recorded registries, else
perflab's table of that release (the newest for a host never probed), each refusal naming the version.

The engine's words come from answers recorded from vLLM 0.33.0's own parser (tests/data/engine_check),
replayed by a real local host's ``vllm`` (tests/engines/replay.py) to the real preflight, which records
them where the app keeps its checks; the hosts' probes are stored host rows, as a probe stores them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab import settings
from perflab.engines import get_adapter
from perflab.engines.preflight import default_cache, preflight
from perflab.inventory import HostConfig
from perflab.study.coordinator import create_study
from perflab.study.spec import StudySpecError, parse_spec
from tests.engines.replay import recorded_argv, replaying_host
from tests.fixtures.runs import inventory_of

SPEC = """
name: speculative methods
model: Qwen/Qwen3-8B
hosts: [HOST]
baseline: {engine: vllm, speculative_config: {method: medusa, num_speculative_tokens: 1}}
tuning_profile: {name: tune, title: Chat, dataset: random, input_len: 128, output_len: 64, num_prompts: 50,
  max_concurrency: 4}
stages:
  - name: Speculative decoding
    candidates:
      - label: MLP speculator
        set: {speculative_config: {method: mlp_speculator, num_speculative_tokens: 2}}
      - label: Step5 MTP
        set: {speculative_config: {method: step5_mtp, num_speculative_tokens: 2}}
"""


@pytest.fixture(autouse=True)
def app_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The app's work directory, where checks of hosts' engines are recorded."""
    monkeypatch.setenv(settings.APP_WORKDIR_ENV, str(tmp_path / "app"))
    return tmp_path / "app"


def _probed(engine: Engine, host: str, engines: dict[str, str]) -> None:
    probe = {
        "host": host, "python": {"command": "python3"}, "engines": engines,
        "probed_at": "2026-11-27T00:00:00Z", "duration_s": 1.0, "accelerators": [],
    }  # fmt: skip
    with new_session(engine) as session:
        crud.record_probe(session, name=host, reachable=True, probe=probe)


def _create(engine: Engine, host: str) -> list[str]:
    """The problems creating the spec on ``host`` meets (empty: the study was stored)."""
    inventory = inventory_of(HostConfig(name=host, transport="local"))
    try:
        create_study(engine, parse_spec(SPEC.replace("HOST", host)), inventory=inventory)
    except StudySpecError as error:
        return error.problems
    return []


def _studies(engine: Engine) -> int:
    with new_session(engine) as session:
        return len(crud.list_studies(session))


def test_medusa_on_a_host_with_vllm_0_33_is_refused_when_created_in_vllms_own_words(
    db_engine: Engine, tmp_path: Path
) -> None:
    spec = parse_spec(SPEC.replace("HOST", "gpu-033"))
    baseline = spec.baseline_config(None, 1)  # as creating the study builds it
    vllm = get_adapter("vllm")
    argv = vllm.leaving_words_to_engine().serve_argv(baseline, port=8000, engine_version="0.33.0")
    assert " ".join(argv[len(vllm.program) :]) == recorded_argv("vllm-0.33.0-medusa.txt")
    # the Launch page's check of the baseline on that host, answered by vLLM 0.33.0's parser
    checked = preflight(
        replaying_host(tmp_path, "vllm-0.33.0-medusa.txt"),
        vllm,
        baseline,
        engine_version="0.33.0",
        cache=default_cache(),
    )
    assert checked.asked and not checked.ok
    _probed(db_engine, "gpu-033", {"vllm": "0.33.0"})

    baseline_problem, mlp_problem = _create(db_engine, "gpu-033")

    assert baseline_problem.startswith(
        "baseline on host 'gpu-033': vLLM 0.33.0 refuses --speculative-config 'medusa': "
        "Input should be 'ngram', 'draft_model',"
    )
    assert "'step5_mtp'" in baseline_problem and "'medusa'," not in baseline_problem
    # no answer recorded for this argv: the registries the same vLLM listed judge it
    assert mlp_problem.startswith(
        "stages[0].candidates[0] (MLP speculator) on host 'gpu-033': vLLM: speculative_config "
        "'mlp_speculator' is not one of vLLM 0.33.0's values (accepted: ngram, draft_model,"
    )
    assert _studies(db_engine) == 0


def _refused(problems: list[str]) -> list[str]:
    return [problem.partition(" (accepted: ")[0] for problem in problems]


def test_without_a_recorded_check_the_table_of_the_probed_release_judges_naming_it(db_engine: Engine) -> None:
    _probed(db_engine, "gpu-033", {"vllm": "0.33.0"})
    _probed(db_engine, "gpu-032", {"vllm": "0.32.0"})

    on_033 = _create(db_engine, "gpu-033")
    on_032 = _create(db_engine, "gpu-032")
    never_probed = _create(db_engine, "gpu-new")

    assert _refused(on_033) == [
        "baseline on host 'gpu-033': vLLM: speculative_config 'medusa' is not one of vLLM 0.33.0's values",
        "stages[0].candidates[0] (MLP speculator) on host 'gpu-033': vLLM: speculative_config "
        "'mlp_speculator' is not one of vLLM 0.33.0's values",
    ]
    # vLLM 0.32.0 still has medusa and mlp_speculator, not step5_mtp
    assert _refused(on_032) == [
        "stages[0].candidates[1] (Step5 MTP) on host 'gpu-032': vLLM: speculative_config 'step5_mtp' "
        "is not one of vLLM 0.32.0's values",
    ]
    # a host never probed: the newest table's
    assert _refused(never_probed) == [problem.replace("gpu-033", "gpu-new") for problem in _refused(on_033)]
    assert _studies(db_engine) == 0


def test_a_spec_its_hosts_accept_is_created(db_engine: Engine) -> None:
    _probed(db_engine, "gpu-032", {"vllm": "0.32.0"})
    accepted = SPEC.replace("HOST", "gpu-032").rpartition("      - label: Step5 MTP")[0]
    inventory = inventory_of(HostConfig(name="gpu-032", transport="local"))

    study = create_study(db_engine, parse_spec(accepted), inventory=inventory)

    assert study.status == "queued" and _studies(db_engine) == 1
