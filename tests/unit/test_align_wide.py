"""Wide embeddings: the cap on ICA components, the efficiency where perm and rigid agree
within round-off, and the numerical fallbacks (a LAPACK driver that does not converge,
FastICA failing), each at small sizes."""

import numpy as np
import pytest
import scipy.linalg

from nearid import align, linalg
from nearid.ica import Whitener, WhitenedICA, choose_components


def planted(n=2000, d=40, k=12, noise=0.3, seed=0):
    """Two float32 images of the same k Laplace sources, with noise: the 95% rule asks for
    more than k components."""
    rng = np.random.default_rng(seed)
    Z = rng.laplace(size=(n, k))
    A = Z @ rng.normal(size=(k, d))
    B = Z @ rng.normal(size=(k, d))
    A += noise * A.std() * rng.standard_normal(A.shape)
    B += noise * B.std() * rng.standard_normal(B.shape)
    return A.astype(np.float32), B.astype(np.float32)


CLI = dict(ica_max_rows=align.ICA_MAX_ROWS, ica_max_iter=align.ICA_MAX_ITER)


# --------------------------------------------------------------------------- the cap
def test_cap_constant_never_binds_for_the_chapters():
    from nearid.book.profiles import ch04_alignment

    largest = max(max(P["ica_grid"]) for P in ch04_alignment.PROFILES.values())
    assert largest < align.ICA_MAX_COMPONENTS == 256


def test_choose_components_cap():
    var = np.linspace(10, 1, 50)
    assert choose_components(var, 1000, 0.95) > 5
    assert choose_components(var, 1000, 0.95, max_components=5) == 5
    assert choose_components(var, 1000, "all", max_components=500) == 50
    with pytest.raises(ValueError, match="max_components"):
        choose_components(var, 1000, 0.95, max_components=0)


def test_cap_binds_and_says_so():
    A, B = planted()
    free = align.compare(A, B, **CLI)
    assert free.ica_max_components is None and free.ica_cap_bound is None
    assert "ica_max_components" not in free.to_dict()  # the chapters' records are unchanged
    rule = free.ica_components
    assert min(rule) > 5
    capped = align.compare(A, B, ica_max_components=5, **CLI)
    assert capped.ica_components == (5, 5)
    assert capped.ica_components_by_rule == rule and capped.ica_cap_bound == (True, True)
    assert capped.ica_variance[0] < free.ica_variance[0]
    # only the ICA row changes
    for fam in ("permutation", "rigid", "linear"):
        assert capped.errors[fam] == free.errors[fam]
    d = capped.to_dict()
    assert d["ica_max_components"] == 5 and d["ica_cap_bound"] == [True, True]
    assert d["ica_components_by_rule"] == list(rule)
    assert "capped at 5 per side" in str(capped)
    # the reference path applies the same cap
    ref = align.compare(A, B, ica_max_components=5, reference=True, **CLI)
    assert ref.ica_components == (5, 5) and ref.ica_components_by_rule == rule


def test_cap_that_does_not_bind_changes_nothing():
    A, B = planted()
    free = align.compare(A, B, **CLI)
    roomy = align.compare(A, B, ica_max_components=align.ICA_MAX_COMPONENTS, **CLI)
    assert roomy.errors == free.errors and roomy.ica_efficiency == free.ica_efficiency
    assert roomy.ica_cap_bound == (False, False) and "not reached" in str(roomy)


def test_bad_cap():
    A, B = planted(n=300, d=6)
    with pytest.raises(ValueError, match="max_components"):
        align.compare(A, B, ica_max_components=0)


def test_whitened_ica_cap():
    A, _ = planted()
    ica = WhitenedICA(max_components=4, random_state=0).fit(A)
    assert ica.n_components_ == 4 and ica.whitener_.n_components_by_rule_ > 4
    assert WhitenedICA(random_state=0).fit(A).whitener_.n_components_by_rule_ == ica.whitener_.n_components_by_rule_


# --------------------------------------------------------------------------- the efficiency
@pytest.mark.parametrize("reference", [False, True])
def test_efficiency_not_defined_for_a_self_comparison(reference):
    rng = np.random.default_rng(0)
    A = rng.laplace(size=(2000, 16)).astype(np.float32)
    perm, sign = rng.permutation(16), rng.choice([-1, 1], 16).astype(np.float32)
    for B in (A, A[:, perm] * sign):
        res = align.compare(A, B, reference=reference, **CLI)
        assert abs(res.errors["permutation"] - res.errors["rigid"]) < align.EFFICIENCY_MIN_GAP
        assert np.isnan(res.ica_efficiency)
        assert "n/a" in str(res) and "numerical noise" in str(res)


