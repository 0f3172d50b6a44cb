"""User text (study, stage and run names, goals, labels, notes) made inert inside markdown.

Reports and tables are markdown that pages draw with HTML allowed (their coloured spans are HTML), so
a name is escaped before it goes in: ``<``, ``>`` and ``&`` become HTML entities (no tag, no
autolink), the characters that make links, images, code and table cells (``[ ] ` | \\``) are
backslash-escaped, as are the ``:`` of ``://``, the ``.`` of ``www.`` and ``@`` (so GitHub-flavoured
markdown finds no bare URL or address to link), and line breaks become spaces (no new block). ``fence`` picks a code fence longer
than any backtick run in the text it encloses, so a command cannot close its block early.
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
_AUTOLINK_STARTS = re.compile(r"(?i)(?<=[a-z])(:)(?=//)|(?<=www)(\.)|(@)")


def md_text(text: object) -> str:
    """``text`` as markdown that shows it literally, on one line."""
    return _AUTOLINK_STARTS.sub(r"\\\g<0>", str(text).translate(_ESCAPES))


def fence(text: str) -> str:
    """A backtick fence (three or more) longer than any run of backticks in ``text``."""
    longest = max((len(run) for run in _BACKTICK_RUNS.findall(text)), default=0)
    return "`" * max(3, longest + 1)
