"""Reading serve commands: shell splitting with bare JSON, program detection, clear errors."""

from __future__ import annotations

import pytest

from perflab.engines import ServeCommandError, extract_serve_commands, parse_serve_args, parse_serve_command
from perflab.engines.parsing import split_command


def test_split_keeps_bare_json_and_joins_continuations() -> None:
    text = (
        'vllm serve m \\\n  --speculative-config={"method":"mtp","num_speculative_tokens":4} \\\n'
        '  --hf-overrides {"a": {"b": "c d"}}'
    )
    assert split_command(text) == [
        "vllm", "serve", "m", '--speculative-config={"method":"mtp","num_speculative_tokens":4}',
        "--hf-overrides", '{"a": {"b": "c d"}}',
    ]  # fmt: skip


def test_split_handles_collapsed_continuations_quotes_and_comments() -> None:
    text = "# comment line\nvllm serve m \\ --chat-template 'a b.jinja' \\ --seed \"7\""
    assert split_command(text) == ["vllm", "serve", "m", "--chat-template", "a b.jinja", "--seed", "7"]


def test_quoted_json_is_unquoted_by_the_shell() -> None:
    config = parse_serve_command(
        """vllm serve m --speculative-config '{"method": "ngram", "num_speculative_tokens": 3}'"""
    )
    assert config.speculative_config == {"method": "ngram", "num_speculative_tokens": 3}


def test_env_assignments_become_config_env() -> None:
    config = parse_serve_command("CUDA_LAUNCH_BLOCKING=1 HF_HOME='/data/hf hub' vllm serve m -tp 2")
    assert config.env == {"CUDA_LAUNCH_BLOCKING": "1", "HF_HOME": "/data/hf hub"}
    assert config.tp == 2


def test_full_interpreter_path_and_trtllm_subcommand() -> None:
    assert parse_serve_command("/usr/bin/python3 -m sglang.launch_server --model-path m").engine == "sglang"
    assert parse_serve_command("trtllm-serve serve m --tp_size 2").tp == 2


def test_port_is_read_and_host_is_launch_plumbing() -> None:
    config = parse_serve_command("vllm serve m --host 0.0.0.0 --port 8100")
    assert config.port == 8100
    assert config.extra_args == ()


def test_engine_hint_must_agree_with_the_program() -> None:
    assert parse_serve_command("vllm serve m", engine="vllm-ascend").engine == "vllm-ascend"
    with pytest.raises(ServeCommandError, match="is a sglang command, not vllm"):
        parse_serve_command("python3 -m sglang.launch_server --model-path m", engine="vllm")


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("vllm bench serve --model m", "not a serve command"),
        ("vllm serve", "has no model"),
        ("vllm serve m -tp four", "cannot read -tp: expected an integer, got 'four'"),
        ("vllm serve m --max-model-len", "--max-model-len needs a value"),
        ("vllm serve m --speculative-config '[1, 2]'", "expected a JSON object"),
        ("vllm serve m 'unterminated", "No closing quotation"),
        ("vllm serve m extra-positional", "unexpected argument"),
        ("python3 -m sglang.launch_server --tp 2", "has no --model-path"),
        ("vllm serve m --enable-prefix-caching=yes", "takes no value"),
        ("vllm serve m -tp 0", "greater than or equal to 1"),
    ],
)
def test_unreadable_commands_name_the_problem(command: str, problem: str) -> None:
    with pytest.raises(ServeCommandError, match=problem) as caught:
        parse_serve_command(command)
    assert repr(command.strip())[:20] in str(caught.value) or "not a serve command" in str(caught.value)


def test_backend_parameters_need_engine_and_model() -> None:
    config = parse_serve_args(
        "--reasoning-parser=qwen3 --context-length=32768", engine="sglang", model="Qwen/Qwen3-8B"
    )
    assert (config.model, config.max_model_len, config.reasoning_parser) == ("Qwen/Qwen3-8B", 32768, "qwen3")
    with pytest.raises(ServeCommandError, match="cannot read mindie arguments"):
        parse_serve_args("--max-batch-size lots", engine="mindie", model="m")


def test_extract_finds_commands_in_markdown_blocks() -> None:
    document = """
??? info "Serving script"
    ```bash
    # TP8 only is not compatible for the model weight. Use EP as well.
    vllm serve Qwen/Qwen3-235B -tp 8 \\
        --enable-expert-parallel
    ```
We use vllm bench serve --model x to benchmark.
- Backend Parameters: ```bash --reasoning-parser=qwen3 ``` ???+ tip ```bash vllm serve M \\ --a=1 \\ --b ```
    ```bash
    # This is a simplified vLLM-like command.
    mindie serve Qwen3-30B-A3B --enable-prefix-caching
    ```
"""
    assert extract_serve_commands(document) == [
        "vllm serve Qwen/Qwen3-235B -tp 8 --enable-expert-parallel",
        "vllm serve M --a=1 --b",
        "mindie serve Qwen3-30B-A3B --enable-prefix-caching",
    ]
