"""Disaggregated configurations: the workers' and router's argv, the budget they take, one-line refusals,
and the argv parsed by the engines' and routers' own parsers (SGLang 0.5.23's server arguments, vLLM
0.32's serve parser, sglang-router's and vllm-router's router arguments)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from perflab.engines import (
    EngineConfig,
    EngineConfigError,
    ServeCommandError,
    get_adapter,
    parse_serve_command,
)
from perflab.engines.disagg import WorkerPorts, role_args, role_env, router_argv, worker_config
from tests.fixtures.real_sglang import require_sglang_args, sglang_args_dir
from tests.fixtures.real_vllm import require_real_vllm, vllm_python

SPLIT = {
    "prefill": {"workers": 3, "tp": 2},
    "decode": {"workers": 1, "tp": 2, "max_num_seqs": 128},
    "transfer_backend": "mooncake",
}


def _config(engine: str = "sglang", **disaggregation: object) -> EngineConfig:
    return EngineConfig(
        engine=engine,
        model="Qwen/Qwen3-32B",
        max_num_batched_tokens=8192,
        disaggregation=disaggregation or SPLIT,
    )


def test_a_split_takes_both_groups_accelerators_and_names_itself():
    config = _config()
    assert config.gpus_needed == 8
    assert config.disaggregation is not None
    assert config.disaggregation.label() == "3P1D (P TP2, D TP2)"
    assert (
        config.fingerprint()
        != _config(prefill={"workers": 2, "tp": 2}, decode={"workers": 2, "tp": 2}).fingerprint()
    )


def test_a_worker_is_its_group_on_top_of_the_shared_knobs():
    decode = worker_config(_config(), "decode")
    assert (decode.tp, decode.max_num_seqs, decode.max_num_batched_tokens) == (2, 128, 8192)
    assert decode.disaggregation is None
    prefill = worker_config(_config(), "prefill")
    assert (prefill.tp, prefill.max_num_seqs) == (2, None)


def test_sglang_roles_and_router():
    config = _config()
    layout = config.disaggregation
    assert layout is not None
    ports = WorkerPorts(30000, 31000)
    assert role_args("sglang", layout, "prefill", ports) == [
        "--disaggregation-mode",
        "prefill",
        "--disaggregation-transfer-backend",
        "mooncake",
        "--disaggregation-bootstrap-port",
        "31000",
    ]
    assert role_args("sglang", layout, "decode", ports)[:2] == ["--disaggregation-mode", "decode"]
    assert "--disaggregation-bootstrap-port" not in role_args("sglang", layout, "decode", ports)
    argv = router_argv(
        "sglang", layout, prefill=[ports], decode=[WorkerPorts(30001, 31001)], port=30002, metrics_port=30003
    )
    assert argv[:3] == ["python3", "-m", "sglang_router.launch_router"]
    assert argv[3:10] == [
        "--pd-disaggregation",
        "--prefill",
        "http://127.0.0.1:30000",
        "31000",
        "--decode",
        "http://127.0.0.1:30001",
        "--host",
    ]
    assert argv[-4:] == ["--prometheus-host", "127.0.0.1", "--prometheus-port", "30003"]


def test_vllm_connector_roles_and_side_channels():
    nixl = _config("vllm", prefill={"tp": 4}, decode={"tp": 4}, transfer_backend="nixl").disaggregation
    mooncake = _config(
        "vllm", prefill={"tp": 4}, decode={"tp": 4}, transfer_backend="mooncake"
    ).disaggregation
    assert nixl is not None and mooncake is not None
    ports = WorkerPorts(8000, 9000)
    assert role_args("vllm", nixl, "decode", ports) == [
        "--kv-transfer-config",
        '{"kv_connector":"NixlConnector","kv_role":"kv_both"}',
    ]
    assert json.loads(role_args("vllm", mooncake, "prefill", ports)[1]) == {
        "kv_connector": "MooncakeConnector",
        "kv_role": "kv_producer",
    }
    assert role_env("vllm", nixl, "decode", ports) == {"VLLM_NIXL_SIDE_CHANNEL_PORT": "9000"}
    assert role_env("vllm", mooncake, "prefill", ports) == {"VLLM_MOONCAKE_BOOTSTRAP_PORT": "9000"}
    assert role_env("vllm", mooncake, "decode", ports) == {}
    argv = router_argv(
        "vllm", nixl, prefill=[ports], decode=[WorkerPorts(8001, 9001)], port=8002, metrics_port=8003
    )
    assert argv[:2] == ["vllm-router", "--vllm-pd-disaggregation"]
    assert argv[argv.index("--kv-connector") + 1] == "nixl"
    # a Mooncake prefill's bootstrap port follows its URL: the router queries it for the engine ids
    argv = router_argv(
        "vllm", mooncake, prefill=[ports], decode=[WorkerPorts(8001, 9001)], port=8002, metrics_port=8003
    )
    assert argv[2:5] == ["--prefill", "http://127.0.0.1:8000", "9000"]


def test_display_command_lists_every_worker_then_the_router():
    lines = get_adapter("sglang").display_command(_config()).splitlines()
    assert len(lines) == 5
    assert all("--disaggregation-mode prefill" in line for line in lines[:3])
    assert "--disaggregation-mode decode" in lines[3] and "--max-running-requests 128" in lines[3]
    assert lines[4].startswith("python3 -m sglang_router.launch_router --pd-disaggregation")


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"tp": 2}, "sets parallelism per group (prefill.tp, decode.workers, …), not tp=2"),
        ({"replicas": 2}, "not replicas=2"),
        ({"image": "lmsysorg/sglang:v0.5.21"}, "runs on the host's engine, not from an image"),
    ],
)
def test_shared_parallelism_is_refused_in_one_line(fields, words):
    with pytest.raises(ValidationError) as caught:
        EngineConfig(engine="sglang", model="m", disaggregation=SPLIT, **fields)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("engine", "version", "backend", "message"),
    [
        (
            "sglang",
            "0.5.23",
            "fake",
            "SGLang: disaggregation.transfer_backend 'fake' is not a transfer backend of SGLang 0.5.23 "
            "(choose from mooncake, nixl, ascend, mori, mooncake_tcp)",
        ),
        (
            "vllm",
            None,
            "mori",
            "vLLM: disaggregation.transfer_backend 'mori' is not a transfer backend of vLLM 0.32.0 or 0.33.0 "
            "(choose from nixl, mooncake)",
        ),
    ],
)
def test_a_backend_the_release_lacks_is_refused(engine, version, backend, message):
    adapter = get_adapter(engine).for_version(version) if version else get_adapter(engine)
    assert adapter is not None
    config = EngineConfig(engine=engine, model="m", disaggregation={"transfer_backend": backend})
    with pytest.raises(EngineConfigError) as caught:
        adapter.validate(config)
    assert str(caught.value) == message


def test_other_engines_and_repeated_role_flags_are_refused():
    with pytest.raises(EngineConfigError, match="launches prefill/decode disaggregation with SGLang or vLLM"):
        get_adapter("trtllm").validate(EngineConfig(engine="trtllm", model="m", disaggregation={}))
    repeated = EngineConfig(
        engine="sglang", model="m", disaggregation={}, extra_args=("--disaggregation-mode", "decode")
    )
    with pytest.raises(EngineConfigError, match="repeats --disaggregation-mode"):
        get_adapter("sglang").validate(repeated)
    # each group's parallelism is checked by the engine's rules, as an aggregated one is
    odd = EngineConfig(engine="sglang", model="m", disaggregation={"decode": {"tp": 4, "ep": 3}})
    with pytest.raises(EngineConfigError, match=r"ep \(3\) must divide tp \(4\)"):
        get_adapter("sglang").validate(odd)


def _run(python: str, code: str, words: list[str], env: dict[str, str] | None = None) -> dict:
    completed = subprocess.run(
        [python, "-c", code, *words], capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


SGLANG_PARSE = """
import argparse, json, sys
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
ns = parser.parse_args(sys.argv[1:])
keys = ("disaggregation_mode", "disaggregation_transfer_backend", "disaggregation_bootstrap_port", "tp_size",
        "max_running_requests", "chunked_prefill_size", "model_path", "port")
