import json

import nbformat
import pytest
from chapter_checks import assert_exercises_ran, assert_matches_reference, assert_verdicts

from nearid.book.runner import run_chapter

CLAIMS = {"error_falls_with_delta", "ae_ica_recovers_axes", "ica_aligns_seeds", "seeds_differ_by_rotation"}


@pytest.fixture
def task_cache(tmp_path, monkeypatch):
    """A task cache of the test's own, so that no run reuses another test's models."""
    monkeypatch.setenv("NEARID_TASK_CACHE", str(tmp_path / "tasks"))
    return tmp_path / "tasks"


def test_chapter_02_smoke(tmp_path, mnist_root, task_cache):
    res = run_chapter("02", profile="smoke", out_dir=tmp_path, force=True)
    assert_matches_reference(tmp_path, "02_isometric_dgp")
    deltas = {"0.0", "0.5"}
    assert set(res["mcc"]) == {"ae", "ae_ica"}
    assert set(res["mcc"]["ae_ica"]) == deltas
    assert set(res["error_between_seeds"]) == {"permutation", "rigid", "linear", "ica"}
    for family in res["error_between_seeds"].values():
        assert set(family) == deltas and all(0 <= v < 2 for v in family.values())
    assert all(0 <= v <= 1 for v in res["mcc"]["ae_ica"].values())
    assert res["bilipschitz"]["0.0"] == 1.0 and res["bilipschitz"]["0.5"] > 1.0
    assert res["sources"] == "uniform"
    assert set(res["verdicts"]) == CLAIMS
    assert_verdicts({**res["verdicts"], **res["hypotheses"]}, sections={"ch02-verdict", "ch02-weight-decay"})
    assert res["verdicts"]["ica_aligns_seeds"]["n"] == 150  # the evaluation half of 300 held-out inputs
    assert res["verdicts"]["ae_ica_recovers_axes"]["n"] == 2  # seeds
    assert res["verdicts"]["error_falls_with_delta"]["n"] == 4  # models
    assert_exercises_ran(tmp_path / "02_isometric_dgp.ipynb")
    nb = nbformat.read(tmp_path / "02_isometric_dgp.ipynb", as_version=4)
    assert sum(bool(c.metadata.get("mystnb", {}).get("figure", {}).get("name")) for c in nb.cells) == 5
    # the run_tasks summary (4 sweep models, 2 without weight decay, the blob model, 2 extra seeds
    # for the seed trend) goes to the terminal, not the page (nearid.tasks.runner_log)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "tasks: 0 reused" not in text
    assert {r["seeds"] for r in res["seed_trend"]} == {2, 3}


def test_chapter_02_is_deterministic(tmp_path, mnist_root, monkeypatch):
    """Same seed and profile, two fresh kernels, recomputed tasks: identical numbers."""
    runs = []
    for name in ("a", "b"):
        monkeypatch.setenv("NEARID_TASK_CACHE", str(tmp_path / name / "tasks"))
        runs.append(run_chapter("02", profile="smoke", out_dir=tmp_path / name, force=True))
    assert json.dumps(runs[0], sort_keys=True) == json.dumps(runs[1], sort_keys=True)

