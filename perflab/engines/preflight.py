"""Version-aware preflight: before a launch, ask the host's engine which flags and values it accepts.

An engine with a check program (vLLM, SGLang; :mod:`perflab.engines.asking`) is asked itself: its own parser
reads the exact launch argv, its own config checks and registries judge the values, each refusal names
flag, value, version and the engine's own message, and the values it parsed for the typed knobs (the
effective configuration: the last flag wins) must agree with the typed knobs — an extra argument that
contradicts one is refused, naming both. Its registries are cached per host, engine, version and
command prefix (:meth:`HelpCache.store_words`) for the Launch page. Where the engine cannot be imported
there, or for the other engines, the help text is read instead and the values are checked against the
static tables of :mod:`perflab.engines.vocabulary`:

The engine's own help (``vllm serve --help=all``, ``python3 -m sglang.launch_server --help``,
``trtllm-serve serve --help``; :attr:`EngineAdapter.help_argv`) is run over the host's transport, read
with :func:`perflab.engines.helptext.parse_help` and cached per host, engine, version and command
prefix (:class:`HelpCache`, a JSON file per key under the app's work directory), so a second check of
the same host and version costs no remote command. Every flag of the argv the adapter would launch
is then checked: one the engine does not list, or a value outside the choices it lists, is a problem
naming the flag, the value and the engine version, found in seconds instead of after a model load.
MindIE takes no flags; its preflight checks that the daemon the version needs is on the host.

A container launch runs the same help inside the image: pass the runtime's argv as ``prefix``
(``("podman", "run", "--rm", IMAGE)``), which also keys the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perflab.atomic_file import write_atomically
from perflab.engines.asking import (
    NOT_IMPORTABLE,
    NOT_PYTHON,
    EngineAnswer,
    answer_from_json,
    answer_json,
    ask_engine,
)
from perflab.engines.base import EngineAdapter
from perflab.engines.config import EngineConfig
from perflab.engines.errors import EngineConfigError
from perflab.engines.flags import format_value, option_value
from perflab.engines.helptext import FlagSpec, HelpFlags, parse_help
from perflab.engines.registry import get_adapter
from perflab.transport.base import Transport
from perflab.transport.errors import TransportError

HELP_TIMEOUT_S = 180.0
NOT_FOUND = 127
CACHE_FORMAT = 1


@dataclass(frozen=True)
class Verdict:
    """What the preflight found: ``problems`` (each naming flag, value and version) or none.

    ``missing`` says the engine's program is not on the host at all. ``checked`` is False when the
    engine could not be asked (its help failed or timed out); ``note`` then says why, and the launch
    goes ahead as before.
    """

    engine: str
    version: str | None
    host: str
    problems: tuple[str, ...] = ()
    missing: bool = False
    checked: bool = True
    note: str = ""
    effective: Mapping[str, Any] | None = None
    asked: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """One line for a log, an error or the Launch page."""
        who = f"{self.engine} {self.version or '(version unknown)'} on host '{self.host}'"
        if self.problems:
            return f"preflight: {who} refuses this configuration: " + "; ".join(self.problems)
        if not self.checked:
            return f"preflight: {who} was not checked: {self.note}"
        accepted = f"preflight: {who} accepts every flag and value of this configuration"
        return f"{accepted} (its own parser)" if self.asked else accepted


class HelpCache:
    """Parsed help outputs, installed engines' registries and their answers for one argv on disk, one
    JSON file per key (host, engine, version, command prefix, and the argv for an answer)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, key: Sequence[str]) -> Path:
        digest = hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:24]
        return self.directory / f"{digest}.json"

    def load(self, key: Sequence[str]) -> dict[str, FlagSpec] | None:
        """The parsed help stored by :meth:`store`."""
        data = self.load_data(key)
        if data is None:
            return None
        return {
            flag: FlagSpec(bool(spec["takes_value"]), tuple(spec["choices"]) if spec["choices"] else None)
            for flag, spec in data.items()
        }

    def store(self, key: Sequence[str], flags: HelpFlags) -> None:
        self.store_data(
            key,
            {
                flag: {"takes_value": spec.takes_value, "choices": list(spec.choices or []) or None}
                for flag, spec in flags.items()
            },
        )

    def load_words(self, key: Sequence[str]) -> dict[str, tuple[str, ...]] | None:
        """The registries an installed engine listed (knob → values), stored by :meth:`store_words`."""
        data = self.load_data(("words", *key))
        return None if data is None else {knob: tuple(values) for knob, values in data.items()}

    def store_words(self, key: Sequence[str], words: Mapping[str, Sequence[str]]) -> None:
        self.store_data(("words", *key), {knob: list(values) for knob, values in words.items()})

    def load_data(self, key: Sequence[str]) -> dict[str, Any] | None:
        """The JSON object stored under ``key`` by :meth:`store_data`, or None."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if data.get("format") != CACHE_FORMAT or data.get("key") != list(key):
            return None
        return data["flags"] if isinstance(data.get("flags"), dict) else None

    def store_data(self, key: Sequence[str], data: Mapping[str, Any]) -> None:
        """Store ``data`` under ``key``; writers of one key at once (threads or processes) never see or
        leave a partial file (:func:`perflab.atomic_file.write_atomically`)."""
        payload = {"format": CACHE_FORMAT, "key": list(key), "flags": data}
        write_atomically(self._path(key), json.dumps(payload).encode("utf-8"))


def default_cache() -> HelpCache:
    """The cache under the app machine's work directory (``$PERFLAB_APP_WORKDIR/preflight``)."""
    from perflab.settings import app_workdir

    return HelpCache(Path(os.path.expanduser(app_workdir())) / "preflight")


