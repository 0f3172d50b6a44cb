"""Streamlit helpers shared by ``app.py`` and the pages (the only perflab module importing streamlit).

- the app shell every page sits in (layout, access check, sidebar status and login), drawn by
  ``app.py`` or, for a shared link opened first after a restart, by the page itself;
- access (:mod:`perflab.auth`): the page shown instead of the app when it would serve beyond this
  machine without a login, the login (shared password or OIDC), the viewer and what they may do;
- the database engine (migrated on first use) and the in-app worker, each one per server process
  (``st.cache_resource``); sessions on that engine;
- cached reads keyed by the database URL and the data's version (``st.cache_data``), cleared after
  the app writes;
- query parameters validated once at the top of a page, with a friendly message instead of a
  traceback; absolute share links and the "Copy link" button that puts them on the clipboard;
- small drawing helpers: download buttons for charts (PNG) and tables, the sidebar status.
"""

from __future__ import annotations

import html
import mimetypes
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple
from urllib.parse import urlencode, urlsplit

import altair as alt
import pandas as pd
import streamlit as st
from sqlalchemy.engine import Engine
from sqlmodel import Session
from streamlit.navigation.page import StreamlitPage
from streamlit.runtime.pages_manager import PagesManager

from db import crud
from db import session as db_session
from perflab import app_address, auth, redact, settings
from perflab.chart_png import chart_png
from perflab.charts import run_page as run_page_charts
from perflab.cost.figures import CostFigures
from perflab.cost.prices import PriceBook
from perflab.cost.stored import load_cost_context
from perflab.hub.client import HubError, hub_endpoint
from perflab.hub.downloads import Downloads
from perflab.inventory import Inventory, InventoryError, default_inventory_path, load_inventory
from perflab.report.charts import report_charts
from perflab.report.from_study import study_report
from perflab.report.model import Report
from perflab.study import views as study_views
from perflab.study.spec import StudySpecError
from perflab.views import compare, datasets, run_detail, run_list, status, urlstate
from perflab.views import cost as cost_views
from perflab.views.cards import Card
from perflab.views.run_list import run_link

TABLE_ROW_PX = 35
# Widths of :func:`fitted_columns`: pixels per character of the table font, padding, bounds.
CHAR_PX = 8
CELL_PADDING_PX = 24
MIN_FITTED_PX = 100
MAX_FITTED_PX = 360
SIDEBAR_REFRESH_S = 3.0
CARDS_PER_ROW = 4
# Distinct hosts/engines/models change rarely; runs the worker adds show up within this time.
FILTER_CHOICES_TTL_S = 60
STATUS_ICONS: dict[str, str] = {
    "queued": ":material/schedule:",
    "launching": ":material/rocket_launch:",
    "ready": ":material/play_circle:",
    "benchmarking": ":material/speed:",
    "done": ":green[:material/task_alt:]",
    "failed": ":red[:material/error:]",
    "cancelled": ":gray[:material/block:]",
    "incomplete": ":orange[:material/warning:]",
}


# ----- app shell ----------------------------------------------------------------------------------


# Set while app.py runs a page inside the shell it drew, in this script run's thread only.
_IN_SHELL: ContextVar[bool] = ContextVar("perflab_in_shell", default=False)


