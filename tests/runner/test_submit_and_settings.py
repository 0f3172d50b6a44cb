"""Storing runs, waiting for them, resolving datasets, and the settings read from the environment."""

from __future__ import annotations

import math
import socket
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab import settings
from perflab.engines import EngineConfig, InvalidKnobValue
from perflab.hub.sample import SAMPLE_PATH
from perflab.inventory import HostConfig, default_inventory_path
from perflab.profiles import PRESETS, BenchmarkProfile
from perflab.runner import RunFailed, submit_run, wait_for_runs
from perflab.runner.datasets import dataset_files
from perflab.runner.profile_spec import parse_profile


def test_submitted_runs_keep_profiles_that_reload_exactly(database_url: str, db_engine: Engine) -> None:
    config = EngineConfig(engine="vllm", model="m", tp=2)
    queued = submit_run(db_engine, host_name="h", config=config, profiles=[PRESETS["short"]], label="x")
    claimed = submit_run(db_engine, host_name="h", config=config, profiles=[PRESETS["short"]], worker_id="w")

    with new_session(db_engine) as session:
        stored = crud.require_run(session, run_id=queued.id)
        held = crud.require_run(session, run_id=claimed.id)
    assert (stored.status, stored.worker_id, stored.label) == ("queued", None, "x")
    assert (held.status, held.worker_id) == ("launching", "w") and held.launching_at is not None
    assert stored.profiles[0]["request_rate"] == "Infinity"
    reloaded = BenchmarkProfile.model_validate(stored.profiles[0])
    assert reloaded == PRESETS["short"] and math.isinf(reloaded.request_rate)


def test_values_are_judged_by_the_table_of_the_hosts_probed_vllm(runs_db: Engine) -> None:
    """A host whose probe found vLLM 0.32.0 is judged by perflab's 0.32.0 table (no octave_k3v4 yet), one
    never probed by the newest table (0.33.0: octave_k3v4, no medusa); a version no table follows is left
    to the engine's own check before the launch."""
    with new_session(runs_db) as session:
        for name, version in (("gpu-032", "0.32.0"), ("gpu-034", "0.34.0")):
            crud.record_probe(
                session,
                name=name,
                reachable=True,
                probe={
                    "host": name, "python": {"command": "python3"}, "engines": {"vllm": version},
                    "probed_at": "2026-11-26T00:00:00Z", "duration_s": 1.0, "accelerators": [],
                },
            )  # fmt: skip
    octave = EngineConfig(engine="vllm", model="m", kv_cache_dtype="octave_k3v4")
    medusa = EngineConfig(
        engine="vllm", model="m", speculative_config={"method": "medusa", "num_speculative_tokens": 1}
    )

    with pytest.raises(InvalidKnobValue, match="'octave_k3v4' is not one of vLLM 0.32.0's values"):
        submit_run(runs_db, host_name="gpu-032", config=octave, profiles=[PRESETS["short"]])
    assert submit_run(runs_db, host_name="gpu-032", config=medusa, profiles=[PRESETS["short"]]).id
    assert submit_run(runs_db, host_name="never-probed", config=octave, profiles=[PRESETS["short"]]).id
    with pytest.raises(InvalidKnobValue, match="'medusa' is not one of vLLM 0.33.0's values"):
        submit_run(runs_db, host_name="never-probed", config=medusa, profiles=[PRESETS["short"]])
    assert submit_run(runs_db, host_name="gpu-034", config=medusa, profiles=[PRESETS["short"]]).id


def test_a_config_the_engine_refuses_is_not_stored(runs_db: Engine) -> None:
    config = EngineConfig(engine="vllm", model="m", extra_args=("--port=1",))
    with pytest.raises(InvalidKnobValue, match="repeats --port"):
        submit_run(runs_db, host_name="h", config=config, profiles=[PRESETS["short"]])
    with pytest.raises(ValueError, match="at least one benchmark profile"):
        submit_run(runs_db, host_name="h", config=EngineConfig(engine="vllm", model="m"), profiles=[])
    with new_session(runs_db) as session:
        assert crud.list_runs(session).total == 0


