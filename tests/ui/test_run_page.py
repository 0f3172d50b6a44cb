"""The Run page (``?run=ID``) with AppTest: a finished perflab run with charts, imported runs that
lack fields, failed / in-flight / queued runs, Re-run, Copy link, cancel, and bad URLs."""

from __future__ import annotations

import pytest
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from db import crud
from db import session as db_session
from db.models import ProfileResult, Run
from perflab.charts.run import LIVE_LATENCY_TITLE
from perflab.views import run_delete
from tests.fixtures.ui_data import MODEL, PROFILES, SeededDatabase
from tests.ui.conftest import APP, preformatted, run_app, texts

RUN_PAGE = "pages/run.py"
PROFILE_TABS = ["Notes", "Throughput and requests in flight", "Latency distribution", "Input length vs TTFT"]
COMMANDS_BOX = "Commands: serve, benchmark, and the same requests as vllm bench serve"


def charts(app) -> list:  # type: ignore[no-untyped-def]
    return list(app.get("vega_lite_chart"))


def result_ids(data: SeededDatabase, run_id: int) -> list[int]:
    """The ids of a run's profile results, in profile order (the keys of their chart tabs)."""
    with db_session.session_scope(db_session.get_engine(data.url)) as session:
        query = (
            select(ProfileResult.id).where(ProfileResult.run_id == run_id).order_by(ProfileResult.position)
        )
        return list(session.exec(query))


def test_a_run_on_a_time_scaled_simulated_host_says_how_far_its_figures_are_off(  # type: ignore[no-untyped-def]
    data_db: SeededDatabase, open_page
) -> None:
    """The runner stores the host's simulate block with the run's environment: a clock run 4 × faster
    than the engine it models is named beside the figures it shortened."""
    with db_session.session_scope(db_session.get_engine(data_db.url)) as session:
        run = session.get(Run, data_db.runs.done)
        assert run is not None
        simulate = {"accelerator": "H100", "count": 8, "time_scale": 4.0}
        run.environment = {**run.environment, "simulate": simulate}
        session.add(run)
    app = open_page(data_db.url, RUN_PAGE, {"run": str(data_db.runs.done)})
    assert not app.exception
    assert any(
        "Its clock ran 4 × faster than the modelled engine (the host's time_scale): latencies, energies and "
        "costs per token read 4 × smaller, throughputs (per second and per joule) 4 × higher" in text
        for text in texts(app.caption)
    )


def test_finished_run_shows_results_commands_and_charts(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, RUN_PAGE, {"run": str(data_db.runs.done)})
    assert not app.exception
    assert texts(app.title) == [f"Run {data_db.runs.done} · simulated vLLM TP2"]
    facts = " ".join(texts(app.markdown))
    assert (
        "local-sim (simulated)" in facts
        and "NVIDIA H100 80GB HBM3" in facts
        and ":green[:material/task_alt:] done" in facts
    )
    assert any("Simulated host" in text for text in texts(app.caption))
    assert not any("faster than the modelled engine" in text for text in texts(app.caption))  # time_scale 1
    # Profiles, then the open profile's notes and charts: tabs drawn only when open.
    assert [tab.label for tab in app.tabs] == ["Paced 256→32", *PROFILE_TABS, "Burst 128→16"]
    cards = {metric.label: metric.value for metric in app.metric}
    assert {"Total token throughput (tok/s)", "Mean TTFT (ms)", "Mean TPOT (ms)", "Success rate"} <= set(
        cards
    )
    assert cards["Success rate"] == "100.0 %"
    blocks = preformatted(app)
    assert sum("Serving Benchmark Result" in block for block in blocks) == 1  # the open profile's
    captions = texts(app.caption)
    assert any(text.startswith("Total input tokens: the server's usage.prompt_tokens") for text in captions)
    assert any(text.startswith("Peak concurrent requests: requests active during the") for text in captions)
    # The notes tab is open: no chart and no code block is built for a reader who does not ask.
    assert charts(app) == [] and texts(app.code) == []
    # its CSV (a row a profile) is held at once, its JSON (every request) is built when asked for
    assert {button.label for button in app.get("download_button")} == {"Download CSV"}
    app.button(key="run_download_json_prepare").click().run()
    assert {button.label for button in app.get("download_button")} == {"Download JSON", "Download CSV"}
    assert "Prepare JSON" not in [button.label for button in app.button]  # the download took its place
    assert [expander.label for expander in app.expander] == [
        "Delete this run",
        "Engine and accelerator samples",
        COMMANDS_BOX,
        "Environment snapshot",
        "Engine log tail",
        "Lifecycle",
    ]
    assert not any("driver" in text for text in texts(app.json))  # closed boxes are not drawn

    app.session_state["run_commands"] = True
    app.run()
    code = texts(app.code)
    assert f"vllm serve {MODEL} -tp 2" in code
    # Where people copy commands: perflab's bench command and the vllm bench serve one, for each profile.
    bench = [block for block in code if block.startswith("perflab bench --base-url http://127.0.0.1:8000 ")]
    assert len(bench) == 2
    vllm = [block for block in code if block.startswith("vllm bench serve --model")]
    assert vllm == [
        profile.vllm_bench_command(MODEL, base_url="http://127.0.0.1:8000", same_requests=True)
        for profile in PROFILES
    ]


