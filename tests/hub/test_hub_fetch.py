"""Fetching hub dataset files against a local hub (real HTTP servers serving the hub's URL layout and
a CDN it redirects to): download, cache, checksum, token, offline, and the sample stand-in."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from perflab.cli import main
from perflab.hub.catalog import SHAREGPT, hub_file, resolve_hub_dataset
from perflab.hub.client import (
    HubChecksumMismatch,
    HubError,
    HubFile,
    HubUnreachable,
    fetch,
    hub_endpoint,
    hub_token,
)
from perflab.hub.sample import SAMPLE_NAME, SAMPLE_PATH, sample_text
from tests.fixtures.hub_server import COMMIT, HubServer

REPO = "team/prompts"
CONTENT = json.dumps([{"id": "a", "conversations": [{"from": "human", "value": "hi"}]}]).encode() * 40


def closed_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def _hub_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("PERFLAB_HF_ENDPOINT", "HF_ENDPOINT", "HF_TOKEN", "PERFLAB_HF_TOKEN_FILE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PERFLAB_HUB_CACHE", str(tmp_path / "cache"))


def test_fetch_follows_the_redirect_verifies_and_caches(hub_server: HubServer, tmp_path: Path) -> None:
    sha256 = hub_server.add(REPO, "data/chats.json", CONTENT)
    seen: list[tuple[int, int | None]] = []
    file = HubFile(REPO, "data/chats.json")
    got = fetch(
        file,
        cache_dir=tmp_path / "cache",
        endpoint=hub_server.endpoint,
        token="hf_secret_value_1",
        on_progress=lambda done, total: seen.append((done, total)),
    )
    assert got.downloaded and got.path.read_bytes() == CONTENT
    assert got.sha256 == sha256 and got.commit == COMMIT and got.size == len(CONTENT)
    assert got.path.is_relative_to(tmp_path / "cache") and got.path.suffix == ".json"
    assert seen[-1] == (len(CONTENT), len(CONTENT))
    # The token goes to the hub, never to the CDN of another origin.
    assert all(
        entry.headers.get("Authorization") == "Bearer hf_secret_value_1"
        for entry in hub_server.requests
        if entry.server == "hub"
    )
    assert hub_server.served("cdn") and all(
        "Authorization" not in entry.headers for entry in hub_server.served("cdn")
    )

    again = fetch(file, cache_dir=tmp_path / "cache", endpoint=hub_server.endpoint)
    assert not again.downloaded and again.path == got.path
    assert len(hub_server.served("cdn")) == 1


def test_a_checksum_mismatch_keeps_nothing(hub_server: HubServer, tmp_path: Path) -> None:
    hub_server.add(REPO, "bad.json", CONTENT, wrong_etag=True)
    with pytest.raises(HubChecksumMismatch, match="does not match the hub's checksum"):
        fetch(HubFile(REPO, "bad.json"), cache_dir=tmp_path / "cache", endpoint=hub_server.endpoint)
    assert not [path for path in (tmp_path / "cache").rglob("*") if path.is_file()]


def test_a_pinned_checksum_is_checked_too(hub_server: HubServer, tmp_path: Path) -> None:
    hub_server.add(REPO, "pinned.json", CONTENT)
    with pytest.raises(HubChecksumMismatch):
        fetch(
            HubFile(REPO, "pinned.json", sha256="0" * 64),
            cache_dir=tmp_path / "cache",
            endpoint=hub_server.endpoint,
        )


def test_missing_files_and_bad_references_are_one_line_errors(hub_server: HubServer, tmp_path: Path) -> None:
    with pytest.raises(HubError, match=r"hf://datasets/team/prompts/nope.json: not found on http://127"):
        fetch(HubFile(REPO, "nope.json"), cache_dir=tmp_path / "cache", endpoint=hub_server.endpoint)
    with pytest.raises(HubError, match="expected hf://datasets/"):
        hub_file("hf://models/x")
    with pytest.raises(HubError, match="inside the repository"):
        HubFile(REPO, "../../etc/passwd")
    assert hub_file("hf://datasets/team/prompts@v2/a/b.jsonl") == HubFile(REPO, "a/b.jsonl", revision="v2")
    assert hub_file("ShareGPT_V3_unfiltered_cleaned_split.json") == SHAREGPT
    assert hub_file("prompts.jsonl") is None


def test_unreachable_hub_uses_the_cache_else_says_so(hub_server: HubServer, tmp_path: Path) -> None:
    file = HubFile(REPO, "chats.json")
    cache = tmp_path / "cache"
    with pytest.raises(
        HubUnreachable,
        match=r"hf://datasets/team/prompts/chats.json: the hub at http://127.0.0.1:\d+ cannot be reached "
        r"\(.+\); set PERFLAB_HF_ENDPOINT to a hub mirror this machine can reach$",
    ):
        fetch(file, cache_dir=cache, endpoint=closed_endpoint())
    hub_server.add(REPO, "chats.json", CONTENT)
    first = fetch(file, cache_dir=cache, endpoint=hub_server.endpoint)
    offline = fetch(file, cache_dir=cache, endpoint=closed_endpoint())
    assert offline.path == first.path and not offline.downloaded


def test_hf_hub_offline_reads_only_the_cache(
    monkeypatch: pytest.MonkeyPatch, hub_server: HubServer, tmp_path: Path
) -> None:
    hub_server.add(REPO, "chats.json", CONTENT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        HubUnreachable, match=r"HF_HUB_OFFLINE is set .* or from a mirror \(PERFLAB_HF_ENDPOINT\)$"
    ):
        fetch(HubFile(REPO, "chats.json"), cache_dir=tmp_path / "cache", endpoint=hub_server.endpoint)
    assert not hub_server.requests


def test_sharegpt_comes_from_the_configured_hub_else_the_sample(
    monkeypatch: pytest.MonkeyPatch, hub_server: HubServer, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", closed_endpoint())
    fallback = resolve_hub_dataset(SHAREGPT, cache_dir=tmp_path / "cache")
    assert fallback.is_sample and fallback.path == SAMPLE_PATH and fallback.source == "sample"
    assert "ShareGPT-format sample used instead of the ShareGPT dump" in (fallback.note or "")
    assert "cannot be reached" in (fallback.note or "")

    hub_server.add(SHAREGPT.repo, SHAREGPT.path, CONTENT)
    monkeypatch.setenv("PERFLAB_HF_ENDPOINT", hub_server.endpoint)  # wins over HF_ENDPOINT
    real = resolve_hub_dataset(SHAREGPT, cache_dir=tmp_path / "cache")
    assert not real.is_sample and real.note is None and real.path.read_bytes() == CONTENT
    assert hub_server.served("hub", "HEAD")[0].path == (
        "/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/resolve/main/ShareGPT_V3_unfiltered_cleaned_split.json"
    )


def test_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert hub_endpoint({}) == "https://huggingface.co"
    assert hub_endpoint({"HF_ENDPOINT": "http://mirror:8080/"}) == "http://mirror:8080"
    assert hub_endpoint({"HF_ENDPOINT": "http://a", "PERFLAB_HF_ENDPOINT": "http://b"}) == "http://b"
    with pytest.raises(HubError, match="expected an http"):
        hub_endpoint({"PERFLAB_HF_ENDPOINT": "ftp://x"})
    token_file = tmp_path / "token"
    token_file.write_text("hf_from_file\n")
    assert hub_token({"PERFLAB_HF_TOKEN_FILE": str(token_file), "HF_TOKEN": "other"}) == "hf_from_file"
    assert hub_token({"HF_TOKEN": "hf_env"}) == "hf_env" and hub_token({}) is None
    with pytest.raises(HubError, match="PERFLAB_HF_TOKEN_FILE"):
        hub_token({"PERFLAB_HF_TOKEN_FILE": str(tmp_path / "missing")})


def test_the_shipped_sample_is_what_the_generator_makes() -> None:
    assert SAMPLE_NAME in SAMPLE_PATH.name and "sample" in SAMPLE_NAME
    assert SAMPLE_PATH.read_text(encoding="utf-8") == sample_text()
    conversations = json.loads(SAMPLE_PATH.read_text(encoding="utf-8"))
    assert 200 <= len(conversations) <= 500
    assert all(len(item["conversations"]) >= 2 for item in conversations)


def test_the_datasets_fetch_command(
    monkeypatch: pytest.MonkeyPatch, hub_server: HubServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hub_server.add(SHAREGPT.repo, SHAREGPT.path, CONTENT)
    monkeypatch.setenv("PERFLAB_HF_ENDPOINT", hub_server.endpoint)
    assert main(["datasets", "fetch", "sharegpt"]) == 0
    out, err = capsys.readouterr()
    assert Path(out.strip()).read_bytes() == CONTENT and Path(out.strip()).is_relative_to(tmp_path / "cache")
    assert "downloading: " in err and "ShareGPT_V3_unfiltered_cleaned_split.json: downloaded, " in err
    assert main(["datasets", "fetch", "sharegpt"]) == 0
    assert "already cached" in capsys.readouterr().err
    assert main(["datasets", "fetch", "prompts.jsonl"]) == 2
    assert "is not a hub dataset" in capsys.readouterr().err
    monkeypatch.setenv("PERFLAB_HF_ENDPOINT", closed_endpoint())
    assert main(["datasets", "fetch", "hf://datasets/team/prompts/x.json"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: hf://datasets/team/prompts/x.json: the hub at http://127.0.0.1:")