def test_waiting_for_runs_returns_once_all_finish(runs_db: Engine) -> None:
    config = EngineConfig(engine="vllm", model="m")
    runs = [submit_run(runs_db, host_name="h", config=config, profiles=[PRESETS["short"]]) for _ in range(2)]
    with new_session(runs_db) as session:
        crud.request_cancel(session, run_id=runs[0].id)
    with pytest.raises(TimeoutError, match=f"{runs[1].id} \\(queued\\)"):
        wait_for_runs(runs_db, [run.id for run in runs], timeout_s=0.2, poll_s=0.05)
    with new_session(runs_db) as session:
        crud.request_cancel(session, run_id=runs[1].id)
    finished = wait_for_runs(runs_db, [run.id for run in runs], timeout_s=5, poll_s=0.05)
    assert [run.status for run in finished] == ["cancelled", "cancelled"]


def test_datasets_are_found_by_id_hash_name_or_declared_path(runs_db: Engine, tmp_path: Path) -> None:
    content = b'{"prompt": "hi"}\n'
    with new_session(runs_db) as session:
        stored = crud.create_dataset(session, name="team prompts.jsonl", content=content, format="jsonl")
    declared = tmp_path / "declared"
    declared.mkdir()
    local = declared / "local.txt"
    local.write_text("hello\n")
    host = HostConfig(name="h", transport="local", dataset_dirs=(str(declared),))
    for ref in (str(stored.id), stored.content_hash, "team prompts.jsonl"):
        (path,) = dataset_files(runs_db, parse_profile(f"custom:path={ref},n=1"), tmp_path, host).values()
        assert path.read_bytes() == content and path.suffix == ".jsonl"
    for ref in (str(local), "local.txt"):
        assert dataset_files(runs_db, parse_profile(f"custom:path={ref},n=1"), tmp_path, host) == {
            "--dataset-path": local
        }
    assert dataset_files(runs_db, PRESETS["short"], tmp_path, host) == {}
    with new_session(runs_db) as session:
        bare = crud.create_dataset(session, name="my-prompts", content=content + b"\n", format="jsonl")
    (path,) = dataset_files(runs_db, parse_profile("custom:path=my-prompts,n=1"), tmp_path, host).values()
    assert path.name == f"my-prompts-{bare.id}.jsonl"
    with pytest.raises(RunFailed, match="dataset 'nope.json' is neither a stored dataset"):
        dataset_files(runs_db, parse_profile("custom:path=nope.json,n=1"), tmp_path, host)


def test_sharegpt_without_a_reachable_hub_runs_on_the_labelled_sample(
    runs_db: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    monkeypatch.setenv("PERFLAB_HF_ENDPOINT", f"http://127.0.0.1:{closed}")
    monkeypatch.setenv("PERFLAB_HUB_CACHE", str(tmp_path / "hub"))
    host = HostConfig(name="h", transport="local")
    notes: list[str] = []
    assert dataset_files(runs_db, PRESETS["sharegpt"], tmp_path, host, notes) == {
        "--dataset-path": SAMPLE_PATH
    }
    (note,) = notes
    assert note.startswith("ShareGPT-format sample used instead of the ShareGPT dump (hf://datasets/")
    with pytest.raises(RunFailed, match="dataset_missing|cannot be reached"):
        dataset_files(runs_db, parse_profile("custom:path=hf://datasets/team/x/a.jsonl,n=1"), tmp_path, host)


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("PERFLAB_HOSTS", "PERFLAB_READY_TIMEOUT_S", "PERFLAB_APP_WORKER", "PERFLAB_WORKER_STALE_S"):
        monkeypatch.delenv(name, raising=False)
    assert default_inventory_path() == Path(__file__).resolve().parents[2] / "hosts.yaml"
    assert (
        settings.ready_timeout_s(simulated=False) == 1200 and settings.ready_timeout_s(simulated=True) == 300
    )
    assert settings.app_worker_enabled() and settings.worker_stale_s() == 60
    monkeypatch.setenv("PERFLAB_HOSTS", str(tmp_path / "mine.yaml"))
    monkeypatch.setenv("PERFLAB_READY_TIMEOUT_S", "90")
    monkeypatch.setenv("PERFLAB_APP_WORKER", "0")
    assert default_inventory_path() == tmp_path / "mine.yaml"
    assert settings.ready_timeout_s(simulated=False) == 90
    assert not settings.app_worker_enabled()
    monkeypatch.setenv("PERFLAB_WORKER_STALE_S", "soon")
    with pytest.raises(
        settings.SettingError, match="PERFLAB_WORKER_STALE_S='soon': expected a number of seconds"
    ):
        settings.worker_stale_s()
