import time
import warnings

import numpy as np
import pytest
from scipy.stats import ortho_group
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import mutual_info_classif
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.preprocessing import StandardScaler

from nearid.data.procedural import sample_factors
from nearid.metrics import infomec as infomec_module
from nearid.metrics.infomec import (active_latents, encode_sources, infom_infoc, infoe, infomec, informative_latents,
                                    mutual_info_knn, nmi_matrix, probe_inputs)


@pytest.fixture(scope="module")
def factors():
    return sample_factors("shapes3d", 3000, seed=0)  # 6 sources, 4..15 values


def _jitter(F, scale=0.05, seed=0):
    return F.astype(float) + scale * np.random.default_rng(seed).standard_normal(F.shape)


def test_knn_mi_matches_sklearn():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 40, 2000)
    X = StandardScaler().fit_transform(np.c_[y + 3 * rng.standard_normal(2000),
                                             rng.standard_normal(2000), np.round(y / 7.0)])
    for labels in (y, y % 3, np.r_[y[:-1], 99]):  # includes a singleton class
        ref = mutual_info_classif(X, labels, n_neighbors=10, random_state=5)
        np.testing.assert_allclose(mutual_info_knn(X, labels, 10, random_state=5), ref, atol=1e-12)


def test_codes_equal_to_factors_score_near_one(factors):
    r = infomec(factors, _jitter(factors))
    assert r["infom"] > 0.95 and r["infoc"] > 0.95 and r["infoe"] > 0.95
    np.testing.assert_allclose(np.diag(r["nmi"]), 1.0, atol=0.1)
    assert r["active_latents"].all()


def test_random_rotation_scores_lower(factors):
    Z = StandardScaler().fit_transform(_jitter(factors))
    ident = infomec(factors, Z)
    rot = infomec(factors, Z @ ortho_group.rvs(6, random_state=0))
    assert rot["infom"] < ident["infom"] - 0.3
    assert rot["infoc"] < ident["infoc"] - 0.3
    assert rot["infoe"] > 0.9  # a rotation keeps the information, only spreads it


def test_pure_noise_carries_no_information(factors):
    Z = np.random.default_rng(3).standard_normal((len(factors), 12))
    r = infomec(factors, Z)
    assert r["nmi"].max() < 0.02
    assert abs(r["infoe"]) < 0.03
    # where the (tiny, estimation-noise) information sits is arbitrary; with the NMI at
    # zero, InfoM and InfoC are 0 by the zero-information guard
    assert infom_infoc(np.zeros_like(r["nmi"]), r["active_latents"]) == (0.0, 0.0)


def test_extra_latents_and_inactive_latents(factors):
    Z = _jitter(factors)
    # two copies of every factor: each latent still serves one source (InfoM stays), but
    # each source is split over 2 of 12 latents: InfoC = (1/2 - 1/12) / (1 - 1/12) = 0.4545
    dup = infomec(factors, np.repeat(Z, 2, axis=1))
    assert dup["infom"] > 0.9
    assert dup["infoc"] == pytest.approx(5 / 11, abs=0.03)
    # six extra latents with a tiny range are inactive and do not count
    Zx = np.c_[Z, 1e-4 * np.random.default_rng(0).standard_normal((len(Z), 6))]
    act = active_latents(Zx)
    assert act[:6].all() and not act[6:].any()
    assert infomec(factors, Zx)["infom"] > 0.95


def test_guards():
    nmi = np.array([[0.8, 0.0], [0.0, 0.0], [0.2, 0.0]])
    # latent 1 carries nothing: it spreads uniformly and scores 0; source 1 likewise
    m, c = infom_infoc(nmi, np.array([True, True]))
    assert m == pytest.approx(((0.8 - 1 / 3) / (2 / 3)) / 2)
    assert c == pytest.approx((1.0 + 0.0 + 1.0) / 3)
    # one active latent: InfoC is the share of sources it informs about
    m1, c1 = infom_infoc(nmi, np.array([True, False]))
    assert c1 == pytest.approx(2 / 3) and np.isfinite(m1)
    assert infom_infoc(nmi, np.array([False, False])) == (0.0, 0.0)
    assert not active_latents(np.zeros((50, 3))).any()


