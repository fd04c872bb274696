"""The disentanglement benchmark of chapter 05 (the paper's Table 2), under one protocol.

For each dataset: render ``n_train + n_eval`` distinct grid points once (the same images for
every model and seed). For each seed and each trained model (AE, beta-VAE, beta-TCVAE,
BioAE; one conv family, latent size 2 x number of factors): train with
:func:`nearid.train.fit`, encode the held-out images deterministically, and score the codes
against the factors with InfoMEC, DCI disentanglement and MIG. AE + ICA is no new training:
:class:`nearid.ica.WhitenedICA` fitted on the AE's *training* codes, applied to its held-out
codes, so it differs from the AE row only by the post-processing the paper proposes.

:func:`run_benchmark` returns a tidy DataFrame (one row per dataset x model x seed) plus
the NMI matrices; :func:`summarise` turns it into Table 2 (mean and std over seeds, per
dataset and aggregated = mean over datasets within a seed).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from sklearn.exceptions import ConvergenceWarning

from nearid.data.procedural import DATASETS, FACTOR_GRIDS, make_dataset
from nearid.ica import WhitenedICA
from nearid.metrics.dci_mig import dci_disentanglement, mig
from nearid.metrics.infomec import infomec
from nearid.models.conv import CONV_MODELS, make_conv_model
from nearid.train import fit, predict

MODELS = (*CONV_MODELS, "ae_ica")
MODEL_LABELS = {"ae": "AE", "beta_vae": "β-VAE", "beta_tcvae": "β-TCVAE", "bioae": "BioAE",
                "ae_ica": "AE + ICA", "ae_ica_all": "AE + ICA (all 2K)"}
# How many components the whitening step keeps before ICA: "k" = the number of factors
# (whitening onto the top-K principal subspace, standard ICA practice when the number of
# sources is known), "all" = every one of the 2K latents.
ICA_COMPONENTS = ("k", "all")
SCORES = ("infom", "infoe", "infoc", "dci_d", "mig")

# Every model-specific knob, stated once; the chapter's profile may override any of them.
DEFAULT_HYPER: dict[str, dict] = {
    "ae": {"weight_decay": 1e-4},
    "beta_vae": {"beta": 4.0, "weight_decay": 0.0},
    "beta_tcvae": {"beta": 6.0, "weight_decay": 0.0},
    "bioae": {"nonneg_weight": 1.0, "activity_weight": 0.1, "weight_decay": 1e-4},
}


@dataclass
class BenchmarkResult:
    """Scores (tidy), NMI matrices keyed by (dataset, model, seed), and timings."""

    scores: pd.DataFrame
    nmi: dict = field(default_factory=dict)
    factor_names: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    ica_converged: dict = field(default_factory=dict)


def images_to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 (N,H,W,3) -> float (N,3,H,W) in [0, 1]."""
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise ValueError(f"expected uint8 images (N, H, W, 3), got {images.dtype} {images.shape}")
    return torch.from_numpy(images).permute(0, 3, 1, 2).float().div_(255.0).contiguous()


def score_codes(factors: np.ndarray, codes: np.ndarray, *, random_state: int = 0) -> dict:
    """InfoM, InfoE, InfoC, DCI disentanglement and MIG of one code matrix, plus its NMI."""
    r = infomec(factors, codes, random_state=random_state)
    return {"infom": r["infom"], "infoe": r["infoe"], "infoc": r["infoc"],
            "dci_d": dci_disentanglement(factors, codes, random_state=random_state),
            "mig": mig(factors, codes), "nmi": r["nmi"],
            "n_active": int(r["active_latents"].sum())}


def train_model(name: str, X: torch.Tensor, n_factors: int, *, seed: int, epochs: int,
                batch_size: int, lr: float, width: int, hidden: int, hyper: dict | None = None,
                device: str | torch.device = "cpu"):
    """One conv model of kind ``name`` trained on images X (N,3,H,W); returns (model, TrainResult)."""
    if name not in CONV_MODELS:
        raise ValueError(f"unknown trained model {name!r}; valid: {', '.join(CONV_MODELS)}")
    knobs = {**DEFAULT_HYPER[name], **(hyper or {})}
    weight_decay = float(knobs.pop("weight_decay", 0.0))
    if name == "beta_tcvae":
        knobs.setdefault("dataset_size", len(X))
    torch.manual_seed(seed)
    model = make_conv_model(name, 2 * n_factors, X.shape[-1], width, hidden, **knobs)
    result = fit(model, X, epochs=epochs, batch_size=batch_size, lr=lr, weight_decay=weight_decay,
                 seed=seed, device=device)
    return model, result


