"""nvidia-smi and npu-smi shims print the real tools' formats and show what simulated engines hold."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from perflab.sim.gpustate import Registration


def test_query_gpu_any_fields_any_order_units(sim_host):
    host = sim_host("H100", 2)
    fields = (
        "index,name,uuid,memory.total,memory.used,utilization.gpu,temperature.gpu,driver_version,compute_cap"
    )
    full = host.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv"]).stdout.splitlines()
    assert full[0] == (
        "index, name, uuid, memory.total [MiB], memory.used [MiB], utilization.gpu [%], "
        "temperature.gpu, driver_version, compute_cap"
    )
    values = full[1].split(", ")
    assert values[0] == "0" and values[1] == "NVIDIA H100 80GB HBM3" and values[2].startswith("GPU-")
    assert values[3:6] == ["81559 MiB", "0 MiB", "0 %"] and values[8] == "9.0"
    bare = host.run(["nvidia-smi", "--query-gpu=memory.total,index", "--format=csv,noheader,nounits"]).stdout
    assert bare == "81559, 0\n81559, 1\n"
    spaced = host.run(
        ["nvidia-smi", "--query-gpu", "name,memory.total", "--format", "csv,nounits", "-i", "1"]
    )
    assert spaced.stdout == "name, memory.total [MiB]\nNVIDIA H100 80GB HBM3, 81559\n"
    invalid = host.run(["nvidia-smi", "--query-gpu=index,bogus", "--format=csv"])
    assert invalid.returncode != 0 and 'Field "bogus" is not a valid field to query.' in invalid.stdout


@pytest.mark.parametrize(
    ("accelerator", "name", "total", "cap"),
    [("A100", "NVIDIA A100-SXM4-80GB", 81920, "8.0"), ("H200", "NVIDIA H200", 143771, "9.0")],
)
def test_accelerator_names_and_memory(sim_host, accelerator, name, total, cap):
    host = sim_host(accelerator, 1)
    out = host.run(
        ["nvidia-smi", "--query-gpu=name,memory.total,compute_cap", "--format=csv,noheader"]
    ).stdout
    assert out == f"{name}, {total} MiB, {cap}\n"
    listing = host.run(["nvidia-smi", "-L"]).stdout
    assert listing.startswith(f"GPU 0: {name} (UUID: GPU-")


def test_table_layout_and_registered_processes(sim_host):
    host = sim_host("H100", 2)
    registration = Registration(str(host.home / "state"), "vllm", {1: "VLLM::EngineCore"}, {1: 70000})
    registration.set_utilization(0.5)
    try:
        table = host.run(["nvidia-smi"]).stdout.splitlines()
        assert (
            "| NVIDIA-SMI 570.172.08             Driver Version: 570.172.08     CUDA Version: 12.8     |"
            in table
        )
        assert all(len(line) == 91 for line in table[1:] if line)
        assert any("   70000MiB /  81559MiB |     50%      Default |" in line for line in table)
        assert any("VLLM::EngineCore" in line and "70000MiB" in line for line in table)
        used = host.run(
            ["nvidia-smi", "--query-gpu=memory.used,utilization.gpu", "--format=csv,noheader,nounits"]
        ).stdout
        assert used == "0, 0\n70000, 50\n"
        apps = host.run(
            ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"]
        ).stdout
        assert apps.splitlines()[1].endswith("VLLM::EngineCore, 70000 MiB")
    finally:
        registration.remove()
    assert "No running processes found" in host.run(["nvidia-smi"]).stdout


def test_stale_state_of_dead_processes_is_ignored(sim_host):
    host = sim_host("H100", 1)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = host.home / "state" / f"gpu-{dead.stdout.strip()}.json"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text(
        json.dumps(
            {
                "pid": int(dead.stdout),
                "engine": "vllm",
                "utilization": 1.0,
                "devices": {"0": {"memory_mib": 50000, "process_name": "VLLM::EngineCore"}},
            }
        )
    )
    assert (
        host.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]).stdout == "0\n"
    )
    assert not stale.exists()


def test_npu_smi_info_table(sim_host):
    host = sim_host("910B", 2)
    registration = Registration(str(host.home / "state"), "mindie", {0: "mindie_llm_back"}, {0: 40000})
    try:
        lines = host.run(["npu-smi", "info"]).stdout.splitlines()
    finally:
        registration.remove()
    assert lines[1] == "| npu-smi 23.0.7" + " " * 19 + "Version: 23.0.7" + " " * 47 + "|"
    assert all(len(line) == 98 for line in lines)
    assert lines[6].startswith("| 0     910B3               | OK            | ")
    assert "43337/ 65536" in lines[7] and "3337 / 65536" in lines[10]  # 5-digit values abut the slash
    assert any("mindie_llm_back" in line and "40000" in line for line in lines)
    assert any("No running processes found in NPU 1" in line for line in lines)
    assert not (host.home / "bin" / "nvidia-smi").exists()
    direct = host.run([sys.executable, "-m", "perflab", "sim", "shim", "nvidia-smi"])
    assert direct.returncode == 9 and "couldn't communicate with the NVIDIA driver" in direct.stdout


def test_power_clock_and_temperature_follow_the_engines_load(sim_host):
    from perflab.probe import nvidia
    from perflab.sim import power

    host = sim_host("H200", 2)
    registration = Registration(str(host.home / "state"), "vllm", {1: "VLLM::EngineCore"}, {1: 100000})
    registration.set_utilization(0.5)
    try:
        answer = host.run(nvidia.query_argv(nvidia.SAMPLE_FIELDS))
    finally:
        registration.remove()
    assert answer.returncode == 0, answer.stdout
    header = answer.stdout.splitlines()[0]
    assert header.endswith("power.draw.average [W], clocks.current.sm [MHz], temperature.gpu")
    idle, busy = nvidia.parse_query_csv(answer.stdout)
    # The H200 recordings: 77.6 W and 345 MHz idle; at 50 % duty ≈520 W and ≈1800 MHz (model: 512 W).
    assert (idle.power_w, idle.sm_clock_mhz, idle.temperature_c) == (77.6, 345, 35)
    assert busy.power_w == round(77.6 + (692.0 - 77.6) * 0.5**0.5, 2) == 512.05
    assert (busy.sm_clock_mhz, busy.temperature_c, busy.utilization_pct) == (1856, 47, 50)
    assert power.reading("H200", 1.0) == (692.0, 1485, 59)
    limits = host.run(["nvidia-smi", "--query-gpu=power.limit,clocks.max.sm", "--format=csv,noheader"])
    assert limits.stdout == "700.00 W, 1980 MHz\n" * 2


def test_every_simulated_accelerator_has_a_power_profile():
    from perflab.sim import power
    from perflab.sim.hardware import ACCELERATORS

    assert set(power.PROFILES) == set(ACCELERATORS)
    for key in ACCELERATORS:
        idle, full = power.reading(key, 0.0), power.reading(key, 1.0)
        assert idle.power_w < full.power_w <= power.profile(key).limit_w
        assert idle.temperature_c < full.temperature_c


def test_npu_smi_power_column_follows_load(sim_host):
    from perflab.probe import ascend

    host = sim_host("910B", 2)
    registration = Registration(str(host.home / "state"), "mindie", {0: "mindie_llm_back"}, {0: 40000})
    registration.set_utilization(1.0)
    try:
        npus = ascend.parse_info(host.run(["npu-smi", "info"]).stdout)
    finally:
        registration.remove()
    assert [npu.power_w for npu in npus] == [round(400.0 * 692.0 / 700.0, 1), 90.0]
    assert [npu.temperature_c for npu in npus] == [59, 32]
