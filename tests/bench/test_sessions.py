"""Sessions against a real HTTP server whose replies are known: every turn carries the history with
the server's real replies, turns of a session go one after another to one server, and the result has
TTFT by turn index and the sessions' own figures."""

from __future__ import annotations

import pytest

from perflab.bench import BenchOptions, run_benchmark
from perflab.bench.datasets import SharedPrefixSpec
from perflab.bench.errors import BenchError
from tests.fixtures.streaming_server import Script

FIRST_TTFT_S = 0.1
LATER_TTFT_S = 0.02


def replies(index: int, body: dict) -> Script:
    """A reply of its own for every request; the first turn of a session is slower to start."""
    first = len(body["messages"]) == 1
    return Script(ttft_s=FIRST_TTFT_S if first else LATER_TTFT_S, itl_s=0.001, token_text=f" r{index}w")


def records_of_turn(result: dict, turn: int) -> list[dict]:
    return [record for record in result["requests"] if record["turn"] == turn]


def options(base_urls: list[str], **fields: object) -> BenchOptions:
    values: dict = {
        "base_urls": base_urls,
        "model": "scripted-model",
        "dataset": "generated-shared-prefix",
        "shared_prefix": SharedPrefixSpec(num_groups=2, system_prompt_len=24, question_len=6, num_turns=2),
        "output_len": 4,
        "num_prompts": 6,
        "progress": "none",
        **fields,
    }
    return BenchOptions(**values)


def test_the_second_turn_carries_the_first_turns_real_reply(scripted_server) -> None:
    server = scripted_server(replies)
    result = run_benchmark(options([server.base_url], max_concurrency=3))
    served = server.completions
    assert len(served) == 12 and result["completed"] == 12
    first_turns = {
        s.body["messages"][0]["content"]: index
        for index, s in enumerate(served)
        if len(s.body["messages"]) == 1
    }
    for later in (s for s in served if len(s.body["messages"]) == 3):
        question, answer, follow_up = later.body["messages"]
        assert (question["role"], answer["role"], follow_up["role"]) == ("user", "assistant", "user")
        replied_by = first_turns[question["content"]]
        assert answer["content"] == f" r{replied_by}w" * 4  # what the server streamed, word for word
        assert "\n\n" in question["content"] and "\n\n" not in follow_up["content"]
    by_turn = result["ttft_by_turn_ms"]
    assert [row["turn"] for row in by_turn] == [0, 1] and [row["requests"] for row in by_turn] == [6, 6]
    for row in by_turn:
        ttfts = [record["ttft_ms"] for record in records_of_turn(result, row["turn"])]
        # each record keeps its TTFT to 0.1 µs, so the mean of the records is the turn's to within that
        assert row["mean_ttft_ms"] == pytest.approx(sum(ttfts) / len(ttfts), abs=1e-4)
    # 100 ms injected on first turns, 20 after: each first turn took at least its 100 ms
    assert all(record["ttft_ms"] >= 1000 * FIRST_TTFT_S for record in records_of_turn(result, 0))
    assert all(record["ttft_ms"] >= 1000 * LATER_TTFT_S for record in records_of_turn(result, 1))
    sessions = result["sessions"]
    assert (sessions["count"], sessions["completed"], sessions["mean_turns"]) == (6, 6, 2.0)
    assert sessions["duration_ms"]["mean"] > by_turn[0]["mean_ttft_ms"]
    records = result["requests"]
    assert sorted((record["session"], record["turn"]) for record in records) == [
        (session, turn) for session in range(6) for turn in (0, 1)
    ]
    assert result["dataset"]["shared_prefix"]["num_turns"] == 2
    assert result["bench_args"][result["bench_args"].index("--gsp-num-turns") + 1] == "2"


def test_sessions_in_flight_stay_under_the_cap_and_turns_follow_each_other(scripted_server) -> None:
    server = scripted_server(replies)
    result = run_benchmark(options([server.base_url], max_concurrency=2, turn_delay_mean_ms=50.0))
    records = result["requests"]
    spans: dict[int, list[tuple[float, float]]] = {}
    for record in records:
        end = record["start_s"] + record["e2el_ms"] / 1000.0
        spans.setdefault(record["session"], []).append((record["start_s"], end))
    for turns in spans.values():
        (first_start, first_end), (second_start, _) = sorted(turns)
        assert second_start >= first_end + 0.05  # the think time, after the reply
    sessions = sorted(
        (min(start for start, _ in turns), max(end for _, end in turns)) for turns in spans.values()
    )
    for start, _ in sessions:
        assert sum(1 for other_start, other_end in sessions if other_start <= start < other_end) <= 2


def test_each_session_keeps_to_one_server(scripted_server) -> None:
    first, second = scripted_server(replies), scripted_server(replies)
    result = run_benchmark(options([first.base_url, second.base_url], num_prompts=4))
    servers: dict[int, set[str]] = {}
    for record in result["requests"]:
        servers.setdefault(record["session"], set()).add(record["base_url"])
    assert all(len(urls) == 1 for urls in servers.values())
    assert {next(iter(urls)) for urls in servers.values()} == {first.base_url, second.base_url}
    assert len(first.completions) == len(second.completions) == 4


def test_a_failed_turn_ends_its_session_and_session_goodput_counts_whole_sessions(scripted_server) -> None:
    def failing(index: int, body: dict) -> Script:
        # one session at a time: the first two sessions fail at their first turn
        return Script(status=500) if index in (0, 1) else Script(token_text=" ok")

    server = scripted_server(failing)
    result = run_benchmark(options([server.base_url], max_concurrency=1, goodput={"ttft": 60000.0}))
    sessions = result["sessions"]
    assert (sessions["count"], sessions["completed"]) == (6, 4)
    failed = [record for record in result["requests"] if not record["success"]]
    assert len(failed) == 2 and all(record["turn"] == 0 for record in failed)
    assert {record["session"] for record in failed}.isdisjoint(
        record["session"] for record in result["requests"] if record["turn"] == 1
    )
    assert sessions["goodput"] == pytest.approx(4 / result["duration"])


def test_sessions_need_the_chat_endpoint() -> None:
    with pytest.raises(BenchError, match="needs the chat endpoint"):
        options(["http://127.0.0.1:1"], endpoint="completions").validate()
