"""Telemetry past physical limits, and windows too short to hold it, are "not measured", never
published and never a crash: a 1e12 W power reading, an NVML counter at 2^64 mJ or beyond (the Run and
Compare pages rendered with it, and the figures every report computes), a counter rising faster than
any device draws, a 0.1 s benchmark window between 2 s samples."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.cost.energy import (
    MAX_POWER_W,
    MIN_WINDOW_SAMPLES,
    POWER_SAMPLES,
    Energy,
    NotMeasured,
    window_energy,
)
from perflab.cost.figures import WINDOW_KEY
from perflab.cost.prices import PriceBook
from perflab.cost.stored import CostContext, samples_by_run
from perflab.runner.energy import parse_nvml, parse_rapl
from tests.ui.conftest import run_app

RUN_PAGE = "pages/run.py"
COMPARE_PAGE = "pages/compare.py"


def gpu_rows(times: list[float], **series: list[Any]) -> list[tuple[float, str, dict[str, Any]]]:
    return [
        (t, "accelerator", {"gpu": 0, **{name: values[i] for name, values in series.items()}})
        for i, t in enumerate(times)
    ]


def test_a_power_reading_of_a_terawatt_is_not_published() -> None:
    rows = gpu_rows([0.0, 2.0, 4.0, 6.0], power_w=[650.0, 1e12, 700.0, 690.0])
    found = window_energy(rows, (0.0, 6.0), [0])
    assert isinstance(found, NotMeasured)
    assert found.reason == "GPU 0: a power reading of 1e+12 W is outside the 0–5,000 W a device draws"


@pytest.mark.parametrize("reading", [2**64, 2**64 + 5, 10**30])
def test_an_energy_counter_past_64_bits_is_not_a_reading(reading: int) -> None:
    rows = gpu_rows([0.0, 2.0, 4.0], energy_mj=[1_000, reading, reading + 1], power_w=[600.0, 600.0, 600.0])
    found = window_energy(rows, (0.0, 4.0), [0])
    assert isinstance(found, Energy) and found.methods == (POWER_SAMPLES,)
    assert found.joules == pytest.approx(2400.0)
    assert parse_nvml(f'{{"energy_mj": {{"0": {reading}, "1": 7}}}}') == {1: 7}


def test_a_counter_rising_faster_than_a_device_draws_is_not_used() -> None:
    rows = gpu_rows([0.0, 2.0, 4.0], energy_mj=[0, 10**9 * 2_000, 10**9 * 4_000])
    found = window_energy(rows, (0.0, 4.0), [0])
    assert isinstance(found, NotMeasured)
    assert "rises faster than the 5,000 W a device can draw" in found.reason
    rapl = [(t, "rapl", {"package": 0, "energy_uj": int(t * 3e9)}) for t in (0.0, 2.0, 4.0)]
    assert "2,000 W" in window_energy(rapl, (0.0, 4.0)).reason  # type: ignore[union-attr]
    assert MAX_POWER_W == {"accelerator": 5000.0, "rapl": 2000.0}
    assert parse_rapl("intel-rapl:0 " + "9" * 5001) == []


def test_a_window_shorter_than_the_sampling_is_not_measured() -> None:
    rows = gpu_rows([0.0, 2.0, 4.0, 6.0], power_w=[650.0, 700.0, 690.0, 680.0])
    found = window_energy(rows, (2.45, 2.55), [0])
    assert found == NotMeasured(
        "GPU 0: the window of 0.1 s holds 0 of its samples (at least 2, spanning 50% of it, are needed)"
    )
    # two samples 2 s apart inside a 3 s window: enough
    assert isinstance(window_energy(rows, (1.5, 4.5), [0]), Energy)
    # two samples inside, but 2 s apart in a 5 s window: too little of it is sampled
    assert isinstance(window_energy(rows, (0.5, 5.5), [0]), NotMeasured)
    assert isinstance(window_energy(rows, (0.5, 4.5), [0]), Energy)
    assert MIN_WINDOW_SAMPLES == 2


@pytest.fixture
def hostile_telemetry(
    runs_db: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[int]]:
    """Two finished runs: one whose NVML counter reads past 2^64 and whose power reads 1e12 W, one
    whose benchmark window lasted 0.1 s; the app pointed at their database."""
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts: []\n")
    monkeypatch.setenv("PERFLAB_DATABASE_URL", runs_db.url.render_as_string(hide_password=False))
    monkeypatch.setenv("PERFLAB_HOSTS", str(hosts))
    monkeypatch.setenv("PERFLAB_APP_WORKER", "0")
    ids = []
    with new_session(runs_db) as session:
        for window, counter, power in (((0.0, 6.0), 2**64 + 1, 1e12), ((2.45, 2.55), 5_000, 650.0)):
            run = crud.create_run(
                session,
                engine="vllm",
                model="m",
                host_name="local-sim",
                status="done",
                gpu_ids=[0],
                accelerators=1,
            )
            crud.add_profile_result(
                session,
                run_id=run.id,
                profile={"name": "p"},
                result={
                    "completed": 10,
                    "total_output_tokens": 1000,
                    "duration": 1.0,
                    WINDOW_KEY: list(window),
                },
                text_block=None,
                bench_mode=None,
            )
            samples = [
                {
                    "t_s": t,
                    "source": "accelerator",
                    "values": {"gpu": 0, "energy_mj": counter + int(t), "power_w": power},
                }
                for t in (0.0, 2.0, 4.0, 6.0)
            ]
            crud.add_samples(session, run_id=run.id, samples=samples)
            ids.append(int(run.id))
    yield ids


def test_pages_and_report_figures_say_not_measured(hostile_telemetry: list[int], runs_db: Engine) -> None:
    hostile, short = hostile_telemetry
    with new_session(runs_db) as session:
        runs = crud.get_runs(session, run_ids=hostile_telemetry)
        context = CostContext(PriceBook(), samples_by_run(session, hostile_telemetry))
        texts = {
            run.id: context.figures(run, crud.list_profile_results(session, run_id=run.id)[0]).energy_text
            for run in runs
        }
    assert texts[hostile].startswith("energy not measured: GPU 0: a power reading of 1e+12 W")
    assert texts[short].startswith("energy not measured: GPU 0: the window of 0.1 s holds 0 of its samples")
    for run_id in hostile_telemetry:
        page = run_app(RUN_PAGE, {"run": str(run_id)})
        assert not page.exception, page.exception
        assert "not measured" in [metric.value for metric in page.metric]
    compare = run_app(COMPARE_PAGE, {"compare": f"{hostile},{short}"})
    assert not compare.exception, compare.exception
