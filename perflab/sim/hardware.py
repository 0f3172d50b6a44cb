"""Accelerators the simulator models: memory, bandwidth, compute, interconnect, and how tools name them.

Figures are the vendors' dense peak numbers (no sparsity). ``fp8_tflops`` is 0 where the chip has no
FP8 tensor cores (A100 is SM80: engines either refuse FP8 or fall back to weight-only FP8).
``memory_mib`` is what ``nvidia-smi``/``npu-smi`` report as total memory. ``memory_efficiency`` is
the share of the bandwidth a GEMM streaming its weights reaches: for A100, H100 and H200 the fit of a
roofline to NVIDIA's measured vLLM BF16 GEMM tables in AIConfigurator 0.12.0
(``aiconfigurator_core/systems/data/<gpu>/gemm/vllm``: 0.75, 0.90, 0.85); L40S and the 910B have no
such table and take 0.8. ``compute_achieved`` is the share of the kernel tables' compute rates the
seeds' engines reached end to end: 0.45 on the H100, fitted on seed 003 (vLLM, SGLang and TensorRT-LLM
on one H100; 0.40 / 0.45 / 0.50 / 0.55 / 0.60 give median |error| 0.058 / 0.062 / 0.039 / 0.099 / 0.16
on throughput and 0.115 / 0.085 / 0.139 / 0.175 / 0.23 on TPOT there, the worst block 1.43 / 1.28 /
1.27 / 1.37 / 1.47: 0.45 has the smallest sum); the H200 is the same GH100 chip (132 SMs, the same
clocks and tensor-core peak; only its HBM3e memory differs), so it takes the H100's value; 1.0
elsewhere. ``moe_compute`` is ``(peak, half)`` of the fused-MoE compute curve ``peak × n / (n + half)``
over each GPU's slice ``n`` of an expert's intermediate size
(:func:`perflab.sim.perfmodel.moe_compute_efficiency`), fitted to NVIDIA's measured vLLM fused-MoE
tables in AIConfigurator 0.12.0 (``systems/data/<gpu>/moe/vllm``: BF16 and block-FP8, ``power_law_1.01``
routing, no expert parallelism, the catalogue's four MoE shapes, 4,096–16,384 tokens): (0.62, 300) on
the H100 and H200 (vLLM 0.19 and 0.24 tables alike: median error 8–10 % over 435 measurements, where
the constant 0.28 it replaces was off by 34–45 %), (0.32, 50) on the A100 (vLLM 0.14, 120 measurements:
11 %, the constant 19 %); elsewhere no table measures it and the constant 0.28 stays.
``eager_collective_s`` is what one all-reduce launched outside a CUDA graph takes beyond the same one
in a graph: the median difference of the ``vllm_eager`` and ``vllm_graph`` rows of NVIDIA's measured vLLM
custom all-reduce tables in AIConfigurator 0.12.0 (``systems/data/<gpu>/comm/vllm``, 2–8 GPUs, messages
up to 32 MiB, 57 pairs each): 38 µs on the A100 (vLLM 0.14), 16 µs on the H100 and H200 (vLLM 0.24),
32 µs on the L40S (vLLM 0.22); 0 where no table measures it (the 910B). Power, clocks and temperatures
are :mod:`perflab.sim.power`'s.
"""

from __future__ import annotations

from typing import Dict, Optional

MIB = 1024 * 1024


class Accelerator:
    """One accelerator model."""

    def __init__(
        self,
        key: str,
        vendor: str,
        name: str,
        memory_mib: int,
        bf16_tflops: float,
        fp8_tflops: float,
        int8_tops: float,
        bandwidth_gbs: float,
        link_gbs: float,
        compute_cap: str,
        memory_efficiency: float = 0.8,
        compute_achieved: float = 1.0,
        moe_compute: tuple[float, float] = (0.28, 0.0),
        eager_collective_s: float = 0.0,
    ) -> None:
        self.key = key
        self.vendor = vendor
        self.name = name
        self.memory_mib = memory_mib
        self.bf16_tflops = bf16_tflops
        self.fp8_tflops = fp8_tflops
        self.int8_tops = int8_tops
        self.bandwidth_gbs = bandwidth_gbs
        self.link_gbs = link_gbs
        self.compute_cap = compute_cap
        self.memory_efficiency = memory_efficiency
        self.compute_achieved = compute_achieved
        self.moe_compute = moe_compute
        self.eager_collective_s = eager_collective_s

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    @property
    def is_npu(self) -> bool:
        return self.vendor == "ascend"

    @property
    def supports_fp8(self) -> bool:
        return self.fp8_tflops > 0

    @property
    def sm_version(self) -> int:
        """CUDA SM version as an integer (80, 89, 90); 0 for NPUs."""
        return int(self.compute_cap.replace(".", "")) if self.compute_cap else 0


# (peak, half) of the fused-MoE compute curve (the module's docstring)
AMPERE_MOE = (0.32, 50.0)
HOPPER_MOE = (0.62, 300.0)

ACCELERATORS: Dict[str, Accelerator] = {
    "A100": Accelerator(
        "A100",
        "nvidia",
        "NVIDIA A100-SXM4-80GB",
        81920,
        312.0,
        0.0,
        624.0,
        2039.0,
        300.0,
        "8.0",
        0.75,
        moe_compute=AMPERE_MOE,
        eager_collective_s=38e-6,
    ),
    "A100-40GB": Accelerator(
        "A100-40GB",
        "nvidia",
        "NVIDIA A100-SXM4-40GB",
        40960,
        312.0,
        0.0,
        624.0,
        1555.0,
        300.0,
        "8.0",
        0.75,
        moe_compute=AMPERE_MOE,
        eager_collective_s=38e-6,
    ),
    "H100": Accelerator(
        "H100",
        "nvidia",
        "NVIDIA H100 80GB HBM3",
        81559,
        989.0,
        1979.0,
        1979.0,
        3350.0,
        450.0,
        "9.0",
        0.9,
        0.45,
        HOPPER_MOE,
        eager_collective_s=16e-6,
    ),
    "H200": Accelerator(
        "H200",
        "nvidia",
        "NVIDIA H200",
        143771,
        989.0,
        1979.0,
        1979.0,
        4800.0,
        450.0,
        "9.0",
        0.85,
        0.45,
        HOPPER_MOE,
        eager_collective_s=16e-6,
    ),
    "L40S": Accelerator(
        "L40S",
        "nvidia",
        "NVIDIA L40S",
        46068,
        362.0,
        733.0,
        733.0,
        864.0,
        32.0,
        "8.9",
        eager_collective_s=32e-6,
    ),
    "910B": Accelerator("910B", "ascend", "910B3", 65536, 313.0, 0.0, 640.0, 1600.0, 196.0, ""),
}
_ALIASES = {
    "A100-80GB": "A100",
    "A100-SXM4-80GB": "A100",
    "A100-SXM4-40GB": "A100-40GB",
    "H100-SXM": "H100",
    "H100-80GB": "H100",
    "H200-141GB": "H200",
    "910B3": "910B",
    "ASCEND-910B": "910B",
    "ASCEND910B": "910B",
}


def find_accelerator(name: str) -> Optional[Accelerator]:
    """The accelerator called ``name`` (case-insensitive; ``A100``, ``h100``, ``Ascend 910B``…)."""
    key = name.strip().upper().replace(" ", "-").replace("_", "-")
    key = _ALIASES.get(key, key)
    return ACCELERATORS.get(key)


def accelerator_names() -> str:
    return ", ".join(sorted(ACCELERATORS))
