"""The compare read model on real stored runs: the metric table with % change and verdicts by
direction, its exports, and the chart data (bars, Pareto front, CDFs)."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from sqlmodel import Session

from db import crud
from db import session as db_session
from perflab.cost.prices import PriceBook
from perflab.cost.stored import CostContext
from perflab.engines import EngineConfig
from perflab.views import compare
from perflab.views.distributions import cdf_points, latency_values
from perflab.views.pareto import pareto_front
from tests.fixtures.ui_data import SeededDatabase


@pytest.fixture
def seed_pair(seeded_database: SeededDatabase) -> compare.CompareSet:
    """Seed 000's vLLM (3792.50 tok/s) and SGLang (4635.31 tok/s) engine runs, plus a perflab run."""
    vllm, sglang = seeded_database.runs.imported[:2]
    with db_session.session_scope(db_session.get_engine(seeded_database.url)) as session:
        return compare.load_compare(session, [vllm, sglang, seeded_database.runs.done, 999999])


def test_table_changes_and_verdicts_follow_direction(seed_pair: compare.CompareSet) -> None:
    assert seed_pair.missing == [999999]
    vllm, sglang, perflab_run = (run.name for run in seed_pair.runs)
    table = compare.comparison_table(
        seed_pair, profile=compare.FIRST_RESULT, baseline_id=seed_pair.runs[0].run.id
    )
    assert table.baseline == vllm
    # Seed 000 ran on 8 accelerators and the perflab run on 2: node totals do not compare (no change,
    # no colour), per accelerator they do.
    assert seed_pair.budgets_differ and table.budgets_differ
    assert math.isnan(table.changes.at["total_token_throughput", sglang])
    assert table.verdicts.at["total_token_throughput", sglang] == ""
    change = table.changes.at["total_token_throughput_per_accelerator", sglang]
    assert round(change, 1) == 22.2  # seed 000: "Engine Selection +22.2%", both on 8 accelerators
    assert table.verdicts.at["total_token_throughput_per_accelerator", sglang] == "better"
    assert table.verdicts.at["mean_ttft_ms", sglang] == "better"  # 21130.67 ms < 38065.91 ms
    assert table.verdicts.at["mean_tpot_ms", sglang] == "worse"  # 235.10 ms > 123.36 ms
    assert table.verdicts.at["total_token_throughput", vllm] == ""
    assert math.isnan(table.changes.at["mean_ttft_ms", vllm])
    # The perflab run has fields the seed blocks lack (E2EL, P50…): rows exist, seed cells are empty.
    assert "mean_e2el_ms" in table.values.index and math.isnan(table.values.at["mean_e2el_ms", vllm])
    assert table.verdicts.at["mean_e2el_ms", perflab_run] == ""

    frame = compare.display_frame(table)
    assert frame.columns[0] == f"{vllm} (baseline)"
    assert frame.at["Total token throughput (tok/s)", sglang] == "4635.31"
    assert frame.at["Total token throughput per accelerator (tok/s)", sglang] == "579.41 (+22.2%)"
    assert frame.at["Mean E2EL (ms)", f"{vllm} (baseline)"] == "—"
    styles = compare.styled(table).to_html()
    assert "lightgreen" in styles and "#fbcaca" in styles


def test_exports(seed_pair: compare.CompareSet) -> None:
    table = compare.comparison_table(
        seed_pair, profile=compare.FIRST_RESULT, baseline_id=seed_pair.runs[0].run.id
    )
    vllm, sglang, _ = (run.name for run in seed_pair.runs)
    markdown = compare.comparison_markdown(table)
    lines = markdown.splitlines()
    assert lines[0].startswith(f"| Metric | {vllm} (baseline) | {sglang} |")
    throughput = next(line for line in lines if line.startswith("| Total token throughput per accelerator"))
    assert '<span style="background-color:lightgreen;">579.41 (+22.2%)</span>' in throughput
    tpot = next(line for line in lines if line.startswith("| Mean TPOT"))
    assert '<span style="background-color:#fbcaca;">235.10 (+90.6%)</span>' in tpot
    rows = pd.read_csv(io.StringIO(compare.comparison_csv(table)))
    assert list(rows.columns[:5]) == ["metric", "label", "unit", "better", vllm]
    assert f"{sglang} change %" in rows.columns and f"{vllm} change %" not in rows.columns
    row = rows.set_index("metric").loc["total_token_throughput_per_accelerator"]
    assert (row[vllm], row[sglang], row[f"{sglang} change %"], row["better"]) == (
        3792.5 / 8,
        pytest.approx(4635.31 / 8),
        22.22,
        "higher",
    )
    assert math.isnan(rows.set_index("metric").loc["total_token_throughput", f"{sglang} change %"])


