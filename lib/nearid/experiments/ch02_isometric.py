"""Chapter 02's experiment: autoencoders on an isometric DGP, with delta as the knob.

For each delta, the same g (only delta changes) generates training and held-out data; one
autoencoder per seed learns codes; we score statistical identifiability across seeds and
structural identifiability against the true factors u.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from nearid.data.toy import IsometricDGP, blob_images
from nearid.identifiability import statistical_errors, structural_scores
from nearid.models import MLPAutoencoder
from nearid.train import fit, predict


@dataclass
class SweepResult:
    models: pd.DataFrame  # one row per (delta, seed): structural scores, recon error, time
    pairs: pd.DataFrame  # one row per (delta, seed pair, family): statistical error
    codes: dict[float, list[np.ndarray]] = field(default_factory=dict)  # held-out codes
    factors: dict[float, np.ndarray] = field(default_factory=dict)  # held-out true u


def train_autoencoder(X, *, latent_dim: int, hidden: int, seed: int, epochs: int, batch_size: int,
                      lr: float, weight_decay: float, device) -> tuple[MLPAutoencoder, float, float]:
    """One seeded MLP autoencoder; returns (model, final training loss, seconds)."""
    torch.manual_seed(seed)
    model = MLPAutoencoder(X.shape[1], latent_dim, hidden=(hidden, hidden))
    res = fit(model, X, epochs=epochs, batch_size=batch_size, lr=lr, weight_decay=weight_decay,
              seed=seed, device=device)
    return model, res.losses[-1], res.seconds


def run_isometric_sweep(*, deltas, seeds: int, latent_dim: int, observed_dim: int, n_train: int,
                        n_test: int, epochs: int, batch_size: int, lr: float, weight_decay: float,
                        hidden: int, seed: int = 0, device="cpu", log=print) -> SweepResult:
    """Train ``seeds`` autoencoders per delta and score them (see module docstring)."""
    if seeds < 2:
        raise ValueError(f"need at least 2 seeds to measure statistical identifiability, got {seeds}")
    model_rows, pair_frames = [], []
    codes_by_delta, factors_by_delta = {}, {}
    for delta in deltas:
        dgp = IsometricDGP(latent_dim, observed_dim, delta, random_state=seed)
        X, _ = dgp.sample(n_train, seed=seed + 1)
        Xt, Ut = dgp.sample(n_test, seed=seed + 2)
        bilip = dgp.bilipschitz_constant(Ut)
        codes = []
        for s in range(seed, seed + seeds):
            model, loss, secs = train_autoencoder(X, latent_dim=latent_dim, hidden=hidden, seed=s, epochs=epochs,
                                                  batch_size=batch_size, lr=lr,
                                                  weight_decay=weight_decay, device=device)
            Z = predict(model.encode, Xt, device=device)
            recon = float(np.mean((predict(model, Xt, device=device) - Xt) ** 2))
            scores = structural_scores(Z, Ut, seed=seed)
            model_rows.append({"delta": delta, "seed": s, "bilipschitz": bilip, "train_loss": loss,
                               "test_mse": recon, "seconds": secs, **scores})
            codes.append(Z)
            log(f"delta={delta:.2f} seed={s}: MSE {recon:.1e}, rigid to u {scores['rigid_error']:.3f}, "
                f"MCC+ICA {scores['mcc_ica']:.3f}")
        pairs = statistical_errors(codes, seed=seed)
        pairs.insert(0, "delta", delta)
        pair_frames.append(pairs)
        codes_by_delta[delta], factors_by_delta[delta] = codes, Ut
    return SweepResult(pd.DataFrame(model_rows), pd.concat(pair_frames, ignore_index=True),
                       codes_by_delta, factors_by_delta)


def run_blob_experiment(*, size: int, n_train: int, n_test: int, epochs: int, hidden: int,
                        lr: float, weight_decay: float, batch_size: int, seed: int = 0,
                        device="cpu") -> dict:
    """An image DGP: a translated Gaussian blob, 2 independent factors, one autoencoder."""
    X, _ = blob_images(n_train, size=size, seed=seed + 1)
    Xt, Ut = blob_images(n_test, size=size, seed=seed + 2)
    X, Xt = X.reshape(len(X), -1), Xt.reshape(len(Xt), -1)
    torch.manual_seed(seed)
    model = MLPAutoencoder(X.shape[1], 2, hidden=(4 * hidden, hidden))
    res = fit(model, X, epochs=epochs, batch_size=batch_size, lr=lr, weight_decay=weight_decay,
              seed=seed, device=device)
    Z = predict(model.encode, Xt, device=device)
    scores = structural_scores(Z, Ut, seed=seed)
    from nearid.ica import WhitenedICA

    S = WhitenedICA(n_components="all", random_state=seed).fit(Z).transform(Z)
    return {"scores": scores, "codes": Z, "ica_codes": S, "factors": Ut,
            "train_loss": res.losses[-1], "seconds": res.seconds,
            "test_mse": float(np.mean((predict(model, Xt, device=device) - Xt) ** 2))}