def test_efficiency_is_a_number_with_a_real_gap():
    A, B = planted()
    res = align.compare(A, B, **CLI)
    assert res.errors["permutation"] - res.errors["rigid"] > 0.05
    assert np.isfinite(res.ica_efficiency)


# --------------------------------------------------------------------------- fallbacks
def _failing(*args, **kwargs):
    raise np.linalg.LinAlgError("SVD did not converge")


def test_linalg_svd_fallbacks(monkeypatch):
    M = np.random.default_rng(1).normal(size=(30, 20)) @ np.diag(np.logspace(0, -3, 20))
    U0, S0, Vt0 = np.linalg.svd(M, full_matrices=False)
    notes = []
    assert all(np.array_equal(x, y) for x, y in zip(linalg.svd(M, notes), (U0, S0, Vt0))) and notes == []
    monkeypatch.setattr(np.linalg, "svd", _failing)
    U, S, Vt = linalg.svd(M, notes, what="test SVD")
    assert "gesvd" in notes[-1] and notes[-1].startswith("test SVD")
    np.testing.assert_allclose(S, S0, rtol=1e-10)
    np.testing.assert_allclose(U @ Vt, U0 @ Vt0, atol=1e-8)
    monkeypatch.setattr(scipy.linalg, "svd", _failing)
    for X in (M, M.T):
        notes = []
        U, S, Vt = linalg.svd(X, notes)
        assert "Gram" in notes[0]
        np.testing.assert_allclose(S, S0, rtol=1e-6)
        np.testing.assert_allclose((U * S) @ Vt, X, atol=1e-9)
        np.testing.assert_allclose(U.T @ U, np.eye(20), atol=1e-6)


def test_linalg_eigh_fallback(monkeypatch):
    X = np.random.default_rng(2).normal(size=(50, 10))
    C = X.T @ X
    w0, _ = np.linalg.eigh(C)
    monkeypatch.setattr(np.linalg, "eigh", _failing)
    notes = []
    w, v = linalg.eigh(C, notes, what="PCA eigh")
    assert "driver='evr'" in notes[0]
    np.testing.assert_allclose(w, w0, rtol=1e-10)
    np.testing.assert_allclose((v * w) @ v.T, C, atol=1e-9)
    with pytest.raises(ValueError, match="NaN"):
        linalg.svd(np.array([[np.nan, 1.0], [1.0, 2.0]]))


def test_compare_survives_a_failing_svd(monkeypatch):
    A, B = planted(n=1500, d=20)
    before = align.compare(A, B, **CLI)
    assert before.fallbacks == []
    monkeypatch.setattr(np.linalg, "svd", _failing)
    after = align.compare(A, B, **CLI)
    assert any(n.startswith("rigid SVD") and "gesvd" in n for n in after.fallbacks)
    assert after.errors["rigid"] == pytest.approx(before.errors["rigid"], abs=1e-9)
    assert after.to_dict()["fallbacks"] == after.fallbacks
    assert "numerical fallback: rigid SVD" in str(after)
    ref = align.compare(A, B, reference=True, **CLI)  # the estimators' path too
    assert any("rigid SVD" in n for n in ref.fallbacks) and any("whitening SVD" in n for n in ref.fallbacks)


def test_compare_survives_a_failing_eigh(monkeypatch):
    A, B = planted(n=1500, d=20)
    before = align.compare(A, B, **CLI)
    monkeypatch.setattr(np.linalg, "eigh", _failing)
    after = align.compare(A, B, **CLI)
    assert any(n.startswith("A: PCA eigh") for n in after.fallbacks)
    assert any(n.startswith("B: PCA eigh") for n in after.fallbacks)
    for fam in ("linear", "ica"):
        assert after.errors[fam] == pytest.approx(before.errors[fam], abs=1e-6)


