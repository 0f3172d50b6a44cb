"""Masking secrets: known values (and their escaped forms), secret-shaped text, JSON-able data, argv
lists, log records; and what counts as a secret name."""

from __future__ import annotations

import json
import logging
from urllib.parse import quote

import pytest

from perflab import redact
from perflab.redact import MASK, Redactor
from perflab.secret_names import is_secret_name

SECRET = "pl-Secret/Value+42 with space"


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "VLLM_API_KEY", "--api-key", "--hf-token",
     "PGPASSWORD", "db_password", "AWS_SECRET_ACCESS_KEY", "passphrase", "token", "GOOGLE_CREDENTIALS"],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["TOKENIZERS_PARALLELISM", "--tokenizer", "--max-num-batched-tokens", "--bos-token-id", "HF_HOME",
     "max_tokens", "total_token_throughput", "PERFLAB_AUTH", "--api-server-count", "HF_TOKEN_PATH",
     "PERFLAB_PASSWORD_FILE", "password_env", "--ssl-keyfile"],
)  # fmt: skip
def test_names_that_are_not_secrets(name: str) -> None:
    assert not is_secret_name(name)


def test_known_values_are_masked_raw_url_encoded_and_json_escaped() -> None:
    redactor = Redactor([SECRET])
    text = f"raw {SECRET} | url {quote(SECRET, safe='')} | json {json.dumps(SECRET)}"
    masked = redactor.text(text)
    assert "Secret/Value" not in masked and "Secret%2FValue" not in masked
    assert masked == f'raw {MASK} | url {MASK} | json "{MASK}"'


def test_short_values_are_left_to_the_shapes() -> None:
    assert Redactor(["abc"]).text("abc HF_TOKEN=abc") == f"abc HF_TOKEN={MASK}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HF_TOKEN=hf_x1 vllm serve m", f"HF_TOKEN={MASK} vllm serve m"),
        ("vllm serve m --api-key k-123 --port 8000", f"vllm serve m --api-key {MASK} --port 8000"),
        ("vllm serve m --api-key=k-123", f"vllm serve m --api-key={MASK}"),
        ("postgresql://perflab:pw-9@db:5432/perflab", f"postgresql://perflab:{MASK}@db:5432/perflab"),
        ("Authorization: Bearer abcdef123", f"Authorization: Bearer {MASK}"),
        ("curl -H 'Authorization: Basic dXNlcjpwdw=='", f"curl -H 'Authorization: Basic {MASK}'"),
        ("args: {'api_key': 'k-123', 'port': 8}", f"args: {{'api_key': '{MASK}', 'port': 8}}"),
        ("token hf_abcdefghijklmnopqrstuvwxyz012345 leaked", f"token {MASK} leaked"),
        ("key sk-proj-abcdefghijklmnopqrstuvw leaked", f"key {MASK} leaked"),
    ],
)  # fmt: skip
def test_secret_shapes_are_masked_whatever_the_value(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Total Token throughput (tok/s):          3792.50",
        "-----Time per Output Token (excl. 1st token)------",
        "vllm serve Qwen/Qwen3-8B --max-num-batched-tokens 8192 --tokenizer /models/tok",
        "TOKENIZERS_PARALLELISM=false python3 -m sglang.launch_server --model-path m",
        "http://127.0.0.1:8000/v1/chat/completions",
        "the bearer of this note",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor([SECRET]).text(text) == text


def test_data_masks_strings_secret_keys_and_argv_values() -> None:
    value = {
        "env": {"HF_TOKEN": "anything", "HF_HOME": "/data/hf"},
        "argv": ["vllm", "serve", "m", "--api-key", "k-1", "--api-key=k-2", "--port", "8000"],
        "nested": [{"error": f"401 with {SECRET}"}, 3.5, None, True],
    }
    assert Redactor([SECRET]).data(value) == {
        "env": {"HF_TOKEN": MASK, "HF_HOME": "/data/hf"},
        "argv": ["vllm", "serve", "m", "--api-key", MASK, f"--api-key={MASK}", "--port", "8000"],
        "nested": [{"error": f"401 with {MASK}"}, 3.5, None, True],
    }


def test_masking_twice_changes_nothing() -> None:
    once = Redactor([SECRET]).text(f"HF_TOKEN={SECRET} --api-key {SECRET}")
    assert Redactor([SECRET]).text(once) == once == f"HF_TOKEN={MASK} --api-key {MASK}"


def test_log_records_are_masked_with_their_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLAB_SCAN_TEST_TOKEN", SECRET)
    original = logging.getLogRecordFactory()
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("perflab.tests.redaction")
    logger.addHandler(handler)
    try:
        redact.install_log_redaction()
        redact.install_log_redaction()
        logger.warning("connecting with %s", SECRET)
        try:
            raise RuntimeError(f"login refused for {SECRET}")
        except RuntimeError:
            logger.exception("probe failed")
    finally:
        logger.removeHandler(handler)
        logging.setLogRecordFactory(original)
    formatted = [logging.Formatter().format(record) for record in records]
    assert formatted[0] == f"connecting with {MASK}"
    assert "RuntimeError: login refused for ***" in formatted[1]
    assert all(SECRET not in text for text in formatted)
