"""The chapter-03 sweep: theory-curve fit, rank correlation, and a tiny real sweep."""

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_digits

from nearid.experiments.ch03_bilipschitz import (BiLipschitzSweep, fit_theory_curve, spearman, summarise,
                                theory_curve, train_autoencoder)


def test_theory_curve_known_values():
    np.testing.assert_allclose(theory_curve([0.0, 1.0, 2.0]), [0.0, np.sqrt(3), np.sqrt(8)])
    with pytest.raises(ValueError):
        theory_curve([-0.1])


def test_fit_recovers_c_and_intercept():
    L = np.linspace(0.1, 3, 20)
    fit = fit_theory_curve(L, 0.3 * theory_curve(L))
    assert fit.c == pytest.approx(0.3) and fit.b == 0 and fit.r2 == pytest.approx(1.0)
    fit2 = fit_theory_curve(L, 0.05 + 0.2 * theory_curve(L), intercept=True)
    assert fit2.c == pytest.approx(0.2) and fit2.b == pytest.approx(0.05)
    np.testing.assert_allclose(fit2.predict([1.0]), 0.05 + 0.2 * np.sqrt(3))
    # a flat error is badly explained by a curve through the origin: R^2 < 0
    assert fit_theory_curve(L, np.full_like(L, 0.2) + 0.01 * np.sin(L)).r2 < 0


def test_spearman_monotone_and_validation():
    x = np.arange(10.0)
    assert spearman(x, np.exp(x))["rho"] == pytest.approx(1.0)
    assert spearman(x, -x)["rho"] == pytest.approx(-1.0)
    assert spearman(np.r_[x, np.nan], np.r_[x, 1.0])["n"] == 10
    with pytest.raises(ValueError):
        spearman([1.0, 2.0], [1.0, 2.0])


def test_summarise_means_per_setting():
    models = pd.DataFrame(dict(group="all", alpha=[0.0, 0.0, 1.0, 1.0], weight_decay=0.0, seed=[0, 1, 0, 1],
                               L_mean=[2.0, 4.0, 1.0, 1.0], L_max=[5.0, 7.0, 1.0, 1.0], L_median=1.0,
                               L_mean_geometric=1.0, L_max_geometric=1.0, recon_error=[0.1, 0.3, 0.2, 0.2]))
    pairs = pd.DataFrame(dict(group="all", alpha=[0.0, 1.0], weight_decay=0.0, rigid_error=[0.3, 0.1],
                              linear_error=[0.2, 0.05]))
    s = summarise(models, pairs)
    assert list(s.alpha) == [0.0, 1.0]
    np.testing.assert_allclose(s.L_mean, [3.0, 1.0])
    np.testing.assert_allclose(s.L_max, [6.0, 1.0])
    np.testing.assert_allclose(s.recon_error, [0.2, 0.2])
    np.testing.assert_allclose(s.rigid_error, [0.3, 0.1])


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return X[:1000], y[:1000], X[1000:1400], y[1000:1400]


def test_training_is_deterministic(digits):
    Xtr = digits[0][:200]
    a, _ = train_autoencoder(Xtr, alpha=0.2, seed=3, latent_dim=3, hidden=(16,), epochs=2)
    b, _ = train_autoencoder(Xtr, alpha=0.2, seed=3, latent_dim=3, hidden=(16,), epochs=2)
    for p, q in zip(a.parameters(), b.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        train_autoencoder(Xtr, alpha=1.5, seed=0)


def test_tiny_sweep_frames(digits):
    Xtr, ytr, Xte, yte = digits
    logs = []
    sw = BiLipschitzSweep(alphas=[0.0, 1.0], seeds=2, weight_decays=[0.0, 0.1], latent_dim=3,
                          hidden=(16,), epochs=2, log=logs.append).fit(Xtr, Xte)
    assert len(sw.models_) == 8 and len(sw.pairs_) == 4 and len(sw.B_) == 8 * len(Xte)
    assert len(logs) == 4
    assert (sw.B_.B >= 1 - 1e-9).all()
    # a linear decoder (alpha = 1) has one Jacobian everywhere: B(z) is constant per model
    lin = sw.B_[sw.B_.alpha == 1.0].groupby(["weight_decay", "seed"]).B
    assert (lin.std() < 1e-6 * lin.mean()).all()
    assert ((sw.pairs_.rigid_error >= sw.pairs_.linear_error - 1e-9)).all()  # rigid is a subset
    s = sw.summary()
    assert {"L_mean", "L_max", "rigid_error", "linear_error", "recon_error"} <= set(s.columns)
    assert len(s) == 4 and s.n_pairs.eq(1).all()


def test_digit_sweep_groups(digits):
    Xtr, ytr, Xte, yte = digits
    sw = BiLipschitzSweep(alphas=[0.5], seeds=2, latent_dim=2, hidden=(8,), epochs=1).fit(
        Xtr, Xte, ytr, yte, digits=[0, 7])
    assert sorted(sw.models_.group.unique()) == ["0", "7"]
    sizes = sw.B_.groupby("group").size()
    assert sizes["0"] == 2 * (yte == 0).sum() and sizes["7"] == 2 * (yte == 7).sum()
    with pytest.raises(ValueError, match="labels"):
        BiLipschitzSweep(alphas=[0.5]).fit(Xtr, Xte, digits=[0])


def test_sweep_validation(digits):
    Xtr, _, Xte, _ = digits
    with pytest.raises(ValueError, match="seeds"):
        BiLipschitzSweep(alphas=[0.5], seeds=1).fit(Xtr, Xte)
    with pytest.raises(ValueError, match="alphas"):
        BiLipschitzSweep(alphas=[-0.1]).fit(Xtr, Xte)
