"""Datasets: exact random lengths with a locally built tokenizer, ShareGPT filtering, custom files,
and malformed files reported by file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perflab.bench.datasets import DatasetSpec, load_dataset
from perflab.bench.errors import BenchError, DatasetError
from perflab.bench.tokenizer import load_local_tokenizer

DATA = Path(__file__).resolve().parents[1] / "data" / "bench"


@pytest.fixture(scope="module")
def tokenizer(tiny_tokenizer_path):
    return load_local_tokenizer(str(tiny_tokenizer_path))


def test_random_prompts_have_exact_token_lengths(tokenizer):
    dataset = load_dataset(
        DatasetSpec(kind="random", count=40, input_len=300, output_len=64, seed=3), tokenizer
    )
    assert dataset.prompt_tokens_source == "tokenizer"
    assert dataset.notes == []
    for sample in dataset.samples:
        assert tokenizer.count(sample.prompt) == sample.prompt_tokens == 300
        assert sample.output_len == 64


def test_random_range_ratio_and_shared_prefix(tokenizer):
    spec = DatasetSpec(
        kind="random", count=30, input_len=100, output_len=20, range_ratio=0.5, prefix_len=16, seed=1
    )
    samples = load_dataset(spec, tokenizer).samples
    prefix = samples[0].prompt[:20]
    for sample in samples:
        assert 16 + 50 <= sample.prompt_tokens <= 16 + 150
        assert tokenizer.count(sample.prompt) == sample.prompt_tokens
        assert 10 <= sample.output_len <= 30
        assert sample.prompt.startswith(prefix)
    assert len({sample.prompt_tokens for sample in samples}) > 5


def test_random_is_reproducible_by_seed(tokenizer):
    spec = DatasetSpec(kind="random", count=5, input_len=50, seed=11)
    first = [sample.prompt for sample in load_dataset(spec, tokenizer).samples]
    again = [sample.prompt for sample in load_dataset(spec, tokenizer).samples]
    other = [
        sample.prompt
        for sample in load_dataset(
            DatasetSpec(kind="random", count=5, input_len=50, seed=12), tokenizer
        ).samples
    ]
    assert first == again != other


def test_random_without_tokenizer_says_lengths_are_unverified():
    dataset = load_dataset(DatasetSpec(kind="random", count=3, input_len=20), None)
    assert dataset.prompt_tokens_source == "unverified"
    assert all(
        sample.prompt_tokens is None and len(sample.prompt.split()) == 20 for sample in dataset.samples
    )
    assert "could not be verified" in dataset.notes[0]


def test_random_rejects_bad_ranges():
    with pytest.raises(BenchError, match="range-ratio"):
        load_dataset(DatasetSpec(kind="random", range_ratio=1.5), None)


def sharegpt_expected(tokenizer, fixed_output=None):
    """Prompts vLLM's rules keep, computed from the file with the same tokenizer."""
    kept = set()
    for entry in json.loads((DATA / "sharegpt_small.json").read_text()):
        turns = entry["conversations"]
        if len(turns) < 2:
            continue
        prompt_len = tokenizer.count(turns[0]["value"])
        output_len = fixed_output or tokenizer.count(turns[1]["value"])
        if prompt_len < 4 or (fixed_output is None and output_len < 4):
            continue
        if prompt_len > 1024 or prompt_len + output_len > 2048:
            continue
        kept.add(turns[0]["value"])
    return kept


def test_sharegpt_filters_like_vllm(tokenizer):
    spec = DatasetSpec(kind="sharegpt", path=str(DATA / "sharegpt_small.json"), count=6, seed=0)
    dataset = load_dataset(spec, tokenizer)
    prompts = {sample.prompt for sample in dataset.samples}
    expected = sharegpt_expected(tokenizer)
    # conv-03/04 (one turn or none), conv-05 (prompt "Hi"), conv-06 (reply "Ok."),
    # conv-07 (prompt > 1024 tokens) and conv-08 (prompt + reply > 2048) are dropped.
    assert len(expected) == 6
    assert prompts == expected
    for sample in dataset.samples:
        assert sample.prompt_tokens == tokenizer.count(sample.prompt)
    assert dataset.prompt_tokens_source == "tokenizer"


def test_sharegpt_fixed_output_len_keeps_short_replies_and_cycles(tokenizer):
    spec = DatasetSpec(
        kind="sharegpt", path=str(DATA / "sharegpt_small.json"), count=10, output_len=32, seed=5
    )
    dataset = load_dataset(spec, tokenizer)
    assert len(dataset.samples) == 10
    assert {sample.prompt for sample in dataset.samples} == sharegpt_expected(tokenizer, fixed_output=32)
    assert all(sample.output_len == 32 for sample in dataset.samples)
    assert "reusing them" in dataset.notes[0]


def test_sharegpt_order_depends_on_seed(tokenizer):
    path = str(DATA / "sharegpt_small.json")
    orders = {
        tuple(
            sample.prompt
            for sample in load_dataset(
                DatasetSpec(kind="sharegpt", path=path, count=6, seed=seed), tokenizer
            ).samples
        )
        for seed in range(4)
    }
    assert len(orders) > 1


