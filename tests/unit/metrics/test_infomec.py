import time

import numpy as np
import pytest
from scipy.stats import ortho_group
from sklearn.feature_selection import mutual_info_classif
from sklearn.preprocessing import StandardScaler

from nearid.data.procedural import sample_factors
from nearid.metrics.infomec import (active_latents, infom_infoc, infoe, infomec,
                                    mutual_info_knn, nmi_matrix)


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
