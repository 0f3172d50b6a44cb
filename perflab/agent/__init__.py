"""The agent zipapp shipped to hosts: ``python3 perflab-agent-<hash>.pyz bench|sim …``.

``build_agent(dest_dir)`` packs ``perflab.bench``, ``perflab.sim`` and the pure-Python packages they
import into one executable zip named after its content hash, so a host that already has that file
need not receive it again.
"""

from __future__ import annotations

from perflab.agent.build import build_agent

__all__ = ["build_agent"]