print(json.dumps({key: getattr(ns, key) for key in keys}))
"""


@pytest.mark.real_engine
@pytest.mark.parser_only
def test_sglangs_own_parser_reads_each_workers_argv():
    require_sglang_args()
    import os

    adapter = get_adapter("sglang")
    config = _config()
    layout = config.disaggregation
    assert layout is not None
    env = {**os.environ, "PYTHONPATH": str(sglang_args_dir())}
    for role, expected_mode in (("prefill", "prefill"), ("decode", "decode")):
        ports = WorkerPorts(30000, 31000)
        argv = adapter.serve_argv(worker_config(config, role), port=ports.api)
        words = argv[3:] + role_args("sglang", layout, role, ports)
        parsed = _run(str(vllm_python()), SGLANG_PARSE, words, env)
        assert parsed["disaggregation_mode"] == expected_mode
        assert parsed["disaggregation_transfer_backend"] == "mooncake"
        assert parsed["tp_size"] == 2 and parsed["chunked_prefill_size"] == 8192
        if role == "prefill":
            assert parsed["disaggregation_bootstrap_port"] == 31000
        else:
            assert parsed["max_running_requests"] == 128


VLLM_PARSE = """
import json, sys
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser
top = FlexibleArgumentParser(prog="vllm")
ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
ns = top.parse_args(sys.argv[1:])
from vllm.config.kv_transfer import KVTransferConfig
config = ns.kv_transfer_config
print(json.dumps({"tp": ns.tensor_parallel_size, "connector": config.kv_connector, "role": config.kv_role,
                  "type": type(config).__name__}))
