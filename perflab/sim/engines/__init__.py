"""Engine and device CLI shims of simulated hosts.

``python -m perflab sim shim TOOL ARGV...`` dispatches here. Each engine module parses its engine's
real command line (unknown flags fail as the real CLI fails), prints start-up logs in the engine's
style with its real readiness line, fails with the engine's messages where the real one fails, and
then serves the simulated OpenAI API until SIGTERM.
"""

from __future__ import annotations

import importlib
from typing import Dict, List, Tuple

# tool → (module, function(argv) -> exit status)
SHIM_TOOLS: Dict[str, Tuple[str, str]] = {
    "vllm": ("perflab.sim.engines.vllm", "main"),
    "sglang": ("perflab.sim.engines.sglang", "main"),
    "trtllm-serve": ("perflab.sim.engines.trtllm", "main"),
    "mindieservice_daemon": ("perflab.sim.engines.mindie", "main"),
    "nvidia-smi": ("perflab.sim.smi", "nvidia_smi_main"),
    "npu-smi": ("perflab.sim.smi", "npu_smi_main"),
}


def run_shim(tool: str, argv: List[str]) -> int:
    module_name, function_name = SHIM_TOOLS[tool]
    function = getattr(importlib.import_module(module_name), function_name)
    return int(function(argv) or 0)
