"""Hoyer sparsity, concentration and AUROC on planted answers."""

import numpy as np
import pytest

from nearid.metrics.sparsity import (auroc, biological_fraction, biological_variance, concentration, hoyer,
                                     top_biological_share, top_share)


def test_hoyer_known_values():
    assert hoyer([0, 0, 5, 0]) == pytest.approx(1.0)
    assert hoyer([1, -1, 1, -1]) == pytest.approx(0.0)
    # two equal non-zeros of n=4: (2 - 2/sqrt2) / (2 - 1)
    assert hoyer([1, 1, 0, 0]) == pytest.approx(2 - np.sqrt(2))
    # scale, sign and permutation invariance; rotation changes it
    x = np.array([3.0, 0.1, 0.0, -0.2])
    assert hoyer(-7 * x[::-1]) == pytest.approx(hoyer(x))
    R = np.linalg.qr(np.random.default_rng(0).normal(size=(4, 4)))[0]
    assert hoyer(R @ x) < hoyer(x)
    rows = hoyer(np.array([[0, 0, 1.0], [1, 1, 1.0]]), axis=1)
    np.testing.assert_allclose(rows, [1.0, 0.0], atol=1e-12)


def test_hoyer_errors():
    with pytest.raises(ValueError, match="all-zero"):
        hoyer([0, 0, 0])
    with pytest.raises(ValueError, match="length"):
        hoyer([1.0])


def test_biological_fraction_planted():
    rng = np.random.default_rng(0)
    labels = np.repeat(["control", "a", "b"], 200)
    X = rng.normal(size=(600, 3))
    X[labels == "a", 0] += 3.0  # feature 0 carries the biology
    frac = biological_fraction(X, labels)
    assert frac[0] > 0.6 and frac[1:].max() < 0.02
    # eta^2 of a pure two-level shift: d^2 p(1-p) / (d^2 p(1-p) + 1) with p = 1/3, d = 3
    assert frac[0] == pytest.approx(2 / (2 + 1), abs=0.05)
    # invariant to feature scale
    np.testing.assert_allclose(biological_fraction(X * [10, 1, 0.1], labels), frac)


def test_concentration_sparse_vs_rotated():
    rng = np.random.default_rng(1)
    labels = np.repeat(["control", "g"], 300)
    X = rng.normal(size=(600, 8))
    X[labels == "g", :2] += 2.0
    R = np.linalg.qr(rng.normal(size=(8, 8)))[0]
    c_axis, c_rot = concentration(X, labels), concentration(X @ R, labels)
    assert c_axis > 0.4 and c_axis > c_rot + 0.1
    with pytest.raises(ValueError, match="top"):
        concentration(X, labels, top=0)


def test_top_share_and_auroc():
    assert top_share([4, 0, 0, 0]) == 1.0
    assert top_share([1, 1, 1, 1]) == 0.25
    assert auroc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert auroc([0, 1, 0, 1], [0.1, 0.2, 0.8, 0.9]) == 0.75  # 3 of 4 pairs ordered
    with pytest.raises(ValueError, match="two classes"):
        auroc([1, 1], [0.1, 0.2])


def test_biological_variance_is_the_between_condition_part():
    X = np.array([[0.0, 1.0], [2.0, 1.0], [4.0, 3.0], [6.0, 3.0]])
    labels = np.array(["control", "control", "g", "g"])
    # feature 0: condition means 1 and 5 around 3 -> (2 * 4 + 2 * 4) / 4 = 4; feature 1: 1
    np.testing.assert_allclose(biological_variance(X, labels), [4.0, 1.0])
    with pytest.raises(ValueError, match="one label per row"):
        biological_variance(X, labels[:3])


def test_top_biological_share_even_single_and_rotation():
    rng = np.random.default_rng(2)
    labels = np.repeat(["control", "a", "b", "c"], 150)
    ctrl = labels == "control"
    X = rng.normal(size=(600, 8))
    one = X.copy()
    one[labels != "control", 3] += 3.0  # all biology on one feature: the top 2 of 8 hold ~all
    assert top_biological_share(one, labels, controls=ctrl) > 0.9
    even = 0.1 * X
    even[labels == "a"] += 1.0  # the same shift on every feature: an even spread
    assert top_biological_share(even, labels, controls=ctrl) == pytest.approx(0.25, abs=0.05)
    # never below the top quarter's own share, whatever the data
    assert top_biological_share(X, labels) >= 0.25
    # a rotation of a whitened space keeps the total and spreads a sparse effect out
    R = np.linalg.qr(rng.normal(size=(8, 8)))[0]
    assert top_biological_share(one @ R, labels, controls=ctrl) < top_biological_share(one, labels, controls=ctrl) - 0.2
    # units of control standard deviation: rescaling a feature changes nothing
    np.testing.assert_allclose(top_biological_share(one * np.arange(1, 9), labels, controls=ctrl),
                               top_biological_share(one, labels, controls=ctrl))
    with pytest.raises(ValueError, match="top"):
        top_biological_share(X, labels, top=1.5)