def test_fastica_failure_is_refitted_then_replaced(monkeypatch):
    from sklearn.decomposition import FastICA

    A, _ = planted(n=1500, d=20)
    fit, calls = FastICA.fit, []

    def fail_first(self, X, y=None):
        calls.append(self.w_init is None)
        if len(calls) == 1:
            raise np.linalg.LinAlgError("SVD did not converge")
        return fit(self, X, y)

    monkeypatch.setattr(FastICA, "fit", fail_first)
    ica = WhitenedICA(random_state=0).fit(A)
    assert calls == [True, False]  # the random start, then the identity
    assert "refitted from the identity" in ica.fallbacks_[0]
    assert ica.converged_

    monkeypatch.setattr(FastICA, "fit", _failing)
    with pytest.warns(UserWarning):
        ica = WhitenedICA(random_state=0).fit(A)
    assert "unrotated" in ica.fallbacks_[0] and not ica.converged_
    np.testing.assert_array_equal(ica.rotation_, np.eye(ica.n_components_))
    res = align.compare(A, A[:, ::-1], **CLI)
    assert res.ica_converged == (False, False) and np.isfinite(res.errors["ica"])
    assert any(n.startswith("A: FastICA failed") for n in res.fallbacks)


def test_whitener_fit_falls_back(monkeypatch):
    A, _ = planted(n=800, d=12)
    w0 = Whitener().fit(A)
    monkeypatch.setattr(np.linalg, "svd", _failing)
    w = Whitener().fit(A)
    assert "gesvd" in w.fallbacks_[0]
    np.testing.assert_allclose(np.abs(w.whitening_), np.abs(w0.whitening_), rtol=1e-6, atol=1e-9)


# --------------------------------------------------------------------------- top axes only
def test_linalg_eigh_top_matches_the_full_decomposition(monkeypatch):
    X = np.random.default_rng(3).normal(size=(200, 30))
    C = X.T @ X
    w0, v0 = np.linalg.eigh(C)
    w, v = linalg.eigh_top(C, 4)
    assert v.shape == (30, 4)
    np.testing.assert_allclose(w, w0, rtol=1e-10)
    np.testing.assert_allclose(np.abs(v.T @ v0[:, -4:]), np.eye(4), atol=1e-8)  # same axes, up to sign
    monkeypatch.setattr(np.linalg, "eigvalsh", _failing)
    notes = []
    w, v = linalg.eigh_top(C, 4, notes, what="PCA eigh")
    assert "top-4" in notes[0] and v.shape == (30, 4)
    np.testing.assert_allclose(np.abs(v.T @ v0[:, -4:]), np.eye(4), atol=1e-8)


def test_pca_top_gives_every_variance_and_the_leading_axes():
    from nearid.ica import pca_from_covariance

    A, _ = planted(n=3000, d=60)
    C = np.cov(A.astype(np.float64), rowvar=False)
    var, axes = pca_from_covariance(C, 1e-12)
    var_top, axes_top = pca_from_covariance(C, 1e-12, top=8)
    np.testing.assert_allclose(var_top, var, rtol=1e-10)
    assert axes_top.shape == (60, 8)
    np.testing.assert_allclose(axes_top, axes[:, :8], atol=1e-8)  # the sign convention holds too


def test_wide_sides_compute_only_the_axes_ica_keeps(monkeypatch):
    """From SERIAL_DECOMPOSITION_WIDTH on, a side capped at a quarter of its width or less gets
    its top axes only; the result is the full decomposition's, up to round-off."""
    from nearid.align import engine

    A, B = planted(n=2000, d=40)
    full = align.compare(A, B, ica_max_components=5, **CLI)
    calls = []
    real = linalg.eigh_top
    monkeypatch.setattr(linalg, "eigh_top", lambda M, k, *a, **kw: calls.append((M.shape[0], k)) or real(M, k, *a, **kw))
    monkeypatch.setattr(engine, "SERIAL_DECOMPOSITION_WIDTH", 16)
    top = align.compare(A, B, ica_max_components=5, **CLI)
    assert (40, 5) in calls  # B's side (A's full axes serve the linear family and its ICA)
    assert engine._top_axes(40, 5) == 5 and engine._top_axes(40, 11) is None and engine._top_axes(8, 1) is None
    assert top.ica_components == full.ica_components == (5, 5)
    for fam in ("permutation", "rigid", "linear", "ica"):
        assert top.errors[fam] == pytest.approx(full.errors[fam], abs=1e-6)
