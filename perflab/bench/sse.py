"""Incremental Server-Sent Events parser that returns the ``data`` payload of each complete event.

Events end with a blank line (``\\n\\n`` or ``\\r\\n\\r\\n``). The common case, a read holding whole
events made of one ``data: ...`` line, is handled with a single ``bytes.split`` over the read and a
slice per event; multi-line events, comments and ``event:``/``id:`` fields take the slower general
path. An event spread over many reads is collected in a ``bytearray`` and only the bytes added since
the last look are searched for its end, so the work stays linear in the bytes read however large one
event is; an event that grows past ``max_event_bytes`` raises ``EventTooLarge``.
"""

from __future__ import annotations

from typing import List, Optional

# One event's bound: vLLM's largest chunks (a final chunk with logprobs) are well under a megabyte.
MAX_EVENT_BYTES = 8 * 1024 * 1024
# Raw byte patterns that end an event once "\r\n" is read as "\n": "\n\n" and "\n\r\n".
_ENDS = (b"\n\n", b"\n\r\n")


class EventTooLarge(ValueError):
    """One event grew past the parser's bound before it ended."""


def _event_data(block: bytes) -> Optional[bytes]:
    """The joined ``data`` lines of one event, or None when it has none (comments, keep-alives)."""
    data_lines: List[bytes] = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            data_lines.append(value[1:] if value.startswith(b" ") else value)
    if not data_lines:
        return None
    return b"\n".join(data_lines)


def _has_end(buf: bytes | bytearray, start: int) -> bool:
    return any(buf.find(end, start) >= 0 for end in _ENDS)


class SSEParser:
    """Feed raw body bytes; get back the ``data`` payloads of the events they complete."""

    __slots__ = ("_rest", "_scanned", "max_event_bytes")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._rest = bytearray()
        self._scanned = 0
        self.max_event_bytes = max_event_bytes

    def feed(self, data: bytes) -> List[bytes]:
        rest = self._rest
        if rest:
            rest += data
            # An end may straddle the previous read: look again from the last bytes already seen.
            if not _has_end(rest, max(self._scanned - 2, 0)):
                self._scanned = len(rest)
                self._check(len(rest))
                return []
            buf = bytes(rest)
        elif _has_end(data, 0):
            buf = data
        else:
            rest += data
            self._scanned = len(rest)
            self._check(len(rest))
            return []
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        blocks = buf.split(b"\n\n")
        tail = blocks.pop()
        self._rest = bytearray(tail)
        self._scanned = len(tail)
        self._check(len(tail))
        payloads: List[bytes] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                payloads.append(block[6:])
            elif block:
                payload = _event_data(block)
                if payload is not None:
                    payloads.append(payload)
        return payloads

    def _check(self, size: int) -> None:
        if size > self.max_event_bytes:
            raise EventTooLarge(
                f"one SSE event exceeded {self.max_event_bytes // (1024 * 1024)} MiB without ending"
            )

    @property
    def pending(self) -> bytes:
        """Bytes of an event that has not been terminated yet."""
        return bytes(self._rest)
