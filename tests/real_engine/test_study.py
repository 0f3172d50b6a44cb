"""A two-stage study on the real vLLM (CPU build) over a real sshd, ending in a report whose recommended
serving command is the winner's.

Stage one is a search over max-num-seqs × max-num-batched-tokens with a budget of one launch (a real
launch that screens on half the tuning prompts, then runs the rest); stage two tries a flag the
installed vLLM does not have, which the preflight refuses and the study records as failed.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from perflab.cli import main
from tests.fixtures.real_vllm import StudyOutcome, tiny_model_dir

# A guard against a hang, not a time to meet: on a loaded 2-core machine the whole suite's run has taken
# 580–1,019 s.
pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(2000)]


def test_two_stage_study_on_real_vllm_ends_in_a_report(
    real_vllm_study: Callable[[dict], StudyOutcome], tmp_path: Path
) -> None:
    outcome = real_vllm_study(
        {
            "name": "tiny on CPU",
            "min_gain_pct": 0,
            "stages": [
                {
                    "name": "Batching",
                    "search": {
                        "knobs": {"max_num_seqs": [4, 8], "max_num_batched_tokens": [512, 1024]},
                        "budget": {"launches": 1},
                        "screening": 0.5,
                        "max_measurements": 1,
                    },
                },
                {"name": "Flags", "dimension": "flag", "candidates": ["--no-such-flag"]},
            ],
        }
    )
    study, shown = outcome.listed, outcome.shown
    assert study["status"] == "done"
    candidates = {stage["name"]: stage["candidates"] for stage in shown["stages"]}
    flag = next(c for c in candidates["Flags"] if "--no-such-flag" in c["config"].get("extra_args", []))
    assert flag["decision"] == "failed"
    assert "refuses --no-such-flag: unrecognized arguments" in json.dumps(flag), "refused by the preflight"
    assert {c["decision"] for c in candidates["Batching"]} <= {
        "winner",
        "not_better",
    }
    assert study["recommended_command"].startswith("VLLM_CPU_KVCACHE_SPACE=1 vllm serve")
    (search,) = shown["searches"]
    assert search["stop"] == "budget: 1 launches of 1" and search["space_size"] == 4
    (trial,) = search["trials"]
    assert trial["state"] in ("measured", "winner", "screened out") and trial["screening"] > 0

    out = tmp_path / "report.zip"
    assert main(["report", str(study["id"]), "--url", outcome.url, "--out", str(out)]) == 0
    with zipfile.ZipFile(out) as archive:
        report = archive.read("report.md").decode()
    assert "Serving Command" in report
    command_lines = [line for line in report.splitlines() if "vllm serve" in line]
    assert command_lines and all(str(tiny_model_dir()) in line for line in command_lines)
    assert "VLLM_CPU_KVCACHE_SPACE=1" in report
    assert "Search over 4 configurations" in report and "- Stopped: budget" in report
