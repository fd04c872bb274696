"""The cell-microscopy protocol behind the paper's Tables 3, 4 and 6 (chapter 06).

Input: one embedding per well (rows of ``X``) and a well table with columns ``batch``,
``gene``, ``guide`` and ``is_control`` -- from the simulator (:mod:`nearid.data.cell_simulator`) or
from RxRx3-core (:mod:`nearid.data.rxrx`); the same code runs on both.

Four feature sets (:class:`FeatureSet`), each a transform fitted without perturbation labels:

* ``base`` -- the embeddings as they are;
* ``pca`` -- PCA whitening fitted on the control wells (zero mean, identity covariance on
  controls);
* ``pca_ica`` -- whitening, then the orthogonal FastICA rotation (logcosh contrast);
* ``pca_rand`` -- whitening, then a seeded random orthogonal rotation (Haar measure): the
  control for "any rotation of the whitened space".

Per guide (each guide is its own experiment against all control wells):

* **AUROC** -- LightGBM with exactly :data:`LIGHTGBM_PARAMS` (Table 6) classifies guide
  wells against control wells across batches: GroupKFold over batches, so every well is
  scored by a model that never saw its batch; the out-of-fold scores of all folds are
  pooled into one AUROC. A gene's AUROC is the mean over its guides.
* **sparsity** -- Hoyer sparsity of the guide's effect vector: per batch, mean of the
  guide's wells minus mean of that batch's control wells, averaged over batches, divided
  feature-wise by the control wells' standard deviation (1 for the whitened sets). A gene's
  sparsity is the mean over its guides.

Table 4 is :func:`nearid.metrics.sparsity.concentration` of each feature set with the
guide (or "control") as the condition label.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import ortho_group
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GroupKFold
from sklearn.utils.validation import check_array, check_is_fitted

from nearid.metrics.sparsity import auroc, concentration, hoyer
from nearid.paper import TABLE6_LIGHTGBM

FEATURE_SETS = ("base", "pca", "pca_ica", "pca_rand")
FEATURE_LABELS = {"base": "Base", "pca": "PCA", "pca_ica": "PCA + ICA", "pca_rand": "PCA + Rand"}
# Table 6: passed to LightGBM unchanged. Everything LightGBM's Table 6 leaves open
# (number of trees, seeds, threads) is set in :func:`make_classifier`.
LIGHTGBM_PARAMS: dict[str, Any] = dict(TABLE6_LIGHTGBM)
WELL_COLUMNS = ("batch", "gene", "guide", "is_control")


def check_wells(X, wells: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Validate embeddings against their well table; returns float64 X and a clean table."""
    X = check_array(X, dtype=np.float64)
    if not isinstance(wells, pd.DataFrame):
        raise TypeError(f"wells must be a pandas DataFrame, got {type(wells).__name__}")
    missing = [c for c in WELL_COLUMNS if c not in wells.columns]
    if missing:
        raise ValueError(f"wells lacks columns {missing}; need {list(WELL_COLUMNS)}, "
                         f"have {list(wells.columns)}")
    if len(wells) != len(X):
        raise ValueError(f"X has {len(X)} rows but wells has {len(wells)}")
    wells = wells.reset_index(drop=True)
    ctrl = wells["is_control"].astype(bool).to_numpy()
    if ctrl.sum() < 3 or (~ctrl).sum() < 1:
        raise ValueError(f"need at least 3 control wells and 1 perturbed well, got "
                         f"{int(ctrl.sum())} and {int((~ctrl).sum())}")
    return X, wells


