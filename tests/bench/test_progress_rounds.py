"""The bench's progress lines of a benchmark in rounds: after a round's first line, none says every
request ended until the round's own last line says what follows (a reader takes ``done`` = ``total``
with ``next`` false for the end of the benchmark)."""

from __future__ import annotations

import asyncio
import io
import json

from perflab.bench.progress import PROGRESS_PREFIX, Progress


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line.removeprefix(PROGRESS_PREFIX)) for line in stream.getvalue().splitlines()]


def test_no_line_falls_between_a_rounds_last_request_and_what_follows_it() -> None:
    async def one_round() -> list[dict]:
        stream = io.StringIO()
        progress = Progress(0, "json", stream, floor={"min_duration_s": 1.0, "min_requests": 4})
        progress.begin_round(1, 2)
        progress.start()
        progress.sent()
        progress.finished(True, 0.1)
        for _ in range(100):  # a tick with a request of the round still to come: reported
            await asyncio.sleep(0.1)
            if len(_lines(stream)) > 1:
                break
        progress.sent()
        progress.finished(True, 0.1)
        await asyncio.sleep(2.5)  # ticks once every request of the round ended: not reported
        await progress.stop()
        progress.end_round(True, 1.0, 2, 0.0)
        return _lines(stream)

    lines = asyncio.run(one_round())
    counts = [(line["done"], line["total"], line["rounds"]["next"]) for line in lines]
    assert counts == [(0, 2, False), (1, 2, False), (2, 2, True)]
