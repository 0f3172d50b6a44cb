"""Minimum evidence: the bounds a result must reach to be judged (in the engine's time on a simulated
host running faster than real time), a real run on a simulated host whose short benchmark is stored
marked too short, and the run page and a report saying so instead of publishing its figures."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.report.launches import Launch, mean_figures
from perflab.report.markdown import comparison_table
from perflab.report.model import TOO_SHORT_TEXT, ComparisonRow
from perflab.runner import execute_run, submit_run
from perflab.runner.bench_record import profile_json
from perflab.runner.evidence import MIN_COMPLETED, MIN_DURATION_S, TOO_SHORT, marked, too_short_reason
from perflab.runner.profile_spec import parse_profile
from perflab.views.run_detail import load_run_detail
from tests.fixtures.runs import SimHostFactory, free_port_block, inventory_of, stored_run


@pytest.mark.parametrize(
    ("duration", "completed", "time_scale", "short"),
    [
        (MIN_DURATION_S, MIN_COMPLETED, 1.0, False),
        (MIN_DURATION_S - 0.1, 500, 1.0, True),
        (60.0, MIN_COMPLETED - 1, 1.0, True),
        (0.6, 100, 10.0, False),  # 6 s of simulated time
        (0.4, 100, 10.0, True),
    ],
)
def test_a_result_is_judged_only_past_both_bounds(
    duration: float, completed: int, time_scale: float, short: bool
) -> None:
    result = {"duration": duration, "completed": completed}
    reason = too_short_reason(result, time_scale)
    assert (reason is not None) == short
    assert (TOO_SHORT in marked(result, time_scale)) == short
    if short:
        assert reason.startswith("too short to judge: ")
        assert f"at least {MIN_DURATION_S:g} s and {MIN_COMPLETED} requests" in reason
    assert too_short_reason({"completed": 10}) is None  # a result that says nothing of its length


def test_a_benchmark_shorter_than_the_floor_is_sized_to_it_and_judged(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    """20 short prompts last well under a second of simulated time: the runner has the bench send
    them again, fresh prompts each round, until the result clears the floor."""
    host = sim_host("evidence-sim", kind="local")
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    profile = parse_profile("random:in=64,out=4,n=20")
    run = submit_run(runs_db, host_name=host.name, config=config, profiles=[profile], worker_id="evidence")
    execute_run(run.id, engine=runs_db, inventory=inventory_of(host), worker_id="evidence")
    finished = stored_run(runs_db, run.id)
    assert finished.status == "done"
    with new_session(runs_db) as session:
        (stored,) = crud.list_profile_results(session, run_id=run.id)
    result = stored.result
    assert TOO_SHORT not in result and too_short_reason(result, host.time_scale) is None
    rounds = result["rounds"]
    assert rounds["count"] >= 3 and rounds["prompts_per_round"] == 20 and rounds["floor_reached"]
    assert result["completed"] == 20 * rounds["count"] >= MIN_COMPLETED
    assert result["duration"] * host.time_scale >= MIN_DURATION_S
    # the command stored with the run is perflab's, and says how it was sized
    assert "--perflab-min-duration" in finished.bench_commands[0]


def test_a_result_too_short_is_stored_marked_and_its_figures_are_not_published(runs_db: Engine) -> None:
    """A result stored too short to judge (one measured before benchmarks were sized, or past the
    bench's bound on requests) is shown with its reason instead of its figures."""
    profile = parse_profile("random:in=64,out=4,n=20")
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B")
    run = submit_run(runs_db, host_name="anywhere", config=config, profiles=[profile], worker_id="evidence")
    short = marked({"duration": 0.6, "completed": 20, "total_token_throughput": 2000.0}, 1.0)
    with new_session(runs_db) as session:
        crud.add_profile_result(
            session,
            run_id=run.id,
            profile=profile_json(profile),
            result=short,
            text_block="",
            bench_mode=None,
        )
        (stored,) = crud.list_profile_results(session, run_id=run.id)
        detail = load_run_detail(session, run.id)
    reason = stored.result[TOO_SHORT]
    assert reason.startswith("too short to judge: ") and " and 20 requests" in reason

    figures = mean_figures([Launch(stored_run(runs_db, run.id), (stored,))], profile, profile)
    assert figures is not None and figures.total_tps is None and figures.short == reason
    assert figures.tps_text == TOO_SHORT_TEXT
    table = comparison_table([ComparisonRow("Short", figures, figures)], decimals=1)
    assert reason in table[-1] and "Total TPS" not in table[-1]
    # the run page warns instead of letting the figures pass for a measurement
    assert detail is not None and detail.result_warnings() == [reason]
