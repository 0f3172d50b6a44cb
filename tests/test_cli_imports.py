"""What a ``python -m perflab`` command imports: help loads no database, numerical or web stack, and the
list commands none of the numerical or web stack.

Each command runs in a fresh interpreter that, once the command has ended, prints the top-level names of
the modules it had loaded as its last line of stdout.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perflab.cli import COMMANDS

REPO = Path(__file__).resolve().parents[1]
# Loaded by no command's --help.
NOT_FOR_HELP = ("sqlmodel", "sqlalchemy", "scipy", "pandas", "altair", "streamlit", "numpy", "paramiko")
# Loaded by no list command (they read the hosts file or the database, and print).
NOT_FOR_LISTS = ("scipy", "pandas", "altair", "streamlit")
PROBE = """
import json, sys
from perflab.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as stop:
    status = stop.code
print(json.dumps({"status": status, "modules": sorted({name.split(".")[0] for name in sys.modules})}))
"""


def loaded(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, set[str]]:
    """Exit status, output before the last line, and top-level modules loaded by ``perflab argv``."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    *output, last = done.stdout.splitlines()
    found = json.loads(last)
    return found["status"], "\n".join(output), set(found["modules"])


def help_argvs() -> list[list[str]]:
    """``--help`` of the top-level command, of each command and of each action of a command's parser
    that has one (``sim shim`` hands its arguments, ``--help`` too, to the engine it imitates)."""
    argvs = [["--help"]]
    for name, (module_name, _help) in COMMANDS.items():
        argvs.append([name, "--help"])
        parser = argparse.ArgumentParser()
        importlib.import_module(module_name).configure(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                argvs += [[name, choice, "--help"] for choice, sub in action.choices.items() if sub.add_help]
    return argvs


@pytest.mark.parametrize("argv", help_argvs(), ids=" ".join)
def test_help_loads_no_database_numerical_or_web_stack(argv: list[str]) -> None:
    status, output, modules = loaded(argv)
    assert status == 0
    assert "usage:" in output
    assert not modules & set(NOT_FOR_HELP), sorted(modules & set(NOT_FOR_HELP))


def test_hosts_list_loads_no_numerical_or_web_stack() -> None:
    status, output, modules = loaded(["hosts", "--file", str(REPO / "hosts.yaml"), "list"])
    assert status == 0
    assert "local-sim" in output
    assert not modules & set(NOT_FOR_LISTS), sorted(modules & set(NOT_FOR_LISTS))


def test_study_list_reads_the_database_without_the_numerical_or_web_stack(tmp_path: Path) -> None:
    env = {"PERFLAB_DATABASE_URL": f"sqlite:///{tmp_path / 'perflab.db'}"}
    assert loaded(["db", "upgrade"], env)[0] == 0
    status, output, modules = loaded(["study", "list"], env)
    assert status == 0
    assert output.startswith("No studies in database SQLite")
    # It did open the database (so the probe sees what a command loads) ...
    assert "sqlalchemy" in modules
    # ... and loaded nothing a study's statistics or pages need.
    assert not modules & set(NOT_FOR_LISTS), sorted(modules & set(NOT_FOR_LISTS))
