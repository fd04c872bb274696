"""Chapter 04 (Table 1) in the smoke profile: every pair built, every number in range."""

import math

import pytest

from nearid.book.runner import run_chapter

PAIRS = {"pythia", "mae", "chexpert", "resnet18", "sentence_encoders"}
FAMILIES = {"permutation", "rigid", "linear", "ica"}


@pytest.mark.chapter
def test_chapter_04_smoke(tmp_path, mnist_root):
    res = run_chapter("04", profile="smoke", out_dir=tmp_path)
    assert (tmp_path / "04_alignment.json").is_file()
    table = res["table1"]
    assert set(table) == PAIRS
    for pair, row in table.items():
        assert set(row) == FAMILIES | {"ica_efficiency", "cka"}
        for fam in FAMILIES:
            assert 0.0 <= row[fam] < 2.0, (pair, fam, row[fam])
        assert 0.0 <= row["cka"] <= 1.0 + 1e-9
        eff = row["ica_efficiency"]
        assert eff is None or math.isfinite(eff)
    assert res["n_pairs"] == 5 and 0 <= res["n_order_holds"] <= 5
    assert res["n_order_holds"] == sum(res["order_holds"].values())
    assert res["split"]["resnet18"]["dim_a"] == 512
    assert res["split"]["sentence_encoders"]["dim_b"] == 384
    assert res["models"]["pythia"]["source"] == "trained"
