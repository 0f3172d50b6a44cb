"""Access: the settings and the password check, the page shown instead of an exposed app without a
login, and — with the real app under AppTest — read-only viewers, the password login and logout, OIDC
via ``st.user``, and ``queued_by`` recorded from the login."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import select
from streamlit import config as streamlit_config
from streamlit.testing.v1 import AppTest

from db import crud
from db import session as db_session
from db.models import Run
from db.session import new_session
from perflab import auth
from perflab.cli import main
from perflab.inventory import HostConfig
from perflab.secrets import known_values
from tests.fixtures.runs import perflab_env, write_hosts_file
from tests.fixtures.ui_data import SeededDatabase
from tests.ui.conftest import APP, RUN_TIMEOUT_S, texts

PASSWORD = "team-shared-password"
OIDC_SETTINGS = {
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "cookie-secret-for-tests",
    "client_id": "perflab",
    "client_secret": "client-secret-for-tests",
    "server_metadata_url": "https://sso.example.org/.well-known/openid-configuration",
}

# ----- settings ----------------------------------------------------------------------------------------


def test_modes() -> None:
    assert auth.access_settings({}) == auth.AccessSettings("none", chosen=False)
    assert auth.access_settings({"PERFLAB_AUTH": " Password "}) == auth.AccessSettings(
        "password", chosen=True
    )
    with pytest.raises(
        auth.AccessConfigError, match="PERFLAB_AUTH='ldap' is not one of none, password, oidc"
    ):
        auth.access_settings({"PERFLAB_AUTH": "ldap"})


def test_the_shared_password_comes_from_a_file_or_the_environment(tmp_path: Path) -> None:
    secret_file = tmp_path / "password"
    secret_file.write_text(f"{PASSWORD}\n")
    assert (
        auth.shared_password({"PERFLAB_PASSWORD_FILE": str(secret_file), "PERFLAB_PASSWORD": "x"}) == PASSWORD
    )
    assert auth.shared_password({"PERFLAB_PASSWORD": PASSWORD}) == PASSWORD
    with pytest.raises(auth.AccessConfigError, match="put it in a file named by PERFLAB_PASSWORD_FILE"):
        auth.shared_password({})
    with pytest.raises(auth.AccessConfigError, match="PERFLAB_PASSWORD_FILE: cannot read the file"):
        auth.shared_password({"PERFLAB_PASSWORD_FILE": str(tmp_path / "missing")})
    # Redaction gathers the password where it can and never fails for it.
    assert known_values(environ={"PERFLAB_PASSWORD_FILE": str(tmp_path / "missing")}) == set()
    assert known_values(environ={"PERFLAB_PASSWORD": PASSWORD}) == {PASSWORD}


def test_login_checks_the_name_and_the_password() -> None:
    environ = {"PERFLAB_PASSWORD": PASSWORD}
    assert auth.check_login("  Ana   Lima ", PASSWORD, "192.0.2.1", environ) == "Ana Lima"
    with pytest.raises(auth.LoginRefused, match="Wrong password"):
        auth.check_login("ana", PASSWORD[:-1], "192.0.2.1", environ)
    with pytest.raises(auth.LoginRefused, match="Type your name"):
        auth.check_login("  ", PASSWORD, "192.0.2.1", environ)
    assert auth.password_matches("é-secret", "é-secret") and not auth.password_matches("a", "ab")


@pytest.mark.parametrize(
    ("address", "loopback"),
    [("localhost", True), ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True),
     ("0.0.0.0", False), ("::", False), ("", False), (None, False), ("10.0.0.5", False),
     ("perflab.lan", False)],
)  # fmt: skip
def test_loopback_addresses(address: str | None, loopback: bool) -> None:
    assert auth.is_loopback(address) is loopback


def test_only_an_exposed_server_without_a_chosen_mode_is_refused() -> None:
    unset, chosen_none = auth.AccessSettings("none", chosen=False), auth.AccessSettings("none", chosen=True)
    assert "listens on the address 0.0.0.0" in str(auth.exposure_problem(unset, "0.0.0.0"))
    assert "every network interface" in str(auth.exposure_problem(unset, None))
    assert auth.exposure_problem(unset, "127.0.0.1") is None
    assert auth.exposure_problem(chosen_none, "0.0.0.0") is None


def test_oidc_needs_every_setting() -> None:
    assert auth.oidc_problem(OIDC_SETTINGS) is None
    missing = auth.oidc_problem({"redirect_uri": "http://localhost:8501/oauth2callback"})
    assert missing is not None and "cookie_secret, client_id, client_secret, server_metadata_url" in missing


def test_command_line_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "bo")
    assert auth.cli_user() == "bo"
    assert auth.cli_user(" ana ") == "ana"


# ----- the app ----------------------------------------------------------------------------------------


@pytest.fixture
def app_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., None]:
    """``app_settings(url, **env)``: the app's database and environment, without a worker thread."""

    def configure(url: str, **env: str) -> None:
        monkeypatch.setenv("PERFLAB_DATABASE_URL", url)
        monkeypatch.setenv("PERFLAB_APP_WORKER", "0")
        hosts = tmp_path / "hosts.yaml"
        hosts.write_text(f"hosts:\n  - {{name: local-sim, transport: local, workdir: {tmp_path / 'work'}}}\n")
        monkeypatch.setenv("PERFLAB_HOSTS", str(hosts))
        for name in ("PERFLAB_AUTH", "PERFLAB_PASSWORD", "PERFLAB_PASSWORD_FILE"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)

    return configure


