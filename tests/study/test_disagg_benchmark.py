"""benchmarks/disagg_layouts.py in its small mode: a study per TPOT limit, driven by the study's own
planner over aggregated layouts and prefill/decode splits of a simulated 8 × H200 node, ends, chooses a
layout, and words its choice between the best split and the best aggregated layout as the study's report
does, with the verdict between them. Which side wins is the simulator's physics, which the benchmark
prints; the test holds for either."""

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
    for limit in ("tpot_12ms", "tpot_30ms"):
        found = summary[limit]
        assert found["status"] == "done" and found["launches"] >= found["configurations"] > 2
        assert found["best_split"].startswith("disaggregated ")
        assert found["best_aggregated"].startswith("aggregated ")
        # the study keeps its baseline (aggregated TP8) unless a candidate beats it
        assert found["chosen"] in (found["best_split"], found["best_aggregated"], "aggregated TP8")
        assert found["split_vs_aggregated"] > 0 and found["verdict_outcome"] is not None
        split = found["best_split"].removeprefix("disaggregated ")
        assert f"Serving layout: chose {found['chosen']}. Disaggregated {split} against" in completed.stdout
    assert completed.stdout.count("Verdict on ") == 2
