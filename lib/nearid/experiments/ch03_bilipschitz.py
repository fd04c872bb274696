"""Chapter 03's experiment: does a more nearly isometric decoder give more identical codes?

Theorem 1 bounds the rigid misalignment between two minimisers by c sqrt(2L + L^2) when the
decoder is (1+L)-bi-Lipschitz. :class:`BiLipschitzSweep` trains MNIST MLP autoencoders whose
decoder uses leaky ReLUs with negative slope ``alpha`` (PyTorch's convention: alpha = 1 is a
linear decoder, alpha = 0 a ReLU decoder), over a grid of alphas, seeds and weight decays,
and measures per model the bi-Lipschitz estimate L (:mod:`nearid.lipschitz`) at the codes of
held-out images and the reconstruction error, and per pair of seeds the rigid and linear
alignment errors (:func:`nearid.align.alignment_table`) on those held-out images. Results are
tidy pandas DataFrames, one row per model, per pair, per (model, image) for B(z).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

from nearid.align import alignment_table
from nearid.lipschitz import bilipschitz_from_singular_values, jacobian_singular_values
from nearid.models import MLPAutoencoder
from nearid.train import TrainResult, fit, predict

SETTING = ["group", "alpha", "weight_decay"]


# --------------------------------------------------------------------------- one model
def train_autoencoder(X, *, alpha: float, seed: int, latent_dim: int = 8,
                      hidden: Sequence[int] = (128, 64), epochs: int = 20, batch_size: int = 64,
                      lr: float = 2e-3, weight_decay: float = 0.0, encoder_slope: float = 0.0,
                      device: str | torch.device = "cpu") -> tuple[MLPAutoencoder, TrainResult]:
    """One MLP autoencoder on flattened images ``X``; ``seed`` fixes both init and shuffling."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha (the decoder's leaky-ReLU negative slope) must lie in [0, 1], got {alpha}")
    X = np.asarray(X, dtype=np.float32).reshape(len(X), -1)
    torch.manual_seed(seed)
    model = MLPAutoencoder(X.shape[1], latent_dim, hidden=hidden, encoder_slope=encoder_slope,
                           decoder_slope=alpha)
    result = fit(model, X, epochs=epochs, batch_size=batch_size, lr=lr, weight_decay=weight_decay,
                 seed=seed, device=device)
    return model, result


def evaluate_autoencoder(model: MLPAutoencoder, X, *, device: str | torch.device = "cpu") -> dict:
    """Codes, reconstruction MSE (per pixel) and B(z) of both normalisations on images ``X``."""
    X = np.asarray(X, dtype=np.float32).reshape(len(X), -1)
    model = model.to(device).eval()
    Z = predict(model.encode, X, device=device)
    recon = predict(model, X, device=device)
    S = jacobian_singular_values(model.decoder, Z, device=device)
    B, _ = bilipschitz_from_singular_values(S, "condition")
    Bg, _ = bilipschitz_from_singular_values(S, "geometric")
    return {"codes": Z, "recon_error": float(np.mean((recon - X) ** 2)), "B": B, "B_geometric": Bg}


