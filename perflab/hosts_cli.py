"""``python -m perflab hosts``: list the hosts of hosts.yaml, or probe them.

- ``hosts list [--json]``: each host's name, transport, address, labels, and whether it is simulated,
  without connecting anywhere; then, on stderr, every file a host names on this machine that is
  missing or unreadable (``hosts.yaml:9: host 'gpu-a' field 'auth.key_file': /root/.ssh/x does not
  exist``). In JSON each host carries its ``problems`` (an empty list when it has none). The exit
  status is 1 when any host has such a problem (the whole listing is still printed), as ``probe``
  exits 1 for a host it could not probe.
- ``hosts probe [NAME ...] [--json]``: connect to the hosts (all by default) and show accelerators,
  memory, utilisation, engines and Python, then every problem found with what to do about it.
  The exit status is 1 if any host could not be probed.

Both exit with status 2, naming file, line, host and field, when hosts.yaml cannot be used (or a NAME
is not in it). ``--file`` picks another hosts.yaml (default: ``$PERFLAB_HOSTS`` or <repo>/hosts.yaml).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from perflab.inventory import HostConfig, Inventory
    from perflab.probe.status import HostStatus


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--file", default=None, help="hosts.yaml to read (default: $PERFLAB_HOSTS or <repo>/hosts.yaml)"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="action")
    listing = actions.add_parser(
        "list", help="show the hosts of hosts.yaml and the key or secret files they miss"
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    probe = actions.add_parser("probe", help="connect to hosts and show accelerators, engines, problems")
    probe.add_argument("names", nargs="*", metavar="NAME", help="hosts to probe (default: all)")
    probe.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from perflab.inventory import InventoryError, default_inventory_path, load_inventory

    try:
        inventory = load_inventory(args.file or default_inventory_path())
        hosts = _select(inventory, getattr(args, "names", None) or [])
    except InventoryError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 2
    if args.action == "list":
        from perflab.host_files import inventory_file_problems

        problems = inventory_file_problems(inventory)
        _print_list(hosts, problems, as_json=args.json, out=sys.stdout)
        for host_problems in problems.values():
            for problem in host_problems:
                print(problem, file=sys.stderr)
        return 1 if problems else 0
    # Probing connects (SSH, the transports): imported only when hosts are probed.
    from perflab.probe.status import host_statuses

    statuses = host_statuses(hosts)
    _print_statuses(statuses, as_json=args.json, out=sys.stdout)
    return 0 if all(status.error is None for status in statuses) else 1


def _select(inventory: Inventory, names: Sequence[str]) -> list[HostConfig]:
    return [inventory.get(name) for name in names] if names else list(inventory)


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table with columns padded to their widest cell."""
    widths = [max(len(str(row[column])) for row in [header, *rows]) for column in range(len(header))]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    return "\n".join(lines)


def _print_list(
    hosts: Sequence[HostConfig], problems: Mapping[str, list[str]], *, as_json: bool, out: TextIO
) -> None:
    if as_json:
        payload = [
            {
                **host.model_dump(mode="json"),
                "simulated": host.simulated,
                "problems": problems.get(host.name, []),
            }
            for host in hosts
        ]
        print(json.dumps(payload, indent=2), file=out)
        return
    rows = [
        [
            host.name,
            host.transport,
            host.display_address,
            f"{host.simulate.count}× {host.simulate.accelerator}" if host.simulate else "no",
            ", ".join(host.labels) or "-",
        ]
        for host in hosts
    ]
    print(format_table(["NAME", "TRANSPORT", "ADDRESS", "SIMULATED", "LABELS"], rows), file=out)


def _memory(status: HostStatus) -> str:
    if status.probe is None:
        return "-"
    used = [acc.memory_used_mib for acc in status.probe.accelerators if acc.memory_used_mib is not None]
    total = [acc.memory_total_mib for acc in status.probe.accelerators if acc.memory_total_mib is not None]
    if not total:
        return "-"
    return f"{sum(used) / 1024:.0f}/{sum(total) / 1024:.0f} GiB"


def _utilization(status: HostStatus) -> str:
    if status.probe is None:
        return "-"
    values = [acc.utilization_pct for acc in status.probe.accelerators if acc.utilization_pct is not None]
    return f"{sum(values) / len(values):.0f}%" if values else "-"


def _state(status: HostStatus) -> str:
    if status.error is not None:
        return status.error.kind
    return (
        "ok"
        if not status.problems
        else f"ok ({len(status.problems)} problem{'s' * (len(status.problems) > 1)})"
    )


def _print_statuses(statuses: Sequence[HostStatus], *, as_json: bool, out: TextIO) -> None:
    if as_json:
        print(json.dumps([status.model_dump(mode="json") for status in statuses], indent=2), file=out)
        return
    rows = [
        [
            status.display_name,
            _state(status),
            status.accelerator_summary() if status.probe else "-",
            _memory(status),
            _utilization(status),
            status.engine_summary() if status.probe else "-",
            (status.probe.python.version or "missing") if status.probe else "-",
        ]
        for status in statuses
    ]
    print(
        format_table(["HOST", "STATUS", "ACCELERATORS", "MEMORY", "UTIL", "ENGINES", "PYTHON"], rows),
        file=out,
    )
    for status in statuses:
        notes = _notes(status)
        if notes:
            print(f"\n{status.display_name}:", file=out)
            for note in notes:
                print(f"  - {note}", file=out)


def _notes(status: HostStatus) -> list[str]:
    notes: list[str] = []
    if status.error is not None:
        notes.append(status.error.message + (f" {status.error.hint}" if status.error.hint else ""))
    notes.extend(f"{problem.tool}: {problem.message}" for problem in status.problems)
    return notes
