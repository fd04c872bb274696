"""Similarity measures (nearid.align.measures) against known answers: an exact rotation gives
the measure's "identical" value, independent data its analytic or exact permutation
expectation, each claimed invariance holds, a common offset of 1e4 and float32 change
nothing that matters."""

import numpy as np
import pytest

from nearid.align import measures as M

N, P = 600, 20


def _rotation(d, rng):
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return Q


def _related(seed=0, n=N, p=P):
    """A and a noisy linear image of it (related, not identical: invariances have something to keep)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, p)) * np.linspace(0.5, 2.0, p)
    B = np.tanh(A @ rng.standard_normal((p, p)) / np.sqrt(p)) + 0.3 * rng.standard_normal((n, p))
    return A, B


def _independent(seed=0, n=N, p=P):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, p)), rng.standard_normal((n, p))


# every measure as f(X, Y); fitted ones scored on held-out rows (the second half)
def _heldout(fn):
    def f(X, Y):
        h = X.shape[0] // 2
        return fn(X[:h], Y[:h], X[h:], Y[h:])
    return f


FUNCTIONS = {
    "cka": M.linear_cka,
    "debiased_cka": M.debiased_cka,
    "minibatch_cka": lambda X, Y: M.minibatch_cka(X, Y, batch_size=100),
    "rbf_cka": M.rbf_cka,
    "cca": _heldout(M.cca),
    "svcca": _heldout(M.svcca),
    "pwcca": _heldout(M.pwcca),
    "rsa": M.rsa,
    "mutual_knn": M.mutual_knn,
    "procrustes": M.procrustes_angle,
    "bures": M.bures_distance,
}


def test_every_registered_measure_is_tested():
    assert set(FUNCTIONS) == set(M.MEASURES)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_planted_rotation_gives_identical(name):
    rng = np.random.default_rng(1)
    A = rng.laplace(size=(N, P))
    B = 2.5 * A @ _rotation(P, rng) + 7.0
    assert FUNCTIONS[name](A, B) == pytest.approx(M.MEASURES[name].identical, abs=1e-9)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_rotation_scale_and_offset_invariance(name):
    A, B = _related()
    rng = np.random.default_rng(2)
    moved = 3.0 * B @ _rotation(P, rng) - 4.0
    assert FUNCTIONS[name](A, moved) == pytest.approx(FUNCTIONS[name](A, B), abs=1e-9)


@pytest.mark.parametrize("name", ["cca", "pwcca"])
def test_invertible_linear_invariance_where_claimed(name):
    A, B = _related()
    rng = np.random.default_rng(3)
    W = rng.standard_normal((P, P)) + 3 * np.eye(P)  # invertible, far from a rotation
    assert FUNCTIONS[name](A, B @ W + 1.0) == pytest.approx(FUNCTIONS[name](A, B), abs=1e-9)
    if name == "cca":
        assert FUNCTIONS[name](A @ W, B) == pytest.approx(FUNCTIONS[name](A, B), abs=1e-9)


def test_linear_cka_is_not_invariant_to_linear_maps():
    A, B = _related()
    W = np.diag(np.linspace(0.1, 10, P))
    assert abs(M.linear_cka(A, B @ W) - M.linear_cka(A, B)) > 0.01  # the invariance it does not claim


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_common_offset_of_1e4(name):
    A, B = _related()
    assert FUNCTIONS[name](A + 1e4, B + 1e4) == pytest.approx(FUNCTIONS[name](A, B), abs=1e-6)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_float32_agrees_with_float64(name):
    A, B = _related()
    A32, B32 = A.astype(np.float32), B.astype(np.float32)
    tol = 1e-2 if name == "mutual_knn" else 1e-5  # a neighbour rank may swap at a near-tie
    assert FUNCTIONS[name](A32, B32) == pytest.approx(FUNCTIONS[name](A32.astype(float), B32.astype(float)),
                                                      abs=tol)


# --------------------------------------------------------------------------- independent data
def _permutation_mean(K, L):
    """E over row shuffles of <K~, P L~ P'> / (||K~|| ||L~||) for double-centred K~, L~:
    tr(K~) tr(L~) / ((n - 1) ||K~|| ||L~||), exactly (the denominator does not move)."""
    K, L = M._double_centre(K), M._double_centre(L)
    return np.trace(K) * np.trace(L) / ((K.shape[0] - 1) * np.linalg.norm(K) * np.linalg.norm(L))


def test_linear_cka_independent_matches_its_expectations():
    A, C = _independent()
    expected = _permutation_mean(A @ A.T, C @ C.T)
    assert expected == pytest.approx(P / (N + P), rel=0.02)  # ~ sqrt(pq / ((n+p)(n+q))), isotropic
    assert M.linear_cka(A, C) == pytest.approx(expected, abs=0.006)


def test_debiased_and_minibatch_cka_are_near_zero_on_independent_data():
    for seed in range(3):
        A, C = _independent(seed)
        assert abs(M.debiased_cka(A, C)) < 0.01
        assert abs(M.minibatch_cka(A, C, batch_size=100)) < 0.02
        assert M.linear_cka(A, C) > 0.025  # the bias the debiased one removes


def test_rbf_cka_independent_matches_permutation_mean():
    A, C = _independent()
    D = [M._sq_distances(M._centred(Z)) for Z in (A, C)]
    K, L = (np.exp(-d / (2 * np.median(d[np.triu_indices(N, 1)]))) for d in D)
    assert M.rbf_cka(A, C) == pytest.approx(_permutation_mean(K, L), abs=0.008)


@pytest.mark.parametrize("name", ["cca", "svcca", "pwcca"])
def test_held_out_canonical_correlations_are_near_zero_on_independent_data(name):
    A, C = _independent()
    assert abs(FUNCTIONS[name](A, C)) < 0.03


def test_in_sample_cca_overfits_where_held_out_does_not():
    rng = np.random.default_rng(4)
    A, C = rng.standard_normal((120, 40)), rng.standard_normal((120, 40))
    fit = M.fit_cca(A[:60], C[:60])  # 60 rows: 40 + 40 - 59 = 21 correlations of exactly 1
    assert np.sum(fit.rho > 1 - 1e-9) == 21
    assert M.cca(A[:60], C[:60]) > 0.75
    assert abs(M.cca(A[:60], C[:60], A[60:], C[60:])) < 0.1


def test_rsa_independent():
    A, C = _independent()
    assert abs(M.rsa(A, C)) < 0.04
    assert abs(M.rsa(A, C, comparison="kendall")) < 0.03
    u, v = M.rdm(A), M.rdm(C)  # cosine of positive distances: mean(u) mean(v) / rms(u) rms(v)
    expected = u.mean() * v.mean() / np.sqrt((u ** 2).mean() * (v ** 2).mean())
    assert M.rsa(A, C, comparison="cosine") == pytest.approx(expected, abs=0.002)


def test_mutual_knn_independent_is_k_over_n():
    A, C = _independent()
    for k in (5, 10):
        assert M.mutual_knn(A, C, k=k) == pytest.approx(k / (N - 1), abs=0.006)


def test_procrustes_independent_follows_the_quarter_circle_law():
    """For independent isotropic Gaussians, cos(theta) = ||X'Y||_* / (||X|| ||Y||) tends to
    the mean singular value of a p x p Gaussian matrix, 8 sqrt(p) / (3 pi), over sqrt(n p)."""
    for seed in range(3):
        A, C = _independent(seed)
        cos = np.cos(M.procrustes_angle(A, C))
        assert cos == pytest.approx(8 / (3 * np.pi) * np.sqrt(P / N), abs=0.015)
        assert M.bures_distance(A, C) == pytest.approx(np.sqrt(2 - 2 * cos), abs=1e-12)


# --------------------------------------------------------------------------- definitions
def test_unbiased_hsic_feature_form_equals_the_n_by_n_estimator():
    A, B = _related(n=80)
    A, B = A + 3.0, B - 2.0  # the n x n form on uncentred data: HSIC_u does not see a shift
    Ac, Bc = M._centred(A), M._centred(B)
    assert M._hsic_unbiased_linear(Ac, Bc, Ac.T @ Bc) == pytest.approx(M.hsic_unbiased(A @ A.T, B @ B.T),
                                                                       rel=1e-9)
    num = M.hsic_unbiased(A @ A.T, B @ B.T)
    den = np.sqrt(M.hsic_unbiased(A @ A.T, A @ A.T) * M.hsic_unbiased(B @ B.T, B @ B.T))
    assert M.debiased_cka(A, B) == pytest.approx(num / den, rel=1e-9)


def test_linear_cka_is_the_rbf_free_hsic_ratio():
    A, B = _related(n=80)
    K, L = M._double_centre(A @ A.T), M._double_centre(B @ B.T)
    assert M.linear_cka(A, B) == pytest.approx((K * L).sum() / (np.linalg.norm(K) * np.linalg.norm(L)), rel=1e-12)


def test_shape_metrics_by_their_definition():
    A, B = _related()
    Ac, Bc = M._centred(A), M._centred(B)
    cos = np.linalg.svd(Ac.T @ Bc, compute_uv=False).sum() / (np.linalg.norm(Ac) * np.linalg.norm(Bc))
    assert M.procrustes_angle(A, B) == pytest.approx(np.arccos(cos), abs=1e-10)
    narrow = B[:, :5]  # different widths: the narrower side is zero-padded
    cos = np.linalg.svd(Ac.T @ M._centred(narrow), compute_uv=False).sum() / (
        np.linalg.norm(Ac) * np.linalg.norm(M._centred(narrow)))
    assert M.procrustes_angle(A, narrow) == pytest.approx(np.arccos(cos), abs=1e-10)
    assert M.procrustes_angle(narrow, A) == pytest.approx(M.procrustes_angle(A, narrow), abs=1e-12)


def test_svcca_keeps_the_variance_share():
    A, B = _related()
    fit = M.fit_cca(A[:300], B[:300], variance=0.5)
    assert fit.a.shape[1] < P  # fewer directions than the width
    assert M.svcca(A[:300], B[:300], A[300:], B[300:], variance=1.0) == pytest.approx(
        M.cca(A[:300], B[:300], A[300:], B[300:]), abs=1e-9)


def test_rdm_by_definition():
    from scipy.spatial.distance import pdist

    A, _ = _related(n=50)
    assert np.allclose(M.rdm(A), pdist(A), atol=1e-9)
    assert np.allclose(M.rdm(A, "correlation"), pdist(A, "correlation"), atol=1e-9)


def test_mutual_knn_by_definition():
    A, B = _related(n=120)
    k = 7
    def sets(X):
        X = M._centred(X)
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
        S = X @ X.T
        np.fill_diagonal(S, -np.inf)
        return [set(np.argsort(-row)[:k]) for row in S]
    expected = np.mean([len(a & b) / k for a, b in zip(sets(A), sets(B))])
    assert M.mutual_knn(A, B, k=k) == pytest.approx(expected)


def test_pairwise_measures_subsample_to_max_rows():
    A, B = _related(n=900)
    assert M.rsa(A, B, max_rows=300) == M.rsa(A, B, max_rows=300, random_state=0)
    assert M.rsa(A, B, max_rows=300) != M.rsa(A, B, max_rows=None)
    assert M.subsampled_rows(900, 300) == 300 and M.subsampled_rows(200, 300) == 200


def test_bad_options_are_refused():
    A, B = _related(n=50)
    with pytest.raises(ValueError, match="comparison"):
        M.rsa(A, B, comparison="pearsonish")
    with pytest.raises(ValueError, match="batch_size"):
        M.minibatch_cka(A, B, batch_size=100)
    with pytest.raises(ValueError, match="k must be below"):
        M.mutual_knn(A, B, k=50)


def test_the_page_has_a_row_per_measure():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "book" / "align.md").read_text()
    rows = {line.split("|")[1].strip().strip("`") for line in page.splitlines() if line.startswith("| `")}
    assert set(M.MEASURES) <= rows
