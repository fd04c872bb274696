import json
import re

from chapter_checks import assert_exercises_ran, assert_matches_reference, assert_verdicts

from nearid.book.runner import run_chapter

METRICS = {"L_mean", "L_max", "L_mean_local", "rigid_error", "linear_error", "recon_error"}
CLAIMS = {"leak_moves_L", "rigid_rises_with_L", "rigid_rises_with_Lmax", "recon_improves_with_L",
          "digits_rigid_rises_with_L"}


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_chapter_03_smoke(tmp_path, mnist_root):
    res = run_chapter("03", profile="smoke", out_dir=tmp_path)
    assert_matches_reference(tmp_path, "03_bilipschitz")
    assert res["profile"] == "smoke" and res["dry_run"] is False
    per_alpha = res["per_alpha"]
    # smoke: alphas [0, 1] x weight decays [0, 0.5]
    assert sorted((r["alpha"], r["weight_decay"]) for r in per_alpha) == [(0.0, 0.0), (0.0, 0.5),
                                                                        (1.0, 0.0), (1.0, 0.5)]
    for r in per_alpha + res["per_digit"]:
        assert METRICS <= set(r)
        assert 0 <= r["L_mean_local"] <= r["L_mean"] + 1e-9 and r["L_mean"] <= r["L_max"] + 1e-9
        assert 0 < r["rigid_error"] < 2 and 0 < r["linear_error"] <= 1.1 * r["rigid_error"]  # held-out: a little slack
        assert 0 < r["recon_error"] < 0.2
    # a linear decoder has one Jacobian: its mean and max distortion coincide, whichever scale
    for r in per_alpha:
        if r["alpha"] == 1.0:
            assert abs(r["L_max"] - r["L_mean"]) < 1e-6 * max(1.0, r["L_mean"])
            assert abs(r["L_mean_local"] - r["L_mean"]) < 1e-6 * max(1.0, r["L_mean"])
    assert {r["digit"] for r in res["per_digit"]} == {"1"}
    assert [r["n_train"] for r in res["digit_scale"]] == [300, 600, 1200]

    # verdicts: the contract the summary page reads, decided by intervals
    nb = json.loads((tmp_path / "03_bilipschitz.ipynb").read_text())
    labels = set(re.findall(r"^\((ch03-[a-z-]+)\)=", "\n".join(_source(c) for c in nb["cells"]), flags=re.M))
    verdicts = res["verdicts"]
    assert CLAIMS <= set(verdicts)
    assert_verdicts(verdicts, sections=labels)
    assert verdicts["leak_moves_L"]["method"] == "t" and verdicts["rigid_rises_with_L"]["method"] == "bootstrap"
    assert verdicts["rigid_rises_with_L"]["n"] == 4 and verdicts["recon_improves_with_L"]["n"] == 8
    fit = res["theory_fit"]["L_mean"]
    assert {"b", "c", "r2", "r2_through_origin"} <= set(fit) and fit["r2"] >= fit["r2_through_origin"] - 1e-9

    assert_exercises_ran(tmp_path / "03_bilipschitz.ipynb")
    # every figure is named and captioned
    figures = [c["metadata"]["mystnb"]["figure"] for c in nb["cells"] if "figure" in c["metadata"].get("mystnb", {})]
    assert {f["name"] for f in figures} == {"fig-03-bz", "fig-03-rigid", "fig-03-recon", "fig-03-digits",
                                           "fig-03-digit-scale"}
    assert all(f["caption"] for f in figures)