@pytest.fixture
def server_address() -> Iterator[Callable[[str], None]]:
    """Set Streamlit's ``server.address`` for this test (as ``--server.address`` would)."""
    before = streamlit_config.get_option("server.address")
    yield lambda address: streamlit_config.set_option("server.address", address)
    streamlit_config.set_option("server.address", before)


def open_app(
    page: str | None = None,
    params: dict[str, str] | None = None,
    *,
    user: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
) -> AppTest:
    """The app (then ``page`` with ``params``) as a session with the given ``st.user`` and secrets."""
    app = AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S)
    if user is not None:
        app.user = user
    if secrets is not None:
        app.secrets.update(secrets)
    app.run()
    if page is not None:
        app.switch_page(page)
        app.query_params.update(params or {})
        app.run()
    return app


def newest_run(url: str) -> Run:
    with db_session.session_scope(db_session.get_engine(url)) as session:
        run = session.exec(select(Run).order_by(Run.id.desc())).first()
        assert run is not None
        session.expunge(run)
        return run


def test_an_exposed_server_without_login_shows_how_to_enable_one(
    app_settings: Callable[..., None], server_address: Callable[[str], None], tmp_path: Path
) -> None:
    database = tmp_path / "never-created.db"
    app_settings(f"sqlite:///{database}")
    server_address("0.0.0.0")
    app = open_app()
    assert not app.exception
    assert texts(app.title) == ["perflab needs a login here"]
    assert "listens on the address 0.0.0.0" in texts(app.error)[0]
    assert any("PERFLAB_AUTH=password" in text for text in texts(app.markdown))
    assert not database.exists() and not app.sidebar.caption

    app_settings(f"sqlite:///{database}", PERFLAB_AUTH="none")
    app = open_app()
    assert not app.exception and texts(app.title) == ["Runs"]


def test_password_mode_without_a_password_explains_itself(
    app_settings: Callable[..., None], empty_db: str
) -> None:
    app_settings(empty_db, PERFLAB_AUTH="password")
    app = open_app()
    assert texts(app.title) == ["perflab needs a login here"]
    assert "needs the shared password" in texts(app.error)[0]


