from nearid.book.runner import run_chapter

METRICS = {"L_mean", "L_max", "rigid_error", "linear_error", "recon_error"}


def test_chapter_03_smoke(tmp_path, mnist_root):
    res = run_chapter("03", profile="smoke", out_dir=tmp_path)
    assert res["profile"] == "smoke"
    per_alpha = res["per_alpha"]
    # smoke: alphas [0, 1] x weight decays [0, 0.5]
    assert sorted((r["alpha"], r["weight_decay"]) for r in per_alpha) == [(0.0, 0.0), (0.0, 0.5),
                                                                        (1.0, 0.0), (1.0, 0.5)]
    for r in per_alpha + res["per_digit"]:
        assert METRICS <= set(r)
        assert 0 <= r["L_mean"] <= r["L_max"] + 1e-9
        assert 0 < r["rigid_error"] < 2 and 0 < r["linear_error"] <= 1.1 * r["rigid_error"]  # held-out: a little slack
        assert 0 < r["recon_error"] < 0.2
    # a linear decoder has one Jacobian: its mean and max distortion coincide
    for r in per_alpha:
        if r["alpha"] == 1.0:
            assert abs(r["L_max"] - r["L_mean"]) < 1e-6 * max(1.0, r["L_mean"])
    assert {r["digit"] for r in res["per_digit"]} == {"1"}
    sp = res["spearman_L_rigid"]
    assert -1 <= sp["rho"] <= 1 and 0 <= sp["pvalue"] <= 1 and sp["n"] == 4
    assert res["error_rises_with_L"] in {"rises", "does not rise",
                                         "rises only weakly (not significant at the 5% level)"}
    assert set(res["theory_fit"]) == {"L_mean", "L_max"} and res["theory_fit"]["L_mean"]["c"] > 0
    assert (tmp_path / "03_bilipschitz.ipynb").is_file()