# Markdown tables wider than the page scroll sideways inside it instead of running off its edge. A
# block of program output (:func:`preformatted`) looks like a code block. A
# metric's label and value wrap instead of being cut with an ellipsis, and the value's font shrinks
# with the window, so a headline figure reads whole beside the sidebar at 1024 px; below 1280 px the
# sidebar is 240 px wide (not 300) and the page keeps narrower margins, leaving it about 730 px.
LAYOUT_CSS = """
<style>
  [data-testid="stMarkdownContainer"] table { display: block; max-width: 100%; overflow-x: auto; }
  [data-testid="stMetricLabel"] .stMarkdownEllipsis, [data-testid="stMetricLabel"] p,
  [data-testid="stMetricValue"] .stMarkdownEllipsis, [data-testid="stMetricValue"] p {
    white-space: normal; overflow: visible; text-overflow: clip; overflow-wrap: anywhere;
  }
  [data-testid="stMetricValue"] { font-size: clamp(1.25rem, 2.4vw, 2.25rem); }
  .perflab-pre {
    margin: 0; padding: 1rem; border-radius: 0.5rem; overflow-x: auto; white-space: pre;
    background: rgba(172, 177, 195, 0.15); font-family: "Source Code Pro", monospace; font-size: 0.875rem;
    line-height: 1.4;
  }
  .perflab-wrap { white-space: pre-wrap; overflow-wrap: anywhere; }
  @media (max-width: 1280px) {
    [data-testid="stMainBlockContainer"] { padding-left: 1.5rem; padding-right: 1.5rem; }
    [data-testid="stSidebar"][data-collapsed="false"] {
      width: 240px !important; min-width: 240px !important;
    }
  }
</style>
"""


def app_shell() -> None:
    """What surrounds every page: the wide layout, the access check (nothing starts when it fails),
    the migrated database, the in-app worker (once per server process), the sidebar status and login."""
    st.set_page_config(page_title="perflab", page_icon=":material/speed:", layout="wide")
    st.html(LAYOUT_CSS)
    access = access_gate()
    redact.install_log_redaction()
    settings_or_stop()
    db_engine()
    record_app_address(database_url())
    sidebar_status(app_worker=start_worker())
    sidebar_login(access)


def settings_or_stop() -> None:
    """Stop every page with the reason when an environment setting cannot be used."""
    try:
        settings.check()
    except settings.SettingError as problem:
        st.error(f"perflab cannot start: {problem}", icon=":material/error:")
        st.stop()


def run_in_shell(page: StreamlitPage) -> None:
    """Draw the app shell, then ``page`` inside it (``app.py``'s whole script)."""
    app_shell()
    token = _IN_SHELL.set(True)
    try:
        page.run()
    finally:
        _IN_SHELL.reset(token)


def ensure_app_shell() -> None:
    """Draw the app shell unless this very script run already did (through ``app.py``); call it first
    on every page, so that no page renders without the access check whatever the session's age.

    Streamlit treats an app with a ``pages/`` folder as a pages-directory app until its entry script
    has called ``st.navigation`` once in the server process; until then a page opened first after a
    restart (a shared link such as ``/run?run=42``, or any page a session opens while the first session
    is still starting) runs ``pages/<page>.py`` alone, under a navigation made of file names. Whether
    another session has meanwhile switched the server over says nothing about this run, so such a page
    switches the server to ``st.navigation`` and, in a fresh session, reruns at once so that ``app.py``
    draws the shell and the real navigation around the same page (pages are identified by their URL
    path either way). A session that already holds widget state (a browser that reconnected with a
    click in flight) must not lose it to a rerun: the page draws the shell itself and the next
    interaction runs ``app.py``.
    """
    if _IN_SHELL.get():
        return
    PagesManager.uses_pages_directory = False
    if not st.session_state:
        st.rerun()
    app_shell()


# ----- access -------------------------------------------------------------------------------------

VIEWER_KEY = "perflab_viewer"
LOGIN_ERROR_KEY = "perflab_login_refused"
READ_ONLY_NOTE = "Read-only: log in to queue and change runs."


def _oidc_settings() -> dict[str, Any] | None:
    """The ``[auth]`` section of the app's secrets, or None when there is none."""
    try:
        section = st.secrets.get("auth")
    except FileNotFoundError:
        return None
    return dict(section) if section else None


def access_gate() -> auth.AccessSettings:
    """The access settings; when the app may not serve as configured, a page explaining how to enable
    a login is drawn instead and the script stops."""
    try:
        access = auth.access_settings()
        problem = auth.exposure_problem(access, st.get_option("server.address"))
        if problem is None and access.mode == "password":
            auth.shared_password()
            auth.login_policy()
        if problem is None and access.mode == "oidc":
            problem = auth.oidc_problem(_oidc_settings())
    except auth.AccessConfigError as error:
        problem = str(error)
    if problem is None:
        return access
    st.title("perflab needs a login here")
    st.error(problem, icon=":material/lock:")
    st.markdown(auth.HOW_TO_ENABLE)
    st.stop()


