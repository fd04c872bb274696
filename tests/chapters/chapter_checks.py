"""Checks every chapter test makes on an executed chapter: its verdict records follow the
contract the summary page reads, and every exercise's solution cell ran without error."""

from __future__ import annotations

from pathlib import Path

import nbformat

from nearid.book import reference
from nearid.book.results import VERDICT_KEYS
from nearid.verdicts import VERDICTS

ROOT = Path(__file__).resolve().parents[2]

CONTRACT = set(VERDICT_KEYS) | {"threshold", "ours_label"}


def solution_cells(nb) -> tuple[int, list[list]]:
    """(number of exercises, the code cells of each solution: those between its
    solution-start and its solution-end)."""
    exercises, inside, groups = 0, False, []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            exercises += cell.source.count("```{exercise}")
            start, end = cell.source.rfind("{solution-start}"), cell.source.rfind("{solution-end}")
            if start != end:  # the later marker decides (one cell may end a solution and start the next)
                if start > end:
                    groups.append([])
                inside = start > end
        elif inside:
            groups[-1].append(cell)
    return exercises, groups


def assert_exercises_ran(notebook: str | Path, minimum: int = 3) -> int:
    """At least ``minimum`` exercises, each with a solution whose code cells all executed
    and raised nothing, and that shows the reader something (a table, a figure, a printout;
    a cell that only computes, with its output in a hidden cell after it, is fine); returns
    the number of exercises."""
    nb = nbformat.read(notebook, as_version=4)
    exercises, groups = solution_cells(nb)
    assert exercises >= minimum, f"{exercises} exercises"
    assert len(groups) == exercises, f"{len(groups)} solutions for {exercises} exercises"
    for cells in groups:
        for cell in cells:
            assert cell.execution_count is not None, cell.source[:80]
            assert not any(o.output_type == "error" for o in cell.outputs), cell.source[:80]
        shown = [c for c in cells if "remove-cell" not in c.metadata.get("tags", [])]
        assert any(c.outputs for c in shown), f"a solution shows its result: {cells[0].source[:80] if cells else ''}"
    return exercises


def assert_verdicts(verdicts: dict, sections: set[str] | None = None) -> None:
    """Every record has the contract's keys, a valid verdict and an estimate inside its interval."""
    assert verdicts, "no verdicts"
    for claim_id, rec in verdicts.items():
        assert CONTRACT <= set(rec), (claim_id, CONTRACT - set(rec))
        assert rec["verdict"] in VERDICTS, claim_id
        if rec["low"] is not None and rec["high"] is not None and rec["estimate"] is not None:
            assert rec["low"] <= rec["estimate"] <= rec["high"], claim_id
        if sections is not None:
            assert rec["section"] in sections, (claim_id, rec["section"])


def assert_matches_reference(out_dir: str | Path, chapter: str, profile: str = "smoke") -> None:
    """The chapter's JSON in ``out_dir`` equals the committed reference of ``profile``
    (``book/reference/<profile>/``), every number and verdict: ``nearid verify`` for one chapter.
    A change that moves numbers on purpose rewrites the reference (``nearid verify --update``)."""
    report = reference.verify(Path(out_dir), reference.reference_dir(ROOT, profile), profile, chapters=[chapter])
    assert report.ok, report.text(limit=40)
