"""Version-aware preflight: help outputs read into flags, launch argv checked against them, the cache,
and the check over a host's transport (simulated engines answering ``--help`` as the real ones do).

Help outputs under tests/data/help: vLLM 0.32.0 recorded from the real CPU build, vLLM 0.33.0 from its
wheel over the CPU build's torch, SGLang 0.5.23 recorded
from its wheel, TensorRT-LLM 1.3 rebuilt with click from its serve command's options (header of each).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from perflab.engines import EngineConfig, get_adapter
from perflab.engines.base import EngineAdapter
from perflab.engines.helptext import FlagSpec, parse_help
from perflab.engines.preflight import HelpCache, check_argv, preflight
from perflab.engines.tables.sglang import SGLANG_0_5_23
from perflab.engines.tables.vllm import VLLM_0_32, VLLM_0_33
from perflab.transport import open_transport
from perflab.transport.local import LocalTransport
from tests.engines import cache_writers
from tests.fixtures.runs import SimHostFactory

HELP = Path(__file__).resolve().parents[1] / "data" / "help"


def _help(name: str) -> dict[str, FlagSpec]:
    return parse_help((HELP / name).read_text(encoding="utf-8"))


VLLM_HELP = _help("vllm-0.32.0.txt")
SGLANG_HELP = _help("sglang-0.5.23.txt")
TRTLLM_HELP = _help("trtllm-1.3.txt")

# Configs that use every knob each engine renders as a flag (and its plumbing flags).
FULL_CONFIGS = {
    "vllm": EngineConfig(
        engine="vllm", model="/m", served_model_name="s", tp=2, dp=2, ep=4, quantization="fp8",
        attention_backend="FLASHINFER", max_num_batched_tokens=8192, max_num_seqs=64,
        enable_prefix_caching=False, kv_cache_dtype="fp8", enable_chunked_prefill=True,
        performance_mode="throughput", max_model_len=4096,
        gpu_memory_utilization=0.9, reasoning_parser="qwen3",
        speculative_config={"method": "mtp", "num_speculative_tokens": 1},
    ),
    "sglang": EngineConfig(
        engine="sglang", model="/m", served_model_name="s", tp=4, dp=2, ep=2, quantization="fp8",
        attention_backend="fa3", max_num_seqs=64, enable_prefix_caching=False, kv_cache_dtype="fp8",
        enable_chunked_prefill=False, max_model_len=4096, gpu_memory_utilization=0.8,
        reasoning_parser="qwen3",
        speculative_config={"method": "eagle3", "num_speculative_tokens": 3, "model": "/draft"},
    ),
    "trtllm": EngineConfig(
        engine="trtllm", model="/m", served_model_name="s", tp=4, ep=2, max_num_batched_tokens=8192,
        max_num_seqs=64, enable_chunked_prefill=True, max_model_len=4096, reasoning_parser="qwen3",
        attention_backend="TRTLLM",
    ),
}  # fmt: skip
HELPS = {"vllm": VLLM_HELP, "sglang": SGLANG_HELP, "trtllm": TRTLLM_HELP}
VERSIONS = {"vllm": "0.32.0", "sglang": "0.5.23", "trtllm": "1.3"}


def _launch_words(config: EngineConfig, adapter: EngineAdapter | None = None) -> list[str]:
    chosen = adapter or get_adapter(config.engine)
    return chosen.serve_argv(config, port=8000)[len(chosen.program) :]


def test_help_outputs_are_read_into_flags_values_and_choices() -> None:
    assert VLLM_HELP["-tp"] == VLLM_HELP["--tensor-parallel-size"] == FlagSpec(True, None)
    assert VLLM_HELP["--enable-prefix-caching"] == VLLM_HELP["--no-enable-prefix-caching"] == FlagSpec(False)
    assert VLLM_HELP["--performance-mode"].choices == ("balanced", "interactivity", "throughput")
    assert SGLANG_HELP["--disable-radix-cache"] == FlagSpec(False)
    assert TRTLLM_HELP["--tp_size"] == TRTLLM_HELP["--tensor_parallel_size"] == FlagSpec(True, None)
    assert TRTLLM_HELP["--backend"].choices == ("pytorch", "tensorrt", "_autodeploy")
    assert TRTLLM_HELP["--trust_remote_code"] == FlagSpec(False)
    assert "--tokenizer-mode" in SGLANG_HELP and "auto" not in SGLANG_HELP  # the usage block is not read


def test_vllm_0_33s_help_is_the_fallback_where_vllm_cannot_be_imported() -> None:
    """0.33 lists ``--enable-X, --disable-X`` and hides ``--no-enable-X``; it shows the KV-cache dtypes as
    a Python list: prefix caching off and octave_k3v4 pass, fp4_e2m1 is refused with the listed values."""
    help_033 = _help("vllm-0.33.0.txt")
    adapter = get_adapter("vllm").leaving_words_to_engine()
    config = EngineConfig(
        engine="vllm", model="/m", enable_prefix_caching=False, enable_chunked_prefill=False,
        kv_cache_dtype="octave_k3v4", attention_backend="STEP5_DSA",
    )  # fmt: skip
    assert help_033["--disable-prefix-caching"] == help_033["--no-enable-prefix-caching"] == FlagSpec(False)
    assert check_argv(adapter, _launch_words(config, adapter), help_033, "0.33.0") == []
    fp4 = config.model_copy(update={"kv_cache_dtype": "fp4_e2m1"})
    (problem,) = check_argv(adapter, _launch_words(fp4, adapter), help_033, "0.33.0")
    assert problem.startswith(
        "vLLM 0.33.0 does not accept --kv-cache-dtype 'fp4_e2m1' (choices: auto, bfloat16"
    )
    assert "octave_k3v3_compact" in problem


def test_the_vocabulary_tables_are_the_recorded_engines_choices() -> None:
    help_033 = _help("vllm-0.33.0.txt")
    assert set(VLLM_HELP["--kv-cache-dtype"].choices or ()) == set(VLLM_0_32.words["kv_cache_dtype"])
    assert set(help_033["--kv-cache-dtype"].choices or ()) == set(VLLM_0_33.words["kv_cache_dtype"])
    assert set(VLLM_HELP["--performance-mode"].choices or ()) == set(VLLM_0_32.words["performance_mode"])
    assert set(help_033["--performance-mode"].choices or ()) == set(VLLM_0_33.words["performance_mode"])
    sglang = SGLANG_0_5_23.words
    assert set(SGLANG_HELP["--attention-backend"].choices or ()) == set(sglang["attention_backend"])
    assert set(SGLANG_HELP["--kv-cache-dtype"].choices or ()) == set(sglang["kv_cache_dtype"])
    assert set(SGLANG_HELP["--quantization"].choices or ()) == set(sglang["quantization"])


def test_the_flags_the_tables_say_a_release_added_or_removed_are_in_its_recorded_help() -> None:
    help_033 = _help("vllm-0.33.0.txt")
    for flag in VLLM_0_33.flags_added:
        assert flag in help_033 and flag not in VLLM_HELP, flag
        assert help_033[flag].takes_value == VLLM_0_33.flags_added[flag], flag
    for flag in SGLANG_0_5_23.flags_removed:
        assert flag not in SGLANG_HELP, flag


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_every_flag_perflab_launches_with_is_one_the_engine_lists(engine: str) -> None:
    problems = check_argv(get_adapter(engine), _launch_words(FULL_CONFIGS[engine]), HELPS[engine], "x")
    assert problems == []


@pytest.mark.parametrize(
    ("engine", "extra", "problem"),
    [
        ("vllm", ("--no-such-flag",), "vLLM 0.32.0 has no flag --no-such-flag"),
        ("vllm", ("--dtype", "float99"), "vLLM 0.32.0 does not accept --dtype 'float99' (choices: auto,"),
        ("sglang", ("--enable-mixed-chunks",), "SGLang 0.5.23 has no flag --enable-mixed-chunks"),
        ("sglang", ("--grammar-backend=regex",), "does not accept --grammar-backend 'regex'"),
        ("trtllm", ("--backend", "onnx"), "TensorRT-LLM 1.3 does not accept --backend 'onnx'"),
        ("trtllm", ("--tp-size", "2"), "TensorRT-LLM 1.3 has no flag --tp-size"),
    ],
)
def test_a_flag_or_value_the_engine_lacks_is_named_with_the_version(
    engine: str, extra: tuple[str, ...], problem: str
) -> None:
    config = EngineConfig(engine=engine, model="/m", extra_args=extra)
    problems = check_argv(get_adapter(engine), _launch_words(config), HELPS[engine], VERSIONS[engine])
    assert len(problems) == 1 and problem in problems[0]


def test_the_same_config_is_judged_by_the_version_installed() -> None:
    """--served_model_name came with TensorRT-LLM 1.3: an older help (without it) refuses it."""
    config = EngineConfig(engine="trtllm", model="/models/Qwen3-8B", served_model_name="qwen")
    older = {flag: spec for flag, spec in TRTLLM_HELP.items() if flag != "--served_model_name"}
    adapter = get_adapter("trtllm")
    assert check_argv(adapter, _launch_words(config), TRTLLM_HELP, "1.3") == []
    assert check_argv(adapter, _launch_words(config), older, "1.2.0") == [
        "TensorRT-LLM 1.2.0 has no flag --served_model_name"
    ]


def test_argparse_engines_take_underscores_and_unique_prefixes_as_their_parsers_do() -> None:
    config = EngineConfig(engine="vllm", model="/m", extra_args=("--max_logprobs", "5", "--enforce-eag"))
    assert check_argv(get_adapter("vllm"), _launch_words(config), VLLM_HELP, "0.32.0") == []


def test_the_cache_keeps_a_help_per_host_engine_version_and_prefix(tmp_path: Path) -> None:
    cache = HelpCache(tmp_path)
    key = ("gpu-a", "vllm", "0.32.0")
    cache.store(key, VLLM_HELP)
    assert cache.load(key) == VLLM_HELP
    assert cache.load(("gpu-a", "vllm", "0.31.0")) is None
    assert cache.load((*key, "podman", "run", "--rm", "image")) is None


class CountingTransport(LocalTransport):
    """The local transport, counting the commands it runs."""

    commands: list[list[str]]

    def run(self, argv, **kwargs):  # type: ignore[no-untyped-def, override]
        self.commands = [*getattr(self, "commands", []), list(argv)]
        return super().run(argv, **kwargs)


@pytest.mark.parametrize(
    ("engine", "extra", "problem"),
    [
        ("vllm", ("--no-such-flag",), "vLLM 0.11.0 has no flag --no-such-flag"),
        ("sglang", ("--kv-cache-dtypes", "auto"), "SGLang 0.5.5.post1 has no flag --kv-cache-dtypes"),
        ("trtllm", ("--log_level", "loud"), "TensorRT-LLM 1.0.0 does not accept --log_level 'loud'"),
    ],
)
def test_preflight_asks_the_hosts_engine_once_per_version(
    sim_host: SimHostFactory, tmp_path: Path, engine: str, extra: tuple[str, ...], problem: str
) -> None:
    host = sim_host(f"pre-{engine}", kind="local")
    counting = CountingTransport(host)
    counting.extra_env = open_transport(host).extra_env  # the simulator's PATH, as open_transport sets
    version = {"vllm": "0.11.0", "sglang": "0.5.5.post1", "trtllm": "1.0.0"}[engine]
    cache = HelpCache(tmp_path / "cache")
    adapter = get_adapter(engine)
    good = EngineConfig(engine=engine, model="Qwen/Qwen3-8B", max_num_seqs=8)
    bad = good.model_copy(update={"extra_args": extra})

    verdict = preflight(counting, adapter, bad, engine_version=version, cache=cache)
    assert verdict.checked and len(verdict.problems) == 1 and verdict.problems[0].startswith(problem)
    assert problem in verdict.summary() and f"host '{host.name}'" in verdict.summary()
    assert preflight(counting, adapter, good, engine_version=version, cache=cache).ok
    help_runs = [argv for argv in counting.commands if argv[-1].startswith("--help")]
    assert help_runs == [list(adapter.help_argv or ())]
    # the simulator's vllm is a shell script, no Python; its python3 has no sglang: the engine's own
    # check is tried once per version
    checks = [argv for argv in counting.commands if "perflab-check" in argv]
    assert len(checks) == (1 if adapter.check_program else 0)
    assert (
        verdict.note
        == {
            "vllm": "vllm is not a Python program; read its help instead",
            "sglang": "the engine could not be imported there "
            "(ModuleNotFoundError: No module named 'sglang.srt'); read its help instead",
            "trtllm": "",
        }[engine]
    )


def test_an_engine_missing_on_the_host_is_refused(sim_host: SimHostFactory) -> None:
    """A simulated H100 host has no MindIE daemon: the launch would fail with 'command not found'."""
    host = sim_host("no-mindie", kind="local")
    config = EngineConfig(engine="mindie", model="/models/Qwen3-8B")
    verdict = preflight(open_transport(host), get_adapter("mindie"), config, engine_version=None)
    assert verdict.missing and verdict.problems == ("mindieservice_daemon is not on the host's PATH",)


def test_processes_and_threads_storing_one_entry_at_once_never_fail_nor_leave_a_partial_file(
    tmp_path: Path,
) -> None:
    """Two studies on one machine check the same host and version at once: three processes of three
    threads each store and read one cache entry 60 times. Every store succeeds, every read is one
    writer's whole entry, and no temporary file is left behind."""
    processes, threads, rounds = 3, 3, 60
    writers = [f"p{process}t{thread}" for process in range(processes) for thread in range(threads)]
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
        barrier = manager.Barrier(processes)
        futures = [
            pool.submit(
                cache_writers.store_at_once, str(tmp_path), process, threads, rounds, writers, barrier
            )
            for process in range(processes)
        ]
        problems = [problem for future in futures for problem in future.result(timeout=120)]
    assert problems == []
    assert [path.name for path in tmp_path.iterdir() if path.suffix != ".json"] == []
    stored = HelpCache(tmp_path).load(cache_writers.KEY)
    assert any(stored == cache_writers.flags_of(writer) for writer in writers)
