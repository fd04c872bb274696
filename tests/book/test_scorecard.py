"""The summary page's tables from chapter results."""

import json

import pytest

from nearid.book import scorecard
from nearid.verdicts import Verdict, claim


def _results():
    return {
        "04_alignment": {"profile": "quick",
                         "verdicts": {"a": claim(Verdict(0.1, 0.0, 0.2, "inconclusive", 9, "t"), "x | y",
                                                 section="ch04-verdict", paper=None)},
                         "paper_comparison": [{"table": "Table 1", "row": "mae", "column": "ica", "ours": 0.2,
                                               "paper": 0.145},
                                              {"table": "Table 1", "row": "mae", "column": "x", "ours": None,
                                               "paper": 0.1}]},
        "05_disentanglement": None,
    }


def test_tables_counts_and_markdown():
    claims = scorecard.claims_table(_results())
    assert len(claims) == 1 and claims.loc[0, "profile"] == "quick"
    assert scorecard.verdict_counts(claims) == {"holds": 0, "inconclusive": 1, "fails": 0}
    md = scorecard.to_markdown(claims)
    assert "x \\| y" in md and "{ref}`inconclusive <ch04-verdict>`" in md and "[0, 0.2]" in md
    assert len(scorecard.comparison_table(_results())) == 1  # rows without a number are dropped


def test_load_results(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the chapters first"):
        scorecard.load_results(tmp_path, ["01_definitions"])
    (tmp_path / "01_definitions.json").write_text(json.dumps({"profile": "smoke"}))
    got = scorecard.load_results(tmp_path, ["01_definitions", "02_isometric_dgp"])
    assert got == {"01_definitions": {"profile": "smoke"}, "02_isometric_dgp": None}
