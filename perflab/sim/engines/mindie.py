"""``mindieservice_daemon`` on a simulated host: MindIE Service driven by its ``config.json``.

The configuration is read from ``$MIES_CONFIG_JSON_PATH`` when set, else from
``$MIES_INSTALL_PATH/conf/config.json``. Used keys: ``ServerConfig.ipAddress``/``port``;
``BackendConfig.npuDeviceIds`` (logical ids within ``ASCEND_RT_VISIBLE_DEVICES``);
``BackendConfig.ModelDeployConfig.maxSeqLen`` and ``ModelConfig[0]`` (``modelName``,
``modelWeightPath``, ``worldSize``, ``tp``, ``dp``, ``moe_ep``, ``plugin_params``);
``BackendConfig.ScheduleConfig`` (``maxBatchSize``, ``maxPrefillTokens``, ``maxPrefillBatchSize``,
``templateType`` ``Mix`` or ``enableSplit`` for split-fuse, ``enablePrefixCache``).
``NPU_MEMORY_FRACTION`` (default 0.8) sets the memory share; ``MIES_SERVICE_MONITOR_MODE=1`` exposes
``/metrics``. Prefix caching on a MoE model crashes at start-up, as the seed studies found. As
MindIE-LLM does, the daemon refuses a config.json whose permissions exceed 0640
(``FileUtils::ConstrainPermission``) and a ``modelName`` outside ``^[a-zA-Z0-9_.-]{1,256}$`` or not
starting and ending with a letter or digit (``CheckModelNameLength``), with MindIE's own messages.
The readiness line is ``Daemon start success!``.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from typing import Dict, List, Optional, Tuple

from perflab.sim.deployment import Deployment, Knobs
from perflab.sim.engines.launch import EngineLog, Launch, host_or_none, run_engine
from perflab.sim.perfmodel import MemoryPlan
from perflab.sim.server import Console

GIB = 1024**3
READY_LINE = "Daemon start success!"
CONFIG_MODE = 0o640
MODEL_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,256}$")


class ConfigError(Exception):
    """A config.json MindIE cannot use."""


def config_path(environ: Dict[str, str]) -> str:
    explicit = environ.get("MIES_CONFIG_JSON_PATH")
    if explicit:
        return explicit
    install = environ.get("MIES_INSTALL_PATH")
    if not install:
        raise ConfigError("neither MIES_CONFIG_JSON_PATH nor MIES_INSTALL_PATH is set")
    return os.path.join(install, "conf", "config.json")


def permission_problem(path: str) -> Optional[str]:
    """MindIE's message for a config file whose permission bits exceed 0640, else None."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    names = ["Other group permission", "Owner group permission", "Owner permission"]
    for index in (3, 2, 1):
        shift = (index - 1) * 3
        current, allowed = (mode >> shift) & 7, (CONFIG_MODE >> shift) & 7
        if current | allowed != allowed:
            return (
                f" Check {names[index - 1]} failed: {path} current permission is {current}, but required "
                f"no greater than {allowed}. Required permisssion is {CONFIG_MODE:o}, but got permission "
                f"is {mode:o}"
            )
    return None


def _section(parent: dict, key: str, where: str) -> dict:
    value = parent.get(key)
    if not isinstance(value, dict):
        raise ConfigError(f"{where}{key} is missing or not an object")
    return value


def _int(section: dict, key: str, where: str, default: Optional[int] = None) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}{key} must be an integer, got {value!r}")
    return value


