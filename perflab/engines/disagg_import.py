"""Reading a disaggregated configuration back from its commands: every worker's, then the router's.

The inverse of a disaggregated configuration's display command (:meth:`perflab.engines.base.
EngineAdapter.display_command`, one command per line): each worker's command is read by its engine's
adapter once the flags and variables of its role (:func:`perflab.engines.disagg.role_args`,
:func:`~perflab.engines.disagg.role_env`) are taken out, and the router's command (``sglang-router``
0.3.2, ``vllm-router`` 0.1.17, the flags :func:`~perflab.engines.disagg.router_argv` writes) says which
worker is a prefill and which a decode worker, by the port of each URL. The workers of one role form
its group (they must agree); a group's parallelism and batching knobs are its own, a batching knob both
groups share is the configuration's, and every other field must agree between the roles. Ports are
placement and are left out. Anything else is a ``ValueError`` saying why, in one line.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perflab.engines.config import EngineConfig
from perflab.engines.disagg import VLLM_CONNECTORS, VLLM_ROLES
from perflab.engines.layout import ROLES, Disaggregation

# The programs perflab starts a router with (perflab.engines.disagg.ROUTERS), and their engine.
ROUTER_PROGRAMS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("python3", "-m", "sglang_router.launch_router"), "sglang"),
    (("python", "-m", "sglang_router.launch_router"), "sglang"),
    (("vllm-router",), "vllm"),
)
PD_FLAGS = {"sglang": "--pd-disaggregation", "vllm": "--vllm-pd-disaggregation"}
ROUTER_VALUE_FLAGS = ("--host", "--port", "--prometheus-host", "--prometheus-port", "--kv-connector")
SGLANG_ROLE_FLAGS = (
    "--disaggregation-mode",
    "--disaggregation-transfer-backend",
    "--disaggregation-bootstrap-port",
)
VLLM_SIDE_CHANNELS = ("VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_MOONCAKE_BOOTSTRAP_PORT")
# SGLang 0.5.23's default --disaggregation-transfer-backend
SGLANG_DEFAULT_BACKEND = "mooncake"
# Fields a group of workers sets for itself (perflab.engines.layout.WorkerGroup).
GROUP_PARALLELISM = ("tp", "dp", "ep")
GROUP_BATCHING = ("max_num_seqs", "max_num_batched_tokens")


@dataclass(frozen=True)
class Role:
    """What a worker's command says of its role: the mode it names (None: the router decides, as
    NixlConnector's ``kv_both`` workers leave it) and its transfer backend."""

    mode: str | None
    backend: str


@dataclass
class RouterCommand:
    """The router's workers: each prefill URL (with its bootstrap port, if given) and decode URL."""

    prefill: list[str] = field(default_factory=list)
    decode: list[str] = field(default_factory=list)
    kv_connector: str | None = None


def router_engine(words: Sequence[str]) -> tuple[str, list[str]] | None:
    """The engine of a router command and the words after its program, or None for another command."""
    head = [words[0].rsplit("/", 1)[-1], *words[1:]] if words else []
    for program, engine in ROUTER_PROGRAMS:
        if tuple(head[: len(program)]) == program:
            return engine, list(words[len(program) :])
    return None


def read_router(engine: str, words: Sequence[str]) -> RouterCommand:
    """The workers a router command names (only the flags perflab launches a router with)."""
    router = RouterCommand()
    seen_pd = False
    index = 0
    while index < len(words):
        word = words[index]
        name, has_inline, inline = word.partition("=")
        index += 1
        if name == PD_FLAGS[engine] and not has_inline:
            seen_pd = True
        elif name in ("--prefill", "--decode"):
            if has_inline or index >= len(words) or words[index].startswith("-"):
                raise ValueError(f"{name} needs a worker URL")
            url = words[index]
            index += 1
            if name == "--prefill" and index < len(words) and not words[index].startswith("-"):
                index += 1  # the prefill's bootstrap port (SGLang; vLLM with Mooncake)
            (router.prefill if name == "--prefill" else router.decode).append(url)
        elif name in ROUTER_VALUE_FLAGS:
            if not has_inline:
                if index >= len(words):
                    raise ValueError(f"{name} needs a value")
                inline = words[index]
                index += 1
            if name == "--kv-connector":
                router.kv_connector = inline
        else:
            raise ValueError(f"the router's {name} is not a flag perflab launches a router with")
    if not seen_pd:
        raise ValueError(f"the router command lacks {PD_FLAGS[engine]}")
    if not router.prefill or not router.decode:
        raise ValueError("the router command names no prefill or no decode worker")
    return router


