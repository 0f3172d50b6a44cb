"""``pip install .`` gives a working ``perflab`` command: built by pip in a throwaway venv (the packages
perflab needs come from this interpreter, so nothing else is downloaded but the build backend), run
from a directory outside the checkout, where it keeps its database and finds its hosts file."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_pip_install_gives_a_perflab_command(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    [packages] = (venv / "lib").glob("python3*/site-packages")
    (packages / "perflab-test-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    source = tmp_path / "source"
    skip = shutil.ignore_patterns("__pycache__", "*.pyz")
    for package in ("perflab", "db"):
        shutil.copytree(REPO / package, source / package, ignore=skip)
    for name in ("pyproject.toml", "requirements-app.txt", "README.md"):
        shutil.copy(REPO / name, source / name)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(source)],
        check=True,
        timeout=240,
        cwd=tmp_path,
    )
    shutil.rmtree(source)
    workdir = tmp_path / "lab"
    workdir.mkdir()
    shutil.copy(REPO / "hosts.yaml", workdir / "hosts.yaml")
    command = venv / "bin" / "perflab"

    def perflab(*args: str) -> str:
        done = subprocess.run(
            [str(command), *args], cwd=workdir, capture_output=True, text=True, timeout=120, check=True
        )
        return done.stdout

    assert perflab("--help").startswith("usage: perflab ")
    assert perflab("db", "upgrade").startswith(f"SQLite {workdir / 'var' / 'perflab.db'}: revision ")
    assert (workdir / "var" / "perflab.db").is_file()
    assert "local-sim" in perflab("hosts", "list")
    module = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "perflab", "--help"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert module.stdout.startswith("usage: python -m perflab ")
