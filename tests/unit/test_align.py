import numpy as np
import pytest

from nearid import align
from nearid.data.toy import random_orthogonal


@pytest.fixture
def codes():
    rng = np.random.default_rng(0)
    return rng.laplace(size=(400, 4)), rng


def test_rigid_recovers_planted_rotation_scale_and_shift(codes):
    A, rng = codes
    Q = random_orthogonal(4, rng)
    B = 2.5 * A @ Q + np.array([1.0, -2.0, 0.5, 3.0])
    est = align.RigidAlignment().fit(A, B)
    assert est.score(A, B) < 1e-10
    assert est.scale_ == pytest.approx(2.5)
    np.testing.assert_allclose(est.rotation_, Q, atol=1e-10)


def test_strict_rigid_cannot_absorb_scale(codes):
    A, rng = codes
    B = 3.0 * A
    assert align.RigidAlignment(scale=False).fit(A, B).score(A, B) > 0.1
    assert align.RigidAlignment(scale=True).fit(A, B).score(A, B) < 1e-10


def test_signed_permutation_recovers_planted_permutation(codes):
    A, _ = codes
    perm, signs, scales = [2, 0, 3, 1], np.array([1, -1, -1, 1]), np.array([1.0, 2.0, 0.5, 3.0])
    B = A[:, perm] * signs * scales
    est = align.SignedPermutationAlignment().fit(A, B)
    assert est.score(A, B) < 1e-10
    np.testing.assert_array_equal(est.source_, perm)
    np.testing.assert_allclose(est.coef_, signs * scales)


def test_permutation_fails_on_rotation_but_linear_does_not(codes):
    A, rng = codes
    M = rng.normal(size=(4, 4)) + 2 * np.eye(4)
    B = A @ M
    assert align.SignedPermutationAlignment().fit(A, B).score(A, B) > 0.05
    assert align.LinearAlignment().fit(A, B).score(A, B) < 1e-10


def test_ica_alignment_recovers_rotation_without_regression(codes):
    A, rng = codes
    B = A @ random_orthogonal(4, rng)
    assert align.ICAAlignment().fit(A, B).score(A, B) < 0.05


def test_rectangular_dimensions_are_supported(codes):
    A, rng = codes
    B = A @ random_orthogonal(4, rng).T[:, :4] @ rng.normal(size=(4, 6))
    for family in align.FAMILIES:
        pred = align.make_alignment(family).fit(A, B).transform(A)
        assert pred.shape == B.shape


def test_alignment_table_order_and_keys(codes):
    A, rng = codes
    B = A @ random_orthogonal(4, rng) + 0.05 * rng.normal(size=A.shape)
    t = align.alignment_table(A, B, seed=1)
    assert set(t) == {"permutation", "rigid", "linear", "ica", "ica_efficiency", "cka", "n_fit", "n_eval",
                      "dim_a", "dim_b", "ica_components", "ica_variance"}
    assert t["n_fit"] + t["n_eval"] == len(A)
    assert t["permutation"] > t["rigid"] >= t["linear"] * 0.9
    assert 0.9 < t["cka"] <= 1.0


def test_latent_diameter_is_robust_quantile():
    line = np.linspace(0, 1, 101)[:, None]
    assert align.latent_diameter(line, quantile=1.0) == pytest.approx(1.0)
    assert align.latent_diameter(line) < 1.0
    with pytest.raises(ValueError, match="zero diameter"):
        align.latent_diameter(np.ones((5, 2)))


@pytest.mark.parametrize("A,B,msg", [
    (np.ones(5), np.ones((5, 2)), "2-D"),
    (np.ones((5, 2)), np.ones((4, 2)), "same number of rows"),
    (np.array([[np.nan, 1.0], [1.0, 2.0]]), np.ones((2, 2)), "NaN"),
])
def test_check_pair_rejects_bad_input(A, B, msg):
    with pytest.raises(ValueError, match=msg):
        align.check_pair(A, B)


def test_alignment_table_rejects_too_few_rows():
    with pytest.raises(ValueError, match="too few rows"):
        align.alignment_table(np.random.rand(8, 4), np.random.rand(8, 4))


def test_transform_checks_width(codes):
    A, _ = codes
    est = align.LinearAlignment().fit(A, A)
    with pytest.raises(ValueError, match="4 columns"):
        est.transform(A[:, :3])


def test_ica_efficiency_formula():
    assert align.ica_efficiency(0.4, 0.2, 0.3) == pytest.approx(0.5)
    assert np.isnan(align.ica_efficiency(0.2, 0.2, 0.1))


def test_ica_efficiency_not_defined_within_float32_noise():
    tol = align.EFFICIENCY_MIN_GAP
    assert tol == pytest.approx(np.sqrt(np.finfo(np.float32).eps))  # 3.45e-4 of B's diameter
    # the round-off gaps measured on A against itself (perm, rigid ~ 1e-7, ICA ~ 0.1)
    assert np.isnan(align.ica_efficiency(7.0e-7, 1.4e-7, 0.127))
    assert np.isnan(align.ica_efficiency(0.2 + 0.9 * tol, 0.2, 0.1))
    assert np.isnan(align.ica_efficiency(0.2 - 0.9 * tol, 0.2, 0.1))
    assert np.isnan(align.ica_efficiency(float("nan"), 0.2, 0.1))
    assert align.ica_efficiency(0.2 + 2 * tol, 0.2, 0.2) == pytest.approx(1.0)
    assert align.ica_efficiency(0.2046, 0.2, 0.2023) == pytest.approx(0.5, abs=1e-9)  # the smallest gap in the book


def test_linear_cka_invariances(codes):
    A, rng = codes
    assert align.linear_cka(A, 3 * A @ random_orthogonal(4, rng)) == pytest.approx(1.0)
    assert align.linear_cka(A, rng.normal(size=A.shape)) < 0.1