def test_sharegpt_without_tokenizer_estimates(tmp_path):
    dataset = load_dataset(
        DatasetSpec(kind="sharegpt", path=str(DATA / "sharegpt_small.json"), count=2), None
    )
    assert dataset.prompt_tokens_source == "estimate"
    assert all(sample.prompt_tokens for sample in dataset.samples)


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "prompts.jsonl",
            [
                ("Write a haiku about GPUs.", 24),
                ("List three ways to reduce time to first token.", 99),
                ("Translate 'throughput' into French.", 8),
            ],
        ),
        (
            "prompts.csv",
            [
                ("Explain KV cache, briefly.", 32),
                ("What is speculative decoding?", 99),
                ('Say "hello" twice.', 5),
            ],
        ),
        (
            "prompts.txt",
            [
                ("First prompt on its own line.", 99),
                ("Second prompt, after a blank line.", 99),
                ("Third prompt.", 99),
            ],
        ),
    ],
)
def test_custom_files(tokenizer, name, expected):
    dataset = load_dataset(
        DatasetSpec(kind="custom", path=str(DATA / name), count=3, output_len=99), tokenizer
    )
    assert [(sample.prompt, sample.output_len) for sample in dataset.samples] == expected
    assert all(sample.prompt_tokens == tokenizer.count(sample.prompt) for sample in dataset.samples)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_custom_jsonl_reads_vllm_output_tokens(tmp_path):
    # vllm bench serve's custom dataset names the output length "output_tokens".
    path = write(tmp_path, "vllm.jsonl", '{"prompt": "a b", "output_tokens": 7}\n{"prompt": "c d"}\n')
    dataset = load_dataset(DatasetSpec(kind="custom", path=path, count=2, output_len=3), None)
    assert [sample.output_len for sample in dataset.samples] == [7, 3]
    bad = write(tmp_path, "bad.jsonl", '{"prompt": "a", "output_tokens": 0}\n')
    with pytest.raises(DatasetError, match="field 'output_tokens': must be a positive integer"):
        load_dataset(DatasetSpec(kind="custom", path=bad, count=1), None)


MALFORMED = [
    ("custom", "bad.jsonl", '{"prompt": "ok"}\n{"prompt": "broken"\n', 2, None, "invalid JSON"),
    ("custom", "bad.jsonl", '{"prompt": "ok"}\n\n{"text": "no prompt"}\n', 3, "prompt", "missing"),
    ("custom", "bad.jsonl", '{"prompt": "ok", "output_len": -4}\n', 1, "output_len", "positive integer"),
    ("custom", "bad.jsonl", '{"prompt": ""}\n', 1, "prompt", "non-empty"),
    ("custom", "bad.jsonl", '["not", "an", "object"]\n', 1, None, "JSON object"),
    ("custom", "bad.csv", "text,output_len\nhello,3\n", 1, "prompt", "no 'prompt' column"),
    ("custom", "bad.csv", "prompt,output_len\nhello,3\nworld,lots\n", 3, "output_len", "positive integer"),
    ("sharegpt", "bad.json", '[\n  {"conversations": []},\n  {"id": 2}\n]\n', 3, "conversations", "missing"),
    ("sharegpt", "bad.json", '[\n  {"conversations": "text"}\n]', 2, "conversations", "must be a list"),
    (
        "sharegpt",
        "bad.json",
        '[\n {"conversations": [\n  {"value": "q"},\n  {"from": "gpt", "value": 7}]}\n]',
        2,
        "conversations[1].value",
        "must be a string",
    ),
    (
        "sharegpt",
        "bad.json",
        '[\n  {"conversations": []},\n  {"conversations": [}\n]',
        3,
        None,
        "invalid JSON",
    ),
    ("sharegpt", "bad.json", '{"conversations": []}', 1, None, "expected a JSON array"),
]


@pytest.mark.parametrize("kind, name, text, line, field, message", MALFORMED)
def test_malformed_files_name_file_line_and_field(tmp_path, kind, name, text, line, field, message):
    path = write(tmp_path, name, text)
    with pytest.raises(DatasetError) as caught:
        load_dataset(DatasetSpec(kind=kind, path=path, count=2), None)
    error = caught.value
    assert (error.path, error.line, error.field) == (path, line, field)
    assert message in str(error)
    assert str(error).startswith(f"{path}:{line}: ")


def test_unreadable_and_unsupported_files(tmp_path):
    with pytest.raises(DatasetError, match="cannot read file"):
        load_dataset(DatasetSpec(kind="custom", path=str(tmp_path / "missing.jsonl")), None)
    with pytest.raises(DatasetError, match=r"\.jsonl, \.csv or \.txt"):
        load_dataset(DatasetSpec(kind="custom", path=write(tmp_path, "p.parquet", "x")), None)
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"fine line\ncaf\xe9\n")
    with pytest.raises(DatasetError) as caught:
        load_dataset(DatasetSpec(kind="custom", path=str(latin)), None)
    assert caught.value.line == 2 and "UTF-8" in str(caught.value)
    with pytest.raises(DatasetError, match="no prompts"):
        load_dataset(DatasetSpec(kind="custom", path=write(tmp_path, "empty.txt", "\n\n")), None)
    with pytest.raises(BenchError, match="needs --dataset-path"):
        load_dataset(DatasetSpec(kind="sharegpt"), None)
