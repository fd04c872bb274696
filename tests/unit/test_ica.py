import numpy as np
import pytest

from nearid.align import amari_distance
from nearid.data.toy import sample_sources
from nearid.ica import WhitenedICA


def test_recovers_mixing_of_laplace_sources():
    rng = np.random.default_rng(0)
    S = sample_sources("laplace", 5000, 3, rng)
    A = rng.normal(size=(3, 3)) + 2 * np.eye(3)
    ica = WhitenedICA(random_state=0).fit(S @ A.T)
    assert ica.converged_
    assert amari_distance(ica.unmixing_, A) < 0.05


def test_components_are_white_and_round_trip():
    rng = np.random.default_rng(1)
    X = sample_sources("uniform", 2000, 4, rng) @ rng.normal(size=(4, 4))
    ica = WhitenedICA(random_state=0).fit(X)
    S = ica.transform(X)
    np.testing.assert_allclose(np.cov(S.T), np.eye(4), atol=0.01)
    np.testing.assert_allclose(ica.inverse_transform(S), X, atol=1e-8)


def test_deterministic_given_random_state():
    X = np.random.default_rng(2).laplace(size=(500, 3))
    a = WhitenedICA(random_state=3).fit_transform(X)
    b = WhitenedICA(random_state=3).fit_transform(X)
    np.testing.assert_array_equal(a, b)


def test_unfitted_raises():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        WhitenedICA().transform(np.ones((3, 2)))
