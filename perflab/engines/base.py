"""The engine adapter contract and the behaviour every adapter shares.

An adapter turns one :class:`~perflab.engines.config.EngineConfig` into what a host executes (argv, files
for the run directory, environment) and what a user would type (the display command), knows where the
engine answers health checks and Prometheus metrics, recognises its readiness line, and classifies its
failure logs. Subclasses declare their engine's facts as class attributes (a :class:`FlagTable` for the
typed knobs, the knobs it lacks with a hint each) and override hooks only for what a table cannot say.

Launch contract: the runner writes :meth:`EngineAdapter.files` into the replica's run directory
(``<run dir>/engine-<i>/``) and starts :meth:`EngineAdapter.serve_argv` with that directory as working
directory and :meth:`EngineAdapter.env` added to the environment, so argv may name those files by
relative path.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from perflab.engines.config import CPU_KNOBS, EngineConfig
from perflab.engines.disagg import (
    WorkerPorts,
    check_disaggregation,
    role_args,
    role_env,
    router_argv,
    worker_config,
)
from perflab.engines.errors import EngineConfigError, InvalidKnobValue, UnsupportedKnob
from perflab.engines.failures import COMMON_SIGNATURES, FailureInfo, Signature, classify
from perflab.engines.flags import Flag, FlagTable, format_value, parse_int
from perflab.engines.layout import ROLES
from perflab.engines.vocabulary import EngineReleases, Release, Vocabulary

_WORD = re.compile(r"^[A-Za-z0-9_.:/+\-]+$")
_WORD_KNOBS = ("quantization", "attention_backend", "kv_cache_dtype", "performance_mode", "reasoning_parser")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Why an engine takes no dp_attention: vLLM 0.32/0.33 (ParallelConfig, docs "Data Parallel Deployment")
# runs the -dp ranks of a MoE model with attention apart and the experts shared (tensor parallel over
# tp×dp, or expert parallel with --enable-expert-parallel) by itself, and those of a dense model as
# replicas: the layout is dp and ep alone.
_VLLM_DP = (
    "vLLM runs the -dp ranks of a MoE model as attention data parallel by itself (experts over tp×dp, "
    "expert parallel with ep); set dp and ep without dp_attention"
)
DP_ATTENTION_ELSEWHERE = {"vllm": _VLLM_DP, "vllm-ascend": _VLLM_DP}


@dataclass(frozen=True)
class EngineMetrics:
    """Where an engine publishes Prometheus gauges and what the three gauges perflab samples are called.

    KV-cache usage is a fraction in [0, 1] on every engine listed here.
    """

    running: str
    waiting: str
    kv_cache_usage: str
    path: str = "/metrics"


@dataclass(frozen=True)
class SpeculativeRequest:
    """The engine-neutral part of a speculative config, written the vLLM way (``--speculative-config``)."""

    method: str
    num_tokens: int
    draft_model: str | None
    extra: Mapping[str, Any]


def _knob_of_flag(table: FlagTable | None, flag: str, normalize: Callable[[str], str]) -> str | None:
    """The typed knob whose flag (any spelling) ``table`` writes as ``flag``, or None."""
    if table is None:
        return None
    for entry in table.flags:
        if flag in {normalize(spelling) for spelling in entry.spellings()}:
            return entry.knob.partition(".")[0]
    return None


class EngineAdapter:
    """Base adapter: table-driven flags, validation, display command, env, readiness and failure logs."""

    name: ClassVar[str]
    display_name: ClassVar[str]
    default_port: ClassVar[int]
    health_path: ClassVar[str]
    visible_devices_env: ClassVar[str]
    # The variable selecting CPU devices (NUMA nodes) on a host without accelerators; None: the engine
    # has no CPU backend perflab can launch.
    cpu_devices_env: ClassVar[str | None] = None
    # Typed knobs carried by environment variables (knob → variable), e.g. the CPU backend's.
    env_knobs: ClassVar[Mapping[str, str]] = {}
    metrics: ClassVar[EngineMetrics | None]
    program: ClassVar[tuple[str, ...]]
    model_flag: ClassVar[str | None] = None
    host_flag: ClassVar[str] = "--host"
    port_flag: ClassVar[str] = "--port"
    flags: ClassVar[FlagTable]
    special_knobs: ClassVar[frozenset[str]] = frozenset()
    file_knobs: ClassVar[frozenset[str]] = frozenset()
    unsupported: ClassVar[Mapping[str, str]] = {}
    plumbing_args: ClassVar[tuple[str, ...]] = ()
    lookalike_flags: ClassVar[FlagTable | None] = None
    # The releases perflab keeps tables for (perflab.engines.tables); None: no one-word knob is checked.
    releases: ClassVar[EngineReleases | None] = None
    # The words each one-word knob takes: any release's (the default), one release's (for_version) or an
    # installed engine's registries (with_vocabulary).
    vocabulary: Mapping[str, Vocabulary] = {}
    # The release this adapter judges for (flags a release added or removed); None: any release.
    release: Release | None = None
    help_argv: ClassVar[tuple[str, ...] | None] = None
    # A program under perflab/engines/programs/ that the engine's own Python runs to parse an argv with
    # the engine's parser and read its registries (perflab.engines.asking); None: only its help is read.
    check_program: ClassVar[str | None] = None
    # The engine parser's names (argparse dests) of perflab's typed knobs, for that program's answer.
    engine_dests: ClassVar[Mapping[str, str]] = {}
    # Values a platform plug-in registers when the engine starts on its hardware (knob → (flag, values)),
    # which the check program may not see: accepted beside the engine's registries.
    plugin_words: ClassVar[Mapping[str, tuple[str, tuple[str, ...]]]] = {}
    # Words outside :attr:`vocabulary` are refused (the default: perflab's tables, or an installed
    # engine's registries through :meth:`with_vocabulary`); False (:meth:`leaving_words_to_engine`): only
    # other engines' spellings, the rest left to the installed engine's own check before launch.
    words_known: bool = True
    # Unknown flags with these prefixes take no value when a command is imported (vLLM's booleans).
    switch_prefixes: ClassVar[tuple[str, ...]] = ()
    flag_abbreviations: ClassVar[bool] = False
    bare_switches: ClassVar[tuple[str, ...]] = ()
    default_env: ClassVar[Mapping[str, str]] = {}
    file_mode: ClassVar[int] = 0o644
    ready_markers: ClassVar[tuple[str, ...]]
    signatures: ClassVar[tuple[Signature, ...]] = COMMON_SIGNATURES

    # ----- validation -------------------------------------------------------------------------------

    def validate(self, config: EngineConfig) -> None:
        """Raise an :class:`EngineConfigError` when this engine cannot run ``config`` as given."""
        if config.engine != self.name:
            raise InvalidKnobValue(self.display_name, "engine", f"is {config.engine!r}, not {self.name!r}")
        if config.dp_attention is not None and self.name != "sglang":
            raise UnsupportedKnob(
                self.display_name,
                "dp_attention",
                DP_ATTENTION_ELSEWHERE.get(self.name, "attention data parallel is SGLang's (--attn-dp-size)"),
            )
        if config.disaggregation is not None:
            check_disaggregation(config, self.display_name, self.release.version if self.release else None)
            for role in ("prefill", "decode"):
                self.validate(worker_config(config, role))
        for knob in self._set_knobs(config):
            if knob in self.unsupported:
                raise UnsupportedKnob(self.display_name, knob, self.unsupported[knob])
            if knob in CPU_KNOBS and knob not in self.env_knobs:
                raise UnsupportedKnob(self.display_name, knob, "it is a knob of vLLM's CPU build")
        for knob in _WORD_KNOBS:
            value = getattr(config, knob)
            if value is not None and not _WORD.match(value):
                raise InvalidKnobValue(self.display_name, knob, f"must be a single word, got {value!r}")
        self._check_extra_args(config)
        self._check_env(config)
        for knob in _WORD_KNOBS:
            value = self.knob_word(config, knob)
            if value is not None:
                self.check_word(knob, value)
        self.check_values(config)

    def knob_word(self, config: EngineConfig, knob: str) -> str | None:
        """The word the engine receives for a one-word knob (hook: SGLang writes fp8 as fp8_e4m3)."""
        value = getattr(config, knob)
        return value if isinstance(value, str) else None

    def check_word(self, knob: str, value: str) -> None:
        """Refuse ``value`` unless the engine's vocabulary for ``knob`` (if it has one) contains it (see
        :attr:`words_known`)."""
        words = self.vocabulary.get(knob)
        if words is not None:
            words.check(self.display_name, knob, value, hints_only=not self.words_known)

    def with_vocabulary(self, vocabulary: Mapping[str, Vocabulary] | None = None) -> EngineAdapter:
        """This adapter checking every word against ``vocabulary`` (an installed engine's registries;
        None: the static tables, when the engine cannot be asked)."""
        checked = copy.copy(self)
        checked.vocabulary = {**self.vocabulary, **(vocabulary or {})}
        checked.words_known = True
        return checked

    def leaving_words_to_engine(self) -> EngineAdapter:
        """This adapter refusing only other engines' spellings (an engine whose own check judges the
        rest: :attr:`check_program`); itself for an engine that cannot be asked."""
        if self.check_program is None:
            return self
        lenient = copy.copy(self)
        lenient.words_known = False
        return lenient

    def knobs_read(self, effective: Mapping[str, Any]) -> dict[str, Any]:
        """The typed knobs as the engine read them, from its parsed values renamed by
        :attr:`engine_dests` (hook: SGLang's ``--disable-radix-cache`` is prefix caching off)."""
        return dict(effective)

    def for_version(self, version: str | None) -> EngineAdapter | None:
        """This adapter judging words and flags by perflab's table of the engine ``version`` as a host
        reports it (None: unknown, the newest release's table); None when no table follows ``version``."""
        if self.releases is None:
            return self
        release = self.releases.newest if version is None else self.releases.release(version)
        if release is None:
            return None
        judged = copy.copy(self)
        judged.vocabulary = {**self.vocabulary, **self.releases.vocabulary(release)}
        judged.release = release
        judged.words_known = True
        return judged

    def check_values(self, config: EngineConfig) -> None:
        """Engine-specific value formats and knob combinations (hook)."""

    def cpu_problem(self, version: str | None) -> str | None:
        """Why this engine, installed at ``version`` (None: unknown), cannot run on a CPU host, or None."""
        if self.cpu_devices_env is None:
            return f"{self.display_name} has no CPU backend perflab can launch"
        return None

    def check_launch(self, config: EngineConfig) -> None:
        """What only a launch needs, beyond :meth:`validate` (hook: MindIE's local weight directory).

        A command can be shown and imported without it; :meth:`serve_argv` and :meth:`files` check it.
        """

    def served_name(self, config: EngineConfig) -> str:
        """The model name clients put in requests (hook: MindIE derives a valid ``modelName``)."""
        return config.served_model_name or config.model

    def covered_knobs(self) -> frozenset[str]:
        """Every knob this adapter either renders or rejects; tests hold this equal to all knobs."""
        own = self.flags.knobs() | self.special_knobs | self.file_knobs | frozenset(self.unsupported)
        return own | frozenset(CPU_KNOBS) | frozenset(self.env_knobs)

    def _set_knobs(self, config: EngineConfig) -> list[str]:
        knobs = list(config.knob_values())
        return [*knobs, "served_model_name"] if config.served_model_name else knobs

    def reserved_flags(self) -> frozenset[str]:
        """Flags perflab writes itself; ``extra_args`` may not repeat them."""
        own = {self.host_flag, self.port_flag, *self.plumbing_args, *self.file_flags()}
        if self.model_flag:
            own.update((self.model_flag, *self.model_flag_aliases()))
        return self.flags.spellings() | frozenset(own)

    def file_flags(self) -> tuple[str, ...]:
        """Flags that point the engine at files from :meth:`files` (hook)."""
        return ()

    def normalize_flag(self, flag: str) -> str:
        """The spelling the engine's parser reads ``flag`` as (hook: vLLM folds ``_`` into ``-``)."""
        return flag

    def _check_extra_args(self, config: EngineConfig) -> None:
        reserved = {self.normalize_flag(flag) for flag in self.reserved_flags()}
        for item in config.extra_args:
            if any(ch in item for ch in "\r\n\0"):
                raise InvalidKnobValue(
                    self.display_name, "extra_args", f"item {item!r} must be a single line"
                )
            flag = self.normalize_flag(item.partition("=")[0])
            missing = self._release_lacks(flag)
            if missing is not None:
                raise InvalidKnobValue(self.display_name, "extra_args", missing)
            if flag in reserved:
                owner = _knob_of_flag(self.flags, flag, self.normalize_flag)
                if owner is None:
                    raise InvalidKnobValue(
                        self.display_name, "extra_args", f"repeats {flag}; perflab sets it itself"
                    )
                typed = {**config.knob_values(), "served_model_name": config.served_model_name}.get(owner)
                clash = (
                    f", contradicting the typed knob {owner}: {format_value(typed)}"
                    if typed is not None
                    else ""
                )
                raise InvalidKnobValue(
                    self.display_name, "extra_args", f"repeats {flag}{clash}; set {owner} instead"
                )
            lookalike = _knob_of_flag(self.lookalike_flags, flag, self.normalize_flag)
            if lookalike is not None:
                raise InvalidKnobValue(
                    self.display_name,
                    "extra_args",
                    f"passes {flag}, vLLM's flag for {lookalike}, which {self.display_name} does not have; "
                    f"set {lookalike} instead",
                )

    def _release_lacks(self, flag: str) -> str | None:
        """Why the release this adapter judges for has no ``flag``, where perflab's tables say so."""
        if self.release is None or self.releases is None or not flag.startswith("-"):
            return None
        return self.releases.flag_problem(flag, self.release)

    def _check_env(self, config: EngineConfig) -> None:
        for key, value in config.env.items():
            if not _ENV_NAME.match(key):
                raise InvalidKnobValue(self.display_name, "env", f"name {key!r} is not a valid variable name")
            if any(ch in value for ch in "\r\n\0"):
                raise InvalidKnobValue(self.display_name, "env", f"{key} must be a single line")
        for devices_env in (self.visible_devices_env, self.cpu_devices_env):
            if devices_env in config.env:
                raise InvalidKnobValue(
                    self.display_name,
                    "env",
                    f"sets {devices_env}; perflab sets it from the GPU ids, use gpu_ids instead",
                )
        for knob, variable in self.env_knobs.items():
            if variable in config.env:
                raise InvalidKnobValue(self.display_name, "env", f"sets {variable}; set {knob} instead")

    # ----- argv -------------------------------------------------------------------------------------

    def model_words(self, model: str) -> list[str]:
        return [self.model_flag, model] if self.model_flag else [model]

    def knob_args(self, config: EngineConfig) -> list[str]:
        """The typed knobs that differ from the engine default, as flags, in :data:`KNOBS` order."""
        args: list[str] = []
        for knob, value in config.knob_values().items():
            args.extend(self.render_knob(knob, value, config))
        if config.served_model_name:
            args.extend(self.render_knob("served_model_name", config.served_model_name, config))
        return args

    def render_knob(self, knob: str, value: Any, config: EngineConfig) -> list[str]:
        """Argv items for one knob; knobs carried by :meth:`files` render nothing here."""
        flag = self.flags.for_knob(knob)
        return flag.render(value) if flag else []

    def file_args(self, config: EngineConfig) -> list[str]:
        """Argv items naming the run-directory files (hook); shown in the display command too."""
        return []

    def launch_file_args(self, config: EngineConfig) -> list[str]:
        """Argv items naming the run-directory files at launch (hook; default :meth:`file_args`)."""
        return self.file_args(config)

    def serve_argv(
        self, config: EngineConfig, *, port: int, host: str = "127.0.0.1", engine_version: str | None = None
    ) -> list[str]:
        """The argv the host executes for one replica listening on ``host:port``.

        ``engine_version`` is the installed engine's version as the probe found it (None: unknown); only
        engines whose launch differs between versions read it.
        """
        self.validate(config)
        self.check_launch(config)
        if config.disaggregation is not None:
            raise InvalidKnobValue(
                self.display_name, "disaggregation", "is launched worker by worker (perflab.runner.disagg)"
            )
        return [
            *self.program,
            *self.model_words(config.model),
            self.host_flag,
            host,
            self.port_flag,
            str(port),
            *self.knob_args(config),
            *self.launch_file_args(config),
            *self.plumbing_args,
            *config.extra_args,
        ]

    def display_words(self, config: EngineConfig) -> list[str]:
        """The words of the command a user would type (hook for engines launched another way)."""
        words = [*self.program, *self.model_words(config.model)]
        if config.port is not None:
            words += [self.port_flag, str(config.port)]
        return [*words, *self.knob_args(config), *self.file_args(config), *config.extra_args]

    def display_command(self, config: EngineConfig) -> str:
        """The serve command as a user would type it (env assignments first), shell-quoted; a
        disaggregated configuration's workers and router, one command per line."""
        self.validate(config)
        if config.disaggregation is not None:
            return "\n".join(self._disaggregated_commands(config))
        env = {**self.knob_env(config), **config.env}
        env_words = [f"{key}={value}" for key, value in env.items()]
        return shlex.join([*env_words, *self.display_words(config)])

    def _disaggregated_commands(self, config: EngineConfig) -> list[str]:
        """Every worker's command and the router's, on the default port counted upward (prefill workers
        first, each side channel 1000 above its port)."""
        layout = config.disaggregation
        assert layout is not None
        lines: list[str] = []
        ports: dict[str, list[WorkerPorts]] = {role: [] for role in ROLES}
        next_port = self.default_port
        for role in ROLES:
            worker = worker_config(config, role)
            for _ in range(layout.group(role).workers):
                ports[role].append(WorkerPorts(next_port, next_port + 1000))
                env = role_env(config.engine, layout, role, ports[role][-1])
                words = [f"{key}={value}" for key, value in env.items()]
                base = self.display_command(worker.model_copy(update={"port": next_port}))
                args = shlex.join(role_args(config.engine, layout, role, ports[role][-1]))
                lines.append(" ".join(filter(None, [" ".join(words), base, args])))
                next_port += 1
        router = router_argv(
            config.engine,
            layout,
            prefill=ports["prefill"],
            decode=ports["decode"],
            port=config.port or next_port,
            metrics_port=next_port + 1,
        )
        return [*lines, shlex.join(router)]

    def knob_env(self, config: EngineConfig) -> dict[str, str]:
        """The typed knobs carried by environment variables (:attr:`env_knobs`) that are set."""
        values = {}
        for knob, variable in self.env_knobs.items():
            value = getattr(config, knob)
            if value is not None:
                values[variable] = str(value)
        return values

    def files(
        self, config: EngineConfig, *, port: int, host: str = "127.0.0.1", engine_version: str | None = None
    ) -> dict[str, str]:
        """Files (relative name → content) to write into the run directory before starting, each with
        mode :attr:`file_mode`."""
        self.validate(config)
        self.check_launch(config)
        return {}

    def env(
        self,
        config: EngineConfig,
        *,
        gpu_ids: Sequence[int] | None = None,
        run_dir: str = ".",
        cpu: bool = False,
    ) -> dict[str, str]:
        """Environment for one replica: engine defaults, visible devices, knobs carried by env, the
        config's env, then :meth:`launch_env`. ``gpu_ids`` are this replica's devices (default: the
        config's own); with ``cpu`` they are NUMA nodes of a CPU host, named by :attr:`cpu_devices_env`."""
        self.validate(config)
        devices_env = self.cpu_devices_env if cpu else self.visible_devices_env
        if devices_env is None:
            raise InvalidKnobValue(self.display_name, "engine", "has no CPU backend perflab can launch")
        values = dict(self.default_env)
        ids = tuple(gpu_ids) if gpu_ids is not None else config.gpu_ids
        if ids is not None:
            if len(ids) != config.gpus_per_replica:
                raise InvalidKnobValue(
                    self.display_name,
                    "gpu_ids",
                    f"gives {len(ids)} devices to a replica that needs tp×dp = {config.gpus_per_replica}",
                )
            values[devices_env] = ",".join(str(gpu) for gpu in ids)
        values.update(self.knob_env(config))
        values.update(config.env)
        values.update(self.launch_env(config, run_dir))
        return values

    def launch_env(self, config: EngineConfig, run_dir: str) -> dict[str, str]:
        """Variables perflab sets last: pointers to files in ``run_dir``, knobs carried by env (hook)."""
        return {}

    # ----- logs -------------------------------------------------------------------------------------

    def is_ready_line(self, line: str) -> bool:
        return any(marker in line for marker in self.ready_markers)

    def classify_failure(self, log_text: str) -> FailureInfo | None:
        return classify(log_text, self.signatures, self.display_name)

    # ----- parsing ----------------------------------------------------------------------------------

    def parse_args(self, tokens: Sequence[str], *, env: Mapping[str, str] | None = None) -> EngineConfig:
        """Build a config from the words after the program name (the inverse of :meth:`display_words`)."""
        plumbing = set(self.plumbing_args)
        words = [token for token in tokens if token not in plumbing]
        launch_flags = [Flag("port", self.port_flag, convert=parse_int), Flag("host", self.host_flag)]
        if self.model_flag:
            launch_flags.append(Flag("model", self.model_flag, aliases=self.model_flag_aliases()))
        table = FlagTable((*self.flags.flags, *launch_flags))
        switches = (*self.bare_switches, *(self.releases.switches() if self.releases else ()))
        parsed = table.parse(words, switches, self.switch_prefixes)
        for flag in self.file_flags():
            if any(item.partition("=")[0] == flag for item in parsed.unknown):
                raise ValueError(
                    f"{flag} names a file whose content is not part of the command; cannot import it"
                )
        values = dict(parsed.values)
        values.pop("host", None)
        positionals = list(parsed.positionals)
        if not self.model_flag:
            if not positionals:
                raise ValueError(f"{self.display_name} command has no model")
            values["model"] = positionals.pop(0)
        if positionals:
            raise ValueError(f"unexpected argument(s) {' '.join(positionals)!r}")
        if "model" not in values:
            raise ValueError(f"{self.display_name} command has no {self.model_flag}")
        values = self.finish_parse(values)
        env = dict(env or {})
        for knob, variable in self.env_knobs.items():
            if variable in env:
                values[knob] = env.pop(variable)
        try:
            return EngineConfig(engine=self.name, extra_args=tuple(parsed.unknown), env=env, **values)
        except ValueError as exc:
            raise EngineConfigError(self.display_name, "command", str(exc)) from None

    def model_flag_aliases(self) -> tuple[str, ...]:
        return ()

    def finish_parse(self, values: dict[str, Any]) -> dict[str, Any]:
        """Turn parsed flag values into config fields where the mapping is not one-to-one (hook)."""
        return values

    # ----- speculative decoding ---------------------------------------------------------------------

    def speculative_request(self, config: EngineConfig, allowed_extra: frozenset[str]) -> SpeculativeRequest:
        """Read ``config.speculative_config`` (vLLM's JSON shape) for engines that translate it."""
        spec = dict(config.speculative_config or {})
        method = spec.pop("method", None)
        tokens = spec.pop("num_speculative_tokens", None)
        draft = spec.pop("model", None)
        if not isinstance(method, str) or not method:
            raise InvalidKnobValue(self.display_name, "speculative_config", 'needs a "method" string')
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
            raise InvalidKnobValue(
                self.display_name,
                "speculative_config",
                'needs "num_speculative_tokens" as a positive integer',
            )
        if draft is not None and not isinstance(draft, str):
            raise InvalidKnobValue(self.display_name, "speculative_config", '"model" must be a string')
        unknown = sorted(set(spec) - allowed_extra)
        if unknown:
            allowed = ", ".join(sorted({"method", "num_speculative_tokens", "model", *allowed_extra}))
            raise InvalidKnobValue(
                self.display_name,
                "speculative_config",
                f"has keys {unknown} it cannot map; allowed: {allowed}",
            )
        return SpeculativeRequest(method.lower(), tokens, draft, spec)