# --------------------------------------------------------------------------- feature sets
class ControlWhitening(TransformerMixin, BaseEstimator):
    """PCA whitening fitted on control wells: controls get mean 0 and identity covariance.

    Directions whose control variance is below ``rtol`` times the largest are dropped (they
    would be amplified noise); ``n_components`` caps the number kept.
    """

    def __init__(self, n_components: int | None = None, rtol: float = 1e-8):
        self.n_components = n_components
        self.rtol = rtol

    def fit(self, X, controls=None) -> "ControlWhitening":
        X = check_array(X, dtype=np.float64)
        C = X if controls is None else X[np.asarray(controls, dtype=bool)]
        if len(C) < 3:
            raise ValueError(f"whitening needs at least 3 control rows, got {len(C)}")
        self.mean_ = C.mean(0)
        _, s, Vt = np.linalg.svd(C - self.mean_, full_matrices=False)
        var = s ** 2 / (len(C) - 1)
        keep = var > self.rtol * var.max()
        if self.n_components is not None:
            if self.n_components < 1:
                raise ValueError(f"n_components must be >= 1 or None, got {self.n_components}")
            keep &= np.arange(len(var)) < self.n_components
        self.components_ = Vt[keep]
        self.explained_variance_ = var[keep]
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X) -> np.ndarray:
        check_is_fitted(self, "components_")
        X = check_array(X, dtype=np.float64)
        return (X - self.mean_) @ self.components_.T / np.sqrt(self.explained_variance_)


class FeatureSet(TransformerMixin, BaseEstimator):
    """One of :data:`FEATURE_SETS`; ``fit(X, controls)`` uses no perturbation labels.

    ``ica_fit_on`` picks the rows FastICA sees: "controls" (the whitened control wells) or
    "all" (every well; still label-free). Either way the ICA map is an orthogonal rotation
    of the whitened space, as is ``pca_rand``'s, so the two differ only in which rotation.
    """

    def __init__(self, kind: str = "pca_ica", n_components: int | None = None,
                 ica_fit_on: str = "controls", random_state: int | None = 0, max_iter: int = 2000):
        self.kind = kind
        self.n_components = n_components
        self.ica_fit_on = ica_fit_on
        self.random_state = random_state
        self.max_iter = max_iter

    def fit(self, X, controls=None) -> "FeatureSet":
        if self.kind not in FEATURE_SETS:
            raise ValueError(f"unknown feature set {self.kind!r}; valid: {', '.join(FEATURE_SETS)}")
        if self.ica_fit_on not in ("controls", "all"):
            raise ValueError(f"ica_fit_on must be 'controls' or 'all', got {self.ica_fit_on!r}")
        X = check_array(X, dtype=np.float64)
        self.n_features_in_ = X.shape[1]
        self.whitening_ = None
        self.rotation_ = None
        self.converged_ = True
        if self.kind == "base":
            return self
        controls = np.ones(len(X), bool) if controls is None else np.asarray(controls, dtype=bool)
        self.whitening_ = ControlWhitening(self.n_components).fit(X, controls)
        Z = self.whitening_.transform(X)
        k = Z.shape[1]
        if self.kind == "pca_ica":
            rows = Z[controls] if self.ica_fit_on == "controls" else Z
            ica = FastICA(whiten=False, fun="logcosh", max_iter=self.max_iter, tol=1e-5,
                          random_state=self.random_state)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                ica.fit(rows)
            self.converged_ = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
            self.rotation_ = ica.components_.T  # orthogonal: sources = Z @ W.T
        elif self.kind == "pca_rand":
            self.rotation_ = (ortho_group.rvs(k, random_state=self.random_state) if k > 1
                              else np.ones((1, 1)))
        return self

    def transform(self, X) -> np.ndarray:
        check_is_fitted(self, "n_features_in_")
        X = check_array(X, dtype=np.float64)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"expected {self.n_features_in_} columns, got {X.shape[1]}")
        if self.whitening_ is None:
            return X.copy()
        Z = self.whitening_.transform(X)
        return Z if self.rotation_ is None else Z @ self.rotation_

    def fit_transform(self, X, controls=None, **_) -> np.ndarray:
        return self.fit(X, controls).transform(X)


def feature_sets(X, wells: pd.DataFrame, *, kinds=FEATURE_SETS, n_components: int | None = None,
                 ica_fit_on: str = "controls", seed: int = 0) -> dict[str, np.ndarray]:
    """Every requested feature set of the well embeddings, fitted on all control wells."""
    X, wells = check_wells(X, wells)
    ctrl = wells["is_control"].astype(bool).to_numpy()
    return {k: FeatureSet(k, n_components, ica_fit_on, random_state=seed).fit_transform(X, ctrl)
            for k in kinds}