def test_chart_data(seed_pair: compare.CompareSet) -> None:
    bars = compare.bars_frame(seed_pair, "total_token_throughput")
    assert list(bars["profile"]) == ["imported", "imported", "Paced 256→32", "Burst 128→16"]
    points = compare.pareto_frame(
        seed_pair,
        profile=compare.FIRST_RESULT,
        latency_key="mean_tpot_ms",
        throughput_key="total_token_throughput",
    )
    assert len(points) == 3
    curves, without = compare.cdf_frame(seed_pair, profile=compare.FIRST_RESULT, metric="ttft")
    assert without == [seed_pair.runs[0].name, seed_pair.runs[1].name]
    assert set(curves["run"]) == {seed_pair.runs[2].name} and curves["fraction"].iloc[-1] == 1.0
    table = compare.runs_markdown(seed_pair).splitlines()
    assert table[0] == "| Run | Engine | Knobs | Profiles | Accelerators | Model | Where |"
    done = seed_pair.runs[2]
    assert table[4].startswith(
        f"| [{compare.markdown_text(done.name)}](run?run={done.run.id}) | vllm | tp=2 | "
        "Paced 256→32, Burst 128→16 | 2 | Qwen/Qwen3-8B | local-sim (simulated) · "
    )
    assert compare.markdown_text("tp=2 · max_num_batched_tokens=8192 | [x](y)") == (
        r"tp=2 · max\_num\_batched\_tokens=8192 \| \[x\](y)"
    )
    assert seed_pair.profiles() == [compare.FIRST_RESULT, "imported", "Paced 256→32", "Burst 128→16"]


def test_pareto_front() -> None:
    latencies = [10.0, 20.0, 15.0, 30.0, None, 10.0]
    throughputs = [100.0, 300.0, 100.0, 250.0, 999.0, 90.0]
    assert pareto_front(latencies, throughputs) == [True, True, False, False, False, False]
    assert pareto_front([], []) == []
    assert pareto_front([1.0, 1.0], [5.0, 5.0]) == [True, True]
    with pytest.raises(ValueError):
        pareto_front([1.0], [])


def test_cdf_points_and_latency_values() -> None:
    values = np.arange(1, 1001, dtype=float)
    points = cdf_points(values, max_points=50)
    assert len(points) == 50
    assert (points["value"].iloc[0], points["fraction"].iloc[0]) == (1.0, 0.001)
    assert (points["value"].iloc[-1], points["fraction"].iloc[-1]) == (1000.0, 1.0)
    assert points["value"].is_monotonic_increasing and points["fraction"].is_monotonic_increasing
    assert cdf_points(np.array([]), 10).empty
    records = pd.DataFrame(
        {
            "success": [True, True, False],
            "ttft_ms": [10.0, 20.0, float("nan")],
            "itl_ms": [[1.0, 2.0], [3.0], []],
        }
    )
    assert list(latency_values(records, "ttft")) == [10.0, 20.0]
    assert list(latency_values(records, "itl")) == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="unknown latency metric"):
        latency_values(records, "speed")


