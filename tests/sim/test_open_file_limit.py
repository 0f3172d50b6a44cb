"""The simulator and the bench raise their open-file limit to the hard limit (thousands of streams need
it) and never lower it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))
module = __import__(sys.argv[3], fromlist=["raise_open_file_limit"])
module.raise_open_file_limit()
print(*resource.getrlimit(resource.RLIMIT_NOFILE))
"""


@pytest.mark.parametrize("module", ["perflab.sim.server", "perflab.bench.runner"])
@pytest.mark.parametrize(("soft", "hard", "expected"), [(256, 4096, "4096 4096"), (4096, 4096, "4096 4096")])
def test_the_soft_limit_is_raised_to_the_hard_one(module: str, soft: int, hard: int, expected: str) -> None:
    shown = subprocess.run(
        [sys.executable, "-c", PROBE, str(soft), str(hard), module],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert shown == expected
