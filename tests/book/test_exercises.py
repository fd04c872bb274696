"""Every exercise of the chapters has a title and a solution, and every solution states its
result: its reading (the markdown between ``{solution-start}`` and ``{solution-end}``) pastes
at least one value that the solution's own code cells glue. A solution that ends on a table
or a printout, and leaves the reader to find the answer, fails here.

Checked on the notebook sources (jupytext), without running anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import pytest

from nearid.book.pages import glued_keys

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("0[1-6]_*.py"))

_START = re.compile(r"^[`:]{3,}\{solution-start\}\s+(\S+)", re.M)
_END = re.compile(r"^[`:]{3,}\{solution-end\}", re.M)
_EXERCISE = re.compile(r"^[`:]{3,}\{exercise\}(.*)$", re.M)
_LABEL = re.compile(r"^:label:\s*(\S+)", re.M)
# glue("key", ...), glue(f"key_{x}", ...), glue_verdict("key", ...), glue_tally("prefix", ...)
_GLUE_CALL = re.compile(r"\bglue(_verdict|_tally)?\(\s*(f?)(['\"])(.*?)\3")


@dataclass
class Solution:
    """One solution: its label, its markdown and the keys its code cells glue (as regexes)."""

    label: str
    markdown: list[str] = field(default_factory=list)
    glued: list[re.Pattern] = field(default_factory=list)

    def pasted(self) -> set[str]:
        return glued_keys("\n".join(self.markdown))

    def states_its_result(self) -> bool:
        return any(p.fullmatch(key) for key in self.pasted() for p in self.glued)


def glue_patterns(code: str) -> list[re.Pattern]:
    """The keys a code cell glues, as patterns: an f-string's fields match any text, and
    ``glue_verdict`` / ``glue_tally`` glue several keys under their first argument."""
    out = []
    for kind, is_f, _, key in _GLUE_CALL.findall(code):
        parts = re.split(r"\{[^}]*\}", key) if is_f else [key]
        pattern = ".+".join(re.escape(p) for p in parts)
        out.append(re.compile(pattern + ("_.+" if kind else "")))
    return out


def solutions(source: str) -> tuple[list[tuple[str, str]], list[Solution]]:
    """(exercises as (label, title), solutions in order) of a py:percent notebook's text."""
    nb = jupytext.reads(source, fmt="py:percent")
    exercises, found, current = [], [], None
    for cell in nb.cells:
        if cell.cell_type == "code":
            if current is not None:
                current.glued += glue_patterns(cell.source)
            continue
        text = cell.source
        for m in _EXERCISE.finditer(text):
            label = _LABEL.search(text, m.end())
            exercises.append((label.group(1) if label else "", m.group(1).strip()))
        # walk the markers of this cell in order: text inside a solution is its reading
        pos = 0
        marks = sorted([(m.start(), m.end(), m.group(1)) for m in _START.finditer(text)]
                       + [(m.start(), m.end(), None) for m in _END.finditer(text)])
        for start, end, label in marks:
            if current is not None:
                current.markdown.append(text[pos:start])
            if label is None:
                current = None
            else:
                current = Solution(label)
                found.append(current)
            pos = end
        if current is not None:
            current.markdown.append(text[pos:])
    return exercises, found


def problems(source: str) -> list[str]:
    """What is wrong with the exercises of one notebook's text, in words (empty: nothing)."""
    exercises, found = solutions(source)
    out = [f"exercise {label or '?'} has no title" for label, title in exercises if not title]
    solved = {s.label for s in found}
    out += [f"exercise {label} has no solution" for label, _ in exercises if label not in solved]
    for s in found:
        if not s.glued:
            out.append(f"solution {s.label}: its code glues nothing")
        elif not s.states_its_result():
            out.append(f"solution {s.label}: its reading pastes none of the values its code glues "
                       f"(pastes {sorted(s.pasted()) or 'nothing'})")
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_solution_states_its_glued_result(path):
    exercises, found = solutions(path.read_text())
    assert exercises and len(found) == len(exercises), (len(exercises), len(found))
    assert problems(path.read_text()) == []


SYNTHETIC = '''
# %% [markdown]
# ```{exercise} A question
# :label: ex-q
#
# What is x?
# ```
#
# ```{solution-start} ex-q
# :class: dropdown
# ```

# %%
x = 2
glue(f"x_{x}", x)
glue("shown", x)
x

# %% [markdown]
# READING
#
# ```{solution-end}
# ```
'''


@pytest.mark.parametrize("reading, ok", [
    ("The answer is {glue:text}`shown`.", True),
    ("The answer is {glue:text}`x_2:.1f`.", True),  # an f-string key
    ("The table above gives the answer.", False),  # states nothing
    ("Compare with {glue:text}`elsewhere`.", False),  # a value the solution did not glue
])
def test_the_check_fails_on_a_solution_that_does_not_state_its_result(reading, ok):
    assert (problems(SYNTHETIC.replace("READING", reading)) == []) is ok


def test_the_check_wants_a_title_and_a_solution():
    untitled = SYNTHETIC.replace("{exercise} A question", "{exercise}").replace("READING", "{glue:text}`shown`")
    assert problems(untitled) == ["exercise ex-q has no title"]
    unsolved = SYNTHETIC.split("# ```{solution-start}")[0]
    assert problems(unsolved) == ["exercise ex-q has no solution"]


def test_glue_patterns_read_every_form():
    code = 'glue("a", 1)\nglue(f"b_{k}_c", 2)\nglue_verdict("v", x)\nglue_tally(\'t\', d)'
    patterns = glue_patterns(code)
    assert [bool(p.fullmatch(k)) for p, k in zip(patterns, ["a", "b_x_c", "v_estimate", "t_holds_text"])] == [True] * 4
    assert not patterns[0].fullmatch("ab")


HIDDEN = {"remove-cell", "remove-input"}


def shown_glue_calls(source: str) -> list[str]:
    """The first line of every code cell a reader sees (not tagged remove-cell or
    remove-input) that calls ``glue``: bookkeeping that belongs in a hidden cell after it."""
    nb = jupytext.reads(source, fmt="py:percent")
    return [cell.source.strip().splitlines()[0] for cell in nb.cells
            if cell.cell_type == "code" and not HIDDEN & set(cell.metadata.get("tags", []))
            and _GLUE_CALL.search(cell.source)]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_cell_a_reader_sees_calls_glue(path):
    assert shown_glue_calls(path.read_text()) == []


def test_the_glue_check_sees_a_shown_call_and_not_a_hidden_one():
    shown = SYNTHETIC.replace("x = 2\n", "x = 2  # shown\n")
    assert shown_glue_calls(shown) == ["x = 2  # shown"]
    hidden = SYNTHETIC.replace("# %%\nx = 2", '# %% tags=["remove-cell"]\nx = 2')
    assert shown_glue_calls(hidden) == []
