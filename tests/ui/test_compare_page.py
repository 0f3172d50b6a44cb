"""The Compare page (``?compare=…&baseline=…``) with AppTest: the metric table against a baseline,
profile choice, charts, and every kind of bad URL."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.ui_data import SeededDatabase
from tests.ui.conftest import texts

COMPARE_PAGE = "pages/compare.py"
RUNS_HEADER = "| Run | Engine | Knobs | Profiles |"


def compare_ids(data_db: SeededDatabase) -> list[int]:
    return [data_db.runs.done, data_db.runs.replicated, data_db.runs.imported[0]]


def test_metric_table_against_the_baseline(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    done, replicated, seed = compare_ids(data_db)
    app = open_page(data_db.url, COMPARE_PAGE, {"compare": f"{done},{replicated},{seed}"})
    assert not app.exception
    assert app.query_params["baseline"] == str(done)
    table = app.dataframe[0].value
    assert list(table.columns) == [
        f"#{done} · simulated vLLM TP2 (simulated) (baseline)",
        f"#{replicated} · two replicas (simulated)",
        f"#{seed} · Choosing the Inference Engine · vLLM",
    ]
    assert {"Total token throughput (tok/s)", "Mean TTFT (ms)", "P99 ITL (ms)", "Success rate (%)"} <= set(
        table.index
    )
    # Two runs on 2 and 4 accelerators and a seed run on 8: node totals are shown without a change,
    # the per-accelerator row carries the changes.
    total = table.loc["Total token throughput (tok/s)"]
    assert total.iloc[1].endswith("×2") and "(" not in total.iloc[1]
    assert total.iloc[2] == "3792.50"
    per_accelerator = table.loc["Total token throughput per accelerator (tok/s)"]
    assert per_accelerator.iloc[1].endswith("(-50.0%)") and per_accelerator.iloc[2].startswith("474.06 (")
    assert table.loc["Success rate (%)"].iloc[0] == "100.0 %"
    assert any(
        text.startswith("These runs used different numbers of accelerators") for text in texts(app.warning)
    )
    # the seed's run served another model: named, and its changes are not judged
    (models,) = [
        text for text in texts(app.warning) if text.startswith("These results are of different models")
    ]
    assert f"#{seed} · Choosing the Inference Engine · vLLM: Qwen/" in models
    assert f"#{replicated}" not in models
    assert any(
        text.startswith("Ranked by total token throughput per accelerator (tok/s): 1. ")
        for text in texts(app.caption)
    )
    # Every column is as wide as its longest cell or name, so "18124.35 (+21.3%)" is never clipped.
    widths = {name: column["width"] for name, column in json.loads(app.dataframe[0].proto.columns).items()}
    for name in table.columns:
        assert widths[name] >= 8 * max(len(cell) for cell in table[name])
    facts = [text for text in texts(app.markdown) if text.startswith(RUNS_HEADER)][0].splitlines()
    assert [row.split(" | ")[1:5] for row in facts[2:4]] == [
        ["vllm", "tp=2", "Paced 256→32, Burst 128→16", "2"],
        ["vllm", "tp=2 ×2", "Paced 256→32, Burst 128→16", "4"],
    ]
    # The charts are drawn when asked for, in tabs drawn one at a time: the bars of the first, per
    # accelerator here.
    assert not app.get("vega_lite_chart") and not app.tabs
    app.session_state["compare_charts_box"] = True
    app.run()
    assert [tab.label for tab in app.tabs] == [
        "Per profile",
        "Throughput vs latency",
        "Latency distributions",
    ]
    (bars,) = app.get("vega_lite_chart")
    assert "Total token throughput per accelerator (tok/s)" in bars.proto.spec
    labels = [button.label for button in app.get("download_button")]
    assert labels.count("Download PNG") == 1 and "Download CSV" in labels and "Download markdown" in labels
    app.session_state["compare_charts"] = "Throughput vs latency"
    app.run()
    assert app.selectbox(key="compare_throughput").value == "total_token_throughput_per_accelerator"
    assert any(text.startswith("Pareto front") for text in texts(app.caption))
    app.session_state["compare_charts"] = "Latency distributions"
    app.run()
    assert len(app.get("vega_lite_chart")) == 1
    assert any("No per-request records for" in text and f"#{seed}" in text for text in texts(app.caption))


def test_baseline_and_profile_choice(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    done, replicated, seed = compare_ids(data_db)
    app = open_page(
        data_db.url, COMPARE_PAGE, {"compare": f"{done},{replicated},{seed}", "baseline": str(seed)}
    )
    assert app.dataframe[0].value.columns[2].endswith("(baseline)")
    app.selectbox(key="compare_baseline").select(replicated).run()
    assert app.query_params["baseline"] == str(replicated)
    assert app.dataframe[0].value.columns[1].endswith("(baseline)")
    app.selectbox(key="compare_profile").select("Burst 128→16").run()
    assert not app.exception
    table = app.dataframe[0].value
    assert table.loc["Total token throughput (tok/s)"].iloc[2] == "—"
    app.session_state["compare_charts_box"] = True
    app.run()
    app.selectbox(key="compare_bar_metric").select("mean_tpot_ms").run()
    for tab, key, value in (
        ("Throughput vs latency", "compare_latency", "mean_ttft_ms"),
        ("Latency distributions", "compare_cdf_metric", "e2el"),
    ):
        app.session_state["compare_charts"] = tab
        app.run()
        app.selectbox(key=key).select(value).run()
        assert not app.exception and len(app.get("vega_lite_chart")) == 1


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"compare": ""}, "No runs to compare"),
        ({}, "No runs to compare"),
        ({"compare": "1,abc"}, "'abc' in ?compare= is not a run id"),
        ({"compare": ",,"}, "No runs to compare"),
    ],
)
def test_unreadable_compare_params(empty_db: str, open_page, params: dict[str, str], message: str) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, COMPARE_PAGE, params)
    assert not app.exception
    assert any(text.startswith(message) for text in texts(app.info))


def test_unknown_ids_are_named(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, COMPARE_PAGE, {"compare": "999998,999999"})
    assert not app.exception
    assert texts(app.main.warning) == ["No runs with ids 999998, 999999 exist. Pick runs on the Runs page."]
    assert not app.dataframe

    app = open_page(
        data_db.url, COMPARE_PAGE, {"compare": f"{data_db.runs.done},999999", "baseline": "999999"}
    )
    assert not app.exception
    assert texts(app.main.warning) == ["No run with id 999999 exists; comparing the others."]
    assert any("Run 999999 is not among the compared runs" in text for text in texts(app.info))
    assert app.query_params["baseline"] == str(data_db.runs.done)


def test_bad_baseline_falls_back_to_the_first_run(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(
        data_db.url, COMPARE_PAGE, {"compare": f"{data_db.runs.failed},{data_db.runs.done}", "baseline": "x"}
    )
    assert not app.exception
    assert any("'x' in ?baseline= is not a run id" in text for text in texts(app.info))
    assert app.query_params["baseline"] == str(data_db.runs.failed)


def test_ids_typed_on_the_empty_page(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, COMPARE_PAGE)
    app.text_input(key="compare_open_ids").input(f"{data_db.runs.done}, {data_db.runs.replicated}").run()
    app.button(key="compare_open").click().run()
    assert not app.exception
    assert app.query_params["compare"] == f"{data_db.runs.done}, {data_db.runs.replicated}"
    assert len(app.dataframe) == 1 and any(text.startswith(RUNS_HEADER) for text in texts(app.markdown))
