"""The runner's pure pieces: GPU choice, Prometheus gauges, sweeps, ×N results, argv filtering."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab.engines import EngineConfig, get_adapter
from perflab.inventory import HostConfig, Inventory
from perflab.probe import Accelerator
from perflab.runner import results
from perflab.runner.benchmark import sweep_is_flat, without_flags
from perflab.runner.errors import GpusBusy, RunFailed
from perflab.runner.launch import PortSearch, plan_replicas
from perflab.runner.logs import failure_of
from perflab.runner.placement import choose_gpus
from perflab.runner.ports import same_machine_hosts, search_offset
from perflab.runner.prometheus import gauge_values
from perflab.runner.sampling import engine_values


def _gpus(count: int, used: dict[int, int] | None = None, total: int = 81559) -> list[Accelerator]:
    used = used or {}
    return [
        Accelerator(
            index=i, vendor="nvidia", name="H100", memory_total_mib=total, memory_used_mib=used.get(i, 0)
        )
        for i in range(count)
    ]


def _config(**fields: object) -> EngineConfig:
    return EngineConfig(engine="vllm", model="m", **fields)  # type: ignore[arg-type]


def test_free_gpus_are_taken_lowest_first_skipping_locked_ones() -> None:
    assert choose_gpus(_config(tp=2), _gpus(8), {0: 7, 2: 7}, host_name="h") == (1, 3)
    assert choose_gpus(_config(tp=4, replicas=2), _gpus(8), {}, host_name="h") == tuple(range(8))


def test_locked_gpus_make_the_run_wait() -> None:
    with pytest.raises(GpusBusy, match=r"run\(s\) 3, 4 hold 7 of 8"):
        choose_gpus(_config(tp=2), _gpus(8), {0: 3, 1: 3, 2: 3, 3: 3, 4: 4, 5: 4, 6: 4}, host_name="h")
    with pytest.raises(GpusBusy, match=r"gpu_ids 2, 3 are held by run\(s\) 9"):
        choose_gpus(_config(tp=2, gpu_ids=(2, 3)), _gpus(8), {3: 9}, host_name="h")


def test_gpus_the_host_cannot_give_fail_the_run() -> None:
    with pytest.raises(RunFailed, match="needs 16 GPUs; host 'h' has 8") as too_many:
        choose_gpus(_config(tp=8, replicas=2), _gpus(8), {}, host_name="h")
    assert too_many.value.failure_class == "gpus_unavailable"
    with pytest.raises(RunFailed, match="gpu_ids 9 do not exist on host 'h'"):
        choose_gpus(_config(gpu_ids=(9,)), _gpus(8), {}, host_name="h")
    with pytest.raises(RunFailed, match="lists no accelerators"):
        choose_gpus(_config(), [], {}, host_name="h")


def test_gpus_used_by_foreign_processes_are_avoided_or_named() -> None:
    busy = _gpus(2, used={0: 70000})
    assert choose_gpus(_config(), busy, {}, host_name="h") == (1,)
    with pytest.raises(RunFailed, match="not start \\(GPU 0: 70000 MiB\\)"):
        choose_gpus(_config(gpu_ids=(0,)), busy, {}, host_name="h")
    with pytest.raises(RunFailed, match="GPU 0: 70000 MiB"):
        choose_gpus(_config(tp=2), busy, {}, host_name="h")
    idle_npu = [
        Accelerator(index=0, vendor="ascend", name="910B", memory_total_mib=65536, memory_used_mib=3337)
    ]
    assert choose_gpus(_config(), idle_npu, {}, host_name="h") == (0,)


def test_memory_on_gpus_our_runs_just_released_makes_the_run_wait_not_fail() -> None:
    draining = _gpus(8, used={0: 70000, 1: 70000, 2: 70000, 3: 70000})
    released = {0: 34, 1: 34, 2: 34, 3: 34}
    with pytest.raises(GpusBusy, match=r"GPUs 0, 1, 2, 3 still free the memory of run\(s\) 34"):
        choose_gpus(_config(tp=8), draining, {}, host_name="h", draining=released)
    with pytest.raises(GpusBusy, match=r"GPUs 2 still free the memory of run\(s\) 34"):
        choose_gpus(_config(gpu_ids=(2,)), draining, {}, host_name="h", draining=released)
    # Draining GPUs are never chosen while their memory is in use; free ones are.
    assert choose_gpus(_config(tp=4), draining, {}, host_name="h", draining=released) == (4, 5, 6, 7)
    # Once freed they are ordinary free GPUs; memory on a GPU none of our runs had stays foreign.
    assert choose_gpus(_config(tp=8), _gpus(8), {}, host_name="h", draining=released) == tuple(range(8))
    with pytest.raises(RunFailed, match="GPU 4: 70000 MiB") as foreign:
        choose_gpus(_config(tp=8), _gpus(8, used={4: 70000}), {}, host_name="h", draining=released)
    assert foreign.value.failure_class == "gpus_unavailable"


def _ports(avoid: set[int] | None = None, offset: int = 0, host_name: str = "") -> PortSearch:
    return PortSearch(get_adapter("vllm").default_port + offset, set(avoid or ()), host_name)


def test_replica_ports_follow_the_first_gpu_unless_a_port_is_set() -> None:
    assert [plan.port for plan in plan_replicas(_config(tp=2, replicas=2), (4, 5, 6, 7), _ports())] == [
        8004,
        8006,
    ]
    assert [plan.port for plan in plan_replicas(_config(replicas=2, port=9000), (4, 5), _ports())] == [
        9000,
        9001,
    ]
    assert [plan.gpu_ids for plan in plan_replicas(_config(replicas=2), (4, 5), _ports())] == [(4,), (5,)]


def test_chosen_ports_skip_taken_ones_and_each_other_but_a_pinned_port_stays() -> None:
    taken = {8000, 8001, 8002, 8004}
    plans = plan_replicas(_config(replicas=3), (0, 1, 2), _ports(taken))
    assert [plan.port for plan in plans] == [8003, 8005, 8006]
    pinned = plan_replicas(_config(replicas=2, port=8000), (0, 1), _ports(taken))
    assert [plan.port for plan in pinned] == [8000, 8001]
    with pytest.raises(RunFailed, match="no free port from 8000 to 65535 on host 'h'"):
        plan_replicas(_config(), (0,), _ports(set(range(8000, 65536)), host_name="h"))


def test_gauges_are_read_per_label_set() -> None:
    text = (
        "# HELP vllm:num_requests_running Number of requests.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 5.0\n'
        'vllm:kv_cache_usage_perc{engine="0"} 0.25 1700000000000\n'
        'vllm:kv_cache_usage_perc{engine="1"} 0.75\n'
        "vllm:num_requests_waiting NaN\n"
        "vllm:num_requests_running_total 99\n"
    )
    assert gauge_values(text, ["vllm:num_requests_running", "vllm:kv_cache_usage_perc"]) == {
        "vllm:num_requests_running": [3.0, 5.0],
        "vllm:kv_cache_usage_perc": [0.25, 0.75],
    }
    assert engine_values(get_adapter("vllm"), text) == {"running": 8.0, "kv_cache_usage": 0.5}
    assert engine_values(get_adapter("vllm"), "other_metric 1\n") is None
    assert engine_values(get_adapter("trtllm"), text) is None


def test_a_sweep_is_flat_when_throughput_stops_rising() -> None:
    assert not sweep_is_flat(None, 100.0, 0.03)
    assert not sweep_is_flat(100.0, 110.0, 0.03)
    assert sweep_is_flat(100.0, 102.0, 0.03)
    assert sweep_is_flat(100.0, 80.0, 0.03)


def test_flags_added_by_the_remote_bench_are_filtered() -> None:
    args = ["--base-url", "x", "--model", "m", "--dataset-path", "p", "--num-prompts", "5"]
    assert without_flags(args, ("--base-url", "--dataset-path")) == ["--model", "m", "--num-prompts", "5"]


def test_replicated_results_say_times_n() -> None:
    result = {
        "base_urls": ["http://a", "http://b"],
        "duration": 2.0,
        "total_token_throughput": 6038.38,
        "output_throughput": 100.0,
        "requests": [
            {"base_url": "http://a", "success": True, "input_tokens": 10, "output_tokens": 40},
            {"base_url": "http://b", "success": True, "input_tokens": 10, "output_tokens": 60},
            {"base_url": "http://b", "success": False, "error": "boom"},
        ],
    }
    extended = results.with_replicas(result, 2)
    assert extended["replicas"] == 2
    assert [
        (row["completed"], row["failed"], row["output_throughput"]) for row in extended["per_replica"]
    ] == [
        (1, 0, 20.0),
        (1, 1, 30.0),
    ]
    block = results.text_block("== block ==\n", extended, 2)
    assert block.startswith("== block ==\nReplicas:")
    assert "Per-replica total token throughput:      3019.19×2\n" in block
    assert "Per-replica request throughput" not in block
    assert results.text_block("== block ==\n", results.with_replicas(result, 1), 1) == "== block ==\n"
    assert "per_replica" not in results.with_replicas(result, 1)


def test_a_dead_replica_without_a_signature_is_a_crash_with_its_last_line() -> None:
    adapter = get_adapter("sglang")
    crashed = failure_of(adapter, "engine-1", "starting\nsomething odd happened\n", 3)
    assert crashed.failure_class == "crash"
    assert crashed.message == "SGLang: engine-1 exited with status 3: something odd happened"
    oom = failure_of(adapter, "engine-0", "torch.OutOfMemoryError: CUDA out of memory.\n", 1)
    assert oom.failure_class == "oom"


def test_hosts_with_one_address_or_local_are_one_machine_and_launches_spread() -> None:
    inventory = Inventory(
        Path("hosts.yaml"),
        (
            HostConfig(name="a", address="10.0.0.5"),
            HostConfig(name="a-again", address="10.0.0.5", port=2222, user="bench"),
            HostConfig(name="b", address="10.0.0.6"),
            HostConfig(name="sim-1", transport="local"),
            HostConfig(name="sim-2", transport="local"),
        ),
    )
    assert same_machine_hosts(inventory, inventory.get("a")) == {"a", "a-again"}
    assert same_machine_hosts(inventory, inventory.get("sim-2")) == {"sim-1", "sim-2"}
    assert same_machine_hosts(inventory, inventory.get("b")) == {"b"}
    assert [plan.port for plan in plan_replicas(_config(), (2,), _ports(offset=search_offset(3)))] == [8050]
    assert len({search_offset(run_id) for run_id in range(1, 17)}) == 16
