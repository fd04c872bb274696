"""Chapter 01 in smoke: the definitions' illustrations, its verdicts, its exercises."""

import nbformat
from chapter_checks import assert_exercises_ran, assert_matches_reference, assert_verdicts

from nearid.book.runner import run_chapter


def test_chapter_01_smoke(tmp_path, mnist_root):
    res = run_chapter("01", profile="smoke", out_dir=tmp_path)
    assert_matches_reference(tmp_path, "01_definitions")
    assert res["profile"] == "smoke" and res["params"]["dry_run"] is False
    clean = res["rotated_copy_error"]
    assert clean["rigid"] < 1e-8 and clean["linear"] < 1e-8 and clean["permutation"] > 0.05
    assert set(res["ica_amari"]) == {"laplace", "uniform"}
    # smoke has no Gaussian sources: only the sample-size claim is decided
    assert set(res["verdicts"]) == {"ica_unmixes_with_n"}
    assert_verdicts(res["verdicts"], sections={"ch01-verdict"})
    assert_exercises_ran(tmp_path / "01_definitions.ipynb")


def test_chapter_01_dry_run_subsamples(tmp_path, mnist_root):
    res = run_chapter("01", profile="smoke", overrides={"dry_run": True}, out_dir=tmp_path)
    assert res["params"]["dry_run"] is True
    nb = nbformat.read(tmp_path / "01_definitions.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "DRY RUN" in text