# --------------------------------------------------------------------------- scores
def make_classifier(*, n_estimators: int = 100, seed: int = 0):
    """LightGBM with Table 6's hyperparameters; trees, seed and one thread set here."""
    from lightgbm import LGBMClassifier

    return LGBMClassifier(n_estimators=n_estimators, random_state=seed, n_jobs=1, verbose=-1,
                          deterministic=True, force_col_wise=True, **LIGHTGBM_PARAMS)


def cross_batch_auroc(F, y, batches, *, n_splits: int = 3, n_estimators: int = 100, seed: int = 0) -> float:
    """Pooled out-of-fold AUROC with GroupKFold over batches (no batch in train and test)."""
    F = check_array(F, dtype=np.float64)
    y = np.asarray(y).astype(int)
    batches = np.asarray(batches)
    n_groups = len(np.unique(batches))
    if n_groups < 2:
        raise ValueError("cross-batch evaluation needs at least 2 batches")
    splits = min(n_splits, n_groups)
    scores = np.full(len(y), np.nan)
    for train, test in GroupKFold(n_splits=splits).split(F, y, batches):
        if len(np.unique(y[train])) < 2:
            raise ValueError("a training fold holds only one class; use fewer splits or more batches")
        clf = make_classifier(n_estimators=n_estimators, seed=seed).fit(F[train], y[train])
        scores[test] = clf.predict_proba(F[test])[:, 1]
    return auroc(y, scores)


def effect_vector(F, wells: pd.DataFrame, guide: str) -> np.ndarray:
    """Batch-matched effect of a guide, in control standard deviations (see module doc)."""
    F = np.asarray(F, dtype=np.float64)
    ctrl = wells["is_control"].astype(bool).to_numpy()
    is_guide = (wells["guide"] == guide).to_numpy()
    if not is_guide.any():
        raise ValueError(f"no wells of guide {guide!r}")
    batch = wells["batch"].to_numpy()
    diffs = []
    for b in np.unique(batch[is_guide]):
        in_b = batch == b
        c = ctrl & in_b
        ref = F[c].mean(0) if c.any() else F[ctrl].mean(0)
        diffs.append(F[is_guide & in_b].mean(0) - ref)
    sd = F[ctrl].std(0, ddof=1)
    sd[sd == 0] = 1.0
    return np.mean(diffs, axis=0) / sd


def guides_of(wells: pd.DataFrame) -> dict[str, list[str]]:
    """gene -> its guides, in order of appearance."""
    pert = wells[~wells["is_control"].astype(bool)]
    return {g: list(dict.fromkeys(pert.loc[pert["gene"] == g, "guide"])) for g in dict.fromkeys(pert["gene"])}


def evaluate(X, wells: pd.DataFrame, *, kinds=FEATURE_SETS, n_components: int | None = None,
             ica_fit_on: str = "controls", n_splits: int = 3, n_estimators: int = 100,
             seed: int = 0, top: float = 0.25) -> dict[str, Any]:
    """Tables 3 and 4 for well embeddings ``X``: see the module docstring for every choice.

    Returns ``table3`` {gene: {auroc: {set: value}, sparsity: {set: value}, guides: n}},
    ``table4`` {set: concentration}, ``per_guide`` (a DataFrame) and ``features`` (the
    transformed well embeddings per set).
    """
    X, wells = check_wells(X, wells)
    feats = feature_sets(X, wells, kinds=kinds, n_components=n_components, ica_fit_on=ica_fit_on,
                         seed=seed)
    ctrl = wells["is_control"].astype(bool).to_numpy()
    batch = wells["batch"].to_numpy()
    rows = []
    for gene, guides in guides_of(wells).items():
        for guide in guides:
            sel = ctrl | (wells["guide"] == guide).to_numpy()
            y = (~ctrl[sel]).astype(int)
            for k, F in feats.items():
                rows.append(dict(gene=gene, guide=guide, feature_set=k,
                                 auroc=cross_batch_auroc(F[sel], y, batch[sel], n_splits=n_splits,
                                                           n_estimators=n_estimators, seed=seed),
                                 sparsity=hoyer(effect_vector(F, wells, guide))))
    per_guide = pd.DataFrame(rows)
    means = per_guide.groupby(["gene", "feature_set"], sort=False)[["auroc", "sparsity"]].mean()
    table3 = {}
    for gene, guides in guides_of(wells).items():
        table3[gene] = {"auroc": {k: float(means.loc[(gene, k), "auroc"]) for k in feats},
                        "sparsity": {k: float(means.loc[(gene, k), "sparsity"]) for k in feats},
                        "guides": len(guides)}
    labels = np.where(ctrl, "control", wells["guide"].astype(str).to_numpy())
    table4 = {k: concentration(F, labels, top) for k, F in feats.items()}
    return {"table3": table3, "table4": table4, "per_guide": per_guide, "features": feats}


