"""Compare on real stored runs that do not measure the same thing: another model, another workload,
another dataset, a result too short to judge, another engine version. Each is named in a warning (a
note for the version), and the changes of the runs that differ from the baseline are not coloured;
a quantized variant of the baseline's model and a same-workload run still are."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from db import crud
from perflab.engines import EngineConfig
from perflab.runner.evidence import marked
from perflab.views import comparable, compare


def _run(
    session: Session,
    model: str,
    *,
    input_tokens: int = 128,
    output_tokens: int = 128,
    concurrency: int = 16,
    duration: float = 60.0,
    throughput: float = 1000.0,
    dataset: str = "random",
    version: str = "0.11.0",
) -> int:
    """A finished run of ``model`` with one result of 100 requests of those mean lengths."""
    run = crud.create_run(
        session,
        config=EngineConfig(engine="vllm", model=model),
        status="done",
        environment={"engine": "vllm", "engine_version": version},
    )
    result: dict[str, Any] = {
        "completed": 100,
        "failed": 0,
        "duration": duration,
        "total_input_tokens": 100 * input_tokens,
        "total_output_tokens": 100 * output_tokens,
        "total_token_throughput": throughput,
        "mean_ttft_ms": 50.0,
        "request_rate": "inf",
        "max_concurrency": concurrency,
        "dataset": {"name": dataset, "path": None, "input_len": input_tokens, "output_len": output_tokens},
    }
    crud.add_profile_result(
        session,
        run_id=run.id,
        profile={"name": "p", "title": "Profile"},
        result=marked(result),
        text_block=None,
        bench_mode=None,
    )
    return run.id


def _coloured(table: compare.ComparisonTable, name: str) -> set[str]:
    return {verdict for verdict in table.verdicts[name] if verdict}


def test_runs_that_measure_something_else_are_named_and_not_coloured(db_session: Session) -> None:
    baseline = _run(db_session, "Qwen/Qwen3-8B")
    same = _run(db_session, "Qwen/Qwen3-8B", throughput=1200.0)
    quantized = _run(db_session, "Qwen/Qwen3-8B-FP8", throughput=1300.0)
    bigger = _run(db_session, "Qwen/Qwen3-14B", throughput=1400.0)
    longer = _run(db_session, "Qwen/Qwen3-8B", input_tokens=1024, output_tokens=1024, throughput=900.0)
    sharegpt = _run(db_session, "Qwen/Qwen3-8B", dataset="sharegpt", throughput=1100.0)
    short = _run(db_session, "Qwen/Qwen3-8B", duration=1.2, throughput=1500.0)
    newer = _run(db_session, "Qwen/Qwen3-8B", version="0.12.0", throughput=1250.0)
    ids = [baseline, same, quantized, bigger, longer, sharegpt, short, newer]
    compared = compare.load_compare(db_session, ids)
    names = {run.run.id: run.name for run in compared.runs}

    checked = comparable.comparability(compared, profile=compare.FIRST_RESULT, baseline_id=baseline)
    assert checked.unjudged == {names[bigger], names[longer], names[sharegpt], names[short]}
    assert checked.marks == {names[short]: "(too short to judge)"}
    models, workloads, datasets, too_short = checked.warnings
    assert models.startswith(f"These results are of different models: {names[baseline]}: Qwen/Qwen3-8B; ")
    assert f"{names[bigger]}: Qwen/Qwen3-14B. Their changes" in models and "FP8" not in models
    assert workloads.startswith("These results are of different workloads")
    assert f"{names[longer]}: Profile: request rate inf, max concurrency 16, ~1024 in / ~1024 out tokens" in (
        workloads
    )
    assert f"{names[sharegpt]}: sharegpt" in datasets
    assert too_short.startswith(f"Not judged, as the study pages say: {names[short]}: too short to judge")
    (version,) = checked.notes
    assert version == (
        f"Engine versions differ ({names[baseline]}: vllm 0.11.0; {names[newer]}: vllm 0.12.0): the changes "
        "include the version's."
    )

    table = compare.comparison_table(
        compared,
        profile=compare.FIRST_RESULT,
        baseline_id=baseline,
        unjudged=checked.unjudged,
        marks=checked.marks,
    )
    for odd in (bigger, longer, sharegpt, short):
        assert _coloured(table, names[odd]) == set()
        assert table.changes.at["total_token_throughput", names[odd]] != 0  # shown, not judged
    for fine in (same, quantized, newer):
        assert _coloured(table, names[fine]) == {"better"}
    frame = compare.display_frame(table)
    assert f"{names[short]} (too short to judge)" in frame.columns
    assert f"{names[baseline]} (baseline)" in frame.columns
    markdown = compare.comparison_markdown(table)
    # the three comparable runs gain in throughput, of the node and per accelerator
    assert markdown.count("lightgreen") == 3 * 2


def test_runs_that_measure_the_same_thing_carry_no_warning(db_session: Session) -> None:
    baseline = _run(db_session, "Qwen/Qwen3-8B")
    other = _run(db_session, "Qwen/Qwen3-8B", input_tokens=140, throughput=800.0)  # within 25 %
    compared = compare.load_compare(db_session, [baseline, other])
    checked = comparable.comparability(compared, profile=compare.FIRST_RESULT, baseline_id=baseline)
    assert checked == comparable.Comparability()


def test_quantized_variants_share_their_base_model() -> None:
    assert comparable.base_model("Qwen/Qwen3-8B-FP8") == comparable.base_model("qwen/Qwen3-8B")
    assert comparable.base_model("org/Model-AWQ-Int4") == "org/model"
    assert comparable.base_model("Qwen/Qwen3-14B") != comparable.base_model("Qwen/Qwen3-8B")
    assert comparable.base_model(None) is None
