"""The dataset kinds of sessions, shared prefixes and traces, and the registry that loads every kind."""

from __future__ import annotations

import ast
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from perflab.bench.datasets import DatasetSpec, SharedPrefixSpec, dataset_kinds, load_dataset
from perflab.bench.errors import BenchError, DatasetError
from perflab.bench.tokenizer import load_local_tokenizer

DATASETS_DIR = Path(__file__).resolve().parents[2] / "perflab" / "bench" / "datasets"
TRACE = Path(__file__).resolve().parents[1] / "data" / "bench" / "mooncake_trace.jsonl"


def test_the_package_face_registers_every_kind_and_the_model_imports_none_of_them() -> None:
    assert dataset_kinds() == (
        "random",
        "sharegpt",
        "custom",
        "generated-shared-prefix",
        "sharegpt-multi-turn",
        "agentic-trace",
        "mooncake",
    )
    tree = ast.parse((DATASETS_DIR / "base.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {module for module in imported if module and module.startswith("perflab.bench.datasets")}
    with pytest.raises(BenchError, match="needs --dataset-path"):
        load_dataset(DatasetSpec(kind="mooncake"), None)
    with pytest.raises(BenchError, match="unknown dataset 'nope'"):
        load_dataset(DatasetSpec(kind="nope"), None)


def _shared(count: int, seed: int = 0, tokenizer=None, **shape: object):
    fields = {"num_groups": 4, "system_prompt_len": 40, "question_len": 8, **shape}
    spec = DatasetSpec(
        kind="generated-shared-prefix",
        count=count,
        output_len=16,
        seed=seed,
        shared_prefix=SharedPrefixSpec(**fields),  # type: ignore[arg-type]
    )
    return load_dataset(spec, tokenizer)


def test_shared_prefix_groups_share_their_system_prompt_and_spread_uniformly() -> None:
    dataset = _shared(40)
    assert dataset.sessions is None and len(dataset.samples) == 40
    systems = Counter(sample.prompt.split("\n\n")[0] for sample in dataset.samples)
    assert sorted(systems.values()) == [10, 10, 10, 10]
    assert all(len(prompt.split()) == 40 for prompt in systems)
    questions = [sample.prompt.split("\n\n")[1] for sample in dataset.samples]
    assert len(set(questions)) == 40 and all(len(question.split()) == 8 for question in questions)
    assert [s.prompt for s in _shared(40).samples] == [s.prompt for s in dataset.samples]
    assert not set(systems) & {s.prompt.split("\n\n")[0] for s in _shared(40, seed=1).samples}


def test_zipf_popularity_favours_the_first_groups() -> None:
    dataset = _shared(2000, num_groups=8, distribution="zipf", zipf_alpha=1.2)
    by_system = Counter(sample.prompt.split("\n\n")[0] for sample in dataset.samples)
    counts = sorted(by_system.values(), reverse=True)
    # rank 1 gets 1/H(8, 1.2) ≈ 38 % of 2000 requests, rank 8 about 3 %
    assert counts[0] > 600 and counts[-1] < 120 and len(counts) == 8
    with pytest.raises(BenchError, match="needs --gsp-zipf-alpha"):
        _shared(4, distribution="zipf")
    with pytest.raises(BenchError, match="applies to --gsp-group-distribution zipf only"):
        _shared(4, zipf_alpha=1.0)


def test_multi_turn_shared_prefix_makes_sessions_with_exact_lengths(tiny_tokenizer_path: Path) -> None:
    tokenizer = load_local_tokenizer(str(tiny_tokenizer_path))
    dataset = _shared(6, tokenizer=tokenizer, num_turns=3)
    assert dataset.samples == [] and dataset.sessions is not None and len(dataset.sessions) == 6
    for session in dataset.sessions:
        first, *later = session.turns
        assert len(session.turns) == 3 and first.messages[0]["role"] == "user"
        assert "\n\n" in first.messages[0]["content"]
        assert all("\n\n" not in turn.messages[0]["content"] for turn in later)
        assert all(
            turn.prompt_tokens == tokenizer.count(turn.messages[0]["content"]) for turn in session.turns
        )
        assert all(turn.prompt_tokens == 8 for turn in later) and first.output_len == 16


def _sharegpt_file(tmp_path: Path) -> str:
    words = " ".join(["word"] * 30)
    conversations = [
        {"conversations": [{"from": "human", "value": f"question {i} {words}"} if i % 2 == 0 else
                           {"from": "gpt", "value": f"answer {i} {words} {words}"} for i in range(6)]},
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": words}]},  # too short
        {"conversations": [{"from": "human", "value": f"only {words}"}, {"from": "gpt", "value": words},
                           {"from": "human"}]},
    ]  # fmt: skip
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(conversations))
    return str(path)


def test_sharegpt_multi_turn_takes_every_turn_pair(tmp_path: Path) -> None:
    spec = DatasetSpec(kind="sharegpt-multi-turn", path=_sharegpt_file(tmp_path), count=2, seed=3)
    sessions = load_dataset(spec, None).sessions
    assert sessions is not None
    turns = sorted(len(session.turns) for session in sessions)
    assert turns == [1, 3]  # the short conversation fails the filters; the last one's third turn has no text
    longest = max(sessions, key=lambda session: len(session.turns))
    assert [turn.messages[0]["content"].split()[:2] for turn in longest.turns] == [
        ["question", "0"],
        ["question", "2"],
        ["question", "4"],
    ]
    assert all(turn.output_len > 20 for turn in longest.turns)  # the recorded replies' lengths
    capped = load_dataset(DatasetSpec(kind="sharegpt-multi-turn", path=spec.path, count=2, max_turns=2), None)
    assert max(len(session.turns) for session in capped.sessions or []) == 2


def test_agentic_traces_in_sglangs_json_and_as_jsonl(tmp_path: Path) -> None:
    turn = {"messages": [{"role": "system", "content": "tools"}, {"role": "user", "content": "go"}]}
    sglang = tmp_path / "trace.json"
    sglang.write_text(
        json.dumps(
            {
                "metadata": {},
                "conversations": [[turn, {"messages": [{"role": "tool", "content": "ok"}], "output_len": 7}]],
            }
        )
    )
    sessions = load_dataset(DatasetSpec(kind="agentic-trace", path=str(sglang), count=2), None).sessions
    assert sessions is not None and len(sessions) == 2  # one conversation, reused
    assert [t.output_len for t in sessions[0].turns] == [220, 7] and sessions[0].turns[1].messages[0][
        "role"
    ] == "tool"
    lines = tmp_path / "trace.jsonl"
    lines.write_text(json.dumps({"turns": [turn]}) + "\n\n" + json.dumps([turn, turn]) + "\n")
    sessions = load_dataset(
        DatasetSpec(kind="agentic-trace", path=str(lines), count=2, output_len=5), None
    ).sessions
    assert [len(s.turns) for s in sessions or []] == [1, 2] and sessions[1].turns[1].output_len == 5
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps([turn]) + "\n" + json.dumps([{"messages": [{"role": "assistant", "content": "x"}]}])
    )
    with pytest.raises(
        DatasetError, match=r"bad.jsonl:2: field 'conversation\[0\].messages\[0\]': role must be"
    ):
        load_dataset(DatasetSpec(kind="agentic-trace", path=str(bad), count=2), None)