# --------------------------------------------------------------------------- the sweep
class BiLipschitzSweep:
    """Train autoencoders over alphas x weight decays x seeds; measure L, errors, alignment.

    Parameters
    ----------
    alphas : decoder leaky-ReLU negative slopes, each in [0, 1] (1 = linear decoder).
    seeds : number of seeds per setting (models ``seed, seed+1, ...``); pairs of them are aligned.
    weight_decays : AdamW decoupled weight decays, the second knob on the decoder's Lipschitz constant.
    seed : base seed.
    latent_dim, hidden, epochs, batch_size, lr, encoder_slope : the autoencoder and its training.
    tie_encoder : if True the encoder uses the same slope alpha as the decoder (so alpha = 1 is
        a linear autoencoder) and ``encoder_slope`` is ignored.
    fit_fraction : share of held-out images used to fit each alignment map (the rest score it).
    log : called with one short line per setting (e.g. ``print``); None is silent.

    Attributes (after ``fit``)
    --------------------------
    models_ : one row per model: group, alpha, weight_decay, seed, L_mean, L_max, L_median,
        L_mean_geometric, L_max_geometric, recon_error, train_loss, train_seconds.
    pairs_ : one row per pair of seeds: the setting, seed_a, seed_b, rigid_error, linear_error,
        cka, and the pair's L (mean of the two models' L_mean / L_max, and geometric ones).
    B_ : one row per (model, held-out image): the setting, seed, B, B_geometric.
    """

    def __init__(self, *, alphas: Sequence[float], seeds: int = 3, weight_decays: Sequence[float] = (0.0,),
                 seed: int = 0, latent_dim: int = 8, hidden: Sequence[int] = (128, 64),
                 epochs: int = 20, batch_size: int = 64, lr: float = 2e-3, encoder_slope: float = 0.0,
                 tie_encoder: bool = False, fit_fraction: float = 0.5, device: str | torch.device = "cpu",
                 log: Callable[[str], None] | None = None):
        self.alphas = alphas
        self.seeds = seeds
        self.weight_decays = weight_decays
        self.seed = seed
        self.latent_dim = latent_dim
        self.hidden = hidden
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.encoder_slope = encoder_slope
        self.tie_encoder = tie_encoder
        self.fit_fraction = fit_fraction
        self.device = device
        self.log = log

    def _validate(self):
        if len(self.alphas) == 0 or any(not 0.0 <= a <= 1.0 for a in self.alphas):
            raise ValueError(f"alphas must be a non-empty list of values in [0, 1], got {list(self.alphas)}")
        if self.seeds < 2:
            raise ValueError(f"seeds must be >= 2 (alignment needs pairs of models), got {self.seeds}")
        if len(self.weight_decays) == 0 or any(w < 0 for w in self.weight_decays):
            raise ValueError(f"weight_decays must be a non-empty list of values >= 0, got {list(self.weight_decays)}")

    def fit(self, X_train, X_test, y_train=None, y_test=None,
            digits: Sequence[int] | None = None) -> "BiLipschitzSweep":
        """Run the sweep on all images (group "all"), or per digit class when ``digits`` is given.

        Per-digit models train on the training images of that digit and are evaluated on the
        held-out images of that digit (the paper's Figure A.6).
        """
        self._validate()
        X_train = np.asarray(X_train, dtype=np.float32).reshape(len(X_train), -1)
        X_test = np.asarray(X_test, dtype=np.float32).reshape(len(X_test), -1)
        if digits is None:
            groups = [("all", X_train, X_test)]
        else:
            if y_train is None or y_test is None:
                raise ValueError("digit-specific sweeps need y_train and y_test labels")
            y_train, y_test = np.asarray(y_train), np.asarray(y_test)
            groups = []
            for d in digits:
                tr, te = X_train[y_train == d], X_test[y_test == d]
                if len(tr) == 0 or len(te) < 2 * (self.latent_dim + 2):
                    raise ValueError(f"digit {d}: {len(tr)} training and {len(te)} held-out images; "
                                     f"need some training images and >= {2 * (self.latent_dim + 2)} held-out")
                groups.append((str(d), tr, te))
        model_rows, pair_rows, b_frames = [], [], []
        for group, tr, te in groups:
            for wd, alpha in itertools.product(self.weight_decays, self.alphas):
                self._fit_setting(group, float(alpha), float(wd), tr, te, model_rows, pair_rows, b_frames)
        self.models_ = pd.DataFrame(model_rows)
        self.pairs_ = pd.DataFrame(pair_rows)
        self.B_ = pd.concat(b_frames, ignore_index=True)
        return self

    def _fit_setting(self, group, alpha, wd, X_train, X_test, model_rows, pair_rows, b_frames):
        start = time.perf_counter()
        evals = {}
        for k in range(self.seeds):
            s = self.seed + k
            model, res = train_autoencoder(
                X_train, alpha=alpha, seed=s, latent_dim=self.latent_dim, hidden=self.hidden, epochs=self.epochs,
                batch_size=self.batch_size, lr=self.lr, weight_decay=wd,
                encoder_slope=alpha if self.tie_encoder else self.encoder_slope, device=self.device)
            ev = evaluate_autoencoder(model, X_test, device=self.device)
            evals[s] = ev
            L, Lg = ev["B"] - 1, ev["B_geometric"] - 1
            model_rows.append(dict(group=group, alpha=alpha, weight_decay=wd, seed=s,
                                   L_mean=float(np.mean(L)), L_max=float(np.max(L)),
                                   L_median=float(np.median(L)),
                                   L_mean_geometric=float(np.mean(Lg)), L_max_geometric=float(np.max(Lg)),
                                   recon_error=ev["recon_error"],
                                   train_loss=res.losses[-1] if res.losses else float("nan"),
                                   train_seconds=res.seconds))
            b_frames.append(pd.DataFrame(dict(group=group, alpha=alpha, weight_decay=wd, seed=s,
                                              B=ev["B"], B_geometric=ev["B_geometric"])))
        rows = {r["seed"]: r for r in model_rows[-self.seeds:]}
        for a, b in itertools.combinations(sorted(evals), 2):
            tab = alignment_table(evals[a]["codes"], evals[b]["codes"], fit_fraction=self.fit_fraction,
                                  seed=self.seed, families=("rigid", "linear"))
            pair = dict(group=group, alpha=alpha, weight_decay=wd, seed_a=a, seed_b=b,
                        rigid_error=tab["rigid"], linear_error=tab["linear"], cka=tab["cka"])
            for col in ("L_mean", "L_mean_geometric", "recon_error"):
                pair[col] = (rows[a][col] + rows[b][col]) / 2
            for col in ("L_max", "L_max_geometric"):
                pair[col] = max(rows[a][col], rows[b][col])
            pair_rows.append(pair)
        if self.log is not None:
            done = [r for r in pair_rows[-(self.seeds * (self.seeds - 1) // 2):]]
            self.log(f"group={group} alpha={alpha:g} wd={wd:g}: L_mean {np.mean([rows[s]['L_mean'] for s in rows]):.2f}, "
                     f"rigid {np.mean([p['rigid_error'] for p in done]):.3f}, "
                     f"recon {np.mean([rows[s]['recon_error'] for s in rows]):.4f} "
                     f"({self.seeds} models, {time.perf_counter() - start:.1f} s)")

    def summary(self) -> pd.DataFrame:
        """One row per setting (group, alpha, weight_decay): means over seeds and over pairs."""
        if not hasattr(self, "models_"):
            raise RuntimeError("call fit() before summary()")
        return summarise(self.models_, self.pairs_)


def summarise(models: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per setting: L_mean, L_max, recon_error (mean over seeds), rigid/linear errors (mean and
    std over pairs of seeds)."""
    m = models.groupby(SETTING, sort=True).agg(
        L_mean=("L_mean", "mean"), L_max=("L_max", "mean"), L_median=("L_median", "mean"),
        L_mean_geometric=("L_mean_geometric", "mean"), L_max_geometric=("L_max_geometric", "mean"),
        recon_error=("recon_error", "mean"), n_models=("seed", "size"))
    p = pairs.groupby(SETTING, sort=True).agg(
        rigid_error=("rigid_error", "mean"), rigid_error_std=("rigid_error", "std"),
        linear_error=("linear_error", "mean"), linear_error_std=("linear_error", "std"),
        n_pairs=("rigid_error", "size"))
    return m.join(p).reset_index()


# --------------------------------------------------------------------------- theory curve
def theory_curve(L) -> np.ndarray:
    """sqrt(2L + L^2), the shape of Theorem 1's bound (eps = c_D sqrt(2L + L^2) Delta)."""
    L = np.asarray(L, dtype=np.float64)
    if (L < 0).any():
        raise ValueError("L must be >= 0 (B = 1 + L >= 1)")
    return np.sqrt(2 * L + L ** 2)


@dataclass
class TheoryFit:
    """error ~ c sqrt(2L + L^2) (+ b when fitted with an intercept), and its R^2."""

    c: float
    b: float
    r2: float
    n: int

    def predict(self, L) -> np.ndarray:
        return self.c * theory_curve(L) + self.b


def fit_theory_curve(L, error, *, intercept: bool = False) -> TheoryFit:
    """Least-squares fit of ``error`` against sqrt(2L + L^2); R^2 is on the same points.

    Without an intercept (the theorem's form) R^2 can be negative: the curve then explains
    the errors worse than their mean does.
    """
    L = np.asarray(L, dtype=np.float64).ravel()
    error = np.asarray(error, dtype=np.float64).ravel()
    if L.shape != error.shape or L.size < 2:
        raise ValueError(f"need two equally long arrays with >= 2 points, got {L.size} and {error.size}")
    keep = np.isfinite(L) & np.isfinite(error)
    if keep.sum() < 2:
        raise ValueError("fewer than 2 finite (L, error) points")
    g = theory_curve(L[keep])[:, None]
    reg = LinearRegression(fit_intercept=intercept).fit(g, error[keep])
    r2 = float(r2_score(error[keep], reg.predict(g)))
    return TheoryFit(c=float(reg.coef_[0]), b=float(reg.intercept_) if intercept else 0.0,
                     r2=r2, n=int(keep.sum()))


def spearman(x, y) -> dict[str, float]:
    """Spearman rank correlation of x and y over finite points: rho, p-value, n."""
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.size} vs {y.size}")
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3:
        raise ValueError(f"need at least 3 finite points for a rank correlation, got {int(keep.sum())}")
    res = spearmanr(x[keep], y[keep])
    return {"rho": float(res.statistic), "pvalue": float(res.pvalue), "n": int(keep.sum())}
