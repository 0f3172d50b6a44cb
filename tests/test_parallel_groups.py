"""The parallel run's groups (tests/fixtures/parallel.py): real-engine tests run one after another on one
worker, except those that start no engine server (``parser_only``), which any free worker takes; the
slow tests go first, the one with the longest time limit first; and a real parallel run keeps a group on
one worker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.parallel import _group, _rank, pytest_collection_modifyitems


def _item(
    request: pytest.FixtureRequest, *marks: pytest.MarkDecorator, name: str = "check"
) -> pytest.Function:
    def check() -> None:
        pass

    for mark in marks:
        check = mark(check)
    return pytest.Function.from_parent(request.node.parent, name=name, callobj=check)


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


def test_the_slow_test_with_the_longest_time_limit_goes_first(request: pytest.FixtureRequest) -> None:
    quick = _item(request, name="quick")
    slow = _item(request, pytest.mark.slow, name="slow")  # the ini's limit (pyproject.toml)
    whole_study = _item(request, pytest.mark.slow, pytest.mark.timeout(1500), name="whole_study")
    later_quick = _item(request, pytest.mark.timeout(900), name="later_quick")
    longer_slow = _item(request, pytest.mark.slow, pytest.mark.timeout(timeout=900), name="longer_slow")
    engine = _item(request, pytest.mark.real_engine, name="engine")
    items = [quick, slow, whole_study, later_quick, longer_slow, engine]
    pytest_collection_modifyitems(items)
    assert [item.name for item in items] == [
        "engine",
        "whole_study",
        "longer_slow",
        "slow",
        "quick",
        "later_quick",
    ]


GROUPED_TESTS = """
import os

import pytest

pytestmark = pytest.mark.realtime


@pytest.mark.parametrize("index", range(4))
def test_grouped(index):
    print(os.environ["PYTEST_XDIST_WORKER"])
"""


def test_a_parallel_run_keeps_each_group_on_one_worker(tmp_path: Path) -> None:
    """pytest-xdist's ``loadgroup`` sends a group to one worker only while the installed pytest lets it
    mark the group in the test ids (pytest 9.2 does not: pytest-xdist issue 1386, hence the pin in
    requirements.txt); four tests of one group on two workers must all run on the same one."""
    (tmp_path / "test_grouped.py").write_text(GROUPED_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    realtime: one group\n")
    root = Path(__file__).resolve().parent.parent
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-v",
            "-p",
            "tests.fixtures.parallel",
        ]
        + ["-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    workers = re.findall(r"\[(gw\d+)\] .*PASSED", ran.stdout)
    assert len(workers) == 4 and len(set(workers)) == 1, ran.stdout
