"""User text (study, stage and run names, goals, labels, notes) made inert inside markdown.

Reports and tables are markdown that pages draw with HTML allowed (their coloured spans are HTML), so
a name is escaped before it goes in: ``<``, ``>`` and ``&`` become HTML entities (no tag, no
autolink), the characters that make links, images, code and table cells (``[ ] ` | \\``) are
backslash-escaped, an invisible word joiner (U+2060) goes before the ``//`` of ``scheme://``, the
``.`` of ``www.`` and an ``@`` (GitHub-flavoured markdown links bare URLs and addresses after escapes
are read, so only a character between their parts stops it), and line breaks become spaces. ``fence``
picks a code fence longer than any backtick run in the text it encloses, so a command cannot close its
block early.
"""

from __future__ import annotations

import re

_ESCAPES = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "\\": "\\\\",
        "`": "\\`",
        "[": "\\[",
        "]": "\\]",
        "|": "\\|",
        "\n": " ",
        "\r": " ",
    }
)
_BACKTICK_RUNS = re.compile(r"`+")
# What GitHub-flavoured markdown turns into a link by itself: ``scheme://``, ``www.``, ``a@b.c``.
_AUTOLINK_PARTS = re.compile(r"(?i)(?<=[a-z]:)(?=//)|(?<=www)(?=\.)|(?=@)")
WORD_JOINER = "\u2060"


def md_text(text: object) -> str:
    """``text`` as markdown that shows it literally, on one line."""
    return _AUTOLINK_PARTS.sub(WORD_JOINER, str(text).translate(_ESCAPES))


def fence(text: str) -> str:
    """A backtick fence (three or more) longer than any run of backticks in ``text``."""
    longest = max((len(run) for run in _BACKTICK_RUNS.findall(text)), default=0)
    return "`" * max(3, longest + 1)