def viewer() -> auth.Viewer:
    """The person using this browser session and the access mode."""
    mode = auth.access_settings().mode
    if mode == "oidc":
        if not st.user.is_logged_in:
            return auth.Viewer(mode)
        identity = st.user.get("email") or st.user.get("name") or st.user.get("sub")
        return auth.Viewer(mode, str(identity) if identity else "unknown user")
    if mode == "password":
        return auth.Viewer(mode, st.session_state.get(VIEWER_KEY))
    return auth.Viewer(mode)


def may_write() -> bool:
    """Whether this session may queue, change or delete anything (always without a login mode)."""
    return viewer().may_write


def write_blocker(action: str) -> str | None:
    """``Log in to <action>`` when this session may not write, else None (for a disabled button's help)."""
    return None if may_write() else f"Log in (in the sidebar) to {action}."


def require_login(action: str) -> None:
    """Stop the page with a note when this session may not write (pages that only act)."""
    blocker = write_blocker(action)
    if blocker is not None:
        st.info(blocker, icon=":material/lock:")
        st.stop()


def queued_by(typed: str | None = None) -> str | None:
    """Who is queuing: the logged-in viewer, else the name typed in the form (None when empty)."""
    person = viewer()
    return person.name if person.logged_in else ((typed or "").strip() or None)


def sidebar_login(access: auth.AccessSettings) -> None:
    """The sidebar's login: who is signed in and a way out, or a way in. Logging in and out with the
    shared password happens in button callbacks, before the page runs, so it draws for the new viewer."""
    if not access.login_enabled:
        return
    sidebar = st.sidebar
    person = viewer()
    if person.logged_in:
        sidebar.caption(f"Signed in as **{person.name}**")
        if access.mode == "password":
            sidebar.button("Log out", key="auth_logout", icon=":material/logout:", on_click=_log_out)
        elif sidebar.button("Log out", key="auth_logout", icon=":material/logout:"):
            st.logout()
        return
    if access.mode == "oidc":
        sidebar.caption(READ_ONLY_NOTE)
        if sidebar.button("Log in", key="auth_login", icon=":material/login:"):
            st.login()
        return
    with sidebar.form("auth_form", clear_on_submit=True):
        st.caption(READ_ONLY_NOTE)
        st.text_input("Your name", key="auth_name")
        st.text_input("Password", type="password", key="auth_password")
        st.form_submit_button("Log in", icon=":material/login:", on_click=_log_in)
    refused = st.session_state.pop(LOGIN_ERROR_KEY, None)
    if refused:
        sidebar.error(refused)


def _log_in() -> None:
    """Check the login form's name and shared password, counted against the client's address (the
    browser's connection; None from this machine — every client of a proxy on this machine shares
    it); remember the viewer or why they were refused."""
    try:
        st.session_state[VIEWER_KEY] = auth.check_login(
            st.session_state.get("auth_name", ""),
            st.session_state.get("auth_password", ""),
            st.context.ip_address,
        )
    except auth.LoginRefused as refused:
        st.session_state[LOGIN_ERROR_KEY] = str(refused)


def _log_out() -> None:
    st.session_state.pop(VIEWER_KEY, None)


# ----- database and worker ------------------------------------------------------------------------


@st.cache_resource(show_spinner="Opening the database…")
def _engine_for(url: str) -> Engine:
    engine = db_session.get_engine(url)
    db_session.upgrade(engine)
    return engine


def database_url() -> str:
    """The database this app uses (``PERFLAB_DATABASE_URL`` or the default SQLite file)."""
    return db_session.database_url()


def db_engine() -> Engine:
    """The app's database engine; the schema is migrated the first time."""
    return _engine_for(database_url())


