"""``python -m perflab study …`` and ``python -m perflab report …`` on a database holding real studies."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from db import crud
from db import session as db_session
from perflab.cli import main
from perflab.importers import import_files
from perflab.study.measure import RetryPolicy
from tests.fixtures.study_data import StudyDatabase, leave_incomplete

SEED_000 = Path(__file__).resolve().parents[1] / "data" / "seeds" / "000_7382f1cb439cecdf.txt"


def test_list_and_show(study_db: StudyDatabase, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["study", "--url", study_db.url, "list"]) == 0
    header, *listed = capsys.readouterr().out.splitlines()
    assert header.split() == ["ID", "STATUS", "PHASE", "NAME"]
    assert [line.split()[:3] for line in listed] == [
        [str(study_db.queued), "queued", "—"],
        [str(study_db.done), "done", "—"],
    ]
    assert main(["study", "--url", study_db.url, "show", str(study_db.done)]) == 0
    shown = capsys.readouterr().out
    assert shown.splitlines()[0] == f"study {study_db.done}: engine choice [done]"  # no "[done] done"
    assert "1. Engine" in shown and "reused" in shown
    assert "2. Impossible parallelism" in shown and "more than the study's budget of 1" in shown
    assert "recommended: " in shown
    assert main(["study", "--url", study_db.url, "show", str(study_db.done), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["status"] == "done" and payload["recommended_command"]
    assert [c["label"] for c in payload["stages"][0]["candidates"]] == ["vLLM", "SGLang"]
    assert payload["stages"][0]["candidates"][0]["state"] == "reused"


def test_show_gives_up_at_its_timeout(study_db: StudyDatabase, capsys: pytest.CaptureFixture[str]) -> None:
    # a microsecond is less than reading any study takes: the deadline fires while it is read
    assert main(["study", "--url", study_db.url, "show", str(study_db.done), "--timeout", "0.000001"]) == 2
    assert (
        f"error: showing study {study_db.done} took longer than 1e-06 s (--timeout)"
        in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        main(["study", "--url", study_db.url, "show", str(study_db.done), "--timeout", "-1"])
    assert "expected seconds between 0 and 86400, got -1" in capsys.readouterr().err


def test_pause_resume_cancel_and_their_errors(
    study_db: StudyDatabase, capsys: pytest.CaptureFixture[str]
) -> None:
    url = study_db.url
    assert main(["study", "--url", url, "pause", str(study_db.queued)]) == 0
    assert main(["study", "--url", url, "resume", str(study_db.queued)]) == 0
    assert main(["study", "--url", url, "cancel", str(study_db.queued)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"study {study_db.queued}: {status}" for status in ("paused", "running", "cancelled")]
    assert main(["study", "--url", url, "pause", str(study_db.done)]) == 2
    assert (
        f"error: study {study_db.done} is done; only a queued or running study can be paused"
        in capsys.readouterr().err
    )
    assert main(["study", "--url", url, "show", "999"]) == 2
    assert "error: study 999 does not exist" in capsys.readouterr().err


def test_measure_missing_sends_an_incomplete_study_back_to_running(
    study_db: StudyDatabase, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFLAB_STUDY_RETRY_DELAYS_S", "0")
    leave_incomplete(db_session.get_engine(study_db.url), study_db.queued, RetryPolicy((0.0,)))
    url = study_db.url
    assert main(["study", "--url", url, "show", str(study_db.queued)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert "[incomplete] incomplete: 1 candidate(s) could not be measured" in shown[0]
    assert shown[-1].startswith("Incomplete: not measured because of the infrastructure: Baseline · Baseline")
    assert main(["study", "--url", url, "measure-missing", str(study_db.queued)]) == 0
    assert capsys.readouterr().out == f"study {study_db.queued}: running\n"
    monkeypatch.setenv("PERFLAB_STUDY_RETRY_DELAYS_S", "soon")
    assert main(["study", "--url", url, "show", str(study_db.queued)]) == 2
    assert capsys.readouterr().err == (
        "error: PERFLAB_STUDY_RETRY_DELAYS_S='soon': expected seconds separated by commas\n"
    )
    monkeypatch.delenv("PERFLAB_STUDY_RETRY_DELAYS_S")
    assert main(["study", "--url", url, "measure-missing", str(study_db.done)]) == 2
    assert (
        f"error: study {study_db.done} is done; only an incomplete study has missing candidates"
        in capsys.readouterr().err
    )


def test_create_reports_spec_and_host_problems(
    study_db: StudyDatabase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(
        "hosts:\n  - name: local-sim\n    transport: local\n    simulate: {accelerator: H100, count: 8}\n"
    )
    spec = tmp_path / "study.yaml"
    spec.write_text("name: s\nmodel: m\nhosts: [elsewhere]\nbaseline: {engine: vllm}\nstages:\n  - name: x\n")
    arguments = ["study", "--url", study_db.url, "create", "--spec", str(spec), "--hosts", str(hosts)]
    assert main(arguments) == 2
    needs = "a stage needs 'candidates' (at least one) or a 'search'"
    assert f"error: {spec}:6: stages[0]: {needs}" in capsys.readouterr().err
    spec.write_text(
        "name: s\nmodel: m\nhosts: [elsewhere]\nbaseline: {engine: vllm}\n"
        "stages: [{name: x, dimension: tp, candidates: [2]}]\n"
    )
    assert main(arguments) == 2
    assert "error: hosts.yaml: no host named 'elsewhere'" in capsys.readouterr().err
    spec.write_text(spec.read_text().replace("elsewhere", "local-sim"))
    assert main(arguments) == 0
    assert capsys.readouterr().out.endswith("s [queued]\n")


def test_report_of_a_study_and_of_imported_runs(
    study_db: StudyDatabase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["report", str(study_db.done), "--url", study_db.url, "--out", str(tmp_path / "study.zip")]) == 0
    )
    with zipfile.ZipFile(tmp_path / "study.zip") as archive:
        assert {"report.md", "results.csv", "results.json", "charts/comparison.png"} <= set(
            archive.namelist()
        )
        assert "### 1. Engine" in archive.read("report.md").decode()
    capsys.readouterr()
    with db_session.new_session(db_session.get_engine(study_db.url)) as session:
        run_ids = [run.id for run in import_files(session, [SEED_000])]
    out_dir = tmp_path / "seed"
    runs = ",".join(str(run_id) for run_id in run_ids)
    command = ["report", "--url", study_db.url, "--runs", runs, "--out", str(out_dir), "--no-charts"]
    assert main([*command, "--gpus-per-node", "8", "--tuning-title", "ShareGPT"]) == 0
    assert sorted(path.name for path in out_dir.iterdir()) == ["report.md", "results.csv", "results.json"]
    markdown = (out_dir / "report.md").read_text()
    assert 'Total TPS: 3019.19×2 <span style="background-color:lightgreen;">(+59.2%)</span>' in markdown
    assert main(["report", "--url", study_db.url, "--out", str(out_dir)]) == 2
    assert "give either a STUDY_ID or --runs" in capsys.readouterr().err
    assert main(["report", "--url", study_db.url, "--runs", "99999", "--out", str(out_dir)]) == 2
    assert "error: no run with id 99999" in capsys.readouterr().err
    with db_session.new_session(db_session.get_engine(study_db.url)) as session:
        assert crud.get_run(session, run_id=run_ids[0]).source == "imported"


def test_a_study_run_that_does_not_end_done_says_why_on_stderr(
    sqlite_database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(
        f"hosts:\n  - name: local-sim\n    transport: local\n    workdir: {tmp_path / 'work'}\n"
        "    simulate: {accelerator: H100, count: 8}\n"
    )
    spec = tmp_path / "study.yaml"
    spec.write_text(
        "name: starved\nmodel: Qwen/Qwen3-8B\nhosts: [local-sim]\ngpus: 1\n"
        "baseline: {engine: vllm, gpu_memory_utilization: 0.05}\n"
        "tuning_profile: {name: t, title: T, dataset: random, input_len: 16, output_len: 4, num_prompts: 4}\n"
        "stages: [{name: Batch, dimension: max_num_seqs, candidates: [64]}]\n"
    )
    arguments = ["study", "--url", sqlite_database_url, "run", "--spec", str(spec), "--hosts", str(hosts)]
    assert main([*arguments, "--wait", "--poll", "0.2"]) == 1
    err = capsys.readouterr().err
    assert "error: study 1 ended failed: the baseline failed: vLLM: out of accelerator memory" in err
