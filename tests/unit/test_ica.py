"""Whitening + ICA: the planted cases of the silent whitening failure, the component rule,
round trips, determinism."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from nearid import align
from nearid.data.toy import random_orthogonal, sample_sources
from nearid.ica import LowVarianceWarning, Whitener, WhitenedICA, choose_components
from nearid.metrics.recovery import amari_distance


def test_recovers_mixing_of_laplace_sources():
    rng = np.random.default_rng(0)
    S = sample_sources("laplace", 5000, 3, rng)
    A = rng.normal(size=(3, 3)) + 2 * np.eye(3)
    ica = WhitenedICA(n_components="all", random_state=0).fit(S @ A.T)
    assert ica.converged_
    assert amari_distance(ica.unmixing_, A) < 0.05


def test_components_are_white_and_round_trip():
    rng = np.random.default_rng(1)
    X = sample_sources("uniform", 2000, 4, rng) @ rng.normal(size=(4, 4))
    ica = WhitenedICA(n_components="all", random_state=0).fit(X)
    S = ica.transform(X)
    np.testing.assert_allclose(np.cov(S.T), np.eye(4), atol=0.01)
    np.testing.assert_allclose(ica.inverse_transform(S), X, atol=1e-8)
    np.testing.assert_allclose((X - X.mean(0)) @ ica.unmixing_.T, S, atol=1e-8)
    np.testing.assert_allclose(S @ ica.mixing_.T + X.mean(0), X, atol=1e-8)


def test_deterministic_given_random_state():
    X = np.random.default_rng(2).laplace(size=(500, 3))
    a = WhitenedICA(random_state=3).fit_transform(X)
    b = WhitenedICA(random_state=3).fit_transform(X)
    np.testing.assert_array_equal(a, b)


def test_unfitted_raises():
    with pytest.raises(NotFittedError):
        WhitenedICA().transform(np.ones((3, 2)))


# --------------------------------------------------------------------------- finding 1
def _planted(dead: list[int], n=4000, d=16, seed=0):
    """Laplace sources seen through two different orthogonal mixings, with constant (dead)
    columns inserted at the given positions of both embeddings."""
    rng = np.random.default_rng(seed)
    S = sample_sources("laplace", n, d, rng)
    A, B = S @ random_orthogonal(d, rng), S @ random_orthogonal(d, rng)
    for pos in dead:
        A = np.insert(A, pos, 0.7, axis=1)
        B = np.insert(B, pos, -1.3, axis=1)
    return A, B


@pytest.mark.parametrize("dead", [[], [0], [16], [0, 5, 9]], ids=["none", "first", "last", "several"])
def test_dead_columns_do_not_break_ica_wherever_they_sit(dead):
    d = 16
    A, B = _planted(dead, d=d)
    res = align.compare(A, B, ica_components="all", seed=0)
    assert res.errors["ica"] < 0.05, res.errors
    assert res.ica_efficiency > 0.9
    assert res.ica_components == (d, d)


def test_dead_and_duplicate_columns_are_restored_on_the_way_back():
    rng = np.random.default_rng(4)
    X = sample_sources("laplace", 1000, 3, rng) @ rng.normal(size=(3, 3))
    X = np.column_stack([np.full(1000, 2.5), X, X[:, 1]])  # constant first, a copy last
    w = Whitener(n_components="all").fit(X)
    assert w.kept_columns_.tolist() == [False, True, True, True, False]
    assert w.duplicates_ == {4: 2}
    np.testing.assert_allclose(w.inverse_transform(w.transform(X)), X, atol=1e-9)
    ica = WhitenedICA(n_components="all").fit(X)
    assert ica.n_components_ == 3 and np.isfinite(ica.unmixing_).all()
    assert np.abs(ica.unmixing_).max() < 1e3


def test_flat_spectrum_keeps_what_the_rule_says_and_warns_when_little_is_kept():
    rng = np.random.default_rng(5)
    X = rng.laplace(size=(3000, 20))  # every direction holds 5% of the variance
    assert Whitener(0.95).fit(X).n_components_ == 19
    assert Whitener(0.5).fit(X).n_components_ == 10
    with pytest.warns(LowVarianceWarning, match="hold only"):
        assert Whitener(4).fit(X).n_components_ == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Whitener(0.95).fit(X)


def test_component_rule_and_row_cap():
    var = np.array([5.0, 3.0, 1.0, 0.5, 0.5])
    assert choose_components(var, 1000, 0.8) == 2
    assert choose_components(var, 1000, 0.81) == 3
    assert choose_components(var, 1000, 1.0) == 5
    assert choose_components(var, 1000, "all") == 5
    assert choose_components(var, 1000, 3) == 3
    assert choose_components(var, 1000, 9) == 5
    assert choose_components(var, 25, "all") == 2  # at most one component per ten rows
    assert choose_components(var, 25, "all", rows_per_component=None) == 5
    for bad in (0, -1, 1.5, "most", True):
        with pytest.raises(ValueError):
            choose_components(var, 1000, bad)


def test_all_constant_is_a_clear_error():
    with pytest.raises(ValueError, match="every column is constant"):
        Whitener().fit(np.ones((50, 3)))