@contextmanager
def session() -> Iterator[Session]:
    """A session on the app's database that commits when the block ends."""
    with db_session.session_scope(db_engine()) as opened:
        yield opened


@st.cache_resource(show_spinner=False)
def record_app_address(url: str) -> None:
    """Record, once per server process and database, the address this app is served at (its real
    port and base path), for the links commands reading the same database print."""
    app_address.record(
        url,
        app_address.served_url(
            address=st.get_option("server.address"),
            port=int(st.get_option("server.port")),
            base_path=st.get_option("server.baseUrlPath"),
        ),
    )


@st.cache_resource(show_spinner=False)
def hub_endpoint_text() -> str:
    """The hub's address as the pages show it, or why it cannot be used."""
    try:
        return hub_endpoint()
    except HubError as problem:
        return str(problem)


@st.cache_resource
def hub_downloads() -> Downloads:
    """The hub downloads of this server process (shared by every session)."""
    return Downloads()


def _app_worker(url: str) -> Any:
    from perflab.worker import start_app_worker

    return start_app_worker(_engine_for(url))


def start_worker() -> bool:
    """Start the in-process worker once per server process; False when ``PERFLAB_APP_WORKER=0``."""
    if not settings.app_worker_enabled():
        return False
    _app_worker(database_url())
    return True


# ----- cached reads -------------------------------------------------------------------------------


class HostsFacts(NamedTuple):
    """What the pages read from the hosts file on every rerun: the hosts it simulates (a run learns it
    is simulated only when it launches) and the team's prices (none when the file is unusable)."""

    simulated: frozenset[str]
    prices: PriceBook


@st.cache_resource(show_spinner=False, max_entries=4)
def _hosts_facts(path: str, modified_ns: int) -> HostsFacts:
    try:
        inventory = load_inventory(path)
    except InventoryError:
        return HostsFacts(frozenset(), PriceBook())
    simulated = frozenset(host.name for host in inventory.hosts if host.simulated)
    return HostsFacts(simulated, PriceBook.from_inventory(inventory))


def hosts_facts() -> HostsFacts:
    """:class:`HostsFacts` of the hosts file, read again only when the file changes."""
    path = default_inventory_path()
    try:
        modified = path.stat().st_mtime_ns
    except OSError:
        return HostsFacts(frozenset(), PriceBook())
    return _hosts_facts(str(path), modified)


def price_book() -> PriceBook:
    """The team's prices from the hosts file (:func:`hosts_facts`)."""
    return hosts_facts().prices


@st.cache_data(show_spinner=False, max_entries=32)
def _run_detail(url: str, run_id: int, version: str) -> run_detail.RunDetail | None:
    with db_session.session_scope(_engine_for(url)) as opened:
        return run_detail.load_run_detail(opened, run_id)


class LoadedRun(NamedTuple):
    """The run page's data and the version it was read at (the key of its cached charts)."""

    detail: run_detail.RunDetail
    version: str


def load_run_detail(run_id: int) -> LoadedRun | None:
    """The run page's data, cached until the run changes (status, heartbeat, finish, results,
    samples): a finished run is read once."""
    with session() as opened:
        version = run_detail.run_version(opened, run_id)
    if version is None:
        return None
    detail = _run_detail(database_url(), run_id, version)
    return None if detail is None else LoadedRun(detail, version)


@st.cache_data(show_spinner=False, max_entries=128)
def _run_chart_spec(
    url: str,
    run_id: int,
    version: str,
    chart: str,
    profile_id: int | None,
    metric: str | None,
    _detail: run_detail.RunDetail,
) -> dict[str, Any]:
    # Keyed by the run's version like _run_detail; the detail itself (read at that version) is not
    # hashed (the leading underscore), so a miss costs no second copy of the run's records.
    return run_page_charts.chart_spec(_detail, chart, profile_id=profile_id, metric=metric)


