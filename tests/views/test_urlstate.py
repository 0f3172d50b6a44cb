"""Query parameters of shared links."""

from __future__ import annotations

import pytest

from perflab.views.urlstate import (
    MAX_COMPARE_RUNS,
    BadParam,
    compare_query,
    parse_baseline,
    parse_run_id,
    parse_run_ids,
)


def test_run_ids() -> None:
    assert parse_run_id("42") == 42 and parse_run_id(" 7 ") == 7 and parse_run_id("#12") == 12
    for bad in ("abc", "-1", "0", "4.5", "1e3"):
        with pytest.raises(BadParam, match="is not a run id"):
            parse_run_id(bad)
    for missing in (None, "", "  "):
        with pytest.raises(BadParam, match="No run given"):
            parse_run_id(missing)


def test_compare_ids() -> None:
    assert parse_run_ids("3,7,12") == [3, 7, 12]
    assert parse_run_ids("3, 7 7,3") == [3, 7]
    with pytest.raises(BadParam, match="'abc' in \\?compare= is not a run id"):
        parse_run_ids("1,abc")
    for missing in (None, "", ",,"):
        with pytest.raises(BadParam, match="No runs to compare"):
            parse_run_ids(missing)
    with pytest.raises(BadParam, match=f"compare at most {MAX_COMPARE_RUNS}"):
        parse_run_ids(",".join(str(n) for n in range(1, MAX_COMPARE_RUNS + 2)))


def test_baseline() -> None:
    assert parse_baseline(None, [3, 7]) == (3, None)
    assert parse_baseline("7", [3, 7]) == (7, None)
    baseline, note = parse_baseline("9", [3, 7])
    assert baseline == 3 and note == "Run 9 is not among the compared runs; using run 3 as the baseline."
    baseline, note = parse_baseline("x", [3, 7])
    assert baseline == 3 and note is not None and note.startswith("'x' in ?baseline= is not a run id")
    assert compare_query([3, 7], 7) == {"compare": "3,7", "baseline": "7"}
    assert compare_query([3]) == {"compare": "3"}