def knobs_from_config(config: dict, environ: Dict[str, str]) -> Tuple[Knobs, List[int]]:
    """The knobs and logical NPU ids of a MindIE config.json; raises ConfigError naming the key."""
    server = _section(config, "ServerConfig", "")
    backend = _section(config, "BackendConfig", "")
    deploy = _section(backend, "ModelDeployConfig", "BackendConfig.")
    schedule = _section(backend, "ScheduleConfig", "BackendConfig.")
    models = deploy.get("ModelConfig")
    if not isinstance(models, list) or not models or not isinstance(models[0], dict):
        raise ConfigError("BackendConfig.ModelDeployConfig.ModelConfig must be a non-empty list")
    model = models[0]
    where = "BackendConfig.ModelDeployConfig.ModelConfig[0]."
    weight_path = model.get("modelWeightPath")
    name = model.get("modelName")
    if not isinstance(weight_path, str) or not weight_path or not isinstance(name, str) or not name:
        raise ConfigError(f"{where}modelName and {where}modelWeightPath are required strings")
    if not MODEL_NAME.match(name) or not name[0].isalnum() or not name[-1].isalnum():
        raise ConfigError(
            "The value of modelName must meet the following rules: The string length is [1, 256] and "
            "consists of a match of the type [a-zA-Z0-9_.-]. The first and last characters must be "
            "characters or digits."
        )
    world_size = _int(model, "worldSize", where, 1)
    dp = _int(model, "dp", where, 1)
    tp = _int(model, "tp", where, max(1, world_size // max(dp, 1)))
    device_groups = backend.get("npuDeviceIds", [list(range(world_size))])
    if not isinstance(device_groups, list) or not device_groups or not isinstance(device_groups[0], list):
        raise ConfigError("BackendConfig.npuDeviceIds must be a list of lists of NPU ids")
    devices = [int(index) for index in device_groups[0]]
    if len(devices) != world_size:
        raise ConfigError(
            f"{where}worldSize is {world_size} but BackendConfig.npuDeviceIds[0] lists {len(devices)} NPUs"
        )
    plugin = model.get("plugin_params") or "{}"
    try:
        plugin_type = json.loads(plugin).get("plugin_type", "") if isinstance(plugin, str) else ""
    except ValueError:
        raise ConfigError(f"{where}plugin_params is not valid JSON: {plugin!r}") from None
    knobs = Knobs(weight_path)
    knobs.served_names = [name]
    knobs.tp, knobs.dp = tp, dp
    knobs.ep = _int(model, "moe_ep", where, 1)
    knobs.max_model_len = _int(deploy, "maxSeqLen", "BackendConfig.ModelDeployConfig.", 2560)
    knobs.max_num_seqs = _int(schedule, "maxBatchSize", "BackendConfig.ScheduleConfig.", 200)
    knobs.max_num_batched_tokens = _int(schedule, "maxPrefillTokens", "BackendConfig.ScheduleConfig.", 8192)
    knobs.max_prefill_seqs = _int(schedule, "maxPrefillBatchSize", "BackendConfig.ScheduleConfig.", 50)
    knobs.prefix_caching = bool(schedule.get("enablePrefixCache")) or plugin_type == "prefix_cache"
    knobs.chunked_prefill = schedule.get("templateType") == "Mix" or bool(schedule.get("enableSplit"))
    if plugin_type == "mtp":
        knobs.spec_method = "mtp"
        knobs.spec_tokens = int(json.loads(plugin).get("num_speculative_tokens", 1))
    try:
        knobs.mem_fraction = float(environ.get("NPU_MEMORY_FRACTION", "0.8"))
    except ValueError:
        raise ConfigError(
            f"NPU_MEMORY_FRACTION must be a number, got {environ['NPU_MEMORY_FRACTION']!r}"
        ) from None
    knobs.host = str(server.get("ipAddress", "127.0.0.1"))
    knobs.port = _int(server, "port", "ServerConfig.", 1025)
    if server.get("httpsEnabled", True):
        raise ConfigError(
            "ServerConfig.httpsEnabled is true but no TLS certificates are installed "
            "(security/certs/server.pem not found)"
        )
    return knobs, devices


class MindieLog(EngineLog):
    """MindIE's ``[YYYY-MM-DD HH:MM:SS.mmm+08:00] [pid] [pid] [llm] [INFO] message`` lines."""

    server_header = "MindIE-Server"
    startup_seconds = 8.0
    warmup_seconds = 25.0
    load_gb_per_second = 1.5
    announce_uvicorn = False

    def _info(self, component: str, message: str) -> None:
        pid = os.getpid()
        self.line(
            f"[{time.strftime('%Y-%m-%d %H:%M:%S')}.000+08:00] [{pid}] [{pid}] [{component}] [INFO] {message}"
        )

    def preamble(self, knobs: Knobs, version: str) -> None:
        self.line(f"MindIE-Service version: {version}")
        self._info(
            "server",
            f"ConfigManager: Load Config ({knobs.served_names[0]}, worldSize="
            f"{knobs.tp * knobs.dp}, maxSeqLen={knobs.max_model_len}, "
            f"maxBatchSize={knobs.max_num_seqs}, maxPrefillTokens={knobs.max_num_batched_tokens})",
        )

    def loading(self, dep: Deployment) -> None:
        self._info("llm", f"Start to load model weights from {dep.knobs.model}")

    def loaded(self, dep: Deployment, plan: MemoryPlan, load_seconds: float) -> None:
        self._info(
            "llm",
            f"Load model weights success, cost {load_seconds:.2f}s, weight memory "
            f"{plan.weights / GIB:.2f} GiB per NPU",
        )
        self._info(
            "llm",
            f"kv cache will allocate {plan.kv_bytes / GIB:.2f} GiB per NPU, "
            f"{plan.kv_tokens // dep.profile.block_size} blocks of {dep.profile.block_size} tokens",
        )

    def ready(self, host: str, port: int) -> None:
        self._info("server", f"Endpoint listening on http://{host}:{port}")
        self.line(READY_LINE)

    def process_name(self, rank: int, dep: Deployment) -> str:
        return "mindie_llm_back"


def main(argv: List[str]) -> int:
    """``mindieservice_daemon`` (it takes no arguments; everything comes from config.json)."""
    host = host_or_none("mindieservice_daemon")
    if host is None:
        return 1
    if argv:
        print(
            f"mindieservice_daemon: unexpected argument {argv[0]!r}; configuration comes from config.json",
            file=sys.stderr,
            flush=True,
        )
        return 1
    environ = dict(os.environ)
    try:
        path = config_path(environ)
        problem = permission_problem(path)
        if problem is not None:
            print(problem, flush=True)
            print("Daemon start failed!", file=sys.stderr, flush=True)
            return 1
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
        knobs, devices = knobs_from_config(config, environ)
    except (ConfigError, OSError, ValueError) as exc:
        print(f"[ERROR] ConfigManager: failed to load config: {exc}", file=sys.stderr, flush=True)
        print("Daemon start failed!", file=sys.stderr, flush=True)
        return 1
    launch = Launch(
        "mindie",
        knobs,
        host,
        MindieLog(Console()),
        "ASCEND_RT_VISIBLE_DEVICES",
        metrics_enabled=environ.get("MIES_SERVICE_MONITOR_MODE") == "1",
        access_log=False,
        version=host.version("mindie"),
        logical_devices=devices,
    )
    return run_engine(launch)
