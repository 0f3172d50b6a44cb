"""MindIE Service's ``config.json``, built from an engine config.

``mindieservice_daemon`` takes no arguments: everything is in ``config.json`` (MindIE Server
"配置参数说明"/"Configuration Parameters" pages, 2.x): ``ServerConfig`` (listen address and ports),
``BackendConfig`` with ``npuDeviceIds``, ``ModelDeployConfig`` (``maxSeqLen``, ``maxInputTokenLen``,
``ModelConfig`` entries with ``worldSize``, ``tp``, ``dp``, ``moe_tp``, ``moe_ep``, ``plugin_params``) and
``ScheduleConfig`` (``maxBatchSize``, ``maxPrefillTokens``, ``maxIterTimes``, prefix cache, split-fuse).

Knob mapping (the same one GPUStack's "mindie serve" flags use): ``max_num_seqs`` → ``maxBatchSize``;
``max_num_batched_tokens`` → ``maxPrefillTokens``; ``max_model_len`` → ``maxSeqLen`` (and
``maxIterTimes``; ``maxInputTokenLen`` = min(maxSeqLen, maxPrefillTokens)); ``enable_prefix_caching`` →
the ``prefix_cache`` plugin; ``enable_chunked_prefill`` → split-fuse (``templateType: Mix`` and the
``splitfuse`` plugin); an ``mtp`` speculative config → the ``mtp`` plugin with ``num_speculative_tokens``.

Per version: MindIE 2.x also reads ``ScheduleConfig.enablePrefixCache`` and the split-fuse fields
``enableSplit``/``splitType``/``splitStartType``/``splitChunkTokens``/``splitStartBatchSize``, which are
written for it (``legacy_schedule``). MindIE-LLM 3.x ignores them (docs/zh/user_guide/feature/
prefix_cache.md: "enablePrefixCache … no longer needs to be configured"; splitFuse.md: the plugin and
``templateType`` switch split-fuse on), so they are left out there rather than written as if they worked.

Devices are listed by logical index (0..n-1) because the adapter exposes the physical ones through
``ASCEND_RT_VISIBLE_DEVICES``. The management and metrics endpoints share the serving port, so one port per
replica serves the API, health and Prometheus."""

from __future__ import annotations

import json
from typing import Any

from perflab.engines.config import EngineConfig

DEFAULT_MAX_SEQ_LEN = 8192
DEFAULT_MAX_BATCH_SIZE = 200
MAX_PREFILL_BATCH_SIZE = 50
SPLIT_CHUNK_TOKENS = 512
SPLIT_START_BATCH_SIZE = 16


def max_seq_len(config: EngineConfig) -> int:
    return config.max_model_len or DEFAULT_MAX_SEQ_LEN


def max_prefill_tokens(config: EngineConfig) -> int:
    return config.max_num_batched_tokens or max_seq_len(config)


def plugin(config: EngineConfig, mtp_tokens: int | None) -> dict[str, Any] | None:
    """The one ``plugin_params`` plugin this config switches on, if any (callers reject combinations)."""
    if mtp_tokens is not None:
        return {"plugin_type": "mtp", "num_speculative_tokens": mtp_tokens}
    if config.enable_prefix_caching:
        return {"plugin_type": "prefix_cache"}
    if config.enable_chunked_prefill:
        return {"plugin_type": "splitfuse"}
    return None


def _server_config(host: str, port: int) -> dict[str, Any]:
    return {
        "ipAddress": host,
        "managementIpAddress": host,
        "port": port,
        "managementPort": port,
        "metricsPort": port,
        "allowAllZeroIpListening": host == "0.0.0.0",
        "maxLinkNum": 1000,
        "httpsEnabled": False,
        "fullTextEnabled": False,
        "tlsCaPath": "security/ca/",
        "tlsCaFile": ["ca.pem"],
        "tlsCert": "security/certs/server.pem",
        "tlsPk": "security/keys/server.key.pem",
        "tlsPkPwd": "security/pass/key_pwd.txt",
        "tlsCrlPath": "security/certs/",
        "tlsCrlFiles": ["server_crl.pem"],
        "managementTlsCaFile": ["management_ca.pem"],
        "managementTlsCert": "security/certs/management/server.pem",
        "managementTlsPk": "security/keys/management/server.key.pem",
        "managementTlsPkPwd": "security/pass/management/key_pwd.txt",
        "managementTlsCrlPath": "security/management/certs/",
        "managementTlsCrlFiles": ["server_crl.pem"],
        "kmcKsfMaster": "tools/pmt/master/ksfa",
        "kmcKsfStandby": "tools/pmt/standby/ksfb",
        "inferMode": "standard",
        "interCommTLSEnabled": False,
        "interCommPort": 1121,
        "openAiSupport": "vllm",
        "tokenTimeout": 600,
        "e2eTimeout": 600,
    }


