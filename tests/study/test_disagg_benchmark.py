"""benchmarks/disagg_layouts.py in its small mode: a study per TPOT limit, driven by the study's own
planner over aggregated layouts and prefill/decode splits of a simulated 8 × H200 node, ends; under the
tight limit it chooses a split, better than the best aggregated layout by its verdict, under the loose
one an aggregated layout, and it words each choice as the study's report does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_the_layout_benchmark_smoke_mode_runs_a_study_per_limit() -> None:
    completed = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "disagg_layouts.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    summary = json.loads(completed.stdout.strip().splitlines()[-1])
    tight, loose = summary["tpot_12ms"], summary["tpot_30ms"]
    assert tight["status"] == loose["status"] == "done"
    assert tight["chosen"] == tight["best_split"] and tight["chosen"].startswith("disaggregated ")
    assert tight["verdict_outcome"] == "better" and tight["split_vs_aggregated"] > 1
    assert loose["chosen"].startswith("aggregated ") and loose["split_vs_aggregated"] < 1
    assert f"Serving layout: chose {tight['chosen']}. Disaggregated" in completed.stdout
    assert "Verdict on the split against the aggregated layout: " in completed.stdout
    assert tight["launches"] >= tight["configurations"] > 2
