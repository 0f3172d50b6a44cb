"""Probe parsers on recorded real outputs of nvidia-smi, npu-smi and the system script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perflab.probe import ascend, cpu, engines, nvidia, system

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"


def recorded(name: str) -> str:
    return (DATA / name).read_text()


def test_one_idle_h100() -> None:
    [gpu] = nvidia.parse_query_csv(recorded("nvidia-smi/h100x1.csv"))
    assert gpu.model_dump(exclude_none=True) == {
        "index": 0,
        "vendor": "nvidia",
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_mib": 81559,
        "memory_used_mib": 412,
        "utilization_pct": 0.0,
        "temperature_c": 34.0,
        "power_w": 68.21,
        "driver": "550.90.07",
        "uuid": "GPU-3a1f9e02-4c11-4b8a-9e2d-7f6b1c0a55e1",
    }


def test_eight_busy_h100() -> None:
    gpus = nvidia.parse_query_csv(recorded("nvidia-smi/h100x8-busy.csv"))
    assert [gpu.index for gpu in gpus] == list(range(8))
    assert [gpu.utilization_pct for gpu in gpus] == [100, 98, 100, 100, 100, 98, 100, 99]
    assert [gpu.memory_used_mib for gpu in gpus][:5] == [78942, 78990, 78990, 78750, 21340]
    assert {gpu.memory_total_mib for gpu in gpus} == {81559}
    assert all(gpu.driver is None and gpu.compute_cap is None for gpu in gpus)


def test_compute_capability_and_missing_index_column() -> None:
    [gpu] = nvidia.parse_query_csv(recorded("nvidia-smi/rtx5060ti-compute-cap.csv"))
    assert (gpu.index, gpu.name, gpu.compute_cap, gpu.driver) == (
        0,
        "NVIDIA GeForce RTX 5060 Ti",
        "12.0",
        "580.178.04",
    )
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (16311, 1)


def test_not_available_fields_are_unknown_not_zero() -> None:
    [gpu] = nvidia.parse_query_csv(recorded("nvidia-smi/gb10-na.csv"))
    assert gpu.name == "NVIDIA GB10"
    assert gpu.memory_total_mib is None and gpu.memory_used_mib is None
    assert gpu.temperature_c == 39 and gpu.power_w == 3.74


def test_nvidia_failures_are_explained() -> None:
    assert "cannot talk to the NVIDIA driver" in nvidia.explain_failure(
        9, recorded("nvidia-smi/driver-failed.txt")
    )
    assert "found no GPUs" in nvidia.explain_failure(6, recorded("nvidia-smi/no-devices.txt"))
    assert nvidia.rejects_field(recorded("nvidia-smi/invalid-field.txt"), "compute_cap")
    assert not nvidia.rejects_field(recorded("nvidia-smi/h100x1.csv"), "compute_cap")
    with pytest.raises(ValueError, match="not nvidia-smi CSV"):
        nvidia.parse_query_csv(recorded("nvidia-smi/driver-failed.txt"))
    with pytest.raises(ValueError, match="fields"):
        nvidia.parse_query_csv("index, name\n0, GPU, extra\n")
    assert nvidia.parse_query_csv("") == []


def test_query_asks_for_every_field_the_page_shows() -> None:
    assert nvidia.query_argv() == [
        "nvidia-smi",
        "--query-gpu=" + ",".join(nvidia.QUERY_FIELDS),
        "--format=csv",
    ]
    shown = {"index", "name", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu"}
    assert shown | {"driver_version", "compute_cap"} <= set(nvidia.QUERY_FIELDS)


def test_eight_910b1() -> None:
    npus = ascend.parse_info(recorded("npu-smi/910b1x8.txt"))
    assert len(npus) == 8, "the process table must not add devices"
    first = npus[0]
    assert (first.name, first.driver, first.health) == ("910B1", "24.1.0", "OK")
    assert (first.memory_used_mib, first.memory_total_mib, first.temperature_c, first.utilization_pct) == (
        3437,
        65536,
        32,
        0,
    )
    assert [npu.index for npu in npus] == list(range(8))
    assert npus[7].memory_used_mib == 3380 and npus[6].temperature_c == 30
    assert [npu.power_w for npu in npus[:3]] == [89.1, 90.0, 91.5]  # the device row's Power(W)


def test_sixteen_busy_910b2c() -> None:
    npus = ascend.parse_info(recorded("npu-smi/910b2cx16-busy.txt"))
    assert len(npus) == 16
    assert all(npu.memory_total_mib == 65536 and npu.memory_used_mib >= 59345 for npu in npus)
    assert npus[0].memory_used_mib == 59356 and npus[0].driver == "24.1.rc1" and npus[0].name == "910B2C"


def test_wide_layout_of_newer_npu_smi() -> None:
    [npu] = ascend.parse_info(recorded("npu-smi/910b4x1-wide.txt"))
    assert (npu.name, npu.driver, npu.memory_used_mib, npu.memory_total_mib, npu.temperature_c) == (
        "910B4",
        "26.0.rc1",
        2871,
        32768,
        32,
    )


def test_busy_ai_cores() -> None:
    npus = ascend.parse_info(recorded("npu-smi/910b3x2-busy-rows.txt"))
    assert [(npu.utilization_pct, npu.memory_used_mib) for npu in npus] == [(7, 53984), (42, 52314)]
    assert npus[0].driver is None


def test_npu_failures() -> None:
    text = recorded("npu-smi/dcmi-failed.txt")
    assert ascend.parse_info(text) == []
    assert "reboot" in ascend.explain_failure(1, text)


def test_system_facts() -> None:
    info = system.parse(recorded("system/debian12-x86_64.txt"))
    assert info.cpu_cores == 2 and info.cpu_model == "AMD EPYC" and info.arch == "x86_64"
    assert info.ram_total_mib == 24684092 // 1024 and info.os == "Debian GNU/Linux 12 (bookworm)"
    assert system.parse("") == system.parse("garbage without fields")


def test_numa_nodes_become_the_cpu_devices() -> None:
    info = system.parse(recorded("system/two-numa-nodes.txt"))
    assert [(node.id, node.cpus, node.memory_total_mib) for node in info.numa_nodes] == [
        (0, "0-63", 395998120 // 1024),
        (1, "64-127", 396515312 // 1024),
    ]
    devices = cpu.cpu_devices(info)
    assert [(device.index, device.vendor, device.name) for device in devices] == [
        (0, "cpu", "CPU (AMD EPYC 9554 64-Core Processor)"),
        (1, "cpu", "CPU (AMD EPYC 9554 64-Core Processor)"),
    ]
    assert cpu.summary(info, devices) == "CPU (AMD EPYC 9554 64-Core Processor): 128 cores, 2 NUMA nodes"
    assert cpu.is_cpu_host(devices) and not cpu.is_cpu_host([])


def test_host_without_numa_information_is_one_cpu_device() -> None:
    info = system.parse(recorded("system/debian12-x86_64.txt"))
    assert info.numa_nodes == []
    assert [(device.index, device.memory_total_mib) for device in cpu.cpu_devices(info)] == [
        (0, 24684092 // 1024)
    ]


def test_engine_report() -> None:
    line = json.dumps({"python": "3.10.12", "executable": "/usr/bin/python3", "engines": {"vllm": "0.17.1"}})
    info, found = engines.parse("python3", "some warning\n" + line)
    assert (info.version, info.usable_for_bench, found) == ("3.10.12", True, {"vllm": "0.17.1"})
    old, _ = engines.parse("python3", json.dumps({"python": "3.8.10", "engines": {}}))
    assert not old.usable_for_bench
