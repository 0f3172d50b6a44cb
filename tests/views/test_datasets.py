"""Dataset uploads: every format through the bench's own readers, errors naming file/line/field,
size and encoding limits, token lengths, storage (once per content) and the page's tables."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from sqlmodel import Session

from db import crud
from perflab import datasets as datasets_module
from perflab.bench.tokenizer import load_local_tokenizer
from perflab.datasets import (
    DatasetUploadError,
    dataset_file_name,
    dataset_format,
    estimate_tokens,
    load_tokenizer,
    parse_upload,
    profile_dataset,
    store_dataset,
)
from perflab.profiles import BenchmarkProfile
from perflab.views import datasets as dataset_views

REPO = Path(__file__).resolve().parents[2]
BENCH_DATA = REPO / "tests" / "data" / "bench"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("prompts.jsonl", "jsonl"),
        ("prompts.csv", "csv"),
        ("prompts.txt", "text"),
        ("sharegpt_small.json", "sharegpt"),
    ],
)
def test_the_bench_test_files_are_accepted(name: str, fmt: str) -> None:
    parsed = parse_upload(name, (BENCH_DATA / name).read_bytes())
    assert parsed.format == fmt and parsed.num_prompts > 0 and parsed.lengths_source == "estimate"
    assert parsed.token_lengths == [estimate_tokens(prompt) for prompt in parsed.prompts]
    assert len(parsed.output_lens) == parsed.num_prompts


def test_rows_keep_output_lengths_and_csv_quoting() -> None:
    parsed = parse_upload("p.csv", b'prompt,output_len\n"Hello, world",5\nSecond,\n')
    assert parsed.prompts == ["Hello, world", "Second"] and parsed.output_lens == [5, None]
    conversations = [
        {"conversations": [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"}]},
        {"conversations": [{"from": "human", "value": "alone"}]},
    ]
    assert parse_upload("c.json", json.dumps(conversations).encode()).prompts == ["q1"]
    assert parse_upload("bom.txt", "\ufeffone\ntwo\n".encode()).prompts == ["one", "two"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "a.jsonl",
            b'{"prompt": "x"}\n\n{"prompt": ""}\n',
            "a.jsonl:3: field 'prompt': must be a non-empty string",
        ),
        ("a.jsonl", b"{not json}\n", "a.jsonl:1: invalid JSON"),
        (
            "a.jsonl",
            b'{"prompt": "x", "output_len": -2}\n',
            "a.jsonl:1: field 'output_len': must be a positive integer",
        ),
        ("a.csv", b"prompt,output_len\nok,many\n", "a.csv:2: field 'output_len': must be a positive integer"),
        (
            "a.json",
            b'{"conversations": []}',
            "a.json:1: expected an object with a non-empty list 'conversations'",
        ),
        (
            "a.jsonl",
            b'{"text": "no prompt"}\n',
            "a.jsonl:1: field 'prompt': missing (a prompt file has a JSON object with a 'prompt' on each "
            "line; a session file has one conversation per line",
        ),
        (
            "s.jsonl",
            b'[{"messages": [{"role": "assistant", "content": "hi"}]}]\n',
            "s.jsonl:1: field 'conversation[0].messages[0]': role must be one of system, user, tool",
        ),
        (
            "s.jsonl",
            b'{"turns": [{"messages": [{"role": "user", "content": "q"}], "output_len": 0}]}\n',
            "s.jsonl:1: field 'conversation.turns[0].output_len': must be a positive integer",
        ),
        (
            "a.json",
            b'[\n {"conversations": "no"}\n]',
            "a.json:2: field 'conversations': must be a list, not str",
        ),
        ("a.txt", b"ok\n\xff\xfe\n", "a.txt:2: not valid UTF-8 text"),
        ("a.parquet", b"PAR1", "a.parquet: unsupported file type .parquet"),
        ("noext", b"x", "noext: unsupported file type (none)"),
    ],
)
def test_errors_name_file_line_and_field(name: str, content: bytes, message: str) -> None:
    with pytest.raises(DatasetUploadError) as caught:
        parse_upload(name, content)
    assert str(caught.value).startswith(message)


def test_size_limit() -> None:
    with pytest.raises(
        DatasetUploadError, match=r"big.txt: the file is 2.0 KiB; datasets are limited to 1.0 KiB"
    ):
        parse_upload("big.txt", b"x\n" * 1024, max_bytes=1024)
    assert dataset_format("/some/dir/Prompts.JSONL") == "jsonl"


def test_real_tokenizer_counts(tiny_tokenizer_path: Path) -> None:
    tokenizer = load_tokenizer(str(tiny_tokenizer_path))
    parsed = parse_upload("p.txt", b"the model server streams tokens\nlatency\n", tokenizer=tokenizer)
    reference = load_local_tokenizer(str(tiny_tokenizer_path))
    assert reference is not None
    assert parsed.lengths_source == "tokenizer"
    assert parsed.token_lengths == [reference.count(prompt) for prompt in parsed.prompts]
    with pytest.raises(DatasetUploadError, match="no tokenizer found"):
        load_tokenizer(str(tiny_tokenizer_path.parent / "missing"))


def test_store_once_with_suffix_and_profile_reference(db_session: Session) -> None:
    content = b"first prompt\nsecond prompt\n"
    parsed = parse_upload("support.txt", content)
    dataset, created = store_dataset(
        db_session, parsed, content, name="support prompts", owner_note="  ", created_by="ana"
    )
    # The name stays as typed; as a file (the run's, the vllm bench command's) it gets the format's suffix.
    assert created and dataset.name == "support prompts" and dataset.owner_note is None
    assert dataset_file_name(dataset.name, dataset.format) == "support prompts.txt"
    assert (dataset.num_prompts, dataset.prompt_token_lengths, dataset.format) == (2, [3, 3], "text")
    again, created_again = store_dataset(db_session, parsed, content, name="other")
    assert not created_again and again.id == dataset.id and again.name == "support prompts"
    assert profile_dataset(dataset) == {"dataset": "custom", "dataset_ref": crud.content_hash(content)}

    listing = dataset_views.datasets_table(crud.list_datasets(db_session))
    assert list(listing["Name"]) == ["support prompts"] and list(listing["By"]) == ["ana"]
    stored = crud.get_dataset(db_session, dataset_id=dataset.id)
    assert stored is not None
    preview = dataset_views.preview_frame(stored)
    assert list(preview["Prompt"]) == ["first prompt", "second prompt"] and list(
        preview["Prompt tokens"]
    ) == [3, 3]
    assert dataset_views.dataset_choice_label(stored) == f"#{stored.id} · support prompts (text, 2 prompts)"
    assert dataset_views.length_summary([1, 2, 3, 10]) == {
        "min": 1.0,
        "median": 2.5,
        "mean": 4.0,
        "p99": pytest.approx(9.79),
        "max": 10.0,
    }
    assert dataset_views.length_summary([]) == {}


SESSIONS_JSONL = (
    b'[{"messages": [{"role": "system", "content": "You are a coding agent."}, '
    b'{"role": "user", "content": "List the files."}], "output_len": 64}, '
    b'{"messages": [{"role": "tool", "content": "README.md setup.py"}], "output_len": 32}]\n'
    b'{"turns": [{"messages": [{"role": "user", "content": "Summarise the KV cache."}]}, '
    b'{"messages": [{"role": "user", "content": "And prefix caching?"}], "output_len": 40}, '
    b'{"messages": [{"role": "user", "content": "Thanks."}]}]}\n'
)


def test_session_files_in_both_documented_forms_are_read_as_the_bench_reads_them(db_session: Session) -> None:
    parsed = parse_upload("agents.jsonl", SESSIONS_JSONL)
    assert (parsed.format, parsed.sessions, parsed.num_prompts, parsed.turns) == (
        "agentic-jsonl",
        True,
        2,
        (2, 3),
    )
    assert parsed.by_session(parsed.prompts)[0] == [
        "You are a coding agent.\nList the files.",
        "README.md setup.py",
    ]
    assert parsed.token_lengths == [estimate_tokens(text) for text in parsed.prompts]
    # a turn without its own output length asks for SGLang's 220
    assert parsed.by_session(parsed.output_lens) == [[64, 32], [220, 40, 220]]
    sglang = json.dumps(
        {
            "conversations": [
                [
                    {"messages": [{"role": "user", "content": "q1"}]},
                    {"messages": [{"role": "user", "content": "q2"}]},
                ]
            ]
        }
    ).encode()
    as_json = parse_upload("trace.json", sglang)
    assert (as_json.format, as_json.turns, as_json.prompts) == ("agentic-json", (2,), ["q1", "q2"])
    assert (
        dataset_format("x.json", b"  [{}]") == "sharegpt"
        and dataset_format("x.jsonl", b'{"prompt": "p"}') == "jsonl"
    )

    dataset, _ = store_dataset(db_session, parsed, SESSIONS_JSONL, name="agents")
    assert (dataset.num_prompts, len(dataset.prompt_token_lengths or [])) == (2, 5)
    assert dataset_file_name(dataset.name, dataset.format) == "agents.jsonl"
    assert profile_dataset(dataset) == {"dataset": "agentic-trace", "dataset_ref": dataset.content_hash}
    stored = crud.get_dataset(db_session, dataset_id=dataset.id)
    assert stored is not None
    assert (
        dataset_views.dataset_choice_label(stored)
        == f"#{stored.id} · agents (agentic-jsonl, 2 sessions, 5 turns)"
    )
    listing = dataset_views.datasets_table(crud.list_datasets(db_session))
    assert listing.loc[stored.id, ["Sessions", "Turns"]].tolist() == [2, 5] and pd.isna(
        listing.loc[stored.id, "Prompts"]
    )
    preview = dataset_views.preview_frame(stored)
    assert list(preview.columns) == list(dataset_views.SESSION_COLUMNS)
    assert preview.iloc[1].tolist()[:4] == [
        2,
        3,
        ", ".join(str(n) for n in parsed.token_lengths[2:]),
        "220, 40, 220",
    ]
    assert dataset_views.sessions_summary(stored) == "2 sessions, 5 turns: 2.5 turns per session on average"
    # as a study profile: every session once, a bounded number in flight
    fields = dataset_views.profile_fields(stored)
    assert fields == {
        "name": f"dataset-{stored.id}",
        "title": "agents",
        "dataset": "agentic-trace",
        "dataset_ref": stored.content_hash,
        "num_prompts": 2,
        "seed": 42,
        "max_concurrency": 2,
    }
    profile = BenchmarkProfile(**fields)
    assert profile.sessions and profile.endpoint == "chat"


def test_a_session_file_is_bounded_in_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets_module, "MAX_SESSION_TURNS", 4)
    with pytest.raises(DatasetUploadError, match="agents.jsonl: the file holds more than 4 turns"):
        parse_upload("agents.jsonl", SESSIONS_JSONL)
