"""Chapter 06 (cell microscopy) executes in the smoke profile and writes its results."""

from nearid.experiments.ch06_cellpaint import FEATURE_SETS
from nearid.paper import TABLE3
from nearid.book.runner import run_chapter


def test_chapter_06_smoke(tmp_path):
    res = run_chapter("06", profile="smoke", out_dir=tmp_path)
    assert set(res["table3"]) == set(TABLE3)
    for gene, r in res["table3"].items():
        for metric in ("auroc", "sparsity"):
            assert set(r[metric]) == set(FEATURE_SETS)
            assert all(0.0 <= v <= 1.0 for v in r[metric].values()), (gene, metric, r[metric])
    assert set(res["table4"]) == set(FEATURE_SETS)
    assert all(0.0 <= v <= 1.0 for v in res["table4"].values())
    assert res["data"] == "simulated"
    assert 0.0 <= res["truth"]["concentration"] <= 1.0
    assert len(res["orderings"]) == 2 * len(TABLE3)
