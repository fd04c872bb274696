"""Chapter 01's experiments: the ICA sample-size sweep."""

import numpy as np

from nearid.experiments import ch01_definitions as ch01


def test_ica_amari_sweep_separates_gaussian():
    df = ch01.ica_amari_sweep(sample_sizes=[3000], sources=["laplace", "gaussian"], dim=3, repeats=2)
    means = df.groupby("source").amari.mean()
    assert means["laplace"] < 0.1 < means["gaussian"]
    again = ch01.ica_amari_sweep(sample_sizes=[3000], sources=["laplace", "gaussian"], dim=3, repeats=2)
    np.testing.assert_array_equal(df.amari.values, again.amari.values)
