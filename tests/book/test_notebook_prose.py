"""The chapters' prose renders as written: no line of a paragraph starts a list by accident.

In Markdown a line that begins with "+ ", "- " or "* " starts a bullet even in the middle of a
paragraph, so a sentence wrapped just before "+ ICA" ("whitening\\n+ ICA") shows "ICA" as a
list item. Intended lists start after a blank line (or continue one).
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*_*.py"))
_ITEM = re.compile(r"^([-+*]|\d+[.)])(\s|$)")


def accidental_items(markdown: str) -> list[str]:
    """Lines that start a list item in the middle of a paragraph."""
    found, in_list, previous = [], False, ""
    for line in markdown.splitlines():
        if not line.strip():
            previous = ""
            continue
        if _ITEM.match(line):
            if previous and not in_list:
                found.append(line)
            in_list = True
        elif not line[0].isspace() and not previous:  # a new paragraph ends the list
            in_list = False
        previous = line
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_paragraph_line_starts_a_list(path):
    nb = jupytext.read(path)
    found = [line for cell in nb.cells if cell.cell_type == "markdown" for line in accidental_items(cell.source)]
    assert found == []


@pytest.mark.parametrize("text, found", [
    ("then whitening\n+ ICA recovers the axes.", ["+ ICA recovers the axes."]),
    ("for AE\n- the code", ["- the code"]),
    ("A list:\n\n- one\n- two\n  wrapped\n- three", []),
    ("Verdicts:\n\n1. first\n   more\n2. second\n\nA paragraph\nafter it.", []),
])
def test_accidental_items(text, found):
    assert accidental_items(text) == found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_cell_marker_starts_a_cell(path):
    """A code fence in a markdown cell that never closes (a fence line with a backtick in its
    caption is no fence, so the next ``` opens one) makes jupytext swallow the cells after it."""
    markers = len(re.findall(r"^# %%", path.read_text(), re.M))
    assert len(jupytext.read(path).cells) == markers