def _spec(adapter: EngineAdapter, flag: str, flags: HelpFlags) -> FlagSpec | None:
    """The help's entry for ``flag`` as the engine's parser reads it (argparse also takes a unique
    prefix of a long flag), or None when the engine does not accept it."""
    for spelling in (flag, adapter.normalize_flag(flag)):
        if spelling in flags:
            return flags[spelling]
    if adapter.flag_abbreviations and flag.startswith("--"):
        spelling = adapter.normalize_flag(flag)
        matches = [name for name in flags if name.startswith("--") and name.startswith(spelling)]
        if len(matches) == 1:
            return flags[matches[0]]
    return None


def check_argv(
    adapter: EngineAdapter, argv: Sequence[str], flags: HelpFlags, version: str | None
) -> list[str]:
    """Problems of ``argv`` (the words after the program) against the flags an engine's help lists."""
    who = f"{adapter.display_name} {version or '(version unknown)'}"
    problems: list[str] = []
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if not word.startswith("-") or word == "-":
            continue
        flag, has_inline, inline = word.partition("=")
        spec = _spec(adapter, flag, flags)
        if spec is None:
            problems.append(f"{who} has no flag {flag}")
            continue
        if not spec.takes_value:
            continue
        value, index = option_value(argv, index, inline if has_inline else None)
        if value is None:
            problems.append(f"{flag} needs a value")
            continue
        if spec.choices is not None and value not in spec.choices:
            problems.append(f"{who} does not accept {flag} {value!r} (choices: {', '.join(spec.choices)})")
    return problems


def help_flags(
    transport: Transport,
    adapter: EngineAdapter,
    *,
    engine_version: str | None,
    prefix: Sequence[str] = (),
    cache: HelpCache | None = None,
) -> tuple[dict[str, FlagSpec] | None, str, bool]:
    """The flags the host's engine lists in its help (cached when the version is known), or None; how
    they were found or why not; and whether the engine's program is missing (exit status 127).
    ``prefix`` runs the help through another command, e.g. a container runtime and image."""
    assert adapter.help_argv is not None
    key = (transport.host.name, adapter.name, engine_version or "", *prefix)
    if cache is not None and engine_version:
        cached = cache.load(key)
        if cached is not None:
            return cached, "cached", False
    argv = [*prefix, *adapter.help_argv]
    try:
        result = transport.run(argv, timeout=HELP_TIMEOUT_S)
    except TransportError as exc:
        return None, f"`{' '.join(argv)}` could not run: {exc}", False
    flags = parse_help(result.stdout) if result.ok else {}
    if not flags:
        last = (result.stderr or result.stdout).strip().splitlines()
        why = f"`{' '.join(argv)}` exited {result.exit_status}" + (f": {last[-1]}" if last else "")
        return None, why, result.exit_status == NOT_FOUND
    if cache is not None and engine_version:
        cache.store(key, flags)
    return flags, "asked", False


