"""The summary's claim-by-claim paragraphs: each says what the paper says (the registry's
words), what we find (rounded as the tables), why, and what would change our mind."""

from nearid.book import claim_text, scorecard
from nearid.verdicts import Verdict, claim


def _claims(**extra):
    verdicts = {
        "order_cnn_widths_ica_rigid": claim(Verdict(0.18, 0.14, 0.21, "holds", 5, "t"),
                                            "CheXpert-small -> CheXpert-base: the ica map leaves a larger error",
                                            section="ch04-verdict", paper=0.071, ours_label="CNN small -> CNN base"),
        "order_resnet18_seeds_ica_rigid": claim(Verdict(0.10, 0.08, 0.11, "holds", 5, "t"),
                                                "ResNet-18-fc-1 -> ResNet-18-fc-2: the ica map leaves a larger error",
                                                section="ch04-verdict", paper=0.106),
        "order_resnet18_seeds_permutation_ica": claim(Verdict(0.001, -0.05, 0.05, "inconclusive", 5, "t"),
                                                      "ResNet-18-fc-1 -> ResNet-18-fc-2: perm above ICA",
                                                      section="ch04-verdict", paper=0.02),
    }
    for key, value in extra.items():
        verdicts["order_cnn_widths_ica_rigid"][key] = value
    return scorecard.claims_table({
        "04_alignment": {"profile": "quick", "verdicts": verdicts},
        "03_bilipschitz": {"profile": "quick", "verdicts": {"rigid_rises_with_Lmax": claim(
            Verdict(0.03, -0.08, 0.18, "holds", 10, "bootstrap"), "Figure A.4: the two rank correlations equal",
            section="ch03-rigid")}},
        "02_isometric_dgp": {"profile": "quick", "hypotheses": {"weight_decay_makes_codes_rigid": claim(
            Verdict(0.01, -0.02, 0.04, "inconclusive", 3, "t"), "wd", section="ch02-weight-decay")}},
    })


def test_each_statement_is_one_paragraph_under_its_part_of_the_paper():
    md = claim_text.claims_markdown(_claims())
    assert md.index("**Bi-Lipschitz decoders on MNIST (Figure A.4)**") < md.index("**Cross-model alignment (Table 1)**")
    paragraphs = [p for p in md.split("\n\n") if not p.startswith("**")]
    assert len(paragraphs) == 3, "the pairs of one statement share a paragraph; the hypothesis is not a claim"
    folded = next(p for p in paragraphs if "CheXpert (stand-in:" in p)
    assert "*Table 1*: the printed errors order ICA > rigid." in folded, "the paper's own words, from the registry"
    assert ("CheXpert (stand-in: MNIST CNNs, two widths): **holds** (ours, CNN small -> CNN base: "
            "0.180 [0.140, 0.210], paper 0.071; n = 5)") in folded, \
        "the paper's row, what stands in for it, what our number measures"
    assert ("ResNet (stand-in: MNIST ResNet-18, two seeds): **holds** (ours 0.100 [0.080, 0.110], paper 0.106; "
            "n = 5)") in folded
    assert "lies on the claim's side of 0" in folded and "that reaches 0" in folded
    assert "{ref}`its test <ch04-verdict>`" in folded


def test_the_reason_and_the_way_back_follow_the_outcome():
    md = claim_text.claims_markdown(_claims())
    lmax = next(p for p in md.split("\n\n") if p.startswith("*Figure A.4*"))
    assert "We test that the two rank correlations equal" in lmax, "the figure is said once, not twice"
    assert "lies inside ±0.2" in lmax and "reaches outside ±0.2" in lmax, "equivalence reads as inside/outside"
    under = next(p for p in md.split("\n\n") if "perm above ICA" in p)
    assert "**underpowered**" in under and "cannot tell them apart" in under
    assert "seeds" not in under and "about " in under and "we have 5" in under, "the power calculation's n"
    undecided = claim_text.claims_markdown(_claims(ica_converged=False))
    para = next(p for p in undecided.split("\n\n") if "CheXpert (stand-in:" in p)
    assert "CheXpert (stand-in: MNIST CNNs, two widths): **not decided**" in para
    assert "for CheXpert, the fit behind it is a FastICA run" in para
    assert "for ResNet, the whole 95% interval" in para
    assert "a FastICA fit that converges" in para and "; or an interval over more" in para


def test_no_counted_claim_gives_no_text():
    only_hypothesis = _claims()
    only_hypothesis = only_hypothesis[only_hypothesis["kind"] == "hypothesis"]
    assert claim_text.claims_markdown(only_hypothesis) == ""


def test_unit_words_keep_what_n_counts():
    assert claim_text.unit_words("independently trained replicates of the pair (each its mean), Student's t") \
        == "independently trained replicates of the pair"
    assert claim_text.unit_words(None) == "units"


def test_the_takeaway_line_counts_the_outcomes_of_the_page():
    records = {"order_cnn_widths_ica_rigid": claim(Verdict(0.18, 0.14, 0.21, "holds", 5, "t"), "a",
                                                   section="ch04-verdict", paper=0.071),
               "order_resnet18_seeds_ica_rigid": claim(Verdict(0.1, 0.08, 0.11, "holds", 5, "t"), "b",
                                                       section="ch04-verdict", paper=0.1),
               "order_resnet18_seeds_permutation_ica": claim(Verdict(0.0, -0.05, 0.05, "inconclusive", 5, "t"), "c",
                                                             section="ch04-verdict", paper=0.02)}
    assert claim_text.tally_text("04_alignment", records, "quick") == \
        "of the paper's 3 claims decided here, 2 hold and 1 is inconclusive"
    records["order_cnn_widths_ica_rigid"]["ica_converged"] = False
    assert claim_text.tally_text("04_alignment", records, "quick") == ("of the paper's 3 claims decided here, "
                                                                       "1 holds, 1 is inconclusive and 1 is not "
                                                                       "decided (its FastICA fit settled by neither route)")
    checks = {"ica_unmixes_with_n": claim(Verdict(0.3, 0.2, 0.4, "holds", 20, "bootstrap"), "n", section="ch01-verdict"),
              "gaussian_unresolved": claim(Verdict(0.3, 0.2, 0.4, "holds", 5, "t"), "g", section="ch01-verdict")}
    assert claim_text.tally_text("01_definitions", checks, "quick") == \
        "this chapter decides no claim of the paper; of its 2 checks of our method, 2 hold"
