"""The summary page's tables from chapter results."""

import json

import pytest

from nearid.book import scorecard
from nearid.verdicts import Verdict, claim


def _results():
    return {
        "04_alignment": {"profile": "quick",
                         "verdicts": {"order_cnn_widths_rigid_linear": claim(
                             Verdict(0.1, 0.0, 0.2, "inconclusive", 9, "t"), "x | y", section="ch04-verdict",
                             paper=None)},
                         "paper_comparison": [{"table": "Table 1", "row": "mae", "column": "ica", "ours": 0.2,
                                               "paper": 0.145},
                                              {"table": "Table 1", "row": "mae", "column": "x", "ours": None,
                                               "paper": 0.1}]},
        "02_isometric_dgp": {"profile": "quick", "verdicts": {}, "hypotheses": {
            "weight_decay_makes_codes_rigid": claim(Verdict(0.01, -0.02, 0.04, "inconclusive", 3, "t"), "wd",
                                                    section="ch02-weight-decay")}},
        "05_disentanglement": None,
    }


def test_tables_counts_and_markdown():
    claims = scorecard.claims_table(_results())
    assert list(claims.claim_id) == ["order_cnn_widths_rigid_linear", "weight_decay_makes_codes_rigid"]
    assert list(claims.kind) == ["paper_number", "hypothesis"], "kinds come from the registry"
    assert claims.loc[0, "profile"] == "quick" and claims.loc[0, "retraining"] == "resampled"
    assert claims.loc[0, "test"] == "superiority" and claims.loc[0, "margin"] == 0.0
    assert claims.loc[0, "mde"] == pytest.approx((0.2 / 2) / 2.306 * (2.306 + 0.889), rel=1e-3)  # t, 8 df
    assert scorecard.verdict_counts(claims) == {"holds": 0, "inconclusive": 2, "fails": 0}
    assert len(scorecard.paper_claims(claims)) == 1, "a hypothesis is not counted as the paper's claim"
    assert scorecard.counts_by_kind(claims) == {"paper_number": {"holds": 0, "inconclusive": 1, "fails": 0},
                                                "hypothesis": {"holds": 0, "inconclusive": 1, "fails": 0}}
    md = scorecard.to_markdown(claims)
    assert md.index("Orderings of numbers in the paper") < md.index("Our own hypotheses"), "paper's kinds first"
    assert "x \\| y" in md and "{ref}`inconclusive <ch04-verdict>`" in md and "[0, 0.2]" in md
    assert "| 9 |" in md and "| 3 (below 5) |" in md and "| > 0 |" in md
    res = _results()
    res["04_alignment"]["verdicts"]["order_cnn_widths_rigid_linear"]["ica_converged"] = False
    flagged = scorecard.claims_table(res)
    assert flagged.loc[0, "ica_converged"] is False and flagged.loc[1, "ica_converged"] is None
    assert "| 9 (FastICA unconverged) |" in scorecard.to_markdown(flagged)
    # a verdict on one training says so (chapter 02's seed pairs: one pair, its test rows)
    one = {"02_isometric_dgp": {"profile": "quick", "verdicts": {"ica_aligns_seeds": claim(
        Verdict(0.1, 0.05, 0.15, "holds", 40, "bootstrap"), "ica", section="ch02-verdict")}}}
    assert "| 40 (below 100, one training) |" in scorecard.to_markdown(scorecard.claims_table(one))
    assert len(scorecard.comparison_table(_results())) == 1  # rows without a number are dropped


def test_a_claim_missing_from_the_registry_is_shown_not_dropped():
    res = {"04_alignment": {"verdicts": {"made_up": claim(Verdict(1, 0.5, 2, "holds", 5, "t"), "m",
                                                           section="ch04-verdict")}}}
    claims = scorecard.claims_table(res)
    assert list(claims.kind) == ["undeclared"]
    assert "Claims missing from the registry" in scorecard.to_markdown(claims)


def test_load_results(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the chapters first"):
        scorecard.load_results(tmp_path, ["01_definitions"])
    (tmp_path / "01_definitions.json").write_text(json.dumps({"profile": "smoke"}))
    got = scorecard.load_results(tmp_path, ["01_definitions", "02_isometric_dgp"])
    assert got == {"01_definitions": {"profile": "smoke"}, "02_isometric_dgp": None}


def test_history_markdown_lists_each_earlier_protocol_with_both_verdicts():
    import pandas as pd

    from nearid import claims

    history = pd.DataFrame(claims.history_rows())
    history["verdict_now"] = "inconclusive"
    md = scorecard.history_markdown(history)
    assert md.count("\n") == len(history) + 1
    assert "| `auroc_ica_gt_pca` (06 cell microscopy) | 40c7a93 (2026-11-30) |" in md


def test_each_row_says_its_test_in_a_few_characters():
    from nearid.book.scorecard import test_mark

    assert test_mark("superiority", 0.0) == "> 0"
    assert test_mark("non_inferiority", 0.06) == "> −0.06"
    assert test_mark("equivalence", 0.2) == "within ±0.2"
    assert test_mark(None, None) == "–"


def test_units_table_groups_verdicts_by_chapter_and_unit():
    md = scorecard.units_markdown(scorecard.claims_table(_results()))
    assert md.count("\n") == 3  # header, rule and one row per (chapter, unit)
    assert "| 1 | 9 |" in md and "| 1 | 3 |" in md
