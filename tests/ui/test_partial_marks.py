"""A partial result (its benchmark stopped early) is marked on every page that shows it: the runs
table, the run page (a warning saying how much it covers and why, and its tab), and the compare page."""

from __future__ import annotations

from sqlmodel import select

from db import session as db_session
from db.models import ProfileResult
from tests.fixtures.ui_data import SeededDatabase
from tests.ui.conftest import texts

REASON = "received SIGTERM"


def mark_first_result_partial(data_db: SeededDatabase, run_id: int) -> None:
    """Make the run's first result cover 40 of its 60 requests, stopped by ``REASON``."""
    engine = db_session.get_engine(data_db.url)
    with db_session.session_scope(engine) as session:
        result = session.exec(
            select(ProfileResult).where(ProfileResult.run_id == run_id, ProfileResult.position == 0)
        ).one()
        result.result = dict(
            result.result,
            partial=True,
            partial_reason=REASON,
            num_prompts=60,
            requests_sent=45,
            requests_unfinished=5,
        )
        session.add(result)


def test_partial_result_is_marked_on_runs_run_and_compare_pages(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    runs = data_db.runs
    mark_first_result_partial(data_db, runs.done)

    listing = open_page(data_db.url)
    table = listing.dataframe[0].value
    assert table.loc[runs.done, "Profile"] == "paced (partial)"
    assert table.loc[runs.replicated, "Profile"] == "paced"

    page = open_page(data_db.url, "pages/run.py", {"run": str(runs.done)})
    assert not page.exception
    assert texts(page.main.warning) == [
        f"Paced 256→32: Partial result: 40 of 60 requests ended before the run stopped ({REASON})."
    ]
    profile_tabs = [tab.label for tab in page.tabs if tab.label.startswith(("Paced", "Burst"))]
    assert profile_tabs == ["Paced 256→32 (partial)", "Burst 128→16"]

    untouched = open_page(data_db.url, "pages/run.py", {"run": str(runs.replicated)})
    assert texts(untouched.main.warning) == []

    compare = open_page(data_db.url, "pages/compare.py", {"compare": f"{runs.done},{runs.replicated}"})
    assert not compare.exception
    columns = list(compare.dataframe[0].value.columns)
    assert columns == [
        f"#{runs.done} · simulated vLLM TP2 (simulated) (partial) (baseline)",
        f"#{runs.replicated} · two replicas (simulated)",
    ]
