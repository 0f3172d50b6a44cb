"""Incremental Server-Sent Events parser that returns the ``data`` payload of each complete event.

Events end with a blank line (``\\n\\n`` or ``\\r\\n\\r\\n``). The common case, an event made of one
``data: ...`` line, is handled with a single ``bytes.split`` over the whole buffer and a slice per
event; multi-line events, comments and ``event:``/``id:`` fields take the slower general path.
"""

from __future__ import annotations

from typing import List, Optional


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


class SSEParser:
    """Feed raw body bytes; get back the ``data`` payloads of the events they complete."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, data: bytes) -> List[bytes]:
        buf = self._rest + data if self._rest else data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        blocks = buf.split(b"\n\n")
        self._rest = blocks.pop()
        payloads: List[bytes] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                payloads.append(block[6:])
            elif block:
                payload = _event_data(block)
                if payload is not None:
                    payloads.append(payload)
        return payloads

    @property
    def pending(self) -> bytes:
        """Bytes of an event that has not been terminated yet."""
        return self._rest