def run_chart(
    loaded: LoadedRun,
    chart: str,
    *,
    key: str,
    file_name: str,
    profile_id: int | None = None,
    metric: str | None = None,
) -> None:
    """One of the run page's charts (:mod:`perflab.charts.run_page`), built once per run version."""
    spec = _run_chart_spec(
        database_url(), loaded.detail.run.id, loaded.version, chart, profile_id, metric, loaded.detail
    )
    draw_spec(spec, key=key, file_name=file_name)


@st.cache_data(show_spinner=False, ttl=FILTER_CHOICES_TTL_S, max_entries=8)
def _filter_choices(url: str) -> dict[str, list[str]]:
    with db_session.session_scope(_engine_for(url)) as opened:
        return run_list.filter_choices(opened)


def filter_choices() -> dict[str, list[str]]:
    """The runs page's filter values (refreshed every minute and after the app writes)."""
    return _filter_choices(database_url())


@st.cache_data(show_spinner=False, max_entries=16)
def _compare_set(
    url: str, run_ids: tuple[int, ...], versions: tuple[str | None, ...], prices: str
) -> compare.CompareSet:
    with db_session.session_scope(_engine_for(url)) as opened:
        context = load_cost_context(opened, crud.get_runs(opened, run_ids=list(run_ids)))
        return compare.load_compare(opened, list(run_ids), context)


def load_compare(run_ids: list[int]) -> compare.CompareSet:
    """The compared runs with their results, cached until one of them or a price changes."""
    with session() as opened:
        versions = run_detail.run_versions(opened, run_ids)
    ids = tuple(run_ids)
    shown = tuple(versions.get(run_id) for run_id in ids)
    return _compare_set(database_url(), ids, shown, repr(price_book()))


@st.cache_data(show_spinner=False, max_entries=32)
def _run_costs(url: str, run_id: int, version: str, prices: str) -> dict[int, CostFigures]:
    with db_session.session_scope(_engine_for(url)) as opened:
        run = crud.get_run(opened, run_id=run_id)
        return cost_views.run_costs(opened, run_id, load_cost_context(opened, [run] if run else []))


def load_run_costs(run_id: int) -> dict[int, CostFigures]:
    """Cost and energy figures of a run's results by result id, cached until the run or a price changes."""
    with session() as opened:
        version = run_detail.run_version(opened, run_id)
    return {} if version is None else _run_costs(database_url(), run_id, version, repr(price_book()))


@st.cache_data(show_spinner=False, max_entries=8)
def _dataset_preview(url: str, dataset_id: int, content_hash: str) -> pd.DataFrame | None:
    with db_session.session_scope(_engine_for(url)) as opened:
        return datasets.load_preview(opened, dataset_id)


def dataset_preview(dataset_id: int, content_hash: str) -> pd.DataFrame | None:
    """The first prompts of a stored dataset, read and parsed once per content (the content can be
    large; a dataset never changes it); None when the dataset was deleted."""
    return _dataset_preview(database_url(), dataset_id, content_hash)


@st.cache_data(show_spinner=False, max_entries=8)
def _output_length_counts(url: str, dataset_id: int, content_hash: str) -> tuple[int, int]:
    with db_session.session_scope(_engine_for(url)) as opened:
        return datasets.load_output_length_counts(opened, dataset_id)


def dataset_output_length_counts(dataset_id: int, content_hash: str) -> tuple[int, int]:
    """How many prompts of a stored dataset carry their own output length, of how many (read once
    per content)."""
    return _output_length_counts(database_url(), dataset_id, content_hash)


class LoadedStudy(NamedTuple):
    """A study's result as its page draws it (or why its spec cannot be read), its charts as Vega-Lite
    specs by name, and the version it was built at (:func:`perflab.study.views.study_version`)."""

    report: Report | None
    problem: str | None
    charts: dict[str, dict[str, Any]]
    version: str


@st.cache_data(show_spinner=False, max_entries=16)
def _study_result(
    url: str, study_id: int, version: str, prices: str
) -> tuple[Report | None, str | None, dict[str, dict[str, Any]]]:
    with db_session.session_scope(_engine_for(url)) as opened:
        try:
            report = study_report(opened, study_id=study_id)
        except StudySpecError as error:
            return None, str(error), {}
    return report, None, {name: figure.to_dict() for name, figure in report_charts(report).items()}