def _take(words: Sequence[str], names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """``words`` without the value flags ``names`` (either spelling), and the values they had."""
    kept: list[str] = []
    taken: dict[str, str] = {}
    index = 0
    while index < len(words):
        name, has_inline, inline = words[index].partition("=")
        index += 1
        if name not in names:
            kept.append(words[index - 1])
            continue
        if not has_inline:
            if index >= len(words):
                raise ValueError(f"{name} needs a value")
            inline = words[index]
            index += 1
        taken[name] = inline
    return kept, taken


def take_role(
    engine: str, words: Sequence[str], env: Mapping[str, str]
) -> tuple[list[str], dict[str, str], Role | None]:
    """A worker command's words and environment without its role's flags and variables, and its role
    (None: the command has none, an aggregated engine's)."""
    if engine == "sglang":
        kept, taken = _take(words, SGLANG_ROLE_FLAGS)
        mode = taken.get("--disaggregation-mode", "null")
        if mode == "null":
            return kept, dict(env), None
        if mode not in ROLES:
            raise ValueError(f"--disaggregation-mode {mode!r} is not prefill or decode")
        backend = taken.get("--disaggregation-transfer-backend", SGLANG_DEFAULT_BACKEND)
        return kept, dict(env), Role(mode, backend)
    kept, taken = _take(words, ("--kv-transfer-config",))
    if "--kv-transfer-config" not in taken:
        return kept, dict(env), None
    try:
        transfer = json.loads(taken["--kv-transfer-config"])
    except json.JSONDecodeError as error:
        raise ValueError(f"--kv-transfer-config is not JSON: {error.msg}") from None
    connectors = {connector: backend for backend, connector in VLLM_CONNECTORS.items()}
    backend = connectors.get(transfer.get("kv_connector") if isinstance(transfer, dict) else None)
    if backend is None or set(transfer) - {"kv_connector", "kv_role"}:
        raise ValueError(
            f"--kv-transfer-config {taken['--kv-transfer-config']} is not a launch perflab describes "
            f"(kv_connector {' or '.join(connectors)} and kv_role only)"
        )
    by_kv_role = {kv_role: role for role, kv_role in VLLM_ROLES[backend].items()}
    mode = by_kv_role.get(transfer.get("kv_role")) if len(set(VLLM_ROLES[backend].values())) > 1 else None
    rest = {key: value for key, value in env.items() if key not in VLLM_SIDE_CHANNELS}
    return kept, rest, Role(mode, backend)


def _port_of(url: str) -> int | None:
    try:
        return urllib.parse.urlsplit(url).port
    except ValueError:
        return None


def _one(configs: Sequence[dict[str, Any]], what: str) -> dict[str, Any]:
    """The configuration every worker of ``what`` shares (they must agree)."""
    first = configs[0]
    for other in configs[1:]:
        differ = sorted(name for name in {*first, *other} if first.get(name) != other.get(name))
        if differ:
            raise ValueError(f"the {what} workers differ in {', '.join(differ)}")
    return first


def assemble(
    engine: str, workers: Sequence[tuple[EngineConfig, Role]], router: RouterCommand
) -> EngineConfig:
    """The disaggregated configuration of ``workers`` (each read back with its role) behind ``router``."""
    role_by_port = {
        **{_port_of(url): "prefill" for url in router.prefill},
        **{_port_of(url): "decode" for url in router.decode},
    }
    grouped: dict[str, list[dict[str, Any]]] = {role: [] for role in ROLES}
    backends = set()
    for config, role in workers:
        placed = role_by_port.get(config.port)
        if placed is None:
            raise ValueError(f"no worker URL of the router has the port {config.port} of a worker's command")
        if role.mode is not None and role.mode != placed:
            raise ValueError(
                f"the {role.mode} worker on port {config.port} is a {placed} worker to the router"
            )
        backends.add(role.backend)
        grouped[placed].append(config.model_dump(exclude={"port", "gpu_ids"}))
    if len(backends) != 1:
        raise ValueError(f"the workers name different transfer backends: {', '.join(sorted(backends))}")
    backend = backends.pop()
    if router.kv_connector is not None and router.kv_connector != backend:
        raise ValueError(f"the router's --kv-connector {router.kv_connector} is not the workers' {backend}")
    if len(workers) != len(router.prefill) + len(router.decode):
        raise ValueError("the router names workers whose commands are not given")
    prefill, decode = (_one(grouped[role], role) for role in ROLES)
    shared = dict(prefill)
    groups: dict[str, dict[str, Any]] = {}
    for role, worker in (("prefill", prefill), ("decode", decode)):
        own = {name: worker[name] for name in GROUP_PARALLELISM}
        own["workers"] = len(grouped[role])
        for name in GROUP_BATCHING:
            if prefill[name] != decode[name] and worker[name] is not None:
                own[name] = worker[name]
        groups[role] = own
    for name in GROUP_BATCHING:
        shared[name] = prefill[name] if prefill[name] == decode[name] else None
    apart = sorted(
        name
        for name in shared
        if name not in (*GROUP_PARALLELISM, *GROUP_BATCHING) and prefill[name] != decode[name]
    )
    if apart:
        raise ValueError(
            f"the prefill and decode workers differ in {', '.join(apart)}, which both sides share"
        )
    shared.update({name: 1 for name in GROUP_PARALLELISM})
    layout = Disaggregation.model_validate({**groups, "transfer_backend": backend})
    return EngineConfig.model_validate({**shared, "engine": engine, "disaggregation": layout})
