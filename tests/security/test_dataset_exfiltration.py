"""A benchmark profile may send the host only a stored dataset or a file under a declared dataset
directory (``PERFLAB_DATASET_DIRS``, a host's ``dataset_dirs``): ``custom:path=/etc/passwd`` — from the
command line, a study spec or the Studies page's upload — is refused before anything is sent, and so
are ``..`` and symbolic links out of a declared directory. Hosts are simulated, over the real sshd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.cli import main
from perflab.dataset_dirs import DatasetNotDeclared, declared_dataset_file
from perflab.engines import EngineConfig
from perflab.inventory import HostConfig, Inventory
from perflab.runner.evidence import MIN_COMPLETED
from perflab.runner.profile_spec import parse_profile
from perflab.study.coordinator import create_study
from perflab.study.spec import StudySpecError, parse_spec
from perflab.study.views import spec_from_upload
from tests.fixtures.leftovers import processes_under
from tests.fixtures.runs import SimHostFactory, free_port_block, perflab_env, sized_count, write_hosts_file
from tests.security.conftest import run_to_end

SECRET_LINE = "perflab-test-private-line"
STUDY = """\
name: exfiltrate
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm}}
tuning_profile: {{preset: sharegpt, dataset_ref: {path}, num_prompts: 5}}
stages: [{{name: s, dimension: prefix_cache, candidates: [true]}}]
"""


@pytest.fixture
def private_file(tmp_path: Path) -> Path:
    """A file of the app machine no profile may send (stands for /etc/passwd or an SSH key)."""
    path = tmp_path / "private" / "id_ed25519.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"prompt": SECRET_LINE}) + "\n")
    return path


def _sent_to(host: HostConfig) -> list[str]:
    """Every file perflab put in the host's datasets directory."""
    datasets = Path(host.workdir) / "datasets"
    return sorted(path.name for path in datasets.rglob("*")) if datasets.exists() else []


def test_run_command_refuses_a_private_file_before_sending_it(
    runs_db: Engine,
    sim_host: SimHostFactory,
    private_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    host = sim_host("exfil-cli")
    for name, value in perflab_env(runs_db, write_hosts_file(tmp_path / "hosts.yaml", [host])).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PERFLAB_DATASET_DIRS", raising=False)

    for path in ("/etc/passwd", str(private_file)):
        code = main(
            ["run", "--host", host.name, "--engine", "vllm", "--model", "Qwen/Qwen3-8B",
             "--port", str(free_port_block(1)), "--profile", f"custom:path={path},n=5"]
        )  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2
        assert f"dataset '{path}' is neither a stored dataset" in err and "Traceback" not in err

    assert _sent_to(host) == []
    with new_session(runs_db) as session:
        assert crud.list_runs(session).rows == []


def test_a_stored_run_naming_a_private_file_fails_before_sending_it(
    runs_db: Engine, sim_host: SimHostFactory, private_file: Path
) -> None:
    host = sim_host("exfil-runner")
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    run = run_to_end(runs_db, host, config, [parse_profile(f"custom:path={private_file},n=5")])

    assert run.status == "failed" and run.failure_class == "dataset_missing"
    assert "declared dataset directory" in (run.failure_message or "")
    assert _sent_to(host) == []
    assert run.remote_state is None and processes_under(Path(host.workdir)) == []  # no engine started


def test_a_file_in_a_declared_directory_is_sent(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = tmp_path / "datasets"
    declared.mkdir()
    lines = "".join(json.dumps({"prompt": f"question {index}", "output_len": 4}) + "\n" for index in range(5))
    (declared / "chats.jsonl").write_text(lines)
    monkeypatch.setenv("PERFLAB_DATASET_DIRS", f"/nonexistent:{declared}")
    host = sim_host("exfil-declared")
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    run = run_to_end(runs_db, host, config, [parse_profile("custom:path=chats.jsonl,n=5")], check_host=True)

    assert run.status == "done", run.failure_message
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=run.id)
    # the file's 5 prompts a round, in as many rounds as the floor of evidence asks, every one answered
    assert result.completed == sized_count(result.result, 5) >= MIN_COMPLETED and result.failed == 0
    assert len(_sent_to(host)) == 1


def test_dot_dot_and_symbolic_links_do_not_leave_a_declared_directory(
    tmp_path: Path, private_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PERFLAB_DATASET_DIRS", raising=False)
    declared = tmp_path / "declared"
    declared.mkdir()
    (declared / "link.jsonl").symlink_to(private_file)
    (declared / "fine.jsonl").write_text("{}\n")
    host = HostConfig(name="h", transport="local", dataset_dirs=(str(declared),))
    for ref in (
        "../private/id_ed25519.jsonl",
        "link.jsonl",
        str(declared / "link.jsonl"),
        "/etc/passwd",
        ".",
    ):
        with pytest.raises(DatasetNotDeclared, match="declared dataset directory"):
            declared_dataset_file(ref, host)
    assert declared_dataset_file("fine.jsonl", host) == declared / "fine.jsonl"
    # Without PERFLAB_DATASET_DIRS nor dataset_dirs, only the hub cache is declared.
    hub = tmp_path / "hub"
    (hub / "datasets--team--chats").mkdir(parents=True)
    (hub / "datasets--team--chats" / "a.jsonl").write_text("{}\n")
    monkeypatch.setenv("PERFLAB_HUB_CACHE", str(hub))
    bare = HostConfig(name="bare", transport="local")
    with pytest.raises(DatasetNotDeclared, match=rf"declared dataset directory \({hub}\)"):
        declared_dataset_file("fine.jsonl", bare)
    assert declared_dataset_file(str(hub / "datasets--team--chats" / "a.jsonl"), bare).parent.parent == hub


@pytest.mark.parametrize("path", ["/etc/passwd", "~/.ssh/id_ed25519"])
def test_study_spec_and_upload_refuse_a_private_file(
    runs_db: Engine, sim_host: SimHostFactory, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PERFLAB_DATASET_DIRS", raising=False)
    host = sim_host("exfil-study", kind="local")
    # The Studies page's upload reads the file with spec_from_upload, then creates it the same way.
    for spec in (
        parse_spec(STUDY.format(host=host.name, path=path), name="s.yaml"),
        spec_from_upload("s.yaml", STUDY.format(host=host.name, path=path).encode()),
    ):
        with pytest.raises(StudySpecError, match=f"dataset '{path}' is neither a stored dataset"):
            create_study(runs_db, spec, inventory=Inventory(path=Path("h.yaml"), hosts=(host,)))
    with new_session(runs_db) as session:
        assert crud.list_studies(session) == []
