"""MindIE Service (``mindieservice_daemon`` / ``mindie_llm_server`` with a generated ``config.json``).

The daemon takes no arguments. Packaged MindIE 2.x starts ``mindieservice_daemon`` (on PATH through
MindIE's ``set_env.sh``); MindIE-LLM 3.x installs the console script ``mindie_llm_server``
(``setup.py``: ``mindie_llm.server.main:main``), which sets the library paths and execs the daemon, so
:meth:`MindieAdapter.daemon` picks the program from the engine version the probe found.

Users describe a MindIE deployment with the simplified vLLM-like command the seeds print (``mindie serve
Qwen3-30B-A3B --enable-prefix-caching``, GPUStack's vocabulary: ``-tp``, ``-dp``,
``--moe-expert-parallel-size``, ``--max-batch-size``, ``--max-prefill-tokens``, ``--max-seq-len``,
``--enable-prefix-caching``, ``--enable-split``, ``--npu-memory-fraction``,
``--enable-multi-token-prediction`` / ``--multi-token-prediction-tokens``); perflab maps the knobs into
``config.json`` (:mod:`perflab.engines.mindie_config`) and starts the daemon.

Pointing the daemon at the file: MindIE reads ``$MIES_INSTALL_PATH/conf/config.json`` by default; GPUStack
additionally sets ``MIES_CONFIG_JSON_PATH`` to the file it generates, and perflab does the same with the
run directory's ``config.json`` (this is also the simulator's contract; MindIE-LLM
``src/utils/common_util.cpp`` reads the variable). The file is written with mode 0640: MindIE refuses a
config file with wider permissions (``IsFileValid(..., FILE_MODE_640)`` in ``common_util.cpp``).
``modelWeightPath`` must be a local directory (``model_deploy_config.cpp`` checks it as a readable
directory), so a hub id is refused at launch, and ``modelName`` must match ``^[a-zA-Z0-9_.-]{1,256}$``
starting and ending with a letter or digit (``CheckModelNameLength``): it is the served name when one
is set, else the weight directory's name. The daemon must be on PATH
(MindIE's ``set_env.sh``) and must run from a writable directory (it creates ``kernel_meta`` there; the
run directory is the working directory). ``NPU_MEMORY_FRACTION`` carries ``gpu_memory_utilization`` and
``MIES_SERVICE_MONITOR_MODE=1`` turns on the Prometheus ``/metrics`` endpoint. Readiness is the line
"Daemon start success!"; health is ``GET /v2/health/ready`` on the management port, which perflab sets to
the serving port. Default port 1025.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from perflab.engines.base import EngineAdapter, EngineMetrics
from perflab.engines.config import EngineConfig
from perflab.engines.errors import InvalidKnobValue
from perflab.engines.failures import COMMON_SIGNATURES, Signature
from perflab.engines.flags import Flag, FlagTable, parse_float, parse_int
from perflab.engines.mindie_config import build_config_json, max_prefill_tokens, max_seq_len
from perflab.engines.tables.mindie import MINDIE_MTP_TOKENS, MINDIE_VERSION

CONFIG_FILE = "config.json"
# MindIE-LLM src/include/utils/file_utils.h FILE_MODE_640: the only mode MindIE accepts for config.json.
CONFIG_FILE_MODE = 0o640
# MindIE-LLM src/config_manager/model_deploy_config.cpp CheckModelNameLength.
MODEL_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,256}$")
PACKAGED_DAEMON = "mindieservice_daemon"
MINDIE_LLM_SERVER = "mindie_llm_server"
CONFIG_PATH_ENV = "MIES_CONFIG_JSON_PATH"
MTP_FLAG = "--enable-multi-token-prediction"
MTP_TOKENS_FLAG = "--multi-token-prediction-tokens"
MAX_BATCH_SIZE = 5000

MINDIE_FLAGS = FlagTable(
    (
        Flag("tp", "-tp", aliases=("--tensor-parallel-size",), convert=parse_int),
        Flag("dp", "-dp", aliases=("--data-parallel-size",), convert=parse_int),
        Flag("ep", "--moe-expert-parallel-size", aliases=("-moe-ep",), convert=parse_int),
        Flag("max_num_batched_tokens", "--max-prefill-tokens", convert=parse_int),
        Flag("max_num_seqs", "--max-batch-size", convert=parse_int),
        Flag(
            "enable_prefix_caching",
            "--enable-prefix-caching",
            kind="negatable",
            negative="--no-enable-prefix-caching",
        ),
        Flag("enable_chunked_prefill", "--enable-split", kind="negatable", negative="--no-enable-split"),
        Flag("max_model_len", "--max-seq-len", convert=parse_int),
        Flag("gpu_memory_utilization", "--npu-memory-fraction", convert=parse_float),
        Flag("served_model_name", "--served-model-name"),
        # parse-only parts of speculative_config, assembled by MindieAdapter.finish_parse
        Flag("speculative_config.mtp", MTP_FLAG, kind="switch"),
        Flag("speculative_config.mtp_tokens", MTP_TOKENS_FLAG, convert=parse_int),
    )
)


def _is_power_of_two(value: int) -> bool:
    return value & (value - 1) == 0


def _valid_model_name(name: str) -> bool:
    return bool(MODEL_NAME.match(name)) and name[0].isalnum() and name[-1].isalnum()


def _major(version: str | None) -> int:
    """The leading number of a MindIE version (``2.1.RC1`` → 2, ``3.0.0`` → 3); 2 when unknown."""
    match = re.match(r"\s*(\d+)", version or "")
    return int(match.group(1)) if match else 2


class MindieAdapter(EngineAdapter):
    name = "mindie"
    display_name = "MindIE"
    default_port = 1025
    health_path = "/v2/health/ready"
    visible_devices_env = "ASCEND_RT_VISIBLE_DEVICES"
    metrics = EngineMetrics(
        running="num_requests_running",
        waiting="num_requests_waiting",
        kv_cache_usage="npu_cache_usage_perc",
    )
    program = ("mindie", "serve")
    flags = MINDIE_FLAGS
    special_knobs = frozenset({"speculative_config"})
    unsupported = {
        "quantization": "it reads quantization from the weights: pick a quantized weight variant "
        "such as vllm-ascend/Qwen3-8B-W8A8",
        "attention_backend": "remove attention_backend",
        "kv_cache_dtype": "a quantized KV cache comes with a quantized weight variant; remove kv_cache_dtype",
        "performance_mode": "tune max_num_seqs and max_num_batched_tokens instead",
        "reasoning_parser": "remove reasoning_parser (clients then receive the reasoning text inline)",
    }
    default_env = {"MIES_SERVICE_MONITOR_MODE": "1", "MINDIE_LOG_TO_STDOUT": "1"}
    ready_markers = ("Daemon start success",)
    file_mode = CONFIG_FILE_MODE
    signatures = (
        *COMMON_SIGNATURES,
        Signature.of("port_in_use", r"Failed to listen \S+, please check if business ip and port are legal"),
        # MindIE-LLM src/server/endpoint/http_wrapper/http_server.cpp
        Signature.of("port_in_use", r"Management or Business or Metrics Http server listen port is occupied"),
        # MindIE-LLM mindie_llm/text_generator/generator.py: "Warmup failed due to NPU out of memory …",
        # "Warmup failed. This could be caused by … setting insufficient `npu_mem`. …"
        Signature.of("oom", r"Warmup failed\b.*(?:out of memory|insufficient `?npu_mem)"),
    )

    def check_values(self, config: EngineConfig) -> None:
        if config.extra_args:
            raise InvalidKnobValue(
                self.display_name,
                "extra_args",
                "cannot be passed: the MindIE daemon takes no arguments; use the typed knobs and env",
            )
        for knob in ("tp", "dp", "ep"):
            if not _is_power_of_two(getattr(config, knob)):
                raise InvalidKnobValue(self.display_name, knob, "must be a power of 2")
        if config.gpus_per_replica % config.ep:
            raise InvalidKnobValue(
                self.display_name,
                "ep",
                f"({config.ep}) must divide the world size tp×dp ({config.gpus_per_replica})",
            )
        if max_prefill_tokens(config) > max_seq_len(config):
            raise InvalidKnobValue(
                self.display_name,
                "max_num_batched_tokens",
                f"(maxPrefillTokens {max_prefill_tokens(config)}) must not exceed max_model_len "
                f"(maxSeqLen {max_seq_len(config)})",
            )
        if config.max_num_seqs is not None and config.max_num_seqs > MAX_BATCH_SIZE:
            raise InvalidKnobValue(
                self.display_name, "max_num_seqs", f"(maxBatchSize) must be at most {MAX_BATCH_SIZE}"
            )
        plugins = [
            name
            for name, on in (
                ("speculative_config", config.speculative_config is not None),
                ("enable_prefix_caching", bool(config.enable_prefix_caching)),
                ("enable_chunked_prefill", bool(config.enable_chunked_prefill)),
            )
            if on
        ]
        if len(plugins) > 1:
            raise InvalidKnobValue(
                self.display_name,
                plugins[1],
                f"cannot be combined with {plugins[0]}: each is a plugin_params plugin",
            )
        if config.dp > 1 and plugins and plugins[0] != "speculative_config":
            raise InvalidKnobValue(self.display_name, plugins[0], "is not supported with dp > 1")
        self.mtp_tokens(config)

    def mtp_tokens(self, config: EngineConfig) -> int | None:
        """Speculative tokens of the ``mtp`` plugin, the only speculative method mapped for MindIE."""
        if config.speculative_config is None:
            return None
        request = self.speculative_request(config, frozenset())
        if request.method != "mtp":
            raise InvalidKnobValue(self.display_name, "speculative_config", 'supports only method "mtp"')
        if request.num_tokens not in MINDIE_MTP_TOKENS:
            raise InvalidKnobValue(
                self.display_name,
                "speculative_config",
                f"num_speculative_tokens {request.num_tokens} is not 1 or 2 (MindIE {MINDIE_VERSION}: "
                "the mtp plugin's num_speculative_tokens is the number of MTP layers, 1 or 2)",
            )
        return request.num_tokens

    def model_name(self, config: EngineConfig) -> str:
        """``ModelConfig.modelName``: the served name, else the weight directory's name made valid."""
        if config.served_model_name is not None:
            if not _valid_model_name(config.served_model_name):
                raise InvalidKnobValue(
                    self.display_name,
                    "served_model_name",
                    f"{config.served_model_name!r} is not a MindIE modelName: 1-256 of a-z A-Z 0-9 _ . -, "
                    "starting and ending with a letter or digit",
                )
            return config.served_model_name
        base = posixpath.basename(config.model.rstrip("/"))
        derived = re.sub(r"[^a-zA-Z0-9_.-]", "-", base)[:256].strip("_.-")
        if not _valid_model_name(derived):
            raise InvalidKnobValue(
                self.display_name,
                "served_model_name",
                f"is needed: no valid modelName can be made from {config.model!r}",
            )
        return derived

    def served_name(self, config: EngineConfig) -> str:
        return self.model_name(config)

    def check_launch(self, config: EngineConfig) -> None:
        if not config.model.startswith("/"):
            raise InvalidKnobValue(
                self.display_name,
                "model",
                f"{config.model!r} is not a local directory: MindIE loads modelWeightPath from the host's "
                "disk and cannot download a hub id; give the absolute path of the weights on the host",
            )
        self.model_name(config)

    def daemon(self, engine_version: str | None) -> str:
        """The program that starts MindIE: ``mindie_llm_server`` from MindIE-LLM 3, else the 2.x daemon."""
        return MINDIE_LLM_SERVER if _major(engine_version) >= 3 else PACKAGED_DAEMON

    def render_knob(self, knob: str, value: Any, config: EngineConfig) -> list[str]:
        if knob == "speculative_config":
            return [MTP_FLAG, MTP_TOKENS_FLAG, str(self.mtp_tokens(config))]
        return super().render_knob(knob, value, config)

    def serve_argv(
        self, config: EngineConfig, *, port: int, host: str = "127.0.0.1", engine_version: str | None = None
    ) -> list[str]:
        self.validate(config)
        self.check_launch(config)
        return [self.daemon(engine_version)]

    def files(
        self, config: EngineConfig, *, port: int, host: str = "127.0.0.1", engine_version: str | None = None
    ) -> dict[str, str]:
        self.validate(config)
        self.check_launch(config)
        document = build_config_json(
            config,
            port=port,
            host=host,
            model_name=self.model_name(config),
            mtp_tokens=self.mtp_tokens(config),
            legacy_schedule=_major(engine_version) < 3,
        )
        return {CONFIG_FILE: json.dumps(document, indent=4, ensure_ascii=False) + "\n"}

    def launch_env(self, config: EngineConfig, run_dir: str) -> dict[str, str]:
        values = {CONFIG_PATH_ENV: posixpath.join(run_dir, CONFIG_FILE)}
        if config.gpu_memory_utilization is not None:
            values["NPU_MEMORY_FRACTION"] = f"{config.gpu_memory_utilization:g}"
        return values

    def finish_parse(self, values: dict[str, Any]) -> dict[str, Any]:
        enabled = values.pop("speculative_config.mtp", False)
        tokens = values.pop("speculative_config.mtp_tokens", None)
        if enabled:
            values["speculative_config"] = {"method": "mtp", "num_speculative_tokens": tokens or 1}
        elif tokens is not None:
            raise ValueError(f"{MTP_TOKENS_FLAG} needs {MTP_FLAG}")
        return values
