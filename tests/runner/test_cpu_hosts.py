"""CPU hosts: their NUMA nodes are devices that runs lock like GPUs, and only engines with a CPU build run.

Pure placement and launch-environment pieces; the end-to-end run on a real CPU host is in
tests/real_engine.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from perflab.engines import EngineConfig, get_adapter
from perflab.probe import ProbeResult, PythonInfo, SystemInfo
from perflab.probe.cpu import cpu_devices
from perflab.probe.models import NumaNode
from perflab.runner.errors import GpusBusy, RunFailed
from perflab.runner.placement import check_cpu_engine, choose_gpus

TWO_NODES = SystemInfo(
    cpu_model="AMD EPYC 9554",
    cpu_cores=128,
    ram_total_mib=773938,
    ram_available_mib=700000,
    numa_nodes=[NumaNode(id=0, cpus="0-63"), NumaNode(id=1, cpus="64-127")],
)


def _probe(system: SystemInfo, engines: dict[str, str]) -> ProbeResult:
    return ProbeResult(
        host="cpu-box",
        simulated=False,
        accelerators=cpu_devices(system),
        system=system,
        python=PythonInfo(command="python3"),
        engines=engines,
        probed_at=datetime.now(timezone.utc),
        duration_s=0.1,
    )


def test_a_run_locks_a_numa_node_and_a_second_run_waits_for_a_free_one() -> None:
    devices = cpu_devices(TWO_NODES)
    config = EngineConfig(engine="vllm", model="m")
    assert choose_gpus(config, devices, {}, host_name="cpu-box") == (0,)
    assert choose_gpus(config, devices, {0: 7}, host_name="cpu-box") == (1,)
    with pytest.raises(GpusBusy):
        choose_gpus(config, devices, {0: 7, 1: 8}, host_name="cpu-box")
    one_node = cpu_devices(SystemInfo(cpu_model="AMD EPYC", cpu_cores=2, ram_total_mib=24000))
    with pytest.raises(GpusBusy):
        choose_gpus(config, one_node, {0: 7}, host_name="vm")


def test_host_ram_in_use_never_makes_a_cpu_device_foreign_busy() -> None:
    devices = cpu_devices(TWO_NODES)
    assert all(device.memory_used_mib is None for device in devices)
    assert choose_gpus(EngineConfig(engine="vllm", model="m", tp=2), devices, {}, host_name="h") == (0, 1)


def test_only_the_cpu_build_of_vllm_runs_on_a_cpu_host() -> None:
    vllm = get_adapter("vllm")
    assert check_cpu_engine(vllm, _probe(TWO_NODES, {"vllm": "0.32.0+cpu"}), host_name="cpu-box")
    with pytest.raises(RunFailed) as cuda_build:
        check_cpu_engine(vllm, _probe(TWO_NODES, {"vllm": "0.17.1"}), host_name="cpu-box")
    assert cuda_build.value.failure_class == "gpus_unavailable"
    assert "vLLM 0.17.1 is not its CPU build" in cuda_build.value.message
    assert "neither nvidia-smi nor npu-smi" in cuda_build.value.message
    for engine in ("sglang", "trtllm", "mindie", "vllm-ascend"):
        with pytest.raises(RunFailed, match="has no CPU backend perflab can launch"):
            check_cpu_engine(get_adapter(engine), _probe(TWO_NODES, {}), host_name="cpu-box")


def test_cpu_launch_environment_selects_numa_nodes_and_carries_the_cpu_knobs() -> None:
    vllm = get_adapter("vllm")
    config = EngineConfig(
        engine="vllm",
        model="m",
        cpu_kvcache_space_gib=4,
        cpu_omp_threads_bind="64-127",
        cpu_reserved_cores=1,
    )
    env = vllm.env(config, gpu_ids=(1,), cpu=True)
    assert env["CPU_VISIBLE_MEMORY_NODES"] == "1" and "CUDA_VISIBLE_DEVICES" not in env
    assert (env["VLLM_CPU_KVCACHE_SPACE"], env["VLLM_CPU_OMP_THREADS_BIND"]) == ("4", "64-127")
    assert env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"
    assert vllm.env(EngineConfig(engine="vllm", model="m"), gpu_ids=(0,))["CUDA_VISIBLE_DEVICES"] == "0"
    with pytest.raises(ValueError, match="has no CPU backend"):
        get_adapter("sglang").env(EngineConfig(engine="sglang", model="m"), gpu_ids=(0,), cpu=True)