def test_integer_latents_use_discrete_mi(factors):
    F = factors[:1000]
    r = infomec(F, F.copy())  # integer dtype: plug-in MI, one-hot InfoE
    # plug-in MI between independent factors is biased upwards by ~(a-1)(b-1)/2N nats
    assert r["infom"] > 0.85 and r["infoc"] > 0.85
    np.testing.assert_allclose(np.diag(r["nmi"]), 1.0)
    assert r["infoe"] > 0.99


def test_bad_input():
    with pytest.raises(ValueError, match="same number of rows"):
        infomec(np.zeros((30, 2), int), np.zeros((31, 2)))
    with pytest.raises(ValueError, match="2-D"):
        nmi_matrix(np.zeros(30, int), np.zeros((30, 2)))
    with pytest.raises(ValueError, match="at least 2 sources"):
        infomec(np.zeros((30, 1), int), np.zeros((30, 2)))
    with pytest.raises(ValueError, match="NaN"):
        infoe(np.zeros((30, 2), int), np.full((30, 2), np.nan))


def test_ten_thousand_by_twelve_is_fast():
    F = sample_factors("isaac3d", 10_000, seed=0)
    Z = np.c_[_jitter(F, 0.3), np.random.default_rng(0).standard_normal((10_000, 3))]
    t = time.perf_counter()
    r = infomec(F, Z)
    assert time.perf_counter() - t < 30
    assert r["nmi"].shape == (9, 12)


@pytest.fixture(scope="module")
def entangled():
    """An autoencoder-like code: a nonlinear mix of MPI3D's factors (two 40-valued) spread
    over 14 correlated latents with scales from 1 to 0.01, plus a little noise."""
    F = sample_factors("mpi3d", 1500, seed=0)
    rng = np.random.default_rng(0)
    S = encode_sources(F).astype(float)
    S = S / S.max(0) * 2 - 1
    Z = np.tanh(S @ rng.normal(size=(S.shape[1], 14)))
    Z = Z @ np.diag(np.logspace(0, -2, 14)) @ ortho_group.rvs(14, random_state=0)
    return F, Z + 0.01 * rng.standard_normal(Z.shape)


def _converged_ce(X, y):
    """Reference: Newton's method on the standardised latents, a different solver."""
    m = LogisticRegression(C=np.inf, class_weight="balanced", solver="newton-cholesky", max_iter=200)
    m.fit(X, y)
    return log_loss(y, m.predict_proba(X), labels=m.classes_)


def test_infoe_converges_where_the_reference_setting_does_not(entangled):
    F, Z = entangled
    y = encode_sources(F)[:, 5]  # a 40-valued arm angle
    with warnings.catch_warnings(record=True) as old:
        warnings.simplefilter("always")
        LogisticRegression(C=np.inf, class_weight="balanced", max_iter=100).fit(
            StandardScaler().fit_transform(Z), y)
    assert any(issubclass(w.category, ConvergenceWarning) for w in old)  # the case is realistic
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        value = infoe(F, Z)  # no ConvergenceWarning for any of the seven sources
    E = encode_sources(F)
    Xs = StandardScaler().fit_transform(Z)
    # with balanced class weights the best constant prediction is uniform: H_null = log(classes)
    ref = np.mean([1 - _converged_ce(Xs, E[:, i]) / np.log(len(np.unique(E[:, i])))
                   for i in range(E.shape[1])])
    assert value == pytest.approx(ref, abs=2e-3)


def test_infoe_is_invariant_to_invertible_linear_maps(entangled):
    F, Z = entangled
    A = np.random.default_rng(1).normal(size=(14, 14))  # invertible, far from orthogonal
    assert infoe(F, Z @ A) == pytest.approx(infoe(F, Z), abs=2e-3)
    # keeping only some directions is not invertible: InfoE can only fall
    assert infoe(F, Z[:, :3]) < infoe(F, Z) - 0.05


def test_probe_inputs_whiten_and_handle_degenerate_codes():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(200, 3)) @ np.array([[1.0, 0.9, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 5.0]])
    X = probe_inputs(np.c_[Z, np.full(200, 3.0), Z[:, :1] + 1e-9 * rng.normal(size=(200, 1))])  # dead unit, float noise
    assert X.shape == (200, 3)
    np.testing.assert_allclose(np.cov(X, rowvar=False), np.eye(3), atol=1e-8)
    assert probe_inputs(np.ones((50, 2))).shape == (50, 1)
    assert infoe(np.c_[np.arange(50) % 2, np.arange(50) % 3], np.ones((50, 2))) == pytest.approx(0, abs=1e-6)