"""


@pytest.mark.real_engine
@pytest.mark.parser_only
def test_vllms_own_parser_reads_each_workers_argv():
    require_real_vllm()
    adapter = get_adapter("vllm")
    config = _config("vllm", prefill={"tp": 4}, decode={"tp": 4}, transfer_backend="mooncake")
    layout = config.disaggregation
    assert layout is not None
    for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        argv = adapter.serve_argv(worker_config(config, role), port=8000)
        words = argv[1:] + role_args("vllm", layout, role, WorkerPorts(8000, 9000))
        parsed = _run(str(vllm_python()), VLLM_PARSE, words)
        assert parsed == {
            "tp": 4,
            "connector": "MooncakeConnector",
            "role": kv_role,
            "type": "KVTransferConfig",
        }


SGLANG_ROUTER_PARSE = """
import json, sys
from sglang_router.launch_router import parse_router_args
args = parse_router_args(sys.argv[1:])
print(json.dumps({"pd": args.pd_disaggregation, "prefill": args.prefill_urls, "decode": args.decode_urls,
                  "port": args.port, "prometheus": [args.prometheus_host, args.prometheus_port]}))
"""


def test_sglang_routers_own_parser_reads_its_argv():
    pytest.importorskip("sglang_router")
    config = _config()
    layout = config.disaggregation
    assert layout is not None
    prefill = [WorkerPorts(30000 + index, 31000 + index) for index in range(3)]
    argv = router_argv(
        "sglang", layout, prefill=prefill, decode=[WorkerPorts(30003, 31003)], port=30004, metrics_port=30005
    )
    parsed = _run(sys.executable, SGLANG_ROUTER_PARSE, argv[3:])
    assert parsed == {
        "pd": True,
        "prefill": [[f"http://127.0.0.1:{30000 + index}", 31000 + index] for index in range(3)],
        "decode": ["http://127.0.0.1:30003"],
        "port": 30004,
        "prometheus": ["127.0.0.1", 30005],
    }


VLLM_ROUTER_PARSE = """
import json, sys
from vllm_router.launch_router import parse_router_args
args = parse_router_args(sys.argv[1:])
print(json.dumps({"pd": args.vllm_pd_disaggregation, "prefill": args.prefill_urls, "decode": args.decode_urls,
                  "connector": args.kv_connector, "port": args.port}))
