"""Replicas: disjoint GPU blocks and consecutive ports on one host."""

from __future__ import annotations

import pytest

from perflab.engines import (
    EngineConfig,
    NotEnoughGpus,
    ReplicaPlan,
    get_adapter,
    partition_gpus,
    replica_plans,
)


def test_tp4_on_eight_gpus_is_two_replicas_on_consecutive_ports() -> None:
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", tp=4, replicas=2)
    assert replica_plans(config, range(8)) == [
        ReplicaPlan(0, (0, 1, 2, 3), 8000),
        ReplicaPlan(1, (4, 5, 6, 7), 8001),
    ]


def test_configured_gpu_ids_and_base_port_are_used() -> None:
    config = EngineConfig(engine="sglang", model="m", tp=2, replicas=2, gpu_ids=(7, 6, 1, 0), port=31000)
    plans = replica_plans(config, [0, 1, 2, 3, 4, 5, 6, 7])
    assert [(plan.gpu_ids, plan.port) for plan in plans] == [((7, 6), 31000), ((1, 0), 31001)]


def test_blocks_are_disjoint_and_follow_the_host_order() -> None:
    config = EngineConfig(engine="mindie", model="m", tp=2, dp=2, replicas=2)
    blocks = partition_gpus(config, [3, 2, 1, 0, 7, 6, 5, 4, 3])
    assert blocks == [(3, 2, 1, 0), (7, 6, 5, 4)]


def test_not_enough_gpus_names_the_shape_and_the_host() -> None:
    config = EngineConfig(engine="vllm", model="m", tp=4, replicas=2)
    with pytest.raises(
        NotEnoughGpus, match=r"TP4×DP1 × 2 replica\(s\) needs 8 GPUs; the host has 6 \(0, 1, 2, 3, 4, 5\)"
    ):
        partition_gpus(config, range(6))


def test_gpu_ids_missing_from_the_host() -> None:
    config = EngineConfig(engine="vllm", model="m", tp=2, gpu_ids=(8, 9))
    with pytest.raises(NotEnoughGpus, match=r"gpu_ids \[8, 9\] are not available on this host"):
        partition_gpus(config, range(8))


def test_port_overflow_is_an_error() -> None:
    config = EngineConfig(engine="vllm", model="m", replicas=2, port=65535)
    with pytest.raises(ValueError, match="above 65535"):
        replica_plans(config, range(2))


def test_each_replica_gets_its_own_env_and_argv() -> None:
    config = EngineConfig(engine="vllm", model="m", tp=2, replicas=2)
    adapter = get_adapter("vllm")
    launches = [
        (adapter.serve_argv(config, port=plan.port), adapter.env(config, gpu_ids=plan.gpu_ids))
        for plan in replica_plans(config, range(4))
    ]
    assert [argv[argv.index("--port") + 1] for argv, _ in launches] == ["8000", "8001"]
    assert [env["CUDA_VISIBLE_DEVICES"] for _, env in launches] == ["0,1", "2,3"]
