"""The Launch page's preflight verdicts, against simulated hosts' engines."""

from __future__ import annotations

from perflab.engines import EngineConfig
from perflab.inventory import HostConfig
from perflab.views.preflight import check_config
from tests.fixtures.runs import SimHostFactory


def test_a_mindie_hub_id_is_refused_before_asking_the_host(sim_host: SimHostFactory) -> None:
    host = sim_host("ascend", kind="local", accelerator="910B")
    shown = check_config(host, EngineConfig(engine="mindie", model="Qwen/Qwen3-8B"), "2.1.RC1")
    assert shown.level == "error" and "'Qwen/Qwen3-8B' is not a local directory" in shown.text
    good = check_config(host, EngineConfig(engine="mindie", model="/models/Qwen3-8B"), "2.1.RC1")
    assert good.level == "success" and "MindIE 2.1.RC1 on host 'ascend' accepts" in good.text


def test_an_unreachable_host_is_an_error_not_a_traceback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    host = HostConfig(name="gone", address="127.0.0.1", port=1, user="nobody", workdir=str(tmp_path))
    shown = check_config(host, EngineConfig(engine="vllm", model="m"), None)
    assert shown.level == "error" and shown.text.startswith("host 'gone' cannot be checked: ")


def test_a_container_config_is_not_judged_by_the_hosts_installation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    host = HostConfig(name="gpu", transport="local", workdir=str(tmp_path))
    config = EngineConfig(engine="vllm", model="m", image="vllm/vllm-openai:v0.11.0")
    shown = check_config(host, config, "0.32.0")
    assert shown.level == "info" and "vllm/vllm-openai:v0.11.0" in shown.text