def study_version(study_id: int) -> str | None:
    """What the study's result depends on now (None for an unknown study); one small query."""
    with session() as opened:
        return study_views.study_version(opened, study_id)


def load_study(study_id: int) -> LoadedStudy | None:
    """The study's result, built once per version of the study and of the prices (None for an unknown
    study): a page that polls a running study rebuilds it only when a run or the study moved on."""
    version = study_version(study_id)
    if version is None:
        return None
    report, problem, charts = _study_result(database_url(), study_id, version, repr(price_book()))
    return LoadedStudy(report, problem, charts, version)


def clear_cached_reads() -> None:
    """Forget every cached read (call after the app wrote to the database)."""
    st.cache_data.clear()


# ----- URL state ----------------------------------------------------------------------------------


def query_param(name: str) -> str | None:
    """The value of ``?name=`` (the last one when repeated), or None."""
    value = st.query_params.get(name)
    return value if isinstance(value, str) else None


def url_run_id() -> int | None:
    """The run id of ``?run=``, or None after showing why it cannot be read."""
    try:
        return urlstate.parse_run_id(query_param("run"))
    except urlstate.BadParam as problem:
        st.info(str(problem))
        return None


def url_run_ids() -> list[int] | None:
    """The run ids of ``?compare=``, or None after showing why they cannot be read."""
    try:
        return urlstate.parse_run_ids(query_param("compare"))
    except urlstate.BadParam as problem:
        st.info(str(problem))
        return None


def app_base_url(current_page: str) -> str:
    """The app's address as the browser sees it (``http://host:8501``), without the page path."""
    url = st.context.url
    if url:
        parts = urlsplit(url)
        path = parts.path.rstrip("/")
        if current_page and path.endswith("/" + current_page):
            path = path[: -len(current_page) - 1]
        return f"{parts.scheme}://{parts.netloc}{path}"
    host = st.context.headers.get("Host") if st.context.headers else None
    return f"http://{host}" if host else settings.app_url()


def share_link(page: str, params: dict[str, str], *, current_page: str) -> str:
    """The absolute link to ``page`` with ``params`` (``http://host:8501/run?run=42``)."""
    return f"{app_base_url(current_page)}/{page}?{urlencode(params, safe=',')}"


COPY_BUTTON_HTML = """
<style>
  .perflab-copy button {{
    font: inherit; font-size: 0.95rem; min-height: 2.5rem; padding: 0.25rem 0.75rem; cursor: pointer;
    border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 0.5rem; background: inherit; color: inherit;
  }}
  .perflab-copy button:hover {{ border-color: #ff4b4b; color: #ff4b4b; }}
  .perflab-copy {{ display: flex; align-items: center; gap: 0.5rem; white-space: nowrap; }}
  .perflab-copy span {{ font-size: 0.85rem; opacity: 0.75; }}
</style>
<div class="perflab-copy">
  <button type="button" id="{element_id}" data-text="{text}" title="{text}">{label}</button>
  <span id="{element_id}-note" role="status"></span>
</div>
<script>
(() => {{
  const button = document.getElementById("{element_id}");
  const note = document.getElementById("{element_id}-note");
  if (!button || button.dataset.ready) return;
  button.dataset.ready = "1";
  const fallback = (text) => {{
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    const copied = document.execCommand("copy");
    area.remove();
    if (!copied) throw new Error("copy refused");
  }};
  button.addEventListener("click", async () => {{
    const text = button.dataset.text;
    try {{
      if (navigator.clipboard && window.isSecureContext) {{
        await navigator.clipboard.writeText(text);
      }} else {{
        fallback(text);
      }}
      note.textContent = "{copied}";
    }} catch (error) {{
      try {{
        fallback(text);
        note.textContent = "{copied}";
      }} catch (again) {{
        note.textContent = text;
        note.style.whiteSpace = "normal";
        note.style.userSelect = "all";
      }}
    }}
  }});
}})();
</script>
"""