def _model_config(
    config: EngineConfig, model_name: str, active_plugin: dict[str, Any] | None
) -> dict[str, Any]:
    world_size = config.gpus_per_replica
    model: dict[str, Any] = {
        "modelInstanceType": "Standard",
        "modelName": model_name,
        "modelWeightPath": config.model,
        "worldSize": world_size,
        "cpuMemSize": 5,
        "npuMemSize": -1,
        "backendType": "atb",
        "trustRemoteCode": False,
        "tp": config.tp,
        "moe_tp": world_size // config.ep,
    }
    if config.dp > 1:
        model["dp"] = config.dp
    if config.ep > 1:
        model["moe_ep"] = config.ep
    if active_plugin is not None:
        model["plugin_params"] = json.dumps(active_plugin, separators=(",", ":"))
    return model


def _schedule_config(config: EngineConfig, legacy_schedule: bool) -> dict[str, Any]:
    batch_size = config.max_num_seqs or DEFAULT_MAX_BATCH_SIZE
    schedule: dict[str, Any] = {
        "templateType": "Standard",
        "templateName": "Standard_LLM",
        "cacheBlockSize": 128,
        "maxPrefillBatchSize": min(MAX_PREFILL_BATCH_SIZE, batch_size),
        "maxPrefillTokens": max_prefill_tokens(config),
        "prefillTimeMsPerReq": 150,
        "prefillPolicyType": 0,
        "decodeTimeMsPerReq": 50,
        "decodePolicyType": 0,
        "maxBatchSize": batch_size,
        "maxIterTimes": max_seq_len(config),
        "maxPreemptCount": 0,
        "supportSelectBatch": False,
        "maxQueueDelayMicroseconds": 5000,
    }
    if config.enable_prefix_caching and legacy_schedule:
        schedule["enablePrefixCache"] = True
    if config.enable_chunked_prefill:
        schedule["templateType"] = "Mix"
        if legacy_schedule:
            schedule.update(
                enableSplit=True,
                policyType=0,
                splitType=False,
                splitStartType=False,
                splitChunkTokens=SPLIT_CHUNK_TOKENS,
                splitStartBatchSize=min(SPLIT_START_BATCH_SIZE, batch_size),
            )
    return schedule


def build_config_json(
    config: EngineConfig,
    *,
    port: int,
    host: str,
    model_name: str,
    mtp_tokens: int | None,
    legacy_schedule: bool,
) -> dict[str, Any]:
    """The full ``config.json`` document for one replica listening on ``host:port``.

    ``legacy_schedule`` writes the ScheduleConfig fields only MindIE 2.x reads (see the module docstring).
    """
    seq_len = max_seq_len(config)
    return {
        "Version": "1.0.0",
        "ServerConfig": _server_config(host, port),
        "BackendConfig": {
            "backendName": "mindieservice_llm_engine",
            "modelInstanceNumber": 1,
            "npuDeviceIds": [list(range(config.gpus_per_replica))],
            "tokenizerProcessNumber": 8,
            "multiNodesInferEnabled": False,
            "multiNodesInferPort": 1120,
            "interNodeTLSEnabled": False,
            "ModelDeployConfig": {
                "maxSeqLen": seq_len,
                "maxInputTokenLen": min(seq_len, max_prefill_tokens(config)),
                "truncation": False,
                "ModelConfig": [_model_config(config, model_name, plugin(config, mtp_tokens))],
            },
            "ScheduleConfig": _schedule_config(config, legacy_schedule),
        },
    }