def test_tabs_and_boxes_draw_their_charts_when_opened(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, RUN_PAGE, {"run": str(data_db.runs.done)})
    first = result_ids(data_db, data_db.runs.done)[0]
    app.session_state[f"run_charts_{first}"] = "Throughput and requests in flight"
    app.run()
    (timeline,) = charts(app)
    assert "Output tokens/s" in timeline.proto.spec
    assert "Download PNG" in {button.label for button in app.get("download_button")}
    app.session_state[f"run_charts_{first}"] = "Latency distribution"
    app.run()
    specs = [chart.proto.spec for chart in charts(app)]
    assert len(specs) == 2 and all('"TTFT (ms)"' in spec for spec in specs)
    app.session_state[f"run_charts_{first}"] = "Input length vs TTFT"
    app.run()
    assert len(charts(app)) == 1 and '"Input length (tokens)"' in charts(app)[0].proto.spec
    app.session_state["run_profile"] = "Burst 128→16"
    app.run()
    assert not app.exception
    blocks = [block for block in preformatted(app) if "Serving Benchmark Result" in block]
    assert len(blocks) == 1 and "Successful requests:                     40" in blocks[0], blocks
    assert charts(app) == []  # the second profile opens on its notes
    app.session_state["run_telemetry"] = True
    app.session_state["run_environment"] = True
    app.run()
    assert len(charts(app)) == 2
    assert any("570.172.08" in text for text in texts(app.json))


def test_a_replicated_run_names_its_replica_count_once(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, RUN_PAGE, {"run": str(data_db.runs.replicated)})
    facts = " ".join(texts(app.markdown))
    assert "tp=2 ×2" in facts and facts.count("×2") == 1, facts


def test_latency_metric_choice_redraws_the_distribution(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, RUN_PAGE, {"run": str(data_db.runs.done)})
    app.session_state[f"run_charts_{result_ids(data_db, data_db.runs.done)[0]}"] = "Latency distribution"
    app.run()
    selector = app.selectbox[0]
    assert selector.options == ["TTFT (ms)", "TPOT (ms)", "E2EL (ms)", "ITL (ms)"]
    specs = [chart.proto.spec for chart in charts(app)]
    assert len(specs) == 2 and all('"TTFT (ms)"' in spec for spec in specs)
    selector.select("itl").run()
    assert not app.exception
    specs = [chart.proto.spec for chart in charts(app)]
    assert len(specs) == 2 and all('"ITL (ms)"' in spec and '"TTFT (ms)"' not in spec for spec in specs)


def test_copy_link_carries_the_absolute_address(data_db: SeededDatabase, app_env) -> None:  # type: ignore[no-untyped-def]
    app_env(data_db.url)
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.context = {"url": "http://perf.example:8501/run"}
    app.run()
    app.switch_page(RUN_PAGE)
    app.query_params["run"] = str(data_db.runs.done)
    app.run()
    (button,) = [element for element in app.get("html") if "perflab-copy-run" in element.proto.body]
    assert f'data-text="http://perf.example:8501/run?run={data_db.runs.done}"' in button.proto.body


def test_rerun_queues_a_copy(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, RUN_PAGE, {"run": str(data_db.runs.done)})
    app.button(key="run_rerun").click().run()
    assert not app.exception
    engine = db_session.get_engine(data_db.url)
    with db_session.session_scope(engine) as session:
        newest = session.exec(select(Run).order_by(Run.id.desc())).first()
        original = crud.get_run(session, run_id=data_db.runs.done)
        assert newest is not None and original is not None and newest.id != original.id
        assert (newest.status, newest.host_name, newest.simulated) == ("queued", "local-sim", True)
        assert newest.config == original.config and newest.profiles == original.profiles
    note = f"Queued run {newest.id} with the same host, config and profiles."
    assert note in texts(app.success)
    # the note stays through the page's own reruns (live progress, the run finishing) ...
    app.run()
    assert note in texts(app.success)
    # ... and goes once another run is shown
    app.query_params["run"] = str(data_db.runs.done)
    app.run()
    assert note not in texts(app.success)


