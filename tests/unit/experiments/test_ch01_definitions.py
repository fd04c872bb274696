"""Chapter 01's experiments: the ICA sample-size sweep, its verdicts and the dry run."""

import numpy as np
import pandas as pd
import pytest

from nearid.book.profiles import resolve
from nearid.experiments import ch01_definitions as ch01


def test_ica_amari_sweep_separates_gaussian():
    df = ch01.ica_amari_sweep(sample_sizes=[3000], sources=["laplace", "gaussian"], dim=3, repeats=2)
    means = df.groupby("source").amari.mean()
    assert means["laplace"] < 0.1 < means["gaussian"]
    again = ch01.ica_amari_sweep(sample_sizes=[3000], sources=["laplace", "gaussian"], dim=3, repeats=2)
    np.testing.assert_array_equal(df.amari.values, again.amari.values)


def test_settings_dry_run_keeps_shapes_and_cuts_sizes():
    full = resolve("01", "full")
    assert ch01.settings(full)["ica_sample_sizes"] == full.ica_sample_sizes
    dry = ch01.settings(resolve("01", "full", {"dry_run": True}))
    assert dry["n_points"] == ch01.DRY_RUN_ROWS and dry["ica_repeats"] == ch01.DRY_RUN_REPEATS
    assert max(dry["ica_sample_sizes"]) == ch01.DRY_RUN_ROWS and dry["ica_sample_sizes"] == sorted(
        set(dry["ica_sample_sizes"]))


def _sweep(amari):
    """A sweep frame from {(source, n): [amari per repeat]}."""
    return pd.DataFrame([{"source": s, "n": n, "repeat": r, "amari": a}
                         for (s, n), values in amari.items() for r, a in enumerate(values)])


def test_sample_size_verdict_pairs_source_and_repeat():
    sweep = _sweep({("laplace", 100): [0.20, 0.22, 0.21], ("laplace", 1000): [0.02, 0.03, 0.02],
                    ("uniform", 100): [0.15, 0.16, 0.14], ("uniform", 1000): [0.03, 0.02, 0.03],
                    ("gaussian", 100): [0.4, 0.4, 0.4], ("gaussian", 1000): [0.9, 0.9, 0.9]})
    v = ch01.sample_size_verdict(sweep)
    assert v.verdict == "holds" and v.n == 6  # Gaussian sources are left out
    assert v.estimate == pytest.approx(np.mean([0.18, 0.19, 0.19, 0.12, 0.14, 0.11]))
    g = ch01.gaussian_verdict(sweep)
    assert g.verdict == "holds" and g.n == 3 and g.method == "t"
    worse = _sweep({("laplace", 100): [0.02, 0.03], ("laplace", 1000): [0.2, 0.3]})
    assert ch01.sample_size_verdict(worse).verdict == "fails"
    with pytest.raises(ValueError, match="Gaussian"):
        ch01.gaussian_verdict(worse)
