"""benchmarks/disagg_layouts.py in its small mode: it runs, picks a layout under each TPOT limit and compares
the best split with the best aggregated layout in its last, JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_the_layout_benchmark_smoke_mode_runs() -> None:
    completed = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "disagg_layouts.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    summary = json.loads(completed.stdout.strip().splitlines()[-1])
    for slo in ("tpot_12ms", "tpot_30ms"):
        assert summary[slo]["chosen"] in (summary[slo]["best_split"], summary[slo]["best_aggregated"])
        assert summary[slo]["split_vs_aggregated"] > 0
    assert "against" in completed.stdout and "tokens/s/GPU" in completed.stdout