def orderings(table3: dict) -> pd.DataFrame:
    """Per gene, the paper's claims as booleans: ICA >= PCA >= Base, and ICA > Rand."""
    rows = []
    for gene, r in table3.items():
        for metric in ("auroc", "sparsity"):
            v = r[metric]
            rows.append(dict(gene=gene, metric=metric,
                             ica_ge_pca_ge_base=bool(v["pca_ica"] >= v["pca"] >= v["base"]),
                             ica_gt_rand=bool(v["pca_ica"] > v["pca_rand"])))
    return pd.DataFrame(rows)


def factor_recovery(F, well_factors) -> dict[str, float]:
    """How well a feature set's axes match the simulator's known factors.

    ``mcc``: mean |correlation| over a Hungarian matching of factors to features (1 = every
    factor is one feature up to scale and sign).
    """
    from nearid.align import mean_corr_coef

    return {"mcc": mean_corr_coef(F, well_factors)}


# --------------------------------------------------------------------------- the MAE
def train_cell_mae(images, *, patch_size: int = 8, embed_dim: int = 64, depth: int = 4,
                   num_heads: int = 4, decoder_embed_dim: int = 32, decoder_depth: int = 2,
                   mask_ratio: float = 0.75, epochs: int = 10, batch_size: int = 128,
                   lr: float = 1.5e-3, weight_decay: float = 0.05, seed: int = 0,
                   device="cpu"):
    """Train chapter 04's :class:`~nearid.models.mae.MaskedAutoencoder` on cell crops.

    Returns (model, :class:`~nearid.train.TrainResult`). The crops' channels are the MAE's
    input channels; nothing about factors, wells or batches is shown to it.
    """
    import torch

    from nearid.models.mae import MaskedAutoencoder
    from nearid.train import fit

    images = np.asarray(images, dtype=np.float32)
    if images.ndim != 4 or images.shape[2] != images.shape[3]:
        raise ValueError(f"images must be (n, channels, S, S), got {images.shape}")
    torch.manual_seed(seed)
    model = MaskedAutoencoder(img_size=images.shape[2], patch_size=patch_size,
                              in_chans=images.shape[1], embed_dim=embed_dim, depth=depth,
                              num_heads=num_heads, decoder_embed_dim=decoder_embed_dim,
                              decoder_depth=decoder_depth, decoder_num_heads=num_heads,
                              mask_ratio=mask_ratio, backend="timm")
    result = fit(model, images, epochs=epochs, batch_size=batch_size, lr=lr,
                 weight_decay=weight_decay, seed=seed, device=device)
    return model, result


def well_embeddings(model, images, cell_well, *, n_wells: int | None = None, device="cpu") -> np.ndarray:
    """Well-level embeddings: the mean of the MAE's cell embeddings over each well's cells."""
    from nearid.data.cell_simulator import aggregate_wells
    from nearid.train import predict

    E = predict(model.embed, np.asarray(images, dtype=np.float32), device=device)
    return aggregate_wells(E, cell_well, n_wells)


def batch_share(F, wells: pd.DataFrame) -> float:
    """Median over features of the share of control-well variance explained by the batch.

    High: the features are dominated by technical batch effects (the raw embeddings);
    low: batch effects are confined to a few features or removed.
    """
    from nearid.metrics.sparsity import biological_fraction

    ctrl = wells["is_control"].astype(bool).to_numpy()
    batch = wells["batch"].astype(str).to_numpy()
    return float(np.median(biological_fraction(np.asarray(F)[ctrl], batch[ctrl])))