def preformatted(text: str, *, wrap: bool = False) -> None:
    """A block of program output or a command line in a fixed-width font, as printed (``wrap``: long
    lines go on below). Code blocks (``st.code``) load a syntax highlighter of 1.5 MB into the browser
    the first time a page shows one: text a page shows at once is drawn without it."""
    kind = "perflab-pre perflab-wrap" if wrap else "perflab-pre"
    st.html(f'<pre class="{kind}">{html.escape(text)}</pre>')


def copy_button(text: str, *, key: str, label: str, copied: str) -> None:
    """A button called ``label`` that puts ``text`` on the clipboard in the browser (the Clipboard API,
    or a selected text copy where the page is not a secure context) and says ``copied`` beside it on
    one line (the text is the button's tooltip); where the browser refuses both, the text itself is
    shown, selected on a click, to copy by hand."""
    st.html(
        COPY_BUTTON_HTML.format(
            element_id=f"perflab-copy-{key}",
            text=html.escape(text, quote=True),
            label=html.escape(label),
            copied=html.escape(copied),
        ),
        width="content",
        unsafe_allow_javascript=True,
    )


def copy_link_button(link: str, *, key: str) -> None:
    """A "Copy link" button that puts ``link`` on the clipboard and says "Link copied"
    (:func:`copy_button`)."""
    copy_button(link, key=key, label="Copy link", copied="Link copied")


# ----- drawing helpers ----------------------------------------------------------------------------


def status_text(status_name: str) -> str:
    """A status with its icon, as markdown (``:green[:material/task_alt:] done``)."""
    return f"{STATUS_ICONS.get(status_name, '•')} {status_name}"


# The one file a session prepared for download: its button's key, the version of its content, the file.
PREPARED_KEY = "download_prepared"


class Download(NamedTuple):
    """A download button: its label (``Download …``), its file's content, the file name, a widget key.
    A file too costly to build each time the page is drawn (all of a run's requests, a study's charts)
    is a function building it, with the ``version`` of the content it builds."""

    label: str
    data: str | bytes | Callable[[], str | bytes]
    file_name: str
    key: str
    version: str = ""


def download(item: Download, *, place: Any = st) -> None:
    """A download button holding its file (MIME type from the name), served for as long as the button
    is shown. A costly file (a function) is built by a "Prepare …" button first, under a spinner in the
    button's place; its download button then takes that place and holds the file (one prepared file a
    session, until its content's version changes).

    Streamlit 1.67's own deferred download (a callable ``data``) is not used: the file it builds on the
    click is dropped by the second media clean-up after it is built, and every script run of every
    session ends with one (each sidebar refresh, :data:`SIDEBAR_REFRESH_S`), so a browser that fetched
    it late (many users, a slow link) was given nothing."""
    data = item.data
    if callable(data):
        prepared = st.session_state.get(PREPARED_KEY)
        if prepared is None or prepared[:2] != (item.key, item.version):
            slot = place.empty()
            if not slot.button(item.label.replace("Download", "Prepare", 1), key=f"{item.key}_prepare"):
                return
            with slot, st.spinner(f"Preparing {item.file_name} …"):
                prepared = (item.key, item.version, data())
            st.session_state[PREPARED_KEY] = prepared
            place = slot
        data = prepared[2]
    mime = mimetypes.guess_type(item.file_name)[0] or "application/octet-stream"
    place.download_button(
        item.label, data=data, file_name=item.file_name, mime=mime, key=item.key, on_click="ignore"
    )


def metric_cards(cards: Sequence[Card], per_row: int = CARDS_PER_ROW) -> None:
    """Metric cards, ``per_row`` a row; each row's values line up under labels that wrap."""
    for first in range(0, len(cards), per_row):
        row = cards[first : first + per_row]
        for column, card in zip(st.columns(per_row, vertical_alignment="bottom"), row, strict=False):
            column.metric(card.label, card.value, help=card.help)


