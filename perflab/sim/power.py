"""Power draw, SM clock and temperature of a simulated accelerator, from how busy its engine keeps it.

``reading(key, utilization)`` answers what ``nvidia-smi``/``npu-smi`` of a simulated host print for a
device whose engine was busy ``utilization`` (0–1) of the last second. The shape comes from the real
H200 recordings (tests/data/nvidia-h200/power-under-load.jsonl, driver 580.159.04):

- idle: 77.6 W, SM clock 345 MHz, 35 °C;
- bf16 matmuls back to back (100 % busy): 692 W average against the 700 W cap, SM clock held to
  ≈1485 MHz by the software power cap (event reason 0x4), 59 °C;
- 50 % duty: ≈520 W average and ≈1800 MHz. Power therefore rises with the square root of the busy
  share (77.6 + (692 − 77.6)·√0.5 = 512 W, 1.5 % under the recording), and the clock falls from its
  maximum with the square of it (1980 − 495·0.25 = 1856 MHz).

Each model's figures name their source; where no recording or datasheet gives one, the figure is
scaled from the H200's and says so. The average and the instant reading are the same number: the
simulated load is itself a one-second average.
"""

from __future__ import annotations

import math
from typing import Dict, NamedTuple


class PowerProfile(NamedTuple):
    """What one accelerator model draws idle and fully busy, and its SM clocks and temperatures."""

    idle_w: float
    busy_w: float
    limit_w: float
    idle_sm_mhz: int
    max_sm_mhz: int
    busy_sm_mhz: int
    idle_temp_c: int
    busy_temp_c: int


class Reading(NamedTuple):
    power_w: float
    sm_clock_mhz: int
    temperature_c: int


# H200 ratios used where a model has no figure of its own: idle draw 77.6/700 of the board power, busy
# draw 692/700 of it, the power-capped clock 1485/1980 of the maximum.
_IDLE_SHARE = 77.6 / 700.0
_BUSY_SHARE = 692.0 / 700.0
_CAPPED_CLOCK_SHARE = 1485.0 / 1980.0

PROFILES: Dict[str, PowerProfile] = {
    # Recorded: tests/data/nvidia-h200/ (700 W enforced limit, 1980 MHz max SM clock, the figures above).
    "H200": PowerProfile(77.6, 692.0, 700.0, 345, 1980, 1485, 35, 59),
    # H100 SXM5: 700 W board power and 1980 MHz max boost (NVIDIA H100 datasheet); idle 68.21 W as
    # nvidia-smi showed an idle H100 SXM (tests/data/probe/nvidia-smi/h100x1.csv); the same GH100 die
    # as the H200, so its idle clock, capped clock and temperatures are the H200's recorded ones.
    "H100": PowerProfile(68.2, 700.0 * _BUSY_SHARE, 700.0, 345, 1980, 1485, 34, 59),
    # A100 SXM4 80GB / 40GB: 400 W board power, 1410 MHz max boost (NVIDIA A100 datasheet); idle and busy
    # draw, idle and capped clocks scaled from the H200's shares; temperatures the H200's.
    "A100": PowerProfile(
        400.0 * _IDLE_SHARE, 400.0 * _BUSY_SHARE, 400.0, 210, 1410, int(1410 * _CAPPED_CLOCK_SHARE), 35, 59
    ),
    "A100-40GB": PowerProfile(
        400.0 * _IDLE_SHARE, 400.0 * _BUSY_SHARE, 400.0, 210, 1410, int(1410 * _CAPPED_CLOCK_SHARE), 35, 59
    ),
    # L40S: 350 W board power, 2520 MHz max boost (NVIDIA L40S datasheet); the rest scaled as for A100.
    "L40S": PowerProfile(
        350.0 * _IDLE_SHARE, 350.0 * _BUSY_SHARE, 350.0, 210, 2520, int(2520 * _CAPPED_CLOCK_SHARE), 35, 59
    ),
    # Ascend 910B: 400 W per OAM module (Huawei Atlas 800T A2); idle ≈90 W as npu-smi showed eight idle
    # 910B1 (tests/data/probe/npu-smi/910b1x8.txt, 89.1–93.0 W, 30–33 °C). npu-smi's table shows no
    # clock; the AI-core clock is not simulated beyond a constant.
    "910B": PowerProfile(90.0, 400.0 * _BUSY_SHARE, 400.0, 1800, 1800, 1800, 32, 59),
}


def profile(key: str) -> PowerProfile:
    return PROFILES[key]


def reading(key: str, utilization: float) -> Reading:
    """Power, SM clock and temperature of a device of model ``key`` busy ``utilization`` of the time."""
    spec = PROFILES[key]
    busy = max(0.0, min(1.0, utilization))
    power = spec.idle_w + (spec.busy_w - spec.idle_w) * math.sqrt(busy)
    if busy == 0.0:
        clock = spec.idle_sm_mhz
    else:
        clock = int(round(spec.max_sm_mhz - (spec.max_sm_mhz - spec.busy_sm_mhz) * busy * busy))
    temperature = int(round(spec.idle_temp_c + (spec.busy_temp_c - spec.idle_temp_c) * busy))
    return Reading(round(power, 2), clock, temperature)