def run_benchmark(*, datasets: Sequence[str] = DATASETS, seeds: Sequence[int] = (0,),
                  models: Sequence[str] = MODELS, image_size: int = 32, n_train: int = 5000,
                  n_eval: int = 2000, epochs: int = 10, batch_size: int = 64, lr: float = 1e-3,
                  width: int = 16, hidden: int = 128, hyper: dict | None = None,
                  data_seed: int = 0, supersample: int = 2, device: str | torch.device = "cpu",
                  ica_components: str = "k",
                  log: Callable[[str], None] | None = print) -> BenchmarkResult:
    """Train and score every (dataset, model, seed); see the module docstring for the protocol.

    ``ica_components`` sets what ``ae_ica`` whitens onto (see :data:`ICA_COMPONENTS`); with
    "k", the all-components variant is scored too, as ``ae_ica_all``, for comparison.
    """
    if ica_components not in ICA_COMPONENTS:
        raise ValueError(f"ica_components must be one of {ICA_COMPONENTS}, got {ica_components!r}")
    bad = [d for d in datasets if d not in FACTOR_GRIDS]
    if bad:
        raise ValueError(f"unknown datasets {bad}; valid: {', '.join(DATASETS)}")
    bad = [m for m in models if m not in MODELS]
    if bad:
        raise ValueError(f"unknown models {bad}; valid: {', '.join(MODELS)}")
    hyper = hyper or {}
    trained = [m for m in CONV_MODELS if m in models or (m == "ae" and "ae_ica" in models)]
    rows, nmis, names, seconds, ica_converged = [], {}, {}, {}, {}
    for ds in datasets:
        t0 = time.perf_counter()
        images, factors, factor_names = make_dataset(ds, n_train + n_eval, image_size, data_seed,
                                                      supersample)
        seconds[(ds, "render")] = time.perf_counter() - t0
        names[ds] = factor_names
        X = images_to_tensor(images)
        Xtr, Xev, Fev = X[:n_train], X[n_train:], factors[n_train:]
        K = len(factor_names)
        for seed in seeds:
            for name in trained:
                model, res = train_model(name, Xtr, K, seed=seed, epochs=epochs,
                                         batch_size=batch_size, lr=lr, width=width, hidden=hidden,
                                         hyper=hyper.get(name), device=device)
                codes = {name: predict(model.encode, Xev, device=device)}
                if name == "ae" and "ae_ica" in models:
                    train_codes = predict(model.encode, Xtr, device=device)
                    variants = {"ae_ica": K if ica_components == "k" else None}
                    if ica_components == "k":
                        variants["ae_ica_all"] = None
                    for key, n_comp in variants.items():
                        with warnings.catch_warnings():  # recorded in converged_ instead
                            warnings.simplefilter("ignore", ConvergenceWarning)
                            ica = WhitenedICA(n_components=n_comp, random_state=seed,
                                              max_iter=2000).fit(train_codes)
                        if key == "ae_ica":
                            ica_converged[(ds, seed)] = ica.converged_
                        codes[key] = ica.transform(codes["ae"])
                for key, Z in codes.items():
                    if key not in models and key != "ae_ica_all":
                        continue
                    t1 = time.perf_counter()
                    sc = score_codes(Fev, Z, random_state=seed)
                    nmis[(ds, key, seed)] = sc.pop("nmi")
                    rows.append({"dataset": ds, "model": key, "seed": seed, **sc,
                                 "train_s": res.seconds, "score_s": time.perf_counter() - t1,
                                 "final_loss": res.losses[-1] if res.losses else float("nan")})
                    if log:
                        log(f"{ds:9s} {key:10s} seed {seed}: InfoM {sc['infom']:.2f} "
                            f"InfoE {sc['infoe']:.2f} InfoC {sc['infoc']:.2f} "
                            f"(train {res.seconds:.0f}s)")
        seconds[(ds, "total")] = time.perf_counter() - t0
    return BenchmarkResult(pd.DataFrame(rows), nmis, names, seconds, ica_converged)


def summarise(scores: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds per (dataset, model), plus dataset = "aggregated" (the mean over
    datasets within each seed, then mean and std over seeds). Columns: <score>_mean/_std."""
    need = {"dataset", "model", "seed", *SCORES}
    missing = need - set(scores.columns)
    if missing:
        raise ValueError(f"scores lack columns {sorted(missing)}")
    agg = scores.groupby(["model", "seed"], as_index=False)[list(SCORES)].mean()
    agg["dataset"] = "aggregated"
    full = pd.concat([scores[["dataset", "model", "seed", *SCORES]], agg], ignore_index=True)
    out = full.groupby(["dataset", "model"])[list(SCORES)].agg(["mean", "std"])
    out.columns = [f"{s}_{stat}" for s, stat in out.columns]
    return out.reset_index()


def table2_payload(summary: pd.DataFrame, datasets: Sequence[str] = (*DATASETS, "aggregated"),
                   stat: str = "mean") -> dict:
    """``{dataset: {model: {infom, infoe, infoc, dci_d, mig}}}`` (``stat`` = "mean" or "std"
    over seeds) for the results JSON."""
    if stat not in ("mean", "std"):
        raise ValueError(f"stat must be 'mean' or 'std', got {stat!r}")
    out: dict = {}
    for row in summary.itertuples(index=False):
        if row.dataset in datasets:
            out.setdefault(row.dataset, {})[row.model] = {
                s: float(getattr(row, f"{s}_{stat}")) for s in SCORES}
    return out
