"""The summary page's tables from chapter results."""

import json
import re

import pytest

from nearid.book import scorecard
from nearid.verdicts import Verdict, claim


def _results():
    return {
        "04_alignment": {"profile": "quick",
                         "verdicts": {"order_cnn_widths_ica_rigid": claim(
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
    assert list(claims.claim_id) == ["order_cnn_widths_ica_rigid", "weight_decay_makes_codes_rigid"]
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
    assert "x \\| y" in md and "{ref}`inconclusive <ch04-verdict>`" in md and "0.10 [0.00, 0.20]" in md
    least = claims.loc[0, "min_n"]  # the registry's, from its power calculation
    assert (f"| 9 (below {least}) |" if 9 < least else "| 9 |") in md and "| 3 (below 5) |" in md
    assert "| > 0 |" in md
    res = _results()
    res["04_alignment"]["verdicts"]["order_cnn_widths_ica_rigid"]["ica_converged"] = False
    flagged = scorecard.claims_table(res)
    assert flagged.loc[0, "ica_converged"] is False and flagged.loc[1, "ica_converged"] is None
    below = f"below {least}, " if 9 < least else ""
    assert f"| 9 ({below}FastICA unconverged: not decided) |" in scorecard.to_markdown(flagged)
    assert flagged.loc[0, "outcome"] == "not decided" and flagged.loc[0, "verdict_fdr"] is None
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
    assert "issue 21" in " ".join(history["until"]), "the registry keeps the tracker's number"
    assert not re.search(r"\bissues? \d", md), "the page does not: a reader cannot look it up"
    assert "| 2026-12-02 (quick seeds 3 -> 5) |" in md


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


@pytest.mark.parametrize(("low", "high", "decimals"), [
    (0.025, 0.039, 3),  # width 0.014: leading digit in the hundredths, one more
    (0.0, 0.6, 2), (-1.17, 4.18, 1), (100.0, 130.0, 0), (100.0, 400.0, -1),
    (-1.2e-5, 3.0e-5, 6),
    (0.1, 0.1, None), (0.2, 0.1, None), (float("-inf"), 0.3, None), (None, 0.3, None),
])
def test_interval_decimals_follow_the_leading_digit_of_the_width(low, high, decimals):
    assert scorecard.interval_decimals(low, high) == decimals


def test_numbers_are_rounded_where_their_interval_says():
    fmt = scorecard.format_estimate
    assert fmt(0.03229, 0.02516, 0.03942) == ("0.032", "[0.025, 0.039]")
    assert fmt(1.506, -1.1715, 4.1838) == ("1.5", "[-1.2, 4.2]")
    assert fmt(350.4, 100.2, 420.9) == ("350", "[100, 420]")
    assert fmt(-0.0027, -0.00999, 0.0044) == ("-0.003", "[-0.010, 0.004]")
    assert fmt(-0.0004, -0.06, 0.07) == ("0.00", "[-0.06, 0.07]"), "no negative zero"
    # beyond four decimals: mantissa and exponent, to the same decimal place
    assert fmt(9.4e-6, -1.16e-5, 3.0e-5) == ("9e-6", "[-1.2e-5, 3.0e-5]")
    # no interval to read: three significant digits, and an interval that cannot be written
    assert fmt(0.123456, float("nan"), 0.2) == ("0.123", "–")
    assert fmt(0.123456, 0.1, 0.1) == ("0.123", "[0.1, 0.1]")
    assert fmt(0.5, float("-inf"), float("inf")) == ("0.5", "[-inf, inf]"), "an interval from a single unit"
    assert scorecard.format_at(None, 2) == "–" and scorecard.format_at(float("nan"), 2) == "–"


def test_split_facet_finds_the_model_pair_or_the_dataset():
    split = scorecard.split_facet
    assert split("Pythia-160M-0 -> Pythia-160M-1: the ica map leaves a larger error (Table 1 ordering ICA > rigid)") \
        == ("the ica map leaves a larger error (Table 1 ordering ICA > rigid)", "Pythia-160M-0 -> Pythia-160M-1")
    assert split("AE + ICA's InfoC is higher than the AE's (Falcor3D)") == ("AE + ICA's InfoC is higher than the AE's",
                                                                          "Falcor3D")
    assert split("Figure A.6: in digit-specific models the rigid error rises") \
        == ("Figure A.6: in digit-specific models the rigid error rises", None), "a figure is not a subject"
    assert scorecard.short_facet("ResNet-18-fc-1 -> ResNet-18-fc-2") == "ResNet"
    assert scorecard.short_facet("mean over datasets") == "mean"


def _per_dataset_results():
    """Chapter 05's shape: one claim per dataset (two of them ties), and one claim that only
    shares the trailing parenthesis with another."""
    def rec(text, verdict="holds"):
        return claim(Verdict(0.1, 0.05, 0.15, verdict, 5, "t"), text, section="ch05-verdict", paper=0.1)

    return {"05_disentanglement": {"profile": "quick", "verdicts": {
        "ica_vs_ae_infom_falcor3d": rec("AE + ICA's InfoM is higher than the AE's (Falcor3D)", "fails"),
        "ica_vs_ae_infom_shapes3d": rec("AE + ICA's InfoM is higher than the AE's (Shapes3D)", "inconclusive"),
        "ica_vs_ae_infom_mpi3d": rec("AE + ICA's InfoM is higher than the AE's (MPI3D)"),
        "ica_vs_ae_infoe_falcor3d": rec("AE + ICA's InfoE equals the AE's within the declared margin (Falcor3D)"),
        "ica_vs_beta_vae_infom_aggregated": rec("AE + ICA's InfoM is comparable to β-VAE's (mean over datasets)"),
    }}}


def test_claims_per_dataset_fold_into_one_statement():
    claims = scorecard.claims_table(_per_dataset_results())
    st = scorecard.statements(claims)
    assert len(st) == 3, "three InfoM rows fold; the tie (another kind) and the comparison stay apart"
    folded = st[st.facets.map(len) > 0].iloc[0]
    assert folded.text == "AE + ICA's InfoM is higher than the AE's" and folded.kind == "paper_number"
    assert folded.facets == ("Falcor3D", "Shapes3D", "MPI3D")
    assert [claims.claim_id[i] for i in folded.rows] == ["ica_vs_ae_infom_falcor3d", "ica_vs_ae_infom_shapes3d",
                                                         "ica_vs_ae_infom_mpi3d"]
    assert list(st.kind) == ["paper_claim", "paper_number", "paper_tie"], "the paper's claims first"
    assert set(st.ref) == {"Table 2"}
    md = scorecard.to_markdown(claims)
    row = next(line for line in md.splitlines() if "is higher than the AE's" in line)
    assert row.index("✗") < row.index("?") < row.index("✓") < row.index("AE + ICA"), \
        "the verdict column comes first, one chip per dataset in the facets' order"
    assert "{ref}`Falcor3D (stand-in: procedural Falcor3D analogue) <ch05-verdict>`: ours" in row and row.count("<br>") == 3
    assert md.count("::::{dropdown}") == 3 and "`ica_vs_ae_infom_falcor3d`" in md
    assert md.count(":::{table}") == 6 and ":name: tbl-07-paper-number" in md
    assert "profile" not in md


def test_chapter_tallies_count_the_papers_claims_per_chapter():
    res = {**_results(), **_per_dataset_results()}
    tallies = scorecard.chapter_tallies(scorecard.claims_table(res))
    assert list(tallies.chapter) == ["04_alignment", "02_isometric_dgp", "05_disentanglement", "all"]
    assert list(tallies.columns) == ["chapter", "holds", "fails", "underpowered", "other"], \
        "the outcomes some chapter has, in the headline's order"
    got = tallies.set_index("chapter")[["holds", "fails", "underpowered", "other"]].to_dict(orient="index")
    assert got["05_disentanglement"] == {"holds": 2, "fails": 1, "underpowered": 1, "other": 1}
    assert got["02_isometric_dgp"] == {"holds": 0, "fails": 0, "underpowered": 0, "other": 1}
    assert got["all"] == {"holds": 2, "fails": 1, "underpowered": 2, "other": 2}
    md = scorecard.tallies_markdown(tallies)
    assert "few units |" in md and "underpowered |" not in md, "short column heads; the caption explains them"
    assert "| 05 disentanglement | 2 | 1 | 1 | 1 |" in md and "| **all** | **2** | **1** | **2** | 2 |" in md


@pytest.mark.parametrize("verdict, low, high, paper, converged, expected", [
    ("holds", 0.1, 0.3, 0.2, None, "holds"),
    ("fails", -0.3, -0.1, 0.2, True, "fails"),
    ("inconclusive", -0.1, 0.1, 0.2, True, "smaller than the paper's"),  # the paper's 0.2 is ruled out
    ("inconclusive", -0.1, 0.3, 0.2, True, "underpowered"),             # both 0 and 0.2 inside
    ("inconclusive", -0.1, 0.3, None, None, "underpowered"),            # the paper prints no number
    ("inconclusive", -0.1, 0.3, -0.2, None, "larger than the paper's"),
    ("holds", 0.1, 0.3, 0.2, False, "not decided"),                     # an unconverged FastICA fit
])
def test_outcome_splits_inconclusive_and_sets_unconverged_fits_apart(verdict, low, high, paper, converged,
                                                                     expected):
    assert scorecard.outcome(verdict, low, high, paper, converged) == expected


def test_the_headline_counts_outcomes_and_leaves_aggregates_and_unconverged_fits_out():
    """Table 2's aggregated row is a mean of rows counted on their own: shown, kind
    paper_aggregate, not counted. A claim on an unconverged fit is "not decided": outside the
    BH family, drawn as a blank tile, whatever its interval says."""
    from nearid.book import summary_figures

    res = _per_dataset_results()
    res["05_disentanglement"]["verdicts"]["ica_vs_ae_infom_aggregated"] = claim(
        Verdict(0.1, 0.05, 0.15, "holds", 5, "t"), "AE + ICA's InfoM is higher than the AE's (mean over datasets)",
        section="ch05-verdict", paper=0.1)
    res["05_disentanglement"]["verdicts"]["ica_vs_ae_infom_mpi3d"]["ica_converged"] = False
    claims = scorecard.claims_table(res).set_index("claim_id")
    assert claims.loc["ica_vs_ae_infom_aggregated", "kind"] == "paper_aggregate"
    assert claims.loc["ica_vs_ae_infom_aggregated", "outcome"] is None
    assert claims.loc["ica_vs_ae_infom_mpi3d", "outcome"] == "not decided"
    assert claims.loc["ica_vs_ae_infom_mpi3d", "verdict_fdr"] is None
    counted = scorecard.paper_claims(claims.reset_index())
    assert scorecard.outcome_counts(counted) == {"holds": 1, "fails": 1, "smaller than the paper's": 0,
                                                 "larger than the paper's": 0, "underpowered": 1, "not decided": 1}
    power = scorecard.power_markdown(counted)
    assert power.splitlines()[0] == "| claim | n now | n for the paper's effect | declared minimum |"
    assert "`ica_vs_ae_infom_falcor3d` (05 disentanglement) | 5 |" in power, "a claim the paper prints a number for"
    tiles = summary_figures.claim_tiles(claims.reset_index()).set_index("claim_id")
    assert tiles.loc["ica_vs_ae_infom_mpi3d", "verdict"] == "not decided"
    assert tiles.loc["ica_vs_ae_infom_aggregated", "group"] == "other"


def test_fdr_verdicts_cover_the_counted_claims_only():
    """BH across the counted claims: a row not counted gets None; one claim that holds clearly
    keeps its verdict; claims that hold only at 95% each, among many nulls, read inconclusive."""
    strong = claim(Verdict(0.5, 0.4, 0.6, "holds", 9, "t"), "strong", section="ch04-verdict")
    weak = claim(Verdict(0.1, 0.001, 0.199, "holds", 9, "t"), "weak", section="ch04-verdict")
    null = claim(Verdict(0.0, -0.1, 0.1, "inconclusive", 9, "t"), "null", section="ch04-verdict")
    res = {"04_alignment": {"profile": "quick", "verdicts": {
        "order_cnn_widths_ica_rigid": strong, "order_cnn_widths_permutation_ica": weak,
        **{f"order_{m}_ica_rigid": null for m in ("gpt_neox_seeds", "mae_timm_vs_ours", "resnet18_seeds")},
        "order_resnet18_seeds_permutation_ica": null, "order_cnn_widths_rigid_linear": strong}},
        "02_isometric_dgp": _results()["02_isometric_dgp"]}
    claims = scorecard.claims_table(res).set_index("claim_id")
    assert claims.loc["weight_decay_makes_codes_rigid", "verdict_fdr"] is None  # a hypothesis
    assert claims.loc["order_cnn_widths_rigid_linear", "verdict_fdr"] is None  # a check of the method
    assert claims.loc["order_cnn_widths_ica_rigid", "verdict_fdr"] == "holds"
    assert claims.loc["order_cnn_widths_permutation_ica", "verdict"] == "holds"
    assert claims.loc["order_cnn_widths_permutation_ica", "verdict_fdr"] == "inconclusive"
    counted = scorecard.paper_claims(claims.reset_index())
    assert scorecard.verdict_counts(counted, "verdict_fdr")["holds"] == 1
    assert "| BH |" in scorecard.to_markdown(claims.reset_index())
