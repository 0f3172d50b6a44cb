"""The Datasets page with AppTest: upload (each format, errors naming line and field, duplicates,
a real tokenizer), preview, prompt-length histogram, delete."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from db import crud
from db import session as db_session
from tests.ui.conftest import texts

DATASETS_PAGE = "pages/datasets.py"
JSONL = b'{"prompt": "Explain KV caches in two sentences."}\n{"prompt": "What is TPOT?", "output_len": 12}\n'
SHAREGPT = json.dumps(
    [
        {
            "conversations": [
                {"from": "human", "value": "Write a haiku about GPUs."},
                {"from": "gpt", "value": "Warm fans hum"},
            ]
        },
        {"conversations": [{"from": "human", "value": "Only one turn"}]},
        {
            "conversations": [
                {"from": "human", "value": "Summarise attention."},
                {"from": "gpt", "value": "Weights"},
            ]
        },
    ],
    indent=1,
).encode()


def upload(app, name: str, content: bytes) -> None:  # type: ignore[no-untyped-def]
    app.file_uploader(key="dataset_file").set_value((name, content, "application/octet-stream"))
    app.run()
    app.button(key="dataset_store").click().run()


def test_empty_page(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, DATASETS_PAGE)
    assert not app.exception
    assert "No datasets yet. Upload one above to benchmark with your own prompts." in texts(app.info)
    assert app.button(key="dataset_store").disabled


def test_upload_preview_histogram_and_duplicate(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, DATASETS_PAGE)
    app.text_area(key="dataset_note").input("support team's questions").run()
    upload(app, "support.jsonl", JSONL)
    assert not app.exception
    assert "Stored 'support.jsonl': 2 prompts, lengths estimated." in texts(app.success)
    listing = app.dataframe[0].value
    assert list(listing["Name"]) == ["support.jsonl"] and list(listing["Prompts"]) == [2]
    assert list(listing["Note"]) == ["support team's questions"]
    preview = app.dataframe[1].value
    assert list(preview["Prompt"]) == ["Explain KV caches in two sentences.", "What is TPOT?"]
    assert list(preview["Output len"].fillna(0)) == [0, 12] and list(preview["Prompt tokens"]) == [9, 3]
    assert {metric.label: metric.value for metric in app.metric}["max tokens"] == "9"
    assert len(app.get("vega_lite_chart")) == 1

    upload(app, "again.jsonl", JSONL)
    assert any("already stored as 'support.jsonl'" in text for text in texts(app.info))
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        assert len(crud.list_datasets(session)) == 1


SESSIONS = (
    b'[{"messages": [{"role": "system", "content": "You are a coding agent."}, '
    b'{"role": "user", "content": "List the files in the repo."}], "output_len": 64}, '
    b'{"messages": [{"role": "tool", "content": "README.md setup.py src/"}], "output_len": 32}]\n'
    b'{"turns": [{"messages": [{"role": "user", "content": "Summarise the KV cache in one line."}]}, '
    b'{"messages": [{"role": "user", "content": "And prefix caching?"}], "output_len": 40}]}\n'
)


def test_a_session_file_is_stored_and_previewed_turn_by_turn(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    """The agentic-trace JSONL form of docs/workloads.md, refused before as 'field prompt: missing'."""
    app = open_page(empty_db, DATASETS_PAGE)
    upload(app, "agents.jsonl", SESSIONS)
    assert not app.exception and not app.error
    assert "Stored 'agents.jsonl': 2 sessions of 4 turns, lengths estimated." in texts(app.success)
    listing = app.dataframe[0].value
    assert list(listing["Format"]) == ["agentic-jsonl"]
    assert (list(listing["Sessions"]), list(listing["Turns"])) == ([2], [4])
    assert "2 sessions, 4 turns: 2.0 turns per session on average" in texts(app.markdown)
    assert {metric.label for metric in app.metric} >= {"min tokens per turn", "max tokens per turn"}
    preview = app.dataframe[1].value
    assert list(preview["Turns"]) == [2, 2]
    assert list(preview["Output tokens per turn"]) == ["64, 32", "220, 40"]
    assert preview["First turn"].iloc[0] == "You are a coding agent.\nList the files in the repo."
    (histogram,) = app.get("vega_lite_chart")
    assert "Turn length (tokens)" in histogram.proto.spec


def test_sharegpt_upload_with_a_real_tokenizer(empty_db: str, open_page, tiny_tokenizer_path: Path) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, DATASETS_PAGE)
    app.text_input(key="dataset_tokenizer").input(str(tiny_tokenizer_path)).run()
    app.text_input(key="dataset_name").input("chats").run()
    upload(app, "chats.json", SHAREGPT)
    assert not app.exception
    assert "Stored 'chats': 2 prompts, lengths counted with the tokenizer." in texts(app.success)
    assert list(app.dataframe[0].value["Format"]) == ["sharegpt"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.jsonl", b'{"prompt": "ok"}\n{"text": "no prompt"}\n', "bad.jsonl:2: field 'prompt': missing"),
        ("bad.csv", b"question\nhello\n", "bad.csv:1: field 'prompt': the header has no 'prompt' column"),
        (
            "latin1.txt",
            "first line\nsecond line caf\xe9\n".encode("latin-1"),
            "latin1.txt:2: not valid UTF-8 text",
        ),
        (
            "bad.json",
            b'[{"conversations": [{"from": "human"}, {"value": "x"}]}]',
            "bad.json:1: field 'conversations[0].value': missing",
        ),
        (
            "object.json",
            b'{"sessions": []}',
            "object.json:1: expected an object with a non-empty list 'conversations' (a ShareGPT file is "
            'a JSON array of conversations; a session file is an object {"conversations": [conversation, '
            '…]}, each a list of turns {"messages": [...]}: see docs/workloads.md)',
        ),
        ("empty.txt", b"\n\n", "empty.txt: the file holds no prompts"),
    ],
)
def test_invalid_uploads_are_explained(
    empty_db: str, open_page, name: str, content: bytes, message: str
) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, DATASETS_PAGE)
    upload(app, name, content)
    assert not app.exception
    assert texts(app.error) == [message]
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        assert crud.list_datasets(session) == []


def test_missing_tokenizer_is_explained(empty_db: str, open_page, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, DATASETS_PAGE)
    app.text_input(key="dataset_tokenizer").input(str(tmp_path / "nowhere")).run()
    upload(app, "support.jsonl", JSONL)
    assert texts(app.error) == [
        f"no tokenizer found at '{tmp_path / 'nowhere'}' (give a tokenizer.json or a model directory)"
    ]


def test_delete_needs_confirmation(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, DATASETS_PAGE)
    upload(app, "support.jsonl", JSONL)
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        [dataset] = crud.list_datasets(session)
    delete = app.button(key=f"dataset_delete_{dataset.id}")
    assert delete.disabled
    app.checkbox(key=f"dataset_delete_confirm_{dataset.id}").check().run()
    app.button(key=f"dataset_delete_{dataset.id}").click().run()
    assert not app.exception
    assert "No datasets yet. Upload one above to benchmark with your own prompts." in texts(app.info)


def test_sharegpt_is_fetched_from_the_hub_with_progress(  # type: ignore[no-untyped-def]
    empty_db: str, open_page, hub_server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PERFLAB_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("PERFLAB_HF_ENDPOINT", hub_server.endpoint)
    content = SHAREGPT * 50
    hub_server.add(
        "anon8231489123/ShareGPT_Vicuna_unfiltered", "ShareGPT_V3_unfiltered_cleaned_split.json", content
    )
    app = open_page(empty_db, DATASETS_PAGE)
    status = [text for text in texts(app.markdown) if "ShareGPT_V3_unfiltered_cleaned_split.json" in text]
    assert status and "is not fetched yet" in status[0] and "ShareGPT-format sample" in status[0]
    app.button(key="dataset_hub_fetch").click().run()
    assert not app.exception
    # The download runs in a thread of its own (named after its file) that ends with the download.
    for download in threading.enumerate():
        if download.name == "hub-ShareGPT_V3_unfiltered_cleaned_split.json":
            download.join(timeout=300)
            assert not download.is_alive(), "the hub download did not end within 300 s"
    app.run()
    assert any(text.startswith("Fetched hf://datasets/anon8231489123/") for text in texts(app.success))
    status = [text for text in texts(app.markdown) if "ShareGPT_V3_unfiltered_cleaned_split.json" in text]
    assert "is cached: " in status[0] and str(tmp_path / "hub") in status[0]
    app.text_input(key="dataset_hub_ref").input("prompts.jsonl").run()
    app.button(key="dataset_hub_fetch").click().run()
    assert any("is not a hub file" in text for text in texts(app.error))
