"""Serving ports on one machine: which hosts of the hosts file are the same machine, and where a run
starts looking for free ports.

Ports belong to a machine, not to a hosts.yaml entry: every ``transport: local`` host is the machine
perflab runs on, and SSH hosts with the same address (through the same jump host) are one server, so
a run avoids the ports that this database's unfinished runs on any of them recorded. Concurrent
launches start their search at different ports (:func:`search_offset`, from the run id) instead of
all at the engine's default, so two runs rarely pick the same port even before either records it.
"""

from __future__ import annotations

from perflab.inventory import HostConfig, Inventory

# The search of run ``id`` starts ``(id % PORT_SLOTS) * PORT_SLOT_WIDTH`` above the engine's default
# port (plus the first GPU index): 64 slots of 16 ports, room for the replicas of a 16-GPU node.
PORT_SLOTS = 64
PORT_SLOT_WIDTH = 16


def machine_of(host: HostConfig) -> str:
    """A key equal for hosts that are one machine: ``local``, or the address (lower case) behind
    the chain of jump hosts' addresses."""
    if host.transport == "local":
        return "local"
    address = (host.address or "").lower()
    jump = host.jump_host
    return address if jump is None else f"{machine_of(jump)}>{address}"


def same_machine_hosts(inventory: Inventory, host: HostConfig) -> set[str]:
    """Names of the hosts of ``inventory`` that are the same machine as ``host`` (``host`` included)."""
    machine = machine_of(host)
    return {host.name, *(other.name for other in inventory if machine_of(other) == machine)}


def search_offset(run_id: int) -> int:
    """How far above the engine's default port run ``run_id`` starts looking for free ports."""
    return (run_id % PORT_SLOTS) * PORT_SLOT_WIDTH