def test_imported_run_without_records_or_config(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    seed_run = data_db.runs.imported[3]
    app = open_page(data_db.url, RUN_PAGE, {"run": str(seed_run)})
    assert not app.exception
    assert app.button(key="run_rerun").disabled
    assert any("Serving Benchmark Result" in block for block in preformatted(app))
    assert any("No per-request records" in text for text in texts(app.caption))
    assert not app.tabs and not charts(app)  # nothing to chart: the notes alone


def test_guidellm_import_lacking_fields_has_cards_but_no_block(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    engine = db_session.get_engine(data_db.url)
    with db_session.session_scope(engine) as session:
        guidellm = session.exec(select(Run).where(Run.imported_from == "guidellm_report.json")).first()
    assert guidellm is not None
    app = open_page(data_db.url, RUN_PAGE, {"run": str(guidellm.id)})
    assert not app.exception
    assert any("No text block" in text for text in texts(app.caption))
    assert "Mean TTFT (ms)" in {metric.label for metric in app.metric}
    app.session_state["run_commands"] = True
    app.run()
    assert any("No serve command was recorded." in text for text in texts(app.caption))


def test_failed_run_shows_reason_and_log(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, RUN_PAGE, {"run": str(data_db.runs.failed)})
    assert not app.exception
    assert texts(app.error) == ["**oom**: CUDA out of memory while loading the weights"]
    assert any("torch.OutOfMemoryError" in block for block in texts(app.code))
    assert "This run stored no benchmark result." in texts(app.info)


def test_in_flight_run_shows_live_progress_and_can_be_cancelled(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    run_id = data_db.runs.benchmarking
    app = open_page(data_db.url, RUN_PAGE, {"run": str(run_id)})
    assert not app.exception
    progress = app.get("progress")
    assert len(progress) == 1
    assert (
        "profile paced (1 of 2) · 21/60 requests (1 failed), 12 in flight · 1.5 s elapsed"
        in progress[0].proto.text
    )
    engine = db_session.get_engine(data_db.url)
    with db_session.session_scope(engine) as session:
        crud.heartbeat_run(
            session,
            run_id=run_id,
            progress={
                "profile": "burst",
                "profile_index": 1,
                "profiles": 2,
                "done": 40,
                "failed": 0,
                "total": 40,
                "in_flight": 0,
            },
        )
    app.run()
    assert "profile burst (2 of 2) · 40/40 requests, 0 in flight" in app.get("progress")[0].proto.text

    assert app.button(key="run_cancel").disabled
    app.checkbox(key="run_cancel_confirm").check().run()
    app.button(key="run_cancel").click().run()
    assert not app.exception
    with db_session.session_scope(engine) as session:
        stored = crud.get_run(session, run_id=run_id)
        assert stored is not None and stored.cancel_requested and stored.status == "benchmarking"
    assert "(cancel requested)" in " ".join(texts(app.markdown))


def test_a_running_benchmark_draws_its_live_rate_latency_and_eta(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    run_id = data_db.runs.benchmarking
    # 10 requests end each second with 20 in flight, 2 s each; 100 of 400 done at 10 s.
    history = [[float(t), 10.0 * t, 0.0, 20.0, 20.0 * t, 10.0 * t] for t in range(11)]
    with db_session.session_scope(db_session.get_engine(data_db.url)) as session:
        crud.heartbeat_run(
            session,
            run_id=run_id,
            progress={
                "done": 100,
                "failed": 0,
                "total": 400,
                "in_flight": 20,
                "elapsed_s": 10.0,
                "history": history,
            },
        )
    app = open_page(data_db.url, RUN_PAGE, {"run": str(run_id)})
    assert not app.exception
    assert (
        "100/400 requests, 20 in flight · 10.0 s elapsed · about 30.0 s left"
        in app.get("progress")[0].proto.text
    )
    live_chart = [chart for chart in charts(app) if LIVE_LATENCY_TITLE in chart.proto.spec]
    assert len(live_chart) == 1
    assert any("mean end-to-end latency of the requests that ended" in text for text in texts(app.caption))


def test_queued_run_shows_the_command_it_will_launch(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, RUN_PAGE, {"run": str(data_db.runs.queued)})
    assert not app.exception
    app.session_state["run_commands"] = True
    app.run()
    assert f"vllm serve {MODEL} --enable-prefix-caching" in texts(app.code)
    assert any(text.startswith("No results yet: each profile") for text in texts(app.info))
    assert ":material/schedule: queued" in " ".join(texts(app.markdown))


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("abc", "'abc' in ?run= is not a run id"),
        ("-3", "'-3' in ?run= is not a run id"),
        ("0", "'0' in ?run= is not a run id"),
        ("", "No run given"),
    ],
)
def test_unreadable_run_ids_get_a_friendly_message(
    empty_db: str, open_page, param: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, RUN_PAGE, {"run": param})
    assert not app.exception
    assert any(text.startswith(message) for text in texts(app.info))
    assert app.number_input(key="run_open_id") is not None


def test_unknown_run_id(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, RUN_PAGE, {"run": "999999"})
    assert not app.exception
    assert texts(app.main.warning) == [
        "Run 999999 does not exist (it may have been deleted). Pick a run on the Runs page."
    ]


def test_open_run_by_id(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, RUN_PAGE)
    app.number_input(key="run_open_id").set_value(data_db.runs.failed).run()
    app.button(key="run_open").click().run()
    assert not app.exception
    assert app.query_params["run"] == str(data_db.runs.failed)
    assert texts(app.title)[0].startswith(f"Run {data_db.runs.failed}")


def test_finished_run_shows_its_cost_priced_from_the_hosts_file(  # type: ignore[no-untyped-def]
    data_db: SeededDatabase, app_env, hosts_file
) -> None:
    priced = "    price_per_accelerator_hour: 2.5\n    price_label: example price\n"
    hosts_file.write_text(hosts_file.read_text() + priced)
    app_env(data_db.url, hosts_file)
    app = run_app(RUN_PAGE, {"run": str(data_db.runs.done)})
    assert not app.exception
    cards = {metric.label: metric.value for metric in app.metric}
    assert cards["Cost per 1M tokens"].startswith("$")
    # its energy is the simulated engine's own count over its simulated time: the tokens per joule are the
    # output throughput over the power of its two accelerators (to the cards' rounding)
    tokens_per_joule = float(cards["Output tokens per joule (tok/J)"])
    watts = 2 * float(cards["Mean power per accelerator (W)"])
    output_tps = float(cards["Output token throughput (tok/s)"])
    assert tokens_per_joule == pytest.approx(output_tps / watts, rel=0.01)
    assert any(
        text.startswith("Cost: 2 accelerators × $2.50 per hour (example price; host local-sim)")
        for text in texts(app.caption)
    )


def test_an_ended_run_is_deleted_with_its_records_after_a_confirmation(
    data_db: SeededDatabase, open_page
) -> None:  # type: ignore[no-untyped-def]
    done = data_db.runs.done
    engine = db_session.get_engine(data_db.url)
    with db_session.session_scope(engine) as session:
        result_ids = [result.id for result in crud.list_profile_results(session, run_id=done)]
        assert crud.list_request_records(session, profile_result_id=result_ids[0])
    app = open_page(data_db.url, RUN_PAGE, {"run": str(done)})
    assert app.button(key=f"run_delete_{done}").disabled
    app.checkbox(key=f"run_delete_confirm_{done}").check().run()
    app.button(key=f"run_delete_{done}").click().run()
    assert not app.exception
    assert texts(app.title) == ["Runs"] and f"Deleted run {done}." in texts(app.success)
    assert done not in app.dataframe[0].value.index
    with db_session.session_scope(engine) as session:
        assert crud.get_run(session, run_id=done) is None
        assert not crud.list_profile_results(session, run_id=done)
        assert not crud.list_samples(session, run_id=done)
        assert all(not crud.list_request_records(session, profile_result_id=rid) for rid in result_ids)


def test_runs_a_study_needs_or_still_running_are_not_deleted(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    done, running = data_db.runs.done, data_db.runs.benchmarking
    engine = db_session.get_engine(data_db.url)
    with db_session.session_scope(engine) as session:
        study = crud.create_study(session, name="tp sweep", spec={})
        crud.add_candidate(session, study_id=study.id, stage_index=0, stage_name="tp", config={}, run_id=done)
    app = open_page(data_db.url, RUN_PAGE, {"run": str(done)})
    assert (
        f"Run {done} is a measurement of study #{study.id} (tp sweep): its decisions and report rest on it."
        in (texts(app.caption))
    )
    assert not [button for button in app.button if button.key == f"run_delete_{done}"]
    with db_session.session_scope(engine) as session:
        with pytest.raises(run_delete.RunNotDeletable, match="is benchmarking: cancel it"):
            run_delete.delete_run(session, running)
        assert crud.get_run(session, run_id=running) is not None
    running_page = open_page(data_db.url, RUN_PAGE, {"run": str(running)})
    assert "Delete this run" not in [expander.label for expander in running_page.expander]
