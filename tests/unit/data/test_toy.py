import numpy as np
import pytest
from scipy.spatial.distance import pdist

from nearid.data import toy


@pytest.mark.parametrize("kind", ["laplace", "uniform", "gaussian", "gennorm_1.5", "gennorm_3"])
def test_sources_have_unit_variance(kind):
    S = toy.sample_sources(kind, 50000, 2, np.random.default_rng(0))
    np.testing.assert_allclose(S.std(0), 1.0, atol=0.03)
    np.testing.assert_allclose(S.mean(0), 0.0, atol=0.03)


@pytest.mark.parametrize("kind", ["cauchy", "gennorm_x", "gennorm_-1"])
def test_bad_source_kind(kind):
    with pytest.raises(ValueError):
        toy.sample_sources(kind, 10, 2, np.random.default_rng(0))


def test_delta_zero_is_an_exact_isometry():
    dgp = toy.IsometricDGP(3, 12, delta=0.0, random_state=1)
    X, U = dgp.sample(200, seed=0)
    np.testing.assert_allclose(pdist(X), pdist(U), atol=1e-10)
    assert dgp.bilipschitz_constant(U) == pytest.approx(1.0)


def test_bilipschitz_constant_grows_with_delta_and_respects_bounds():
    U = toy.sample_sources("uniform", 2000, 3, np.random.default_rng(0))
    consts = []
    for delta in (0.1, 0.4, 0.8):
        dgp = toy.IsometricDGP(3, 12, delta, random_state=1)
        s = dgp.jacobian_singular_values(U)
        assert s.min() >= 1 - delta - 1e-9
        assert s.max() <= np.sqrt((1 + delta) ** 2 + delta ** 2) + 1e-9
        consts.append(dgp.bilipschitz_constant(U))
    assert consts == sorted(consts) and consts[0] > 1


def test_jacobian_matches_finite_differences():
    dgp = toy.IsometricDGP(2, 6, 0.5, random_state=3)
    u = np.array([[0.3, -0.7]])
    eps = 1e-6
    J = np.stack([(dgp(u + eps * e) - dgp(u - eps * e))[0] / (2 * eps) for e in np.eye(2)], axis=1)
    np.testing.assert_allclose(np.linalg.svd(J, compute_uv=False), dgp.jacobian_singular_values(u)[0],
                               atol=1e-6)


def test_bad_dgp_arguments():
    with pytest.raises(ValueError, match="delta"):
        toy.IsometricDGP(2, 6, 1.5)
    with pytest.raises(ValueError, match="observed_dim"):
        toy.IsometricDGP(4, 6, 0.1)
    with pytest.raises(ValueError, match="source kind"):
        toy.IsometricDGP(2, 6, 0.1, sources="cauchy")  # at construction, not at the first sample


def test_blob_images():
    images, U = toy.blob_images(50, size=16, seed=0)
    assert images.shape == (50, 16, 16) and U.shape == (50, 2)
    peak = np.array([np.unravel_index(im.argmax(), im.shape) for im in images])
    np.testing.assert_allclose(peak[:, ::-1], U, atol=0.51)  # (row, col) = (u2, u1)
    again, _ = toy.blob_images(50, size=16, seed=0)
    np.testing.assert_array_equal(images, again)