def test_mooncake_blocks_repeat_wherever_their_hash_id_does(tiny_tokenizer_path: Path) -> None:
    spec = DatasetSpec(kind="mooncake", path=str(TRACE), count=300, block_size=512)
    dataset = load_dataset(spec, None)
    rows = [json.loads(line) for line in TRACE.read_text().splitlines()]
    assert len(dataset.samples) == 300 and dataset.arrivals_s is not None
    assert dataset.arrivals_s[:3] == [(row["timestamp"] - rows[0]["timestamp"]) / 1000 for row in rows[:3]]
    assert [len(sample.prompt.split()) for sample in dataset.samples] == [row["input_length"] for row in rows]
    assert [sample.output_len for sample in dataset.samples] == [row["output_length"] for row in rows]
    # two requests whose prompts start with the same hash ids share those blocks of 512 words, no more
    pairs = 0
    for a, b in zip(range(0, 300, 7), range(1, 300, 5), strict=False):
        ids_a, ids_b = rows[a]["hash_ids"], rows[b]["hash_ids"]
        shared = next(
            (n for n, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y),
            min(len(ids_a), len(ids_b)),
        )
        words_a, words_b = dataset.samples[a].prompt.split(), dataset.samples[b].prompt.split()
        common = min(512 * shared, len(words_a), len(words_b))
        assert words_a[:common] == words_b[:common]
        if shared < min(len(ids_a), len(ids_b)) and min(len(words_a), len(words_b)) > 512 * shared:
            assert words_a[512 * shared : 512 * (shared + 1)] != words_b[512 * shared : 512 * (shared + 1)]
        pairs += shared > 0
    assert pairs > 5
    other = load_dataset(DatasetSpec(kind="mooncake", path=str(TRACE), count=5, seed=9), None)
    assert other.samples[0].prompt != dataset.samples[0].prompt  # another seed, other text, same sharing


