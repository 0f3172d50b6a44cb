"""Integers in shared links are bounded before they reach SQL: a huge, non-ASCII or endless page
number on the Runs page shows the last page, never an OverflowError."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from perflab.views.run_list import QUERY_KEYS, RunFilters, load_run_page, read_query
from perflab.views.urlstate import MAX_ID
from tests.fixtures.ui_data import SeededDatabase


@pytest.mark.parametrize("page", ["9999999999999999999", "²", "0", "-3", "9" * 5000, str(MAX_ID + 1)])
def test_page_numbers_no_run_list_can_have_are_left_out(page: str) -> None:
    reading = read_query({"page": page, "size": "9" * 5000}, {})
    assert QUERY_KEYS["page"] not in reading.state and QUERY_KEYS["size"] not in reading.state
    assert any("?page=" in problem for problem in reading.problems)


def test_largest_page_number_is_kept() -> None:
    assert read_query({"page": str(MAX_ID), "size": "50"}, {}).state == {
        "runs_page": MAX_ID,
        "runs_page_size": 50,
    }


def test_a_page_past_every_integer_is_the_last_page(db_session: Session) -> None:
    page = load_run_page(db_session, RunFilters(), page=10**19, page_size=50)
    assert (page.page, page.pages, page.total) == (1, 1, 0)


def test_runs_page_opened_with_a_huge_page_number(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, "pages/runs.py", {"page": "9999999999999999999"})
    assert not app.exception
    assert app.dataframe[0].value.shape[0] > 0
