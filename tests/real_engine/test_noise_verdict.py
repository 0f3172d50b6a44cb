"""A study that measures its noise on the real vLLM (CPU build) over a real sshd: a candidate that changes
nothing that matters here (prefix caching off, on prompts that share no prefix) ends "within noise" with
its interval, and the study shows the spread it measured.

Kept as small as a verdict allows: two launches of each configuration (a verdict needs a spread across
launches), two runs of eight short prompts on each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from perflab.cli import main
from perflab.inventory import HostConfig
from tests.fixtures.real_vllm import tiny_model_dir
from tests.fixtures.runs import perflab_env, write_hosts_file

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(1200)]


def test_a_candidate_that_changes_nothing_ends_within_noise_on_real_vllm(
    vllm_cpu_host: HostConfig,
    runs_db: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [vllm_cpu_host])
    for name, value in perflab_env(runs_db, hosts_file).items():
        monkeypatch.setenv(name, value)
    spec = tmp_path / "study.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "noise on CPU",
                "model": str(tiny_model_dir()),
                "hosts": [vllm_cpu_host.name],
                "gpus": 1,
                "baseline": {
                    "engine": "vllm",
                    "served_model_name": "tiny",
                    "max_model_len": 512,
                    "cpu_kvcache_space_gib": 1,
                },
                "tuning_profile": {"preset": "short", "input_len": 32, "output_len": 8, "num_prompts": 8},
                "objective": "output_throughput",
                "min_gain_pct": 5,
                "repeats": 2,
                "relaunches": 2,
                "max_launches": 2,
                "stages": [{"name": "Prefix cache", "candidates": [{"enable_prefix_caching": False}]}],
            }
        )
    )
    url = runs_db.url.render_as_string(hide_password=False)
    code = main(["study", "--url", url, "run", "--spec", str(spec), "--hosts", str(hosts_file), "--wait"])
    output = capsys.readouterr()
    assert code == 0, output.err

    assert main(["study", "--url", url, "list", "--json"]) == 0
    (study,) = json.loads(capsys.readouterr().out)
    assert study["status"] == "done"
    assert main(["study", "--url", url, "show", str(study["id"]), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    (candidate,) = [row for row in shown["candidates"] if row["stage_name"] == "Prefix cache"]
    (verdict,) = shown["state"]["verdicts"]
    assert candidate["decision"] == "within_noise" and verdict["outcome"] == "within_noise"
    assert (verdict["n_candidate"], verdict["n_reference"]) == (2, 2)
    assert verdict["half_width_pct"] is not None and "within noise (±" in candidate["note"]
    spread = shown["state"]["spread"]
    assert spread["launches"] == 2 and spread["repetitions"] == 4
