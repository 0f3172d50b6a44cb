"""How each engine launches a disaggregated configuration: its workers' flags, its router, its backends.

Checked against the engines' own sources:

- SGLang 0.5.22 and 0.5.23 (the wheels' ``sglang/srt/arg_groups/fields/disagg.py`` and
  ``choices.py``): ``--disaggregation-mode prefill|decode``, ``--disaggregation-transfer-backend`` (choices
  ``DISAGG_TRANSFER_BACKEND_CHOICES``: mooncake, nixl, ascend, fake, mori, mooncake_tcp; ``fake`` moves no
  KV and a prefill server refuses it, so perflab does too) and ``--disaggregation-bootstrap-port`` (the
  prefill server's bootstrap server, default 8998; a decode server learns it from each request). The
  router is PyPI ``sglang-router`` 0.3.2 (``python3 -m sglang_router.launch_router --pd-disaggregation
  --prefill URL BOOTSTRAP_PORT … --decode URL … --host H --port P``, its ``router_args.py``); it sends every
  request to one prefill and one decode worker with ``bootstrap_host``/``bootstrap_port``/``bootstrap_room``
  added and streams the decode worker's answer. It binds Prometheus on 0.0.0.0:29000 unless told
  otherwise, so perflab gives it ``--prometheus-host 127.0.0.1 --prometheus-port`` of its own.
- vLLM 0.32.0 and 0.33.0 (``vllm/config/kv_transfer.py``, ``vllm/distributed/kv_transfer/kv_connector/
  factory.py``, ``vllm/envs.py``): ``--kv-transfer-config '{"kv_connector": …, "kv_role": …}'`` with
  NixlConnector (``kv_both`` on both sides as vLLM's NixlConnector guide does, each worker its own
  ``VLLM_NIXL_SIDE_CHANNEL_PORT``, default 5600) or MooncakeConnector (``kv_producer`` / ``kv_consumer``,
  the prefill's ``VLLM_MOONCAKE_BOOTSTRAP_PORT``, default 8998). The vLLM wheel ships no proxy; the
  router is PyPI ``vllm-router`` 0.1.17 (vllm-project; ``vllm-router --vllm-pd-disaggregation --prefill
  URL [BOOTSTRAP_PORT] --decode URL --kv-connector nixl|mooncake --host H --port P``, its ``router_args.py``;
  with Mooncake it queries each prefill's bootstrap server, ``GET /query`` on that port, at start-up, and
  sends a request to the prefill worker (``max_tokens`` 1, ``kv_transfer_params`` with
  ``do_remote_decode``) and then to the decode worker with the prefill's answer's ``kv_transfer_params``
  (NIXL) or the bootstrap address and engine id (Mooncake), ``src/routers/http/vllm_pd_router.rs``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from perflab.engines.config import EngineConfig
from perflab.engines.errors import InvalidKnobValue, UnsupportedKnob
from perflab.engines.layout import Disaggregation
from perflab.engines.vocabulary import release_of

DISAGG_ENGINES = ("sglang", "vllm")
SGLANG_BACKENDS = ("mooncake", "nixl", "ascend", "mori", "mooncake_tcp")
# engine → release → transfer backends perflab can launch with it
TRANSFER_BACKENDS: dict[str, dict[str, tuple[str, ...]]] = {
    "sglang": {"0.5.22": SGLANG_BACKENDS, "0.5.23": SGLANG_BACKENDS},
    "vllm": {"0.32.0": ("nixl", "mooncake"), "0.33.0": ("nixl", "mooncake")},
}
VLLM_CONNECTORS = {"nixl": "NixlConnector", "mooncake": "MooncakeConnector"}
VLLM_ROLES = {
    "nixl": {"prefill": "kv_both", "decode": "kv_both"},
    "mooncake": {"prefill": "kv_producer", "decode": "kv_consumer"},
}
# Flags perflab writes for a disaggregated worker or its router; extra_args may not repeat them.
ROLE_FLAGS = frozenset(
    {
        "--disaggregation-mode",
        "--disaggregation-transfer-backend",
        "--disaggregation-bootstrap-port",
        "--kv-transfer-config",
    }
)


@dataclass(frozen=True)
class Router:
    """The program in front of a disaggregated configuration's workers."""

    program: tuple[str, ...]
    package: str  # the PyPI distribution that provides it
    version: str  # the release whose flags perflab writes
    ready_marker: str  # the log line that says the router serves
    per_worker: bool  # whether it logs that line once per worker it took in (else once)
    health_path: str = "/health"

    def ready_lines(self, workers: int) -> int:
        """How many ready lines the router's log shows once it serves ``workers`` workers."""
        return workers if self.per_worker else 1


ROUTERS = {
    # sglang-router 0.3.2 logs "Activated 1 worker(s)" for each worker it took in
    "sglang": Router(
        ("python3", "-m", "sglang_router.launch_router"),
        "sglang-router",
        "0.3.2",
        "Activated 1 worker(s)",
        per_worker=True,
    ),
    # vllm-router 0.1.17 waits for every worker's health, then logs "Router ready | workers: [...]"
    "vllm": Router(("vllm-router",), "vllm-router", "0.1.17", "Router ready | workers:", per_worker=False),
}
# What a host's log says when the router's program is not installed there.
ROUTER_MISSING = (
    r"No module named '?sglang_router",
    r"vllm-router: (?:command )?not found",
    r"No module named '?vllm_router",
)


