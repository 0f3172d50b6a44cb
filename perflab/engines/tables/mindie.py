"""MindIE's limits perflab checks offline, from MindIE's documentation (2.x and MindIE-LLM 3.0).

MindIE takes no command-line flags (``config.json`` carries every setting), so no value table is
kept; its preflight checks that the daemon its version needs is on the host. The MTP setting follows
MindIE-LLM ``docs/zh/user_guide/feature/mtp.md`` (the same in MindIE 2.x's service guide):
``plugin_params`` ``mtp`` with ``num_speculative_tokens`` 1 or 2.
"""

from __future__ import annotations

MINDIE_VERSION = "2.x / MindIE-LLM 3.0"
MINDIE_MTP_TOKENS: tuple[int, ...] = (1, 2)