def fitted_columns(frame: pd.DataFrame) -> dict[str, Any]:
    """Column config giving each text column of ``frame`` the width of its longest cell or its name
    (within bounds), so that a cell like ``18124.35 (+21.3%)`` shows whole."""
    config: dict[str, Any] = {}
    for column in frame.columns:
        longest = max((len(str(value)) for value in [column, *frame[column]]), default=0)
        width = min(MAX_FITTED_PX, max(MIN_FITTED_PX, CELL_PADDING_PX + CHAR_PX * longest))
        config[str(column)] = st.column_config.TextColumn(width=width)
    return config


def table_height(rows: int) -> int:
    """Pixels that show a dataframe's header and ``rows`` rows without an inner scroll bar."""
    return TABLE_ROW_PX * (rows + 1) + 3


def button_row() -> Any:
    """A row for buttons, each as wide as its whole label; where the page is too narrow for them all,
    the row goes on below (``with ui.button_row(): …``)."""
    return st.container(horizontal=True, gap="small", vertical_alignment="center")


def lazy_box(label: str, draw: Callable[[], None], *, key: str, expanded: bool = False) -> None:
    """A box (an expander) whose content ``draw`` draws only while it is open: a reader who does not
    open it pays nothing for what it holds (its charts, code blocks, uploaders)."""
    box = st.expander(label, expanded=expanded, key=key, on_change="rerun")
    if box.open:
        with box:
            draw()


def lazy_tabs(tabs: Mapping[str, Callable[[], None]], *, key: str) -> None:
    """Tabs, each drawn by its function only while it is the open one (the first, at first)."""
    for draw, tab in zip(tabs.values(), st.tabs(list(tabs), key=key, on_change="rerun"), strict=True):
        if tab.open:
            with tab:
                draw()


def download_row(*items: Download) -> None:
    """Download buttons side by side (a :func:`button_row`)."""
    with button_row():
        for item in items:
            download(item)


def chart(figure: alt.TopLevelMixin, *, key: str, file_name: str) -> None:
    """Draw an Altair chart with a "Download PNG" button below it."""
    st.altair_chart(figure, width="stretch")
    download(Download("Download PNG", chart_png(figure), file_name, f"png_{key}"))


def draw_spec(spec: dict[str, Any], *, key: str, file_name: str) -> None:
    """Draw a Vega-Lite spec with a "Download PNG" button below it."""
    st.vega_lite_chart(spec, width="stretch")
    download(Download("Download PNG", chart_png(spec), file_name, f"png_{key}"))


def inventory_or_stop() -> Inventory:
    """The hosts of the hosts file; when it cannot be used, its problems are shown and the page stops."""
    try:
        return load_inventory(default_inventory_path())
    except InventoryError as problem:
        st.error("The hosts file cannot be used:\n\n" + "\n".join(f"- {line}" for line in problem.problems))
        st.stop()


@st.fragment(run_every=SIDEBAR_REFRESH_S)
def _live_status(app_worker: bool) -> None:
    """The status lines, redrawn every few seconds so a run that starts or ends shows without a click."""
    with session() as opened:
        summary = status.app_status(
            opened,
            database=db_session.public_name(),
            stale_after_s=settings.worker_stale_s(),
            simulated_hosts=hosts_facts().simulated,
        )
    st.caption(f"Database: {summary.database}")
    if not app_worker:
        st.caption(f"In-app worker off ({settings.APP_WORKER_ENV}=0)")
    if summary.worker_alive:
        st.caption(f"Worker: {summary.worker_summary()}")
    else:
        st.warning(summary.worker_summary(), icon=":material/warning:")
    st.caption(summary.runs_text())
    for active in summary.active_runs:
        st.markdown(
            f"[{status_text(active.status)} · run {active.id}]({run_link(active.id)}) · {active.host}"
        )


def sidebar_status(*, app_worker: bool) -> None:
    """The sidebar: database in use, worker state, queued and in-flight runs (kept live)."""
    with st.sidebar:
        _live_status(app_worker)