def _program_missing(transport: Transport, program: str, prefix: Sequence[str]) -> bool:
    probe = [*prefix, "sh", "-c", 'command -v "$1" >/dev/null', "perflab-preflight", program]
    try:
        return transport.run(probe, timeout=60.0).exit_status != 0
    except TransportError:
        return False


def preflight(
    transport: Transport,
    adapter: EngineAdapter,
    config: EngineConfig,
    *,
    engine_version: str | None,
    prefix: Sequence[str] = (),
    cache: HelpCache | None = None,
) -> Verdict:
    """Check ``config``'s launch argv against what the host's engine (``engine_version`` as probed;
    None when unknown) accepts. Raises :class:`EngineConfigError` for a config the adapter refuses."""
    port = config.port or adapter.default_port
    verdict = Verdict(adapter.display_name, engine_version, transport.host.name)
    why_not_asked = ""
    if adapter.check_program is not None:
        argv = adapter.leaving_words_to_engine().serve_argv(config, port=port, engine_version=engine_version)
        answer = _asked(transport, adapter, argv, engine_version=engine_version, prefix=prefix, cache=cache)
        if isinstance(answer, EngineAnswer):
            version = answer.version or engine_version
            if cache is not None and version and answer.vocabulary:
                cache.store_words((transport.host.name, adapter.name, version, *prefix), answer.vocabulary)
            who = f"{adapter.display_name} {version or '(version unknown)'}"
            problems = [problem.words(who) for problem in answer.problems]
            problems += contradictions(adapter, config, answer)
            return replace(
                verdict, version=version, problems=tuple(problems), effective=answer.effective, asked=True
            )
        why_not_asked = f"{answer}; read its help instead"
        if not prefix:
            adapter = host_adapter(
                adapter.name, host=transport.host.name, version=engine_version, cache=cache
            )
    argv = adapter.serve_argv(config, port=port, engine_version=engine_version)
    if adapter.help_argv is None:
        if _program_missing(transport, argv[0], prefix):
            return replace(verdict, problems=(f"{argv[0]} is not on the host's PATH",), missing=True)
        return verdict
    flags, how, missing = help_flags(
        transport, adapter, engine_version=engine_version, prefix=prefix, cache=cache
    )
    if missing:
        problem = f"{adapter.display_name} is not installed on the host ({how})"
        return replace(verdict, problems=(problem,), missing=True)
    if flags is None:
        return replace(verdict, checked=False, note="; ".join(filter(None, (why_not_asked, how))))
    return replace(
        verdict,
        problems=tuple(check_argv(adapter, argv[len(adapter.program) :], flags, engine_version)),
        note=why_not_asked,
    )


def answer_key(
    host: str, adapter: EngineAdapter, engine_version: str | None, prefix: Sequence[str] = ()
) -> tuple[str, ...]:
    """The cache key of an engine's answers on ``host`` (the launch argv follows it after ``--``)."""
    return ("answer", host, adapter.name, engine_version or "", *prefix)


def recorded_answer(
    cache: HelpCache, host: str, adapter: EngineAdapter, config: EngineConfig, engine_version: str
) -> EngineAnswer | None:
    """The installed engine's answer for ``config``'s launch argv on ``host``, where an earlier check
    recorded one, else None (nothing is asked)."""
    try:
        argv = adapter.leaving_words_to_engine().serve_argv(
            config, port=config.port or adapter.default_port, engine_version=engine_version
        )
    except EngineConfigError:
        return None
    stored = cache.load_data((*answer_key(host, adapter, engine_version), "--", *argv))
    return answer_from_json(stored) if stored is not None else None


