"""The few-line versions the chapters show equal the library's on the same data."""

import numpy as np
import pytest

from nearid import teaching
from nearid.experiments.ch06_cell_microscopy import FeatureSet
from nearid.ica import Whitener
from nearid.lipschitz import bilipschitz_from_singular_values
from nearid.metrics.sparsity import hoyer, top_biological_share

rng = np.random.default_rng(0)


def _mixed(n=400, d=6):
    return rng.laplace(size=(n, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d)


def test_whiten_is_the_whitener_up_to_each_axis_sign():
    X = _mixed()
    ours, lib = teaching.whiten(X, 4), Whitener(4, None).fit_transform(X)
    signs = np.sign((ours * lib).sum(axis=0))
    np.testing.assert_allclose(ours, lib * signs, atol=1e-9)
    np.testing.assert_allclose(np.cov(ours, rowvar=False), np.eye(4), atol=1e-9)


def test_bilipschitz_and_hoyer_are_the_librarys():
    S = rng.uniform(0.2, 3.0, size=(50, 5))
    np.testing.assert_allclose(teaching.bilipschitz(S), bilipschitz_from_singular_values(S)[0], rtol=1e-12)
    for x in (rng.normal(size=10), np.array([0.0, 0, 3, 0]), np.ones(7)):
        assert teaching.hoyer(x) == pytest.approx(hoyer(x), abs=1e-12)


def test_top_quarter_share_is_the_librarys():
    X = _mixed(300, 9)
    labels = rng.choice(["ctrl", "a", "b", "c"], size=300)
    X[labels == "a", 2] += 3.0
    controls = labels == "ctrl"
    assert teaching.top_quarter_share(X, labels, controls) == pytest.approx(
        top_biological_share(X, labels, controls=controls), rel=1e-12)


@pytest.mark.filterwarnings("ignore:FastICA did not converge")
def test_feature_sets_are_the_librarys():
    X = _mixed(300, 8)
    controls = np.zeros(300, bool)
    controls[:120] = True
    ours = teaching.feature_sets(X, controls, k=5, seed=3, max_iter=2000)
    for kind in ("base", "pca", "pca_ica", "pca_rand"):
        lib = FeatureSet(kind, n_components=5, rows_per_component=None, random_state=3,
                         max_iter=2000).fit_transform(X, controls)
        np.testing.assert_allclose(ours[kind], lib, atol=1e-9, err_msg=kind)
