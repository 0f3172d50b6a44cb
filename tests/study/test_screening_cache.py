"""A search proposal's launch screens it, then measures it, on one engine with its prefix cache on: the
screening draws other prompts, so the tuning run finds none of its own cached; a tuning run that does
(the screening sent the same prompts first) is flagged as having ridden that cache and kept out of every
decision, its reason on the run page."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.profiles import BenchmarkProfile, scaled
from perflab.runner import execute_run, submit_run
from perflab.runner.evidence import CACHE_RIDE_TOLERANCE_PCT, RODE_CACHE, unjudged_reason
from perflab.runner.profile_spec import parse_profile
from perflab.study.measure import unjudged
from perflab.study.search_stage import screening_profile
from perflab.views.run_detail import load_run_detail
from tests.fixtures.runs import SimHostFactory, free_port_block, inventory_of, stored_run

TUNING = parse_profile("random:in=512,out=8,n=40,name=tune").model_copy(update={"seed": 42})


def _screen_then_tune(engine: Engine, sim_host: SimHostFactory, name: str, screening: BenchmarkProfile):
    host = sim_host(name, kind="local")
    config = EngineConfig(
        engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1), enable_prefix_caching=True
    )
    run = submit_run(engine, host_name=host.name, config=config, profiles=[screening, TUNING], worker_id=name)
    execute_run(run.id, engine=engine, inventory=inventory_of(host), worker_id=name)
    assert stored_run(engine, run.id).status == "done", stored_run(engine, run.id).failure_message
    with new_session(engine) as session:
        screened, tuned = crud.list_profile_results(session, run_id=run.id)
        detail = load_run_detail(session, run.id)
    return screened, tuned, detail


def test_a_search_launch_measures_its_tuning_run_on_prompts_the_screening_did_not_send(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    screened, tuned, _ = _screen_then_tune(runs_db, sim_host, "screen-fresh", screening_profile(TUNING, 0.25))
    assert screened.result["dataset"]["seed"] != tuned.result["dataset"]["seed"] == 42
    assert tuned.result["prefix_cache_queries"] > 0 and tuned.result["prefix_cache_hit_rate"] < 1.0
    assert RODE_CACHE not in tuned.result and unjudged([tuned], TUNING) is None


def test_a_tuning_run_that_rode_the_screenings_cache_is_flagged_and_kept_out_of_decisions(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    # the screening as it was drawn before: the tuning profile's own seed, so its first prompts
    same_prompts = scaled(TUNING, 0.25).model_copy(update={"name": "tune-screening"})
    _, tuned, detail = _screen_then_tune(runs_db, sim_host, "screen-same", same_prompts)
    hit_rate, own = tuned.result["prefix_cache_hit_rate"], tuned.result["own_prefix_share"]
    assert hit_rate > own + CACHE_RIDE_TOLERANCE_PCT
    reason = tuned.result[RODE_CACHE]
    assert reason.startswith("rode an earlier run's prefix cache: ") and f"{hit_rate:.1f} %" in reason
    # no decision uses it: the study's measurement of the launch is its reason, not a value
    assert unjudged([tuned], TUNING) == reason == unjudged_reason(tuned.result)
    assert detail is not None and any(reason in warning for warning in detail.result_warnings())
