"""An engine whose log is one endless line: its tail stays within ``MAX_TAIL_BYTES`` and following the
log moves on through the line in pieces instead of stalling or flooding the runner."""

from __future__ import annotations

import sys

from perflab.remote import process as rp
from perflab.transport import Transport
from tests.fixtures.polling import wait_for_text

# Three MiB on one line, then a last line, then it stays up.
FLOOD = (
    "import sys, time\n"
    "sys.stdout.write('x' * (3 * 1024 * 1024) + '\\nlast line\\n'); sys.stdout.flush()\n"
    "time.sleep(60)"
)


def test_the_tail_of_an_endless_line_is_bounded(transport: Transport) -> None:
    process = rp.start_detached(transport, [sys.executable, "-c", FLOOD], run_key="run-6", name="engine")
    try:
        tail = wait_for_text(lambda: rp.tail_log(transport, process), "last line")
        assert tail.endswith("x\nlast line\n") and len(tail.encode()) == rp.MAX_TAIL_BYTES
        offset, pieces = 0, []
        while (chunk := rp.read_log(transport, process, offset, max_bytes=1 << 20)).text:
            pieces.append(len(chunk.text))
            offset = chunk.next_offset
        assert pieces == [1 << 20, 1 << 20, 1 << 20, 1 + len("last line\n")]
    finally:
        rp.stop(transport, process, grace_s=1)
