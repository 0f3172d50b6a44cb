"""Engine environment that would run other code (``PYTHONPATH`` with a sitecustomize, ``LD_PRELOAD``,
``PERL5OPT``, …) is refused unless hosts.yaml allows that variable for the host: on the command line,
the Launch page, study specs, ``submit_run`` and, whatever stored the run, in the runner before it
launches anything. Runs go to a simulated local host whose engine is a real Python process."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.cli import main
from perflab.engines import EngineConfig
from perflab.env_policy import EnvNotAllowed, hijack_reason
from perflab.inventory import Inventory, InventoryError, load_inventory
from perflab.runner.profile_spec import parse_profile
from perflab.study.coordinator import create_study
from perflab.study.spec import StudySpecError, parse_spec
from perflab.views.launch import queue_run
from tests.fixtures.runs import SimHostFactory, free_port_block, perflab_env, write_hosts_file
from tests.security.conftest import run_to_end

STUDY = """\
name: hijack
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm}}
tuning_profile: short
stages:
  - name: Env
    candidates: [{{set: {{env: {{PERL5OPT: "-Mwarnings"}}}}}}]
"""


@pytest.fixture
def payload(tmp_path: Path) -> tuple[Path, Path]:
    """A directory whose sitecustomize.py leaves a marker file: code any Python with it on
    PYTHONPATH runs at start-up."""
    directory = tmp_path / "payload"
    directory.mkdir()
    marker = tmp_path / "hijacked"
    (directory / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return directory, marker


@pytest.mark.parametrize(
    "name", ["LD_PRELOAD", "LD_AUDIT", "PYTHONPATH", "PYTHONWARNINGS", "BROWSER", "PERL5OPT", "BASH_ENV",
             "ENV", "NODE_OPTIONS", "GCONV_PATH", "PYTHONSTARTUP", "RUBYOPT", "CUDA_INJECTION64_PATH"]
)  # fmt: skip
def test_hijacking_variables_are_recognised(name: str) -> None:
    assert hijack_reason(name)


@pytest.mark.parametrize("name", ["VLLM_LOGGING_LEVEL", "NCCL_DEBUG", "OMP_NUM_THREADS", "HF_HUB_OFFLINE"])
def test_ordinary_engine_variables_pass(name: str) -> None:
    assert hijack_reason(name) is None


def test_run_command_refuses_pythonpath_and_nothing_runs(
    runs_db: Engine,
    sim_host: SimHostFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    payload: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    directory, marker = payload
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [sim_host("local-a", kind="local")])
    for name, value in perflab_env(runs_db, hosts_file).items():
        monkeypatch.setenv(name, value)

    code = main(
        ["run", "--host", "local-a", "--engine", "vllm", "--model", "Qwen/Qwen3-8B",
         "--port", str(free_port_block(1)), "--env", f"PYTHONPATH={directory}", "--profile", "short:n=2"]
    )  # fmt: skip

    err = capsys.readouterr().err
    assert code == 2
    assert "PYTHONPATH is refused" in err and "allow_env: [PYTHONPATH]" in err and "'local-a'" in err
    assert not marker.exists()
    with new_session(runs_db) as session:
        assert crud.list_runs(session).rows == []


def test_the_runner_refuses_a_stored_run_before_launching(
    runs_db: Engine, sim_host: SimHostFactory, payload: tuple[Path, Path]
) -> None:
    directory, marker = payload
    host = sim_host("local-b", kind="local")
    config = EngineConfig(
        engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1), env={"PYTHONPATH": str(directory)}
    )
    # Stored without the host's entry (as a study's runs are): the runner checks again.
    run = run_to_end(runs_db, host, config, [parse_profile("short:n=2")])

    assert run.status == "failed" and run.failure_class == "invalid_config"
    assert "PYTHONPATH is refused" in (run.failure_message or "")
    assert run.launching_at is not None and run.serve_commands in (None, [])
    assert not marker.exists()


def test_a_variable_the_host_allows_reaches_the_engine(
    runs_db: Engine, sim_host: SimHostFactory, payload: tuple[Path, Path]
) -> None:
    directory, marker = payload
    host = sim_host("local-c", kind="local", allow_env=("PYTHONPATH",))
    config = EngineConfig(
        engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1), env={"PYTHONPATH": str(directory)}
    )
    run = run_to_end(runs_db, host, config, [parse_profile("short:n=2")], check_host=True)

    assert run.status == "done", run.failure_message
    assert marker.read_text() == "ran"


def test_launch_page_and_submit_refuse_ld_preload(runs_db: Engine, sim_host: SimHostFactory) -> None:
    host = sim_host("local-d", kind="local")
    config = EngineConfig(engine="sglang", model="Qwen/Qwen3-8B", env={"LD_PRELOAD": "/tmp/evil.so"})
    with new_session(runs_db) as session, pytest.raises(EnvNotAllowed, match="LD_PRELOAD is refused"):
        queue_run(session, host=host, config=config, profiles=[parse_profile("short:n=2")])
    with new_session(runs_db) as session:
        assert crud.list_runs(session).rows == []


def test_study_creation_names_the_variable_and_host(runs_db: Engine, sim_host: SimHostFactory) -> None:
    host = sim_host("local-e", kind="local")
    spec = parse_spec(STUDY.format(host=host.name), name="hijack.yaml")
    with pytest.raises(StudySpecError, match="PERL5OPT is refused.*'local-e'"):
        create_study(runs_db, spec, inventory=Inventory(path=Path("h.yaml"), hosts=(host,)))
    allowed = host.model_copy(update={"allow_env": ("PERL5OPT",)})
    create_study(runs_db, spec, inventory=Inventory(path=Path("h.yaml"), hosts=(allowed,)))


def test_allow_env_is_validated_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  - name: a\n    transport: local\n    allow_env: [LD_PRELOAD, 'not a name']\n")
    with pytest.raises(InventoryError, match=r"hosts.yaml:4: host 'a' field 'allow_env'.*'not a name'"):
        load_inventory(path)
    path.write_text("hosts:\n  - name: a\n    transport: local\n    allow_env: [LD_PRELOAD]\n")
    assert load_inventory(path).get("a").allow_env == ("LD_PRELOAD",)
