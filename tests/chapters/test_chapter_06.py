"""Chapter 06 (cell microscopy) executes in the smoke profile, writes its results with verdicts
and the paper comparison, and runs every exercise's solution."""

import pytest
from chapter_checks import assert_exercises_ran, assert_matches_reference, assert_verdicts

from nearid.book import profiles
from nearid.book.params import InvalidParameterError
from nearid.book.results import COMPARISON_KEYS
from nearid.book.runner import run_chapter
from nearid.experiments.ch06_cell_microscopy import FEATURE_SETS, TABLE3_CLAIMS, TABLE4_CLAIMS
from nearid.paper import TABLE3


@pytest.mark.chapter
def test_chapter_06_smoke(tmp_path):
    res = run_chapter("06", profile="smoke", out_dir=tmp_path)
    assert_matches_reference(tmp_path, "06_cell_microscopy")
    assert set(res["table3"]) == set(TABLE3)
    for gene, r in res["table3"].items():
        for metric in ("auroc", "sparsity"):
            assert set(r[metric]) == set(FEATURE_SETS)
            assert all(0.0 <= v <= 1.0 for v in r[metric].values()), (gene, metric, r[metric])
    assert set(res["table4"]) == set(FEATURE_SETS) == set(res["table4_share"])
    assert all(0.0 <= v <= 1.0 for v in res["table4"].values())
    assert all(0.25 <= v <= 1.0 for v in res["table4_share"].values())
    assert res["data"] == "simulated" and res["dry_run"] is False
    assert 0.0 <= res["truth"]["concentration"] <= 1.0
    # the declared number of components, capped by the control wells' rows
    k = res["n_components"]["pca"]
    assert res["n_components"]["pca_ica"] == res["n_components"]["pca_rand"] == k
    assert 1 <= k <= 30 // res["params"]["rows_per_component"]
    # verdicts: every claim, with the contract's keys, decided three ways
    assert set(res["verdicts"]) == set(TABLE3_CLAIMS) | set(TABLE4_CLAIMS)
    assert_verdicts(res["verdicts"], sections={"ch06-verdict", "ch06-table4"})
    assert all(isinstance(rec["paper"], float) for rec in res["verdicts"].values())
    # paper comparison: every number of Tables 3 and 4
    comp = res["paper_comparison"]
    assert len(comp) == len(TABLE3) * 2 * 4 + 4
    assert {c["table"] for c in comp} == {"Table 3", "Table 4"}
    assert all(set(COMPARISON_KEYS) <= set(c) for c in comp)
    # the sensitivity sweep ran over the declared grid, the last setting capped by the
    # embeddings' numerical rank (at most their 16 dimensions; 15 with the portable kernels)
    ks = sorted({r["n_components"] for r in res["component_sweep"]})
    assert ks[:2] == [4, 8] and 8 < ks[-1] <= 16 and len(ks) == 3
    assert {r["claim"] for r in res["component_sweep_intervals"]} == {
        c for c, v in TABLE3_CLAIMS.items() if "base" not in v[1:3]}
    # the scale trend decided every claim again at each MAE training budget
    assert {r["epochs"] for r in res["scale_trend"]} == {1, 2}
    assert {r["claim"] for r in res["scale_trend"]} == set(res["verdicts"])
    assert_exercises_ran(tmp_path / "06_cell_microscopy.ipynb")


def test_component_rule_parameter():
    # a fixed number, a quarter of the embedding's width (issue 35; the 0.95 rule kept 4 of 64)
    assert profiles.resolve("06", "quick")["ica_components"] == 16 == profiles.resolve("06", "quick")["embed_dim"] // 4
    assert profiles.resolve("06", "full")["ica_components"] == 48 == profiles.resolve("06", "full")["embed_dim"] // 4
    assert profiles.resolve("06", "quick", {"ica_components": "all"})["ica_components"] == "all"
    assert profiles.resolve("06", "quick", {"ica_components": 12})["ica_components"] == 12
    for bad in (0, 1.5, "most", True, -3):
        with pytest.raises(InvalidParameterError, match="ica_components"):
            profiles.resolve("06", "quick", {"ica_components": bad})
    with pytest.raises(InvalidParameterError, match="decoder_embed_dim must be a multiple of decoder_num_heads"):
        profiles.resolve("06", "full", {"decoder_num_heads": 6})
    for p in ("smoke", "quick", "full"):
        P = profiles.resolve("06", p)
        assert P.executor == "auto" and P.scheduler == "" and P.dry_run is False
