"""Studies on simulated hosts whose infrastructure gets in the way, executed by a real worker: the
ports perflab would choose held by another process, and a host (a real sshd behind a proxy) that drops
off the network mid-study and comes back. Neither may decide anything about a candidate."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.inventory import load_inventory
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.study.coordinator import create_study, measure_missing
from perflab.study.headless import wait_for_study
from perflab.study.progress import StudyProgress, load_progress
from perflab.study.spec import parse_spec
from perflab.study.text import progress_lines
from tests.fixtures.leftovers import processes_under
from tests.fixtures.ports import held_ports
from tests.fixtures.runs import SimHostFactory, proxied_host, write_hosts_file
from tests.fixtures.sshd import SshServer, TcpProxy
from tests.fixtures.study_data import FAST, run_study

SPEC = """
name: {name}
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm}}
gpus: 2
tuning_profile: {{name: tune, title: Chat, dataset: random, input_len: 128, output_len: 64, num_prompts: 50,
  max_concurrency: 4}}
stages:
  - name: Engine
    dimension: engine
    candidates: [sglang, trtllm]
  - name: Parallelism
    candidates:
      - {{label: TP1 x2, set: {{replicas: 2}}}}
"""
MEASURED = {"kept", "winner", "not_better", "within_noise", "reused"}


def _decisions(engine: Engine, study_id: int) -> dict[str, str | None]:
    with new_session(engine) as session:
        return {row.label: row.decision for row in crud.list_candidates(session, study_id=study_id)}


def test_a_study_measures_every_candidate_while_another_process_holds_the_usual_ports(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("ports-held", kind="local", time_scale=100)
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    # vLLM and TensorRT-LLM default to 8000 + GPU, SGLang to 30000 + GPU
    with held_ports([*range(8000, 8011), *range(30000, 30011)]) as held:
        final = run_study(runs_db, SPEC.format(name="crowded", host=host.name), hosts_file)

    assert final.status == "done", (final.state.get("failure"), final.state.get("phase"))
    decisions = _decisions(runs_db, final.id)
    assert set(decisions) == {"Baseline", "SGLang", "TensorRT-LLM", "TP1 x2"}
    assert set(decisions.values()) <= MEASURED, decisions
    with new_session(runs_db) as session:
        runs = load_progress(session, study_id=final.id).runs
    # a run that lost a race for a port to another program on this shared machine is measured again
    done = [run for run in runs if run.status == "done"]
    assert {run.config_fingerprint for run in done} == {run.config_fingerprint for run in runs}
    ports = [process["port"] for run in done for process in run.remote_state["processes"]]
    # every configuration fills the 2-accelerator budget with two replicas ("TP1 x2" is the baseline)
    assert held and len(ports) == 2 * len(done) and not set(ports) & set(held)


@pytest.mark.slow
def test_a_host_dropping_mid_study_leaves_it_incomplete_until_the_missing_candidates_are_measured(
    runs_db: Engine,
    sim_host: SimHostFactory,
    sshd: SshServer,
    tcp_proxy: TcpProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PERFLAB_STUDY_RETRY_DELAYS_S", "0.5")
    host = proxied_host(sim_host, sshd, tcp_proxy, tmp_path, "fragile")
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    spec = parse_spec(SPEC.format(name="fragile", host=host.name), name="study.yaml")
    study = create_study(runs_db, spec, inventory=load_inventory(hosts_file))

    def drop_once_the_baseline_is_measured(progress: StudyProgress) -> None:
        if progress.plan.stages and not tcp_proxy.down:
            tcp_proxy.go_down()

    final = wait_for_study(
        runs_db,
        study.id,
        hosts_path=hosts_file,
        timeout_s=240.0,
        poll_s=0.2,
        runner_options=FAST,
        on_progress=drop_once_the_baseline_is_measured,
    )

    assert final.status == "incomplete", final.state
    assert final.recommended_command is None
    missing = {item["label"]: item["reason"] for item in final.state["unmeasured"]}
    assert set(missing) == {"SGLang", "TensorRT-LLM"}
    for reason in missing.values():
        assert reason.startswith("not measured (infrastructure): ")
        assert "host_unreachable: " in reason or "connection_lost: " in reason, reason
    assert _decisions(runs_db, study.id) == {
        "Baseline": "kept",
        "SGLang": "unmeasured",
        "TensorRT-LLM": "unmeasured",
    }
    with new_session(runs_db) as session:
        progress = load_progress(session, study_id=study.id)
        runs = progress.runs
        report = study_report(session, study_id=study.id)
    # the baseline's launch; then two attempts each (the first, and one retry after 0.5 s), then no claim
    # about either (and no launch of the baseline beside them: its round never began)
    assert sorted(run.engine for run in runs) == ["sglang", "sglang", "trtllm", "trtllm", "vllm"]
    text = render_markdown(report)
    assert '"Incomplete study"' in text and "- Engine · SGLang: not measured (infrastructure): " in text
    assert "Baseline, the best measured so far, is provisional" in text
    assert report.recommended_command is None
    shown = progress_lines(progress)  # study show
    assert shown[0].endswith("[incomplete] incomplete: 2 candidate(s) could not be measured")
    assert shown[-1].startswith("Incomplete: not measured because of the infrastructure: Engine · SGLang (")

    tcp_proxy.come_back()
    measure_missing(runs_db, study.id)
    final = wait_for_study(
        runs_db, study.id, hosts_path=hosts_file, timeout_s=240.0, poll_s=0.2, runner_options=FAST
    )

    assert final.status == "done", (final.state.get("failure"), final.state.get("phase"))
    assert final.state["unmeasured"] == [] and final.recommended_command
    decisions = _decisions(runs_db, study.id)
    assert set(decisions) == {"Baseline", "SGLang", "TensorRT-LLM", "TP1 x2"}
    assert set(decisions.values()) <= MEASURED, decisions
    # The baseline's engine, left running when the host dropped while it was being stopped, was
    # stopped by the first placement once the host was back.
    assert processes_under(Path(host.workdir)) == []
