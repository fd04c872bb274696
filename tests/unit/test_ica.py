"""Whitening + ICA: the planted cases of the silent whitening failure, the component rule,
round trips, determinism."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError

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


def _slow_to_settle(seed: int = 0) -> np.ndarray:
    """Eight weakly non-Gaussian sources (uniform + Gaussian noise, Student t), mixed: scikit-
    learn's undamped FastICA wanders here for thousands of iterations."""
    rng = np.random.default_rng(seed)
    n = 800
    S = np.stack([rng.standard_t(6 + 2 * i, size=n) if i % 2 else rng.uniform(-1, 1, n) + 0.8 * rng.normal(size=n)
                  for i in range(8)], 1)
    return S @ rng.normal(size=(8, 8))


def _undamped_change(Z: np.ndarray, W: np.ndarray) -> float:
    """How far one of scikit-learn's own (undamped) FastICA steps moves W's directions, each
    to the nearest of the new ones: 0 at a fixed point up to the rows' order and signs."""
    return float(np.max(1 - np.abs(W @ _fastica_step(Z, W).T).max(1)))


def test_a_fit_still_moving_at_the_cap_is_refitted_by_the_stabilised_step():
    X = _slow_to_settle()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # converged by the second route: no warning
        ica = WhitenedICA(n_components="all", max_iter=300, random_state=0).fit(X)
    assert ica.stabilised_ and ica.converged_
    assert 300 < ica.n_iter_ < 600  # both routes counted; the stabilised one settles in tens
    assert any("stabilised step" in note for note in ica.fallbacks_)
    np.testing.assert_allclose(ica.rotation_ @ ica.rotation_.T, np.eye(8), atol=1e-10)
    # what it found is a fixed point of scikit-learn's own step, to its tolerance
    Z = ica.whitener_.transform(X)
    assert _undamped_change(Z, ica.rotation_) < 2 * ica.tol
    np.testing.assert_array_equal(ica.rotation_, WhitenedICA(n_components="all", max_iter=300,
                                                             random_state=0).fit(X).rotation_)


def test_a_fit_that_converges_undamped_is_scikit_learns_own():
    from sklearn.decomposition import FastICA

    X = np.random.default_rng(5).laplace(size=(2000, 4)) @ np.random.default_rng(6).normal(size=(4, 4))
    ica = WhitenedICA(n_components="all", random_state=0).fit(X)
    assert ica.converged_ and not ica.stabilised_ and ica.fallbacks_ == []
    Z = ica.whitener_.transform(X)
    ours = FastICA(whiten=False, max_iter=ica.max_iter, random_state=0).fit(Z)
    np.testing.assert_array_equal(ica.rotation_, ours.components_)


def test_stabilised_fastica_separates_sources_and_checks_its_input():
    from nearid.ica import stabilised_fastica

    rng = np.random.default_rng(4)
    S = sample_sources("laplace", 4000, 4, rng)
    A = rng.normal(size=(4, 4)) + 2 * np.eye(4)
    white = Whitener(n_components="all").fit(S @ A.T)
    Z = white.transform(S @ A.T)
    W, converged, n_iter = stabilised_fastica(Z, rng.normal(size=(4, 4)))
    assert converged and n_iter < 200
    unmixing = (white.whitening_ @ W.T).T
    assert amari_distance(unmixing, A) < 0.05
    for fun in ("exp", "cube"):
        assert stabilised_fastica(Z, np.eye(4), fun=fun)[1]
    with pytest.raises(ValueError, match="4 x 4"):
        stabilised_fastica(Z, np.eye(3))
    with pytest.raises(ValueError, match="logcosh"):
        stabilised_fastica(Z, np.eye(4), fun="tanh")
    with pytest.raises(ValueError, match="step"):
        stabilised_fastica(Z, np.eye(4), step=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        stabilised_fastica(Z, np.eye(4), max_iter=0)


def test_stabilised_fastica_treats_the_components_as_a_set():
    """The row order of the start permutes the answer's rows and nothing else: rows are matched
    to rows before each relaxed step, so the order of the components plays no part."""
    from nearid.ica import stabilised_fastica

    X = _slow_to_settle(1)
    Z = Whitener(n_components="all").fit(X).transform(X)
    start = np.random.default_rng(7).normal(size=(8, 8))
    order = np.random.default_rng(8).permutation(8)
    W, converged, n_iter = stabilised_fastica(Z, start)
    W_perm, converged_perm, n_iter_perm = stabilised_fastica(Z, start[order])
    assert converged and converged_perm and n_iter == n_iter_perm
    np.testing.assert_allclose(W_perm, W[order], atol=1e-12)
    # what it returns is a fixed point of scikit-learn's step, up to the rows' order and signs
    overlap = np.abs(W @ _fastica_step(Z, W).T)
    assert np.all(1 - overlap.max(1) < 2e-4)


def _fastica_step(Z: np.ndarray, W: np.ndarray) -> np.ndarray:
    from scipy import linalg

    g = np.tanh(Z @ W.T)
    W1 = g.T @ Z / len(Z) - (1 - g ** 2).mean(0)[:, None] * W
    s, u = linalg.eigh(W1 @ W1.T)
    return (u / np.sqrt(s)) @ u.T @ W1