def test_imported_results_show_cost_from_their_accelerator_price_and_cheaper_is_green(
    seeded_database: SeededDatabase,
) -> None:
    vllm_id, sglang_id = seeded_database.runs.imported[:2]  # seed 000: TP8 on A100s, no power
    costs = CostContext(PriceBook("USD", by_model={"A100": 2.0}))
    with db_session.session_scope(db_session.get_engine(seeded_database.url)) as session:
        pair = compare.load_compare(session, [vllm_id, sglang_id], costs)
    vllm, sglang = (run.name for run in pair.runs)
    table = compare.comparison_table(pair, profile=compare.FIRST_RESULT, baseline_id=vllm_id)
    # 8 A100s at 2.0 per hour over 3792.50 total tok/s
    assert table.values.at["cost_per_mtok_total", vllm] == pytest.approx(8 * 2.0 / (3792.50 * 3600) * 1e6)
    cheaper = (3792.50 / 4635.31 - 1) * 100
    assert table.changes.at["cost_per_mtok_total", sglang] == pytest.approx(cheaper, abs=0.01)
    assert table.verdicts.at["cost_per_mtok_total", sglang] == "better"
    assert "output_tokens_per_joule" not in table.values.index  # write-ups carry no power
    assert "Cost per 1M tokens" in compare.comparison_markdown(table)
    assert "cost_per_mtok_total" in compare.comparison_csv(table)


def test_a_one_gpu_and_a_tp2_run_are_ranked_coloured_and_fronted_per_accelerator(db_session: Session) -> None:
    # The TP2 run's node total is 89.8 % higher, but per accelerator it is 5.1 % lower and slower.
    one_gpu = crud.create_run(
        db_session, config=EngineConfig(engine="vllm", model="Qwen/Qwen3-8B"), status="done"
    )
    tp2 = crud.create_run(
        db_session, config=EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", tp=2), status="done"
    )
    for run, throughput, tpot in ((one_gpu, 22485.0, 20.0), (tp2, 42673.04, 25.0)):
        crud.add_profile_result(
            db_session,
            run_id=run.id,
            profile={"name": "throughput", "title": "Throughput"},
            result={
                "completed": 100,
                "failed": 0,
                "total_token_throughput": throughput,
                "mean_tpot_ms": tpot,
            },
            text_block=None,
            bench_mode=None,
        )
    compared = compare.load_compare(db_session, [one_gpu.id, tp2.id])
    first, second = (run.name for run in compared.runs)
    assert [run.run.accelerators for run in compared.runs] == [1, 2] and compared.budgets_differ
    table = compare.comparison_table(compared, profile=compare.FIRST_RESULT, baseline_id=one_gpu.id)

    # node totals: shown, not compared, not coloured
    assert math.isnan(table.changes.at["total_token_throughput", second])
    assert table.verdicts.at["total_token_throughput", second] == ""
    frame = compare.display_frame(table)
    assert frame.at["Total token throughput (tok/s)", second] == "42673.04"
    # per accelerator: compared and coloured
    assert table.values.at["total_token_throughput_per_accelerator", second] == pytest.approx(21336.52)
    assert round(table.changes.at["total_token_throughput_per_accelerator", second], 1) == -5.1
    assert table.verdicts.at["total_token_throughput_per_accelerator", second] == "worse"
    assert frame.at["Total token throughput per accelerator (tok/s)", second] == "21336.52 (-5.1%)"
    coloured = {
        key: table.verdicts.at[key, second] for key in table.verdicts.index if table.verdicts.at[key, second]
    }
    assert coloured == {"total_token_throughput_per_accelerator": "worse", "mean_tpot_ms": "worse"}
    styles = compare.styled(table).to_html().split("</style>")[0]
    assert "#fbcaca" in styles and "lightgreen" not in styles

    # ranked per accelerator, and the Pareto front drawn with it
    assert compared.throughput_key == "total_token_throughput_per_accelerator"
    assert [name for name, _ in compare.ranking(compared, profile=compare.FIRST_RESULT)] == [first, second]
    assert compare.ranking_text(compared, profile=compare.FIRST_RESULT) == (
        "Ranked by total token throughput per accelerator (tok/s): "
        f"1. {first} 22485.00 · 2. {second} 21336.52"
    )
    per_accelerator = compare.pareto_frame(
        compared,
        profile=compare.FIRST_RESULT,
        latency_key="mean_tpot_ms",
        throughput_key=compared.throughput_key,
    )
    assert per_accelerator.set_index("run")["on_front"].to_dict() == {first: True, second: False}
    node = compare.pareto_frame(
        compared,
        profile=compare.FIRST_RESULT,
        latency_key="mean_tpot_ms",
        throughput_key="total_token_throughput",
    )
    assert node["on_front"].all()  # by node totals the TP2 run would be crowned too