def _asked(
    transport: Transport,
    adapter: EngineAdapter,
    argv: Sequence[str],
    *,
    engine_version: str | None,
    prefix: Sequence[str],
    cache: HelpCache | None,
) -> EngineAnswer | str:
    """The engine's answer for ``argv``: cached per host, engine, probed version, prefix and argv (the
    same config checked again costs no engine import), else asked. That the engine cannot be imported
    there (or its program is no Python program) is cached per host, engine, version and prefix."""
    version_key = answer_key(transport.host.name, adapter, engine_version, prefix)
    key = (*version_key, "--", *argv)
    if cache is not None and engine_version:
        unimportable = cache.load_data(version_key)
        if unimportable is not None:
            return str(unimportable.get("not_asked", "the engine could not be imported there"))
        stored = cache.load_data(key)
        if stored is not None:
            return answer_from_json(stored)
    answer = ask_engine(transport, adapter, argv, prefix=prefix)
    if cache is not None and engine_version:
        if isinstance(answer, EngineAnswer):
            cache.store_data(key, answer_json(answer))
        elif answer.startswith(NOT_IMPORTABLE) or NOT_PYTHON in answer:
            cache.store_data(version_key, {"not_asked": answer})
    return answer


def host_adapter(
    engine: str, *, host: str | None, version: str | None, cache: HelpCache | None, image: str | None = None
) -> EngineAdapter:
    """``engine``'s adapter judging one-word knob values and flags as well as perflab can know them for
    the engine ``version`` on ``host`` (None: unknown): that version's own registries where an earlier
    check cached them; perflab's table of that release, or of the newest release where the version is
    unknown; else — a version no table follows, or an image's engine, on an engine asked before launch —
    only other engines' spellings, the rest left to the engine's own check."""
    adapter = get_adapter(engine)
    if image is not None:
        return adapter.leaving_words_to_engine()
    judged = adapter.for_version(version)
    installed = cache.load_words((host or "", engine, version)) if cache is not None and version else None
    if installed and version is not None:
        base = judged or adapter
        return base.with_vocabulary(
            {
                knob: base.vocabulary[knob].installed(version, values)
                for knob, values in installed.items()
                if knob in base.vocabulary
            }
        )
    return judged if judged is not None else adapter.leaving_words_to_engine()


def _same(knob: str, typed: Any, parsed: Any) -> bool:
    if knob == "attention_backend" and isinstance(parsed, str):
        return str(typed).upper() == parsed.upper() or (str(typed).lower() == "auto" and parsed is None)
    if isinstance(typed, float) and isinstance(parsed, (int, float)):
        return abs(typed - parsed) < 1e-9
    return bool(typed == parsed)


def contradictions(adapter: EngineAdapter, config: EngineConfig, answer: EngineAnswer) -> list[str]:
    """Typed knobs whose value the engine, parsing the whole argv, reads otherwise (an extra argument
    that sets the same thing, in any spelling or abbreviation the engine takes), naming both. A knob
    whose flag the engine refused is left out: its refusal already says so."""
    if answer.effective is None:
        return []
    refused = {problem.flag for problem in answer.problems}
    typed = config.knob_values()
    if config.served_model_name:
        typed["served_model_name"] = config.served_model_name
    problems = []
    for knob, value in typed.items():
        if knob not in answer.effective or refused & set(answer.options.get(knob, ())):
            continue
        parsed = answer.effective[knob]
        if knob == "ep" and isinstance(parsed, bool):
            parsed = config.tp * config.dp if parsed else 1
        if knob == "served_model_name" and isinstance(parsed, list) and len(parsed) == 1:
            parsed = parsed[0]
        if _same(knob, value, parsed) or (
            isinstance(value, str) and _same(knob, adapter.knob_word(config, knob), parsed)
        ):
            continue
        spellings = [adapter.normalize_flag(name) for name in answer.options.get(knob, ())]
        culprits = [
            item
            for item in config.extra_args
            if any(
                name == adapter.normalize_flag(item.partition("=")[0])
                or (item.startswith("--") and name.startswith(adapter.normalize_flag(item.partition("=")[0])))
                for name in spellings
            )
        ]
        source = f"extra_args {' '.join(culprits)}" if culprits else "the command"
        problems.append(
            f"{source} makes {adapter.display_name} read {knob} as {format_value(parsed)}, contradicting "
            f"the typed knob {knob}: {format_value(value)}"
        )
    return problems
