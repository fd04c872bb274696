"""Chapter results files: JSON-ready values, and the records the summary page reads."""

import json

import numpy as np
import pytest

from nearid.book import results
from nearid.verdicts import Verdict, claim


def test_save_writes_json_with_profile_and_params(tmp_path):
    path = tmp_path / "r.json"
    results.save(path, {"x": np.float64(0.5), "nan": float("nan"), "arr": np.arange(2)}, params={"a": 1},
                 profile="smoke")
    doc = json.loads(path.read_text())
    kernels = doc.pop("kernels")  # which CPU kernels computed the numbers (nearid.kernels.record)
    assert doc == {"x": 0.5, "nan": None, "arr": [0, 1], "params": {"a": 1}, "profile": "smoke"}
    assert kernels["mode"] in ("portable", "native") and isinstance(kernels["portable"], bool)


def test_verdict_records_are_checked(tmp_path):
    good = claim(Verdict(0.1, 0.05, 0.2, "holds", 20, "bootstrap"), "x beats y", section="ch03-rigid")
    results.save(tmp_path / "ok.json", {"verdicts": {"rigid_rises_with_L": good}})
    with pytest.raises(ValueError, match="'x_beats_y' is not declared in claims.yaml"):
        results.save(tmp_path / "bad.json", {"verdicts": {"x_beats_y": good}})
    with pytest.raises(ValueError, match="declares 'ch02-weight-decay'"):
        results.save(tmp_path / "bad.json", {"hypotheses": {"weight_decay_makes_codes_rigid": good}})
    with pytest.raises(ValueError, match="lacks"):
        results.save(tmp_path / "bad.json", {"verdicts": {"x": {"estimate": 0.1}}})
    with pytest.raises(ValueError, match="valid: holds, fails, inconclusive"):
        results.save(tmp_path / "bad.json", {"verdicts": {"x": {**good, "verdict": "reproduced"}}})
    from nearid.claims import registry

    declared = registry()["rigid_rises_with_L"]
    with pytest.raises(ValueError, match=f"decided by a equivalence test; claims.yaml declares '{declared.test}'"):
        results.save(tmp_path / "bad.json", {"verdicts": {"rigid_rises_with_L": {**good, "test": "equivalence"}}})
    if declared.margin is not None:
        with pytest.raises(ValueError, match="decided with margin 0.123"):
            results.save(tmp_path / "bad.json", {"verdicts": {"rigid_rises_with_L": {**good, "margin": 0.123}}})
    results.save(tmp_path / "ok.json", {"verdicts": {"rigid_rises_with_L": {**good, "test": declared.test}}})
    with pytest.raises(ValueError, match="paper_comparison"):
        results.save(tmp_path / "bad.json", {"paper_comparison": [{"table": "Table 1"}]})
    assert not (tmp_path / "bad.json").exists()


def test_glue_verdict_one_contract_for_verdicts_records_and_rows(monkeypatch):
    glued = {}
    monkeypatch.setattr(results, "glue", lambda k, v: glued.__setitem__(k, v))
    v = Verdict(0.01234, -0.5, float("inf"), "inconclusive", 1, "t")
    for form in (v, claim(v, "text", section="s"), v.to_dict()):
        glued.clear()
        results.glue_verdict("c", form, digits=2, signed=True)
        assert glued == {"c_estimate": "+0.01", "c_low": "-0.50", "c_high": "+inf", "c_n": 1,
                         "c_verdict": "inconclusive", "c_reads": "is inconclusive"}
    # a finite interval: rounded as the tables round it, to the decimal its width sets
    results.glue_verdict("f", Verdict(0.01234, -0.0012, 0.0256, "inconclusive", 5, "t"), signed=True)
    assert (glued["f_estimate"], glued["f_low"], glued["f_high"]) == ("+0.012", "-0.001", "+0.026")
    results.glue_verdict("g", Verdict(-0.000862, -0.0911, 0.0893, "inconclusive", 3, "t"))
    assert (glued["g_estimate"], glued["g_low"], glued["g_high"]) == ("0.00", "-0.09", "0.09"), \
        "prose shows what the table shows, not -0.000862 [-0.0911, 0.0893]"


def test_glue_tally_names_each_group_and_says_none(monkeypatch):
    glued = {}
    monkeypatch.setattr(results, "glue", lambda k, v: glued.__setitem__(k, v))
    groups = results.glue_tally("t", {"a": "holds", "b": {"verdict": "fails"}, "c": "holds"}, label=str.upper)
    assert groups == {"holds": ["a", "c"], "fails": ["b"], "inconclusive": []}
    assert glued["t_holds_n"] == 2 and glued["t_holds_names"] == "A, C"
    assert glued["t_inconclusive_n"] == 0 and glued["t_inconclusive_names"] == "none"
    assert glued["t_holds_text"] == "2 (A, C)" and glued["t_inconclusive_text"] == "none"  # never "0 (none)"
    with pytest.raises(ValueError, match="unknown verdicts"):
        results.glue_tally("t", {"a": "maybe"})


def test_plot_intervals_keeps_infinite_ends_on_the_axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nearid.book.plotting import plot_intervals

    fig, ax = plt.subplots()
    plot_intervals(ax, [1, 2, 3], ([0.1, 0.2, 0.3], [-np.inf, 0.1, 0.25], [0.2, np.inf, 0.35]),
                   paper=[None, 0.5, np.nan], verdicts=["inconclusive", "inconclusive", "holds"])
    lo, hi = ax.get_ylim()
    assert np.isfinite(lo) and np.isfinite(hi) and hi < 1
    assert len(ax.collections) >= 1  # the paper's cross
    plt.close(fig)
