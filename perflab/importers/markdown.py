"""The structure of a seed-style markdown document: code fences, headings and admonitions.

Seed write-ups put serving commands and benchmark blocks in ```` ``` ```` fences under headings and
``??? info "…"`` admonitions. Some copies of them lost their line breaks (the whole document on a
few lines), so nothing here depends on a construct starting a line, except where noted.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Protocol, TypeVar

_FENCE = re.compile(r"```")
_LANGUAGE = re.compile(r"[A-Za-z0-9_+.-]*(?=\s)")
_ADMONITION = re.compile(r"(?:\?\?\?\+?|!!!)[ \t]*[A-Za-z]+[ \t]+\"([^\"\n]*)\"")
_HEADING = re.compile(
    r"(?:^|(?<=\s))#{1,6}[ \t]+([^\n#`]+?)(?=\s+(?:-\s|\?\?\?|!!!|```|#{1,6}\s)|[ \t]*$)", re.MULTILINE
)


@dataclass(frozen=True)
class Fence:
    """A fenced code block: ``start``/``end`` span the fences, ``content`` lies between them."""

    start: int
    end: int
    content_start: int
    content_end: int

    def contains(self, offset: int) -> bool:
        return self.start <= offset < self.end


@dataclass(frozen=True)
class Marker:
    """A heading or an admonition: its offset and its text (an admonition's quoted title)."""

    offset: int
    text: str


class Document:
    """A text with its fences, headings, admonitions and a line-number lookup."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts = [0] + [match.end() for match in re.finditer(r"\n", text)]
        self.fences = self._find_fences()
        self._fence_starts = [fence.start for fence in self.fences]
        self.headings = [
            Marker(match.start(), " ".join(match.group(1).split()))
            for match in _HEADING.finditer(text)
            if self.fences and not self.in_fence(match.start())
        ]
        self.admonitions = [
            Marker(match.start(), match.group(1).strip())
            for match in _ADMONITION.finditer(text)
            if not self.in_fence(match.start())
        ]

    def _find_fences(self) -> list[Fence]:
        marks = [match.start() for match in _FENCE.finditer(self.text)]
        fences = []
        for index in range(0, len(marks), 2):
            start = marks[index]
            language = _LANGUAGE.match(self.text, start + 3)
            content_start = language.end() if language else start + 3
            if index + 1 < len(marks):
                fences.append(Fence(start, marks[index + 1] + 3, content_start, marks[index + 1]))
            else:
                fences.append(Fence(start, len(self.text), content_start, len(self.text)))
        return fences

    def line_of(self, offset: int) -> int:
        """The 1-based line number of ``offset``."""
        return bisect.bisect_right(self._line_starts, offset)

    def in_fence(self, offset: int) -> bool:
        return self.fence_at(offset) is not None

    def fence_at(self, offset: int) -> Fence | None:
        """The fence whose span holds ``offset``, or None."""
        index = bisect.bisect_right(self._fence_starts, offset) - 1
        if index >= 0 and self.fences[index].contains(offset):
            return self.fences[index]
        return None

    def fence_content(self, fence: Fence) -> str:
        return self.text[fence.content_start : fence.content_end]

    def heading_before(self, offset: int) -> Marker | None:
        """The last heading that starts before ``offset``."""
        return last_before(self.headings, offset)

    def admonitions_between(self, start: int, end: int) -> list[Marker]:
        return [marker for marker in self.admonitions if start <= marker.offset < end]

    def line_before(self, offset: int) -> str:
        """The last non-empty line that ends before ``offset``, stripped ('' if none)."""
        preceding = self.text[:offset].rstrip()
        return preceding[preceding.rfind("\n") + 1 :].strip()


class HasOffset(Protocol):
    offset: int


OffsetT = TypeVar("OffsetT", bound=HasOffset)


def last_before(items: list[OffsetT], offset: int) -> OffsetT | None:
    """The last of ``items`` (sorted by offset) that starts before ``offset``."""
    found = None
    for item in items:
        if item.offset >= offset:
            break
        found = item
    return found