def known_backends(engine: str, engine_version: str | None = None) -> tuple[str, tuple[str, ...]]:
    """The transfer backends of ``engine`` at ``engine_version`` (any release's when unknown or newer than
    perflab's tables), and the words naming which releases that is."""
    releases = TRANSFER_BACKENDS[engine]
    version = release_of(engine_version) if engine_version else None
    if version in releases:
        return version, releases[version]
    merged = tuple(dict.fromkeys(word for words in releases.values() for word in words))
    return " or ".join(releases), merged


def check_disaggregation(config: EngineConfig, display_name: str, engine_version: str | None = None) -> None:
    """Raise an :class:`EngineConfigError` in one line for a disaggregated configuration the engine
    cannot launch: an engine without disaggregation, a backend its release lacks, a group shape its
    parallelism rules refuse, a flag of extra_args perflab writes itself."""
    layout = config.disaggregation
    if layout is None:
        return
    if config.engine not in DISAGG_ENGINES:
        raise UnsupportedKnob(
            display_name,
            "disaggregation",
            "perflab launches prefill/decode disaggregation with SGLang or vLLM",
        )
    versions, backends = known_backends(config.engine, engine_version)
    if layout.transfer_backend not in backends:
        raise InvalidKnobValue(
            display_name,
            "disaggregation.transfer_backend",
            f"{layout.transfer_backend!r} is not a transfer backend of {display_name} {versions} "
            f"(choose from {', '.join(backends)})",
        )
    for item in config.extra_args:
        if item.partition("=")[0] in ROLE_FLAGS:
            raise InvalidKnobValue(
                display_name,
                "extra_args",
                f"repeats {item.partition('=')[0]}; perflab sets it from disaggregation",
            )


def worker_config(config: EngineConfig, role: str) -> EngineConfig:
    """One worker of ``role`` as an aggregated configuration: the group's parallelism and batching
    knobs on top of the configuration's shared ones."""
    assert config.disaggregation is not None
    group = config.disaggregation.group(role)
    changes: dict[str, object] = {"disaggregation": None, "tp": group.tp, "dp": group.dp, "ep": group.ep}
    if group.max_num_seqs is not None:
        changes["max_num_seqs"] = group.max_num_seqs
    if group.max_num_batched_tokens is not None:
        changes["max_num_batched_tokens"] = group.max_num_batched_tokens
    return EngineConfig.model_validate(
        {**config.model_dump(exclude={"disaggregation", "port", "gpu_ids"}), **changes}
    )


@dataclass(frozen=True)
class WorkerPorts:
    """The ports one worker needs: the API's and its transfer side channel or bootstrap server."""

    api: int
    side: int


def role_args(engine: str, layout: Disaggregation, role: str, ports: WorkerPorts) -> list[str]:
    """The flags that make an aggregated worker's argv a ``role`` worker."""
    if engine == "sglang":
        args = [
            "--disaggregation-mode",
            role,
            "--disaggregation-transfer-backend",
            layout.transfer_backend,
        ]
        if role == "prefill":
            args += ["--disaggregation-bootstrap-port", str(ports.side)]
        return args
    transfer = {
        "kv_connector": VLLM_CONNECTORS[layout.transfer_backend],
        "kv_role": VLLM_ROLES[layout.transfer_backend][role],
    }
    return ["--kv-transfer-config", json.dumps(transfer, separators=(",", ":"))]


def role_env(engine: str, layout: Disaggregation, role: str, ports: WorkerPorts) -> dict[str, str]:
    """Environment one vLLM worker needs for its connector's side channel (SGLang: none)."""
    if engine != "vllm":
        return {}
    if layout.transfer_backend == "nixl":
        return {"VLLM_NIXL_SIDE_CHANNEL_PORT": str(ports.side)}
    return {"VLLM_MOONCAKE_BOOTSTRAP_PORT": str(ports.side)} if role == "prefill" else {}


def router_argv(
    engine: str,
    layout: Disaggregation,
    *,
    prefill: Sequence[WorkerPorts],
    decode: Sequence[WorkerPorts],
    port: int,
    metrics_port: int,
    host: str = "127.0.0.1",
) -> list[str]:
    """The router's argv in front of the workers listening on ``host``."""
    router = ROUTERS[engine]
    args: list[str] = [*router.program]
    if engine == "sglang":
        args.append("--pd-disaggregation")
        for ports in prefill:
            args += ["--prefill", f"http://{host}:{ports.api}", str(ports.side)]
    else:
        # vllm-router asks each Mooncake prefill's bootstrap server for its engine ids (GET /query on the
        # port given after the URL, 8998 when none is); NIXL workers need no port of theirs named
        args.append("--vllm-pd-disaggregation")
        for ports in prefill:
            bootstrap = [str(ports.side)] if layout.transfer_backend == "mooncake" else []
            args += ["--prefill", f"http://{host}:{ports.api}", *bootstrap]
    for ports in decode:
        args += ["--decode", f"http://{host}:{ports.api}"]
    if engine == "vllm":
        args += ["--kv-connector", layout.transfer_backend]
    return [
        *args,
        "--host",
        host,
        "--port",
        str(port),
        "--prometheus-host",
        host,
        "--prometheus-port",
        str(metrics_port),
    ]
