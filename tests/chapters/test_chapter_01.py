import nbformat

from nearid.book.runner import run_chapter
from nearid.verdicts import VERDICTS

CONTRACT = {"claim", "estimate", "low", "high", "verdict", "n", "method", "threshold", "paper", "section",
            "ours_label"}


def solution_cells(nb) -> tuple[int, list]:
    """(number of exercises, code cells inside solution-start ... solution-end dropdowns)."""
    exercises, inside, cells = 0, False, []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            exercises += cell.source.count("```{exercise}")
            start, end = cell.source.rfind("{solution-start}"), cell.source.rfind("{solution-end}")
            if start != end:  # the later marker decides (one cell may end a solution and start the next)
                inside = start > end
        elif inside:
            cells.append(cell)
    return exercises, cells


def test_chapter_01_smoke(tmp_path, mnist_root):
    res = run_chapter("01", profile="smoke", out_dir=tmp_path)
    assert res["profile"] == "smoke" and res["params"]["dry_run"] is False
    clean = res["rotated_copy_error"]
    assert clean["rigid"] < 1e-8 and clean["linear"] < 1e-8 and clean["permutation"] > 0.05
    assert set(res["ica_amari"]) == {"laplace", "uniform"}
    # smoke has no Gaussian sources: only the sample-size claim is decided
    assert set(res["verdicts"]) == {"ica_unmixes_with_n"}
    for rec in res["verdicts"].values():
        assert CONTRACT <= set(rec) and rec["verdict"] in VERDICTS
        assert rec["section"] == "ch01-verdict" and rec["low"] <= rec["estimate"] <= rec["high"]
    nb = nbformat.read(tmp_path / "01_definitions.ipynb", as_version=4)
    exercises, cells = solution_cells(nb)
    assert exercises >= 3 and len(cells) >= 3
    for cell in cells:  # every solution executed, without error, and showed something
        assert cell.execution_count is not None
        assert cell.outputs and not any(o.output_type == "error" for o in cell.outputs)


def test_chapter_01_dry_run_subsamples(tmp_path, mnist_root):
    res = run_chapter("01", profile="smoke", overrides={"dry_run": True}, out_dir=tmp_path)
    assert res["params"]["dry_run"] is True
    nb = nbformat.read(tmp_path / "01_definitions.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "DRY RUN" in text