def test_mooncake_prompts_have_the_traces_lengths_in_a_bpe_tokenizer(tiny_tokenizer_path: Path) -> None:
    """With a byte-level BPE tokenizer (sampled token ids decode to text that re-encodes to other, more
    tokens) every prompt is the trace's length exactly, and two prompts that share k hash ids share
    their first k × 512 tokens, to a token where BPE merges across a block's end."""
    tokenizer = load_local_tokenizer(str(tiny_tokenizer_path))
    assert tokenizer is not None
    rows = sorted(
        (json.loads(line) for line in TRACE.read_text().splitlines()), key=lambda row: row["timestamp"]
    )
    dataset = load_dataset(
        DatasetSpec(kind="mooncake", path=str(TRACE), count=150, block_size=512), tokenizer
    )
    tokens = [tokenizer.encode(sample.prompt) for sample in dataset.samples]
    assert [len(ids) for ids in tokens] == [row["input_length"] for row in rows[:150]]
    assert [sample.prompt_tokens for sample in dataset.samples] == [row["input_length"] for row in rows[:150]]
    assert dataset.prompt_tokens_source == "tokenizer"
    shared_pairs = 0
    for a, b in itertools.combinations(range(150), 2):
        ids_a, ids_b = rows[a]["hash_ids"], rows[b]["hash_ids"]
        blocks = next(
            (n for n, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y),
            min(len(ids_a), len(ids_b)),
        )
        common = next(
            (n for n, (x, y) in enumerate(zip(tokens[a], tokens[b], strict=False)) if x != y),
            min(len(tokens[a]), len(tokens[b])),
        )
        assert abs(common - min(512 * blocks, len(tokens[a]), len(tokens[b]))) <= 1, (a, b)
        shared_pairs += blocks > 0
    assert shared_pairs > 100


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"timestamp": -1, "input_length": 5, "output_length": 5}', "field 'timestamp'"),
        ('{"timestamp": 1, "input_length": 0, "output_length": 5}', "field 'input_length'"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 5, "hash_ids": ["a"]}', "field 'hash_ids'"),
        ("[1, 2]", "each line must be a JSON object"),
    ],
)
def test_a_bad_trace_line_is_named(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5, "output_length": 5}\n' + line + "\n")
    with pytest.raises(DatasetError, match=f"trace.jsonl:2: {problem}"):
        load_dataset(DatasetSpec(kind="mooncake", path=str(path), count=2), None)
