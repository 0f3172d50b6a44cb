"""perflab's web app: ``streamlit run app.py``.

Registers every page with ``st.navigation`` (share links look like ``http://host:8501/run?run=42``)
and draws the shell around them (:func:`perflab.ui.run_in_shell`): the database migrated on start, the
in-process worker started once per server process (unless ``PERFLAB_APP_WORKER=0``), and the
sidebar status: database, worker, queued and running runs.
"""

from __future__ import annotations

import streamlit as st

from perflab import ui

PAGES = {
    "Results": [
        st.Page("pages/runs.py", title="Runs", icon=":material/list:", url_path="runs", default=True),
        st.Page("pages/run.py", title="Run", icon=":material/query_stats:", url_path="run"),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    ],
    "Benchmark": [
        st.Page("pages/launch.py", title="Launch", icon=":material/rocket_launch:", url_path="launch"),
        st.Page("pages/datasets.py", title="Datasets", icon=":material/dataset:", url_path="datasets"),
        st.Page("pages/hosts.py", title="Hosts", icon=":material/dns:", url_path="hosts"),
    ],
    "Studies": [
        st.Page("pages/studies.py", title="Studies", icon=":material/science:", url_path="studies"),
        st.Page("pages/study.py", title="Study", icon=":material/biotech:", url_path="study"),
    ],
}

ui.run_in_shell(st.navigation(PAGES))