def test_viewers_read_and_only_logged_in_people_act(
    app_settings: Callable[..., None], data_db: SeededDatabase, tmp_path: Path
) -> None:
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    app_settings(data_db.url, PERFLAB_AUTH="password", PERFLAB_PASSWORD_FILE=str(password_file))

    app = open_app("pages/run.py", {"run": str(data_db.runs.done)})
    assert not app.exception
    rerun = app.button(key="run_rerun")
    assert rerun.disabled and rerun.help == "Log in (in the sidebar) to re-run it."
    assert any("Serving Benchmark Result" in block.proto.body for block in app.get("html")), (
        "a read-only viewer still sees the run"
    )
    assert "Delete this run" not in [expander.label for expander in app.expander]
    app = open_app("pages/run.py", {"run": str(data_db.runs.benchmarking)})
    assert "Cancel this run" not in [expander.label for expander in app.expander]
    for page, action in (("pages/launch.py", "queue runs"), ("pages/datasets.py", "see and upload datasets"),
                         ("pages/hosts.py", "see and probe the hosts")):  # fmt: skip
        app = open_app(page)
        assert texts(app.main.info) == [f"Log in (in the sidebar) to {action}."]
    app = open_app()
    assert not [expander for expander in app.expander if expander.label.startswith("Import results")]

    app = open_app("pages/run.py", {"run": str(data_db.runs.done)})
    app.sidebar.text_input(key="auth_name").input("ana")
    app.sidebar.text_input(key="auth_password").input("wrong password")
    app.sidebar.button[0].click().run()
    assert texts(app.sidebar.error)[0].startswith("Wrong password (")
    assert app.button(key="run_rerun").disabled

    log_in(app, "ana")
    assert "Signed in as **ana**" in texts(app.sidebar.caption)
    assert not app.button(key="run_rerun").disabled
    app.button(key="auth_logout").click().run()
    assert app.button(key="run_rerun").disabled
    assert "Signed in as **ana**" not in texts(app.sidebar.caption)
    assert [button.label for button in app.sidebar.button] == ["Log in"]

    log_in(app, "bo")
    app.button(key="run_rerun").click().run()
    assert not app.exception
    queued = newest_run(data_db.url)
    assert queued.id != data_db.runs.done and queued.queued_by == "bo"
    assert all(PASSWORD not in str(element.value) for element in app.text_input)


def log_in(app: AppTest, name: str) -> None:
    app.sidebar.text_input(key="auth_name").input(name)
    app.sidebar.text_input(key="auth_password").input(PASSWORD)
    app.sidebar.button[0].click().run()


def test_oidc_login_records_the_email(app_settings: Callable[..., None], empty_db: str) -> None:
    app_settings(empty_db, PERFLAB_AUTH="oidc")
    app = open_app("pages/launch.py", user={"is_logged_in": False}, secrets={"auth": OIDC_SETTINGS})
    assert not app.exception
    assert texts(app.main.info) == ["Log in (in the sidebar) to queue runs."]
    assert [button.label for button in app.sidebar.button] == ["Log in"]

    person = {"is_logged_in": True, "email": "ana@example.org", "name": "Ana"}
    app = open_app("pages/launch.py", user=person, secrets={"auth": OIDC_SETTINGS})
    assert "Signed in as **ana@example.org**" in texts(app.sidebar.caption)
    presets = app.multiselect(key="launch_presets").options
    app.multiselect(key="launch_presets").select(presets[1]).run()
    app.button(key="launch_queue").click().run()
    assert not app.exception
    assert newest_run(empty_db).queued_by == "ana@example.org"


def test_oidc_without_its_settings_explains_itself(app_settings: Callable[..., None], empty_db: str) -> None:
    app_settings(empty_db, PERFLAB_AUTH="oidc")
    app = open_app(secrets={})
    assert texts(app.title) == ["perflab needs a login here"]
    assert "needs the [auth] section of .streamlit/secrets.toml" in texts(app.error)[0]


def test_command_line_runs_record_who_queued_them(
    runs_db: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = HostConfig(name="gpu-a", transport="local", workdir=str(tmp_path / "work"))
    for name, value in perflab_env(runs_db, write_hosts_file(tmp_path / "hosts.yaml", [host])).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("USER", "bo")
    queue = ["run", "--host", "gpu-a", "--engine", "vllm", "--model", "m", "--profile", "short", "--queue"]
    assert main(queue) == 0
    assert main([*queue, "--queued-by", "ana"]) == 0
    with new_session(runs_db) as session:
        rows = crud.list_runs(session, sort="created_at", descending=False).rows
    assert [row.queued_by for row in rows] == ["bo", "ana"]
