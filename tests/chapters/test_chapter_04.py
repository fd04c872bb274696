"""Chapter 04 (Table 1) in the smoke profile: every pair built, every number in range, every
verdict in the contract's form, every exercise solution executed."""

import math

import nbformat
import pytest
from chapter_checks import assert_exercises_ran, assert_matches_reference, assert_verdicts

from nearid.book.runner import run_chapter
from nearid.paper import TABLE1, TABLE1_LABELS, TABLE1_STAND_INS
from nearid.verdicts import VERDICTS

PAIRS = {"gpt_neox_seeds", "mae_timm_vs_ours", "cnn_widths", "resnet18_seeds", "sentence_encoders"}
FAMILIES = {"permutation", "rigid", "linear", "ica"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, mnist_root):
    out = tmp_path_factory.mktemp("ch04")
    return run_chapter("04", profile="smoke", out_dir=out), out


@pytest.mark.chapter
def test_chapter_04_table_and_verdicts(smoke):
    res, out = smoke
    assert (out / "04_alignment.json").is_file()
    table = res["table1"]
    assert set(table) == PAIRS
    for pair, row in table.items():
        assert set(row) == FAMILIES | {"ica_efficiency", "cka"}
        for fam in FAMILIES:
            assert 0.0 <= row[fam] < 2.0, (pair, fam, row[fam])
        assert 0.0 <= row["cka"] <= 1.0 + 1e-9
        eff = row["ica_efficiency"]
        assert eff is None or math.isfinite(eff)
    # per pair that mirrors a paper row: one verdict per link of the ordering, and its ICA
    # efficiency against the paper's range (over two or more replicates)
    assert res["params"]["replicates"] >= 2
    assert len(res["verdicts"]) == 4 * len(TABLE1)
    assert {f"efficiency_{p}" for p in TABLE1_STAND_INS} <= set(res["verdicts"])
    for pair, rep in res["replicates"].items():
        n = 1 if pair == "sentence_encoders" else res["params"]["replicates"]
        assert len(rep["seeds"]) == n and all(len(v) == n for v in rep["errors"].values()), pair
        for fam in FAMILIES:  # Table 1 is the mean over replicates
            assert res["table1"][pair][fam] == pytest.approx(sum(rep["errors"][fam]) / n, rel=1e-12)
    assert_verdicts(res["verdicts"], sections={"ch04-verdict"})
    assert all(isinstance(rec["paper"], float) for rec in res["verdicts"].values())
    assert len(res["order_links"]) == 3 * len(PAIRS)
    for pair, word in res["ordering"].items():
        links = [r["verdict"] for r in res["order_links"] if r["pair"] == pair]
        assert word == ("holds" if all(v == "holds" for v in links) else
                        "fails" if "fails" in links else "inconclusive")
    assert res["n_ordering_holds"] == sum(res["ordering"][p] == "holds" for p in TABLE1_STAND_INS)
    comparison = res["paper_comparison"]
    assert len(comparison) == 5 * len(TABLE1)
    assert {r["row"] for r in comparison} == set(TABLE1_LABELS.values())
    assert all(r["table"] == "Table 1" and isinstance(r["ours"], float) for r in comparison)
    # every family on the shared subspace: k directions per side (ResNet-18's 512, MiniLM's 384
    # before), all of them whitened for ICA, at most one per ten fit rows
    for s in res["split"].values():
        assert s["dim_a"] == s["dim_b"] == s["components"][0] == s["components"][1]
        assert 1 <= s["dim_a"] <= min(55, s["n_fit"] // 10)
    assert res["models"]["gpt_neox_seeds"]["source"] == "trained"
    assert res["dry_run"] is False


@pytest.mark.chapter
def test_chapter_04_sensitivity_and_trend(smoke):
    res, _ = smoke
    sens = res["sensitivity"]
    assert len(sens) == len(PAIRS) * (len(res["params"]["ica_grid"]) + 1)
    assert sum(r["rule"] for r in sens) == len(PAIRS)
    first = {p: {f: v[0] for f, v in rep["errors"].items()} for p, rep in res["replicates"].items()}
    widths = {"resnet18_seeds": 512, "sentence_encoders": 384}
    for r in sens:  # every direction (not the shared subspace), the rule's components per side
        if r["rule"]:
            assert 1 <= r["components_a"] <= widths.get(r["pair"], 64) and 0 <= r["ica"] < 2
    trend = res["scale_trend"]
    assert {r["pair"] for r in trend["table"]} == set(TABLE1_STAND_INS)
    assert len(trend["table"]) == len(TABLE1) * len(res["params"]["trend_fractions"])
    assert all(v["verdict"] in VERDICTS for v in trend["difference"].values())
    # one code path per number: the trend's full fraction is Table 1, digit for digit
    full = [r for r in trend["table"] if r["fraction"] == 1.0]
    assert len(full) == len(TABLE1)
    for r in full:
        row = first[r["pair"]]
        assert [r[f] for f in ("permutation", "rigid", "ica")] == [row[f] for f in ("permutation", "rigid", "ica")], \
            r["pair"]
        assert r["fit_rows"] == res["split"][r["pair"]]["n_fit"]


@pytest.mark.chapter
def test_chapter_04_exercises_ran(smoke):
    _, out = smoke
    assert_exercises_ran(out / "04_alignment.ipynb")
    nb = nbformat.read(out / "04_alignment.ipynb", as_version=4)
    figures = [c.metadata["mystnb"]["figure"]["name"] for c in nb.cells if "mystnb" in c.metadata]
    assert {"fig-04-table1", "fig-04-links", "fig-04-components", "fig-04-trend", "fig-04-layers"} <= set(figures)


@pytest.mark.chapter
def test_chapter_04_matches_the_smoke_reference(smoke):
    assert_matches_reference(smoke[1], "04_alignment")