"""


@pytest.mark.parametrize(("backend", "bootstrap"), [("nixl", None), ("mooncake", 9000)])
def test_vllm_routers_own_parser_reads_its_argv(backend: str, bootstrap: int | None):
    pytest.importorskip("vllm_router")
    layout = _config("vllm", prefill={"tp": 4}, decode={"tp": 4}, transfer_backend=backend).disaggregation
    assert layout is not None
    argv = router_argv(
        "vllm",
        layout,
        prefill=[WorkerPorts(8000, 9000)],
        decode=[WorkerPorts(8001, 9001)],
        port=8002,
        metrics_port=8003,
    )
    parsed = _run(sys.executable, VLLM_ROUTER_PARSE, argv[1:])
    assert parsed == {
        "pd": True,
        "prefill": [["http://127.0.0.1:8000", bootstrap]],
        "decode": ["http://127.0.0.1:8001"],
        "connector": backend,
        "port": 8002,
    }


def test_moe_layouts_attention_dp_with_expert_or_tensor_parallel_moe():
    sglang, vllm = get_adapter("sglang"), get_adapter("vllm")
    # AIConfigurator's Qwen3-30B-A3B layout on 8 GPUs: attention DP2 + MoE TP2, four replicas
    config = EngineConfig(engine="sglang", model="Qwen/Qwen3-30B-A3B", dp=2, dp_attention=True, replicas=4)
    assert config.gpus_needed == 8
    assert "--tp-size 2 --attn-dp-size 2" in sglang.display_command(config)
    expert = EngineConfig(engine="sglang", model="m", tp=2, dp=4, dp_attention=True, ep=8)
    assert "--tp-size 8 --attn-dp-size 4 --ep-size 8" in sglang.display_command(expert)
    with pytest.raises(EngineConfigError, match=r"ep \(3\) must divide tp \(8 = tp×dp, dp_attention\)"):
        sglang.validate(expert.model_copy(update={"ep": 3}))
    # vLLM's -dp ranks of a MoE model run attention apart by themselves: its layout is dp and ep alone
    assert vllm.display_command(EngineConfig(engine="vllm", model="m", dp=2, ep=2)).endswith(
        "-dp 2 --enable-expert-parallel"
    )
    with pytest.raises(EngineConfigError, match="vLLM runs the -dp ranks of a MoE model as attention data"):
        vllm.validate(EngineConfig(engine="vllm", model="m", dp=2, ep=2, dp_attention=True))
    with pytest.raises(EngineConfigError, match=r"attention data parallel is SGLang's \(--attn-dp-size\)"):
        get_adapter("trtllm").validate(EngineConfig(engine="trtllm", model="m", dp_attention=True))
    with pytest.raises(EngineConfigError, match="dp_attention needs dp > 1"):
        sglang.validate(EngineConfig(engine="sglang", model="m", tp=8, dp_attention=True))


@pytest.mark.real_engine
@pytest.mark.parser_only
def test_sglangs_own_parser_reads_attention_dp():
    require_sglang_args()
    import os

    config = EngineConfig(engine="sglang", model="m", tp=2, dp=4, dp_attention=True, ep=8)
    words = get_adapter("sglang").serve_argv(config, port=30000)[3:]
    code = SGLANG_PARSE.replace('"port")', '"port", "attn_dp_size", "ep_size")')
    parsed = _run(str(vllm_python()), code, words, {**os.environ, "PYTHONPATH": str(sglang_args_dir())})
    assert (parsed["tp_size"], parsed["attn_dp_size"], parsed["ep_size"]) == (8, 4, 8)


ROUND_TRIPS = [
    _config(),
    _config("vllm", prefill={"tp": 4}, decode={"tp": 4}, transfer_backend="nixl"),
    EngineConfig(
        engine="vllm",
        model="Qwen/Qwen3-30B-A3B",
        env={"HF_HUB_OFFLINE": "1"},
        disaggregation={
            "prefill": {"workers": 2, "dp": 2, "ep": 2},
            "decode": {"tp": 2, "dp": 2, "ep": 4, "max_num_batched_tokens": 512},
            "transfer_backend": "mooncake",
        },
    ),
    EngineConfig(
        engine="sglang",
        model="Qwen/Qwen3-30B-A3B",
        dp_attention=True,
        disaggregation={
            "prefill": {"tp": 2, "dp": 2, "ep": 4},
            "decode": {"tp": 1, "dp": 4, "ep": 4},
            "transfer_backend": "nixl",
        },
    ),
    EngineConfig(engine="sglang", model="Qwen/Qwen3-30B-A3B", tp=2, dp=4, ep=8, dp_attention=True),
    EngineConfig(engine="sglang", model="Qwen/Qwen3-30B-A3B", dp=2, dp_attention=True),
]


@pytest.mark.parametrize("config", ROUND_TRIPS, ids=lambda config: config.fingerprint())
def test_every_command_perflab_writes_reads_back_into_its_configuration(config: EngineConfig) -> None:
    text = get_adapter(config.engine).display_command(config)
    back = parse_serve_command(text)
    assert back == config and back.fingerprint() == config.fingerprint()
    assert not any(flag in " ".join(back.extra_args) for flag in ("--attn-dp-size", "--disaggregation"))


def test_sglangs_deprecated_attention_dp_spelling_reads_as_the_current_one() -> None:
    launch = "python3 -m sglang.launch_server --model-path m --tp-size 8"
    old = parse_serve_command(f"{launch} --dp-size 4 --enable-dp-attention --ep-size 8")
    assert (old.tp, old.dp, old.ep, old.dp_attention, old.extra_args) == (2, 4, 8, True, ())
    assert old == parse_serve_command(f"{launch} --attention-data-parallel-size 4 --ep-size 8")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "python3 -m sglang.launch_server --model-path m --tp-size 2 --disaggregation-mode prefill",
            "is one worker of a disaggregated configuration: give every worker's command and the router's",
        ),
        (
            "python3 -m sglang_router.launch_router --pd-disaggregation --prefill http://h:1 --decode http://h:2",
            "is a router's command: give every worker's command too",
        ),
        (
            "python3 -m sglang.launch_server --model-path m --port 30000 --disaggregation-mode prefill\n"
            "python3 -m sglang.launch_server --model-path m --port 30001 --disaggregation-mode decode\n"
            "python3 -m sglang_router.launch_router --pd-disaggregation --prefill http://h:30000 "
            "--decode http://h:30001 --policy cache_aware",
            "the router's --policy is not a flag perflab launches a router with",
        ),
        (
            "python3 -m sglang.launch_server --model-path m --port 30000 --disaggregation-mode prefill\n"
            "python3 -m sglang.launch_server --model-path m --port 30001 --tp-size 2 "
            "--disaggregation-mode decode\n"
            "python3 -m sglang_router.launch_router --pd-disaggregation --prefill http://h:30000 "
            "--decode http://h:30002",
            "no worker URL of the router has the port 30001 of a worker's command",
        ),
        (
            "python3 -m sglang.launch_server --model-path m --port 30000 --disaggregation-mode prefill\n"
            "python3 -m sglang.launch_server --model-path m --port 30001 --context-length 4096 "
            "--disaggregation-mode decode\n"
            "python3 -m sglang_router.launch_router --pd-disaggregation --prefill http://h:30000 "
            "--decode http://h:30001",
            "the prefill and decode workers differ in max_model_len, which both sides share",
        ),
    ],
)
def test_commands_that_make_no_disaggregated_configuration_are_refused_in_one_line(
    text: str, words: str
) -> None:
    with pytest.raises(ServeCommandError) as caught:
        parse_serve_command(text)
    assert words in str(caught.value) and "\n" not in str(caught.value)
