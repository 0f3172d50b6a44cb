"""Hosts: each host of hosts.yaml with reachability, accelerators, memory, utilisation and engine
versions from its last probe, a warning for each file its entry names that this machine lacks or
cannot read (an SSH key), a probe (re-probe) button, and a clear message for each failure."""

from __future__ import annotations

import streamlit as st

from perflab import ui
from perflab.cost.prices import PriceBook
from perflab.views import cost as cost_views
from perflab.views import hosts
from perflab.views.formatting import MISSING, format_time

ui.ensure_app_shell()

REACHABILITY_ICONS = {
    "reachable": ":green[:material/check_circle:]",
    "reachable, probe failed": ":orange[:material/warning:]",
    "unreachable": ":red[:material/cancel:]",
    "not probed yet": ":gray[:material/help:]",
}

st.title("Hosts")
ui.require_login("see and probe the hosts")
inventory = ui.inventory_or_stop()
st.caption(f"From {inventory.path}")
with st.expander("Prices (cost per 1M tokens)"):
    prices = cost_views.price_lines(PriceBook.from_inventory(inventory))
    st.markdown("\n".join(f"- {line}" for line in prices) if prices else "No prices: costs are not shown.")
    st.caption(
        f"Currency {inventory.prices.currency}. Set in hosts.yaml: a host's price_per_accelerator_hour, "
        "accelerator_prices for models several hosts share (see the comments at its top)."
    )
if not len(inventory):
    st.info("No hosts yet. Add one to hosts.yaml (the comments at its top list every field).")
    st.stop()

if st.button("Probe all hosts", key="hosts_probe_all", icon=":material/refresh:"):
    with st.spinner("Probing every host…"), ui.session() as session:
        for config in inventory:
            hosts.probe_and_store(session, config)

with ui.session() as session:
    views = hosts.load_hosts(session, inventory)


def probe_label(view: hosts.HostView) -> str:
    """``Probe`` for a host never probed, ``Re-probe`` once it was."""
    return "Probe" if view.probed_at is None else "Re-probe"


def draw_host(view: hosts.HostView) -> None:
    """One host: identity, reachability, failure, problems, accelerators, system and engines."""
    # The title beside a button as wide as its label ("Probe" for a host never probed).
    row = st.container(horizontal=True, vertical_alignment="center")
    title = row.empty()
    if row.button(probe_label(view), key=f"hosts_probe_{view.name}", icon=":material/refresh:"):
        with st.spinner(f"Probing {view.name}…"), ui.session() as session:
            hosts.probe_and_store(session, view.config)
        st.rerun()  # drawn again from what the probe stored, its button now "Re-probe"
    state = view.reachability()
    title.subheader(f"{REACHABILITY_ICONS[state]} {view.title}")
    labels = ", ".join(view.config.labels)
    where = (
        "this machine (local transport)"
        if view.config.transport == "local"
        else f"ssh {view.config.display_address}"
    )
    st.caption(
        where
        + (f" · labels: {labels}" if labels else "")
        + f" · {state}"
        + (f" · probed {format_time(view.probed_at)}" if view.probed_at else "")
    )
    if view.config.simulated and view.config.simulate is not None:
        spec = view.config.simulate
        st.caption(f"Simulated host: {spec.count}× {spec.accelerator}, answered by perflab's simulator.")
    for problem in view.file_problems:
        st.warning(problem)
    if view.last_error:
        st.error(view.last_error)
    if view.probed_at is None:
        st.info("Not probed yet: press Probe to connect and list its accelerators and engines.")
        return
    for problem in view.problems:
        st.warning(f"{problem.tool}: {problem.message}")
    if view.probe is None:
        return
    st.markdown(
        f"**Accelerators:** {view.status.accelerator_summary()} · **Engines:** {view.status.engine_summary()}"
    )
    frame = hosts.accelerators_frame(view.probe)
    if not frame.empty:
        st.dataframe(frame, hide_index=True, placeholder=MISSING)
    st.caption(" · ".join(hosts.system_lines(view.probe)))


for view in views:
    with st.container(border=True):
        draw_host(view)
