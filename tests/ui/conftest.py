"""Fixtures of the page tests: the app's environment (database, hosts file, no worker thread) and
``open_page``, which runs the real app with ``AppTest`` and switches to a page with query params."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "app.py"
RUN_TIMEOUT_S = 60.0
SIMULATED_HOSTS = """\
hosts:
  - name: local-sim
    transport: local
    labels: [demo]
    workdir: {workdir}
    simulate:
      accelerator: H100
      count: 8
"""

OpenPage = Callable[..., AppTest]


@pytest.fixture
def hosts_file(tmp_path: Path) -> Path:
    """A hosts.yaml with one simulated local host working in this test's directory."""
    path = tmp_path / "hosts.yaml"
    path.write_text(SIMULATED_HOSTS.format(workdir=tmp_path / "work"))
    return path


@pytest.fixture
def app_env(monkeypatch: pytest.MonkeyPatch, hosts_file: Path) -> Callable[[str], None]:
    """``app_env(url)`` points the app at database ``url`` and the test's hosts file, without a worker."""

    def configure(url: str, hosts: Path = hosts_file) -> None:
        monkeypatch.setenv("PERFLAB_DATABASE_URL", url)
        monkeypatch.setenv("PERFLAB_HOSTS", str(hosts))
        monkeypatch.setenv("PERFLAB_APP_WORKER", "0")

    return configure


def run_app(page: str | None = None, params: dict[str, str] | None = None) -> AppTest:
    """Run ``app.py``; then, for another page, switch to it with ``params`` as its query string."""
    app = AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S).run()
    if page is not None:
        app.switch_page(page)
        app.query_params.clear()
        app.query_params.update(params or {})
        app.run()
    return app


@pytest.fixture
def open_page(app_env: Callable[[str], None]) -> Callable[..., AppTest]:
    """``open_page(url, "pages/run.py", {"run": "3"})``: the page rendered against database ``url``."""

    def open_(url: str, page: str | None = None, params: dict[str, str] | None = None) -> AppTest:
        app_env(url)
        return run_app(page, params)

    return open_


def texts(elements: object) -> list[str]:
    """The values of an AppTest element list (markdown, info, captions, …)."""
    return [str(element.value) for element in elements]  # type: ignore[attr-defined]


_PREFORMATTED = re.compile(r'<pre class="perflab-pre[^"]*">(.*)</pre>', re.DOTALL)


def preformatted(app: AppTest) -> list[str]:
    """The texts of the page's preformatted blocks (``ui.preformatted``: text blocks, commands)."""
    found = (_PREFORMATTED.search(element.proto.body) for element in app.get("html"))
    return [html.unescape(match.group(1)) for match in found if match]
