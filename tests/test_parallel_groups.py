"""The parallel run's groups (tests/fixtures/parallel.py): real-engine tests run one after another on one
worker, except those that start no engine server (``parser_only``), which any free worker takes."""

from __future__ import annotations

import pytest

from tests.fixtures.parallel import _group, _rank


def _item(request: pytest.FixtureRequest, *marks: pytest.MarkDecorator) -> pytest.Function:
    def check() -> None:
        pass

    for mark in marks:
        check = mark(check)
    return pytest.Function.from_parent(request.node.parent, name="check", callobj=check)


@pytest.mark.parametrize(
    ("marks", "group", "rank"),
    [
        ((pytest.mark.real_engine,), "real_engine", 0),
        ((pytest.mark.real_engine, pytest.mark.parser_only), None, 0),
        ((pytest.mark.realtime,), "realtime", 2),
        ((pytest.mark.realtime, pytest.mark.parser_only), "realtime", 2),
        ((pytest.mark.slow,), None, 1),
        ((), None, 2),
    ],
    ids=["real-engine", "parser-only", "realtime", "realtime-parser-only", "slow", "unmarked"],
)
def test_group_and_rank(
    request: pytest.FixtureRequest, marks: tuple[pytest.MarkDecorator, ...], group: str | None, rank: int
) -> None:
    item = _item(request, *marks)
    assert (_group(item), _rank(item)) == (group, rank)
