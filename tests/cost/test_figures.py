"""A result's cost and energy figures from a run of known accelerators, price, throughput and power."""

from __future__ import annotations

import pytest

from db.models import ProfileResult, Run, RunSample
from perflab.cost.energy import NotMeasured
from perflab.cost.figures import cost_figures, cost_per_mtok
from perflab.cost.prices import Price, PriceBook
from perflab.cost.stored import CostContext, with_objectives
from perflab.runner.bench_record import BenchClock, with_sample_window

PRICES = PriceBook("USD", {"gpu-a": (2.5, "example price")}, {"H100": 2.0, "H100 NVL": 3.0})


def samples(watts: dict[int, float], times: range) -> list[RunSample]:
    return [
        RunSample(run_id=1, t_s=float(t), source="accelerator", values={"gpu": gpu, "power_w": power})
        for t in times
        for gpu, power in watts.items()
    ]


def test_cost_and_energy_of_a_known_run() -> None:
    run = Run(id=1, host_name="gpu-a", gpu_ids=[0, 1], config={"tp": 2}, accelerator="NVIDIA H100 80GB HBM3")
    result = {
        "output_throughput": 1000.0,
        "total_token_throughput": 3000.0,
        "completed": 100,
        "total_output_tokens": 60_000,
        "sample_window_s": [10.0, 70.0],
    }
    figures = cost_figures(run, result, samples({0: 400.0, 1: 400.0}, range(0, 81, 2)), PRICES)
    # 2 GPUs × 2.5 $/h = 5 $/h; 1000 tok/s = 3.6M tok/h → 5 / 3.6 $ per 1M output tokens
    assert figures.price == Price(2.5, "USD", "host gpu-a", "example price")
    assert figures.cost_per_mtok_output == pytest.approx(5 / 3.6)
    assert figures.cost_per_mtok_total == pytest.approx(5 / 10.8)
    # 2 × 400 W × 60 s = 48 kJ
    assert figures.energy.joules == pytest.approx(48_000)
    assert figures.joules_per_request == pytest.approx(480)
    assert figures.joules_per_output_token == pytest.approx(0.8)
    assert figures.output_tokens_per_joule == pytest.approx(1.25)
    assert figures.mean_power_w_per_accelerator == pytest.approx(400)
    assert figures.energy_text == "48.00 kJ over 60.0 s (power samples)"


def test_a_simulated_engines_own_count_comes_before_the_samples_and_is_held_to_physics() -> None:
    """A result a simulated engine timed carries the joules its devices drew over the measured simulated
    time: that, not the wall-clock power samples, is its energy; a count that is not a positive number
    over a window, or implies more than 5,000 W a device, is not measured."""
    run = Run(id=1, host_name="gpu-a", gpu_ids=[0, 1], config={"tp": 2}, accelerator="NVIDIA H100 80GB HBM3")
    result = {"completed": 100, "total_output_tokens": 60_000, "sample_window_s": [10.0, 70.0]}
    power = samples({0: 400.0, 1: 400.0}, range(0, 81, 2))
    counted = cost_figures(
        run, {**result, "simulated_energy": {"joules": 24_000.0, "window_s": 40.0}}, power, PRICES
    )
    assert counted.energy.joules == pytest.approx(
        24_000
    ) and counted.output_tokens_per_joule == pytest.approx(2.5)
    assert counted.mean_power_w_per_accelerator == pytest.approx(300)
    assert counted.energy_text == "24.00 kJ over 40.0 s (simulated energy counter)"
    for hostile in (
        {"joules": -1.0, "window_s": 40.0},
        {"joules": 1e12, "window_s": 40.0},
        {"joules": "1"},
        [1],
    ):
        figures = cost_figures(run, {**result, "simulated_energy": hostile}, power, PRICES)
        assert isinstance(figures.energy, NotMeasured) and figures.output_tokens_per_joule is None, hostile
        assert "simulated engine's energy" in figures.energy_text


def test_imported_result_has_cost_from_its_accelerator_model_and_no_energy() -> None:
    run = Run(id=2, source="imported", accelerator="NVIDIA H100 NVL", config={"tp": 4})
    figures = cost_figures(run, {"output_throughput": 2000.0, "total_token_throughput": 4000.0}, [], PRICES)
    assert figures.price is not None and figures.price.source == "accelerator H100 NVL"
    assert figures.cost_per_mtok_output == pytest.approx(4 * 3.0 / (2000 * 3600) * 1e6)
    assert isinstance(figures.energy, NotMeasured)
    assert figures.energy_text.startswith("energy not measured")
    assert figures.joules_per_output_token is None and figures.output_tokens_per_joule is None


def test_no_price_or_no_throughput_gives_no_cost() -> None:
    unpriced = Run(id=3, host_name="other", accelerator="NVIDIA A100-SXM4-80GB", gpu_ids=[0])
    figures = cost_figures(unpriced, {"output_throughput": 10.0}, [], PRICES)
    assert figures.price is None and figures.cost_per_mtok_output is None
    assert cost_per_mtok(0.0, 1, Price(1.0, "USD", "x")) is None
    assert cost_per_mtok(None, 1, Price(1.0, "USD", "x")) is None
    assert cost_per_mtok(10.0, None, Price(1.0, "USD", "x")) is None


def test_the_window_is_the_benchs_first_send_and_last_receive_moved_onto_the_samples_clock() -> None:
    """Progress lines written at bench clock 100, 101 and 102 s arrive at sample clock 10.3, 11.25 and
    12.2 s: the quickest transit (the last line's) places the bench's clock 89.8 s ahead."""
    arrivals = iter([10.3, 11.25, 12.2, 13.0])
    clock = BenchClock(lambda: next(arrivals))
    for written in (100.0, 101.0, 102.0):
        clock.seen({"done": 1, "clock_s": written})
    clock.seen({"done": 2})  # a line without the bench's clock (an older bench) says nothing
    assert clock.offset == pytest.approx(-89.8)
    result = {"duration": 30.0, "bench_clock_window_s": [100.5, 130.5]}
    assert with_sample_window(result, clock.offset)["sample_window_s"] == [10.7, 40.7]
    assert "sample_window_s" not in with_sample_window(result, None)
    assert "sample_window_s" not in with_sample_window({"duration": 30.0}, -89.8)
    assert "sample_window_s" not in with_sample_window({"bench_clock_window_s": [5.0, 5.0]}, 1.0)


def test_study_objectives_are_added_to_the_scored_result() -> None:
    run = Run(id=1, host_name="gpu-a", gpu_ids=[0], config={"tp": 1})
    stored = ProfileResult(
        id=7,
        run_id=1,
        result={
            "output_throughput": 500.0,
            "total_token_throughput": 2000.0,
            "total_output_tokens": 3000,
            "completed": 10,
            "sample_window_s": [0.0, 6.0],
        },
    )
    context = CostContext(PRICES, {1: samples({0: 250.0}, range(0, 7))})
    scored = with_objectives(stored.result, context.figures(run, stored))
    assert scored["cost_per_mtok"] == pytest.approx(2.5 / (2000 * 3600) * 1e6)
    assert scored["tokens_per_joule"] == pytest.approx(3000 / (250 * 6))
    assert scored["output_throughput"] == 500.0
    unpriced = with_objectives({}, CostContext().figures(run, ProfileResult(id=8, run_id=1, result={})))
    assert unpriced == {"cost_per_mtok": None, "tokens_per_joule": None}