def test_reference_probe_is_the_reference_codes_fit_and_sees_linear_maps(entangled):
    """probe="reference" is Hsu et al.'s fit (standardised latents, 100 L-BFGS iterations):
    on a correlated code it stops short of the converged probe, and, unlike it, it scores a
    decorrelated copy of the same code (an invertible linear map) differently."""
    F, Z = entangled
    E = encode_sources(F)
    Xs = StandardScaler().fit_transform(Z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        by_hand = []
        for i in range(E.shape[1]):
            ce = []
            for X in (Xs, np.zeros((len(Z), 1))):
                m = LogisticRegression(C=np.inf, class_weight="balanced", max_iter=100, tol=1e-4).fit(X, E[:, i])
                ce.append(log_loss(E[:, i], m.predict_proba(X), labels=m.classes_))
            by_hand.append((ce[1] - ce[0]) / ce[1])
        reference = infoe(F, Z, probe="reference")
        whitened = probe_inputs(Z)  # an invertible linear map of Z's informative part
        reference_whitened = infoe(F, whitened, probe="reference")
    assert reference == pytest.approx(np.mean(by_hand), abs=1e-9)
    converged = infoe(F, Z)
    assert reference < converged - 0.005  # stopped early on the correlated code (0.664 vs 0.671)
    # decorrelating the code (an invertible linear map) lets the same 100 iterations reach the
    # optimum: the reference probe scores it higher, as the paper's ICA rows do; the converged
    # probe cannot tell the two codes apart
    assert reference_whitened > reference + 0.005
    assert reference_whitened == pytest.approx(converged, abs=2e-3)
    assert infoe(F, whitened) == pytest.approx(converged, abs=2e-3)
    with pytest.raises(ValueError, match="probe"):
        infoe(F, Z, probe="newton")


def test_null_fit_is_stored_with_its_warnings_and_gives_a_fresh_fits_bits(entangled, monkeypatch):
    """H_null is fitted once per labels and cap: a stored one is the fresh fit's number to the
    bit and raises the fresh fit's warnings again, so that counts of unconverged fits do not
    depend on what was scored before."""
    F, Z = entangled
    y = encode_sources(F)[:, 5]  # a 40-valued arm angle
    fit = infomec_module._cross_entropy
    expected = fit(np.zeros((len(y), 1)), y, 100)
    # balanced classes make the null's optimum the starting point, so its L-BFGS never warns
    # by itself: a stand-in fit that warns checks that a stored warning is raised again
    fits = []

    def warning_fit(X, labels, max_iter):
        fits.append(max_iter)
        warnings.warn("stand-in: stopped at the cap", ConvergenceWarning)
        return fit(X, labels, max_iter)

    monkeypatch.setattr(infomec_module, "_cross_entropy", warning_fit)
    infomec_module._null_fit.cache_clear()
    for _ in range(3):  # the fit, then the stored one twice
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = infomec_module._null_cross_entropy(y, 100)
        assert value == expected  # bit for bit
        assert [w.category for w in caught] == [ConvergenceWarning]
    assert fits == [100]
    # a stored fit answers for the same labels and cap only (each new fit warns once)
    with pytest.warns(ConvergenceWarning, match="stand-in") as caught:
        infomec_module._null_cross_entropy(y, 5000)
        infomec_module._null_cross_entropy(y[::-1].copy(), 100)
        infomec_module._null_cross_entropy(y.astype(np.int32), 100)
    assert len(caught) == 3
    assert fits == [100, 5000, 100, 100]
    infomec_module._null_fit.cache_clear()


def test_informative_latents_picks_the_largest_nmi_column_sums():
    nmi = np.array([[0.9, 0.0, 0.2, 0.2], [0.0, 0.1, 0.3, 0.1]])  # column sums 0.9, 0.1, 0.5, 0.3
    assert informative_latents(nmi, 2).tolist() == [True, False, True, False]
    assert informative_latents(np.zeros((2, 3)), 2).tolist() == [True, True, False]  # ties to the lower index
    assert informative_latents(nmi, 4).all()
    for bad in (0, 5):
        with pytest.raises(ValueError, match="between 1 and"):
            informative_latents(nmi, bad)
    with pytest.raises(ValueError, match="matrix"):
        informative_latents(np.zeros(3), 1)
