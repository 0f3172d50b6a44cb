"""A report of runs on a simulated host whose clock runs faster than the engine it models (``time_scale``)
says so, naming the host and the factor its latencies and throughputs are off the modelled ones by; a
report of runs at the modelled speed says nothing of it."""

from __future__ import annotations

from db import session as db_session
from db.models import Run
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.report.sections import time_scale_note
from tests.fixtures.study_data import HOST, StudyDatabase


def test_a_study_on_a_time_scaled_host_says_its_figures_are_that_many_times_off(
    study_db: StudyDatabase,
) -> None:
    engine = db_session.get_engine(study_db.url)
    with db_session.new_session(engine) as session:
        report = study_report(session, study_id=study_db.done)
    (note,) = [note for note in report.notes if note.startswith("Simulated time ran faster")]
    assert f"on {HOST} (× 200), the hosts' time_scale" in note  # as the runner stored its environment
    assert note in render_markdown(report)


def _run(simulated: bool, simulate: object) -> Run:
    return Run(
        host_name="sim-a", simulated=simulated, environment={"simulated": simulated, "simulate": simulate}
    )


def test_only_simulated_runs_off_the_modelled_speed_are_named() -> None:
    assert time_scale_note([_run(True, {"accelerator": "H200", "time_scale": 1.0})]) is None
    assert time_scale_note([_run(False, {"time_scale": 5})]) is None  # a real host's stale snapshot
    assert time_scale_note([_run(True, "not a mapping"), _run(True, {"time_scale": "fast"})]) is None
    assert time_scale_note([_run(True, {"time_scale": True}), _run(True, {"time_scale": -2})]) is None
    scaled = [_run(True, {"time_scale": 5}), Run(host_name="sim-b", simulated=True, environment={})]
    assert time_scale_note(scaled) == (
        "Simulated time ran faster than the modelled engines on sim-a (× 5), the hosts' time_scale: their "
        "latencies, energies and costs per token are that many times smaller, and their throughputs (per "
        "second and per joule) that many times higher, than the modelled accelerators' would be."
    )
