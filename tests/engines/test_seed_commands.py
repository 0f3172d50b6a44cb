"""Golden tests: every serve command in the seeds is reproducible from a config.

For each command: parse → config → display command, compared after normalisation (documented in
docs/engines.md): line continuations and runs of whitespace are one space, ``--flag=value`` equals
``--flag value``, and option groups (a flag with its value) may appear in any order; the program words
and the model must match exactly. The stored commands under tests/engines/data are checked against an
extraction from the seed write-ups shipped in tests/data/seeds.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from perflab.engines import extract_serve_commands, get_adapter, parse_serve_args, parse_serve_command
from perflab.engines.parsing import split_command

DATA = Path(__file__).parent / "data"
# The five seed write-ups, shipped with the tests.
SEEDS = Path(__file__).resolve().parents[2] / "tests" / "data" / "seeds"
PROGRAM_WORDS = {"vllm": 2, "vllm-ascend": 2, "sglang": 3, "trtllm": 1, "mindie": 2}
_NEGATIVE_NUMBER = re.compile(r"^-\d")


def _rows(name: str) -> list[list[str]]:
    lines = (DATA / name).read_text().splitlines()
    return [line.split("\t") for line in lines if line and not line.startswith("#")]


SEED_COMMANDS = _rows("seed_serve_commands.tsv")
BACKEND_PARAMETERS = _rows("seed_backend_parameters.tsv")


def _option_groups(words: list[str]) -> Counter[tuple[str, ...]]:
    expanded: list[str] = []
    for word in words:
        if word.startswith("-") and "=" in word and not _NEGATIVE_NUMBER.match(word):
            expanded.extend(word.split("=", 1))
        else:
            expanded.append(word)
    groups: Counter[tuple[str, ...]] = Counter()
    index = 0
    while index < len(expanded):
        word = expanded[index]
        nxt = expanded[index + 1] if index + 1 < len(expanded) else None
        takes_value = nxt is not None and (not nxt.startswith("-") or _NEGATIVE_NUMBER.match(nxt))
        if word.startswith("-") and takes_value:
            groups[(word, nxt)] += 1
            index += 2
        else:
            groups[(word,)] += 1
            index += 1
    return groups


def normalise(command: str, engine: str) -> tuple[tuple[str, ...], Counter[tuple[str, ...]]]:
    words = split_command(command)
    head = PROGRAM_WORDS[engine] + (0 if get_adapter(engine).model_flag else 1)
    return tuple(words[:head]), _option_groups(words[head:])


@pytest.mark.parametrize(("seed", "engine", "command"), SEED_COMMANDS, ids=[row[2] for row in SEED_COMMANDS])
def test_seed_command_round_trips(seed: str, engine: str, command: str) -> None:
    config = parse_serve_command(command, engine=engine)
    assert config.engine == engine
    shown = get_adapter(engine).display_command(config)
    assert normalise(shown, engine) == normalise(command, engine)
    assert parse_serve_command(shown, engine=engine) == config


def test_every_seed_engine_is_covered() -> None:
    assert {row[1] for row in SEED_COMMANDS} == {"vllm", "sglang", "trtllm", "mindie", "vllm-ascend"}


def test_stored_commands_match_the_seed_files() -> None:
    extracted: dict[str, str] = {}
    for path in sorted(SEEDS.glob("*.txt")):
        for command in extract_serve_commands(path.read_text(encoding="utf-8", errors="replace")):
            extracted.setdefault(command, path.name[:3])
    assert sorted(extracted.items()) == sorted((row[2], row[0]) for row in SEED_COMMANDS)


def test_stored_backend_parameters_match_seed_002() -> None:
    text = next(SEEDS.glob("002_*.txt")).read_text(encoding="utf-8")
    blocks = set(re.findall(r"Backend Parameters:\s*```bash\s*(.*?)\s*```", text, flags=re.IGNORECASE))
    assert blocks == {row[2] for row in BACKEND_PARAMETERS}


@pytest.mark.parametrize(
    ("engine", "model", "arguments"), BACKEND_PARAMETERS, ids=[r[2] for r in BACKEND_PARAMETERS]
)
def test_seed_backend_parameters_round_trip(engine: str, model: str, arguments: str) -> None:
    config = parse_serve_args(arguments, engine=engine, model=model)
    assert config.extra_args == ()
    adapter = get_adapter(engine)
    argv = adapter.serve_argv(config, port=9000)
    model_words = adapter.model_words(model)
    start = len(adapter.program) + len(model_words) + 4
    plumbing = len(adapter.plumbing_args)
    shown_args = argv[start : len(argv) - plumbing]
    assert _option_groups(shown_args) == _option_groups(split_command(arguments))


def test_seed_002_speculative_config_is_read_as_json() -> None:
    row = BACKEND_PARAMETERS[-1]
    config = parse_serve_args(row[2], engine=row[0], model=row[1])
    assert config.speculative_config == {"method": "mtp", "num_speculative_tokens": 4}
    argv = get_adapter("vllm").serve_argv(config, port=8000)
    assert argv[argv.index("--speculative-config") + 1] == '{"method":"mtp","num_speculative_tokens":4}'


@pytest.mark.parametrize(
    ("command", "port", "argv"),
    [
        (
            "vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 -tp 8 --enable-expert-parallel",
            8000,
            [
                "vllm",
                "serve",
                "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
                "--host",
                "127.0.0.1",
                "--port",
                "8000",
                "-tp",
                "8",
                "--enable-expert-parallel",
            ],
        ),
        (
            "python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B-FP8 --attention-backend=fa3",
            30000,
            [
                "python3",
                "-m",
                "sglang.launch_server",
                "--model-path",
                "Qwen/Qwen3-14B-FP8",
                "--host",
                "127.0.0.1",
                "--port",
                "30000",
                "--attention-backend",
                "fa3",
                "--enable-metrics",
            ],
        ),
        (
            "trtllm-serve Qwen/Qwen3-32B --max_seq_len=40960 --enable_chunked_prefill",
            8001,
            [
                "trtllm-serve",
                "Qwen/Qwen3-32B",
                "--host",
                "127.0.0.1",
                "--port",
                "8001",
                "--enable_chunked_prefill",
                "--max_seq_len",
                "40960",
                "--extra_llm_api_options",
                "extra_llm_api_options.yaml",
            ],
        ),
        ("mindie serve /models/Qwen3-30B-A3B --enable-prefix-caching", 1025, ["mindieservice_daemon"]),
    ],
)
def test_seed_commands_give_the_real_engine_argv(command: str, port: int, argv: list[str]) -> None:
    config = parse_serve_command(command)
    assert get_adapter(config.engine).serve_argv(config, port=port) == argv


def test_display_command_is_valid_shell() -> None:
    engine, model, arguments = BACKEND_PARAMETERS[-1]
    config = parse_serve_args(arguments, engine=engine, model=model).model_copy(
        update={"env": {"HF_HOME": "/data/hf cache"}, "extra_args": ("--trust-remote-code",)}
    )
    shown = get_adapter(engine).display_command(config)
    out = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {shown}"], capture_output=True, text=True, check=True
    )
    words = out.stdout.split("\0")[:-1]
    assert words[0] == "HF_HOME=/data/hf cache"
    assert '{"method":"mtp","num_speculative_tokens":4}' in words
    assert parse_serve_command(shown) == config
