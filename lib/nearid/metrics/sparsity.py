"""Sparsity, concentration and AUROC: the scores of the paper's Tables 3 and 4.

* :func:`hoyer` -- Hoyer sparsity (sqrt(n) - ||x||_1 / ||x||_2) / (sqrt(n) - 1): 0 for a
  vector with all entries of equal magnitude, 1 for a vector with one non-zero entry.
* :func:`biological_fraction` and :func:`concentration` -- how much of each feature's
  variation the perturbation labels explain, and how much of it the best quarter of the
  features carries (Table 4; the estimator is stated in :func:`concentration`).
* :func:`top_biological_share` -- a second reading of Table 4: the share of all the
  biological variance that the top quarter of the features holds (0.25 for an even spread).
* :func:`auroc` -- area under the ROC curve with input checks.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

from nearid.constraints import Interval, validate_params

TOP = Interval(float, 0, 1, closed="right")  # the share of the features (or entries) called "top"


def hoyer(x, axis: int = -1) -> np.ndarray | float:
    """Hoyer sparsity of x along ``axis``, in [0, 1]; a zero vector is an error.

    Invariant to the scale and sign of x and to permutations of its entries, but not to
    rotations: that is why it tells a disentangled basis from a rotated one.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0 or x.shape[axis] < 2:
        raise ValueError(f"Hoyer sparsity needs vectors of length >= 2, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("x contains NaN or infinite values")
    n = x.shape[axis]
    l1 = np.abs(x).sum(axis=axis)
    l2 = np.sqrt((x ** 2).sum(axis=axis))
    if np.any(l2 == 0):
        raise ValueError("Hoyer sparsity is undefined for an all-zero vector")
    out = np.clip((np.sqrt(n) - l1 / l2) / (np.sqrt(n) - 1), 0.0, 1.0)  # clip rounding
    return float(out) if np.ndim(out) == 0 else out


def biological_fraction(X, labels) -> np.ndarray:
    """Per feature, the share of its variance explained by the labels (eta squared).

    ``labels`` name each row's condition (control or a perturbation); eta^2_j =
    between-condition sum of squares / total sum of squares of feature j (one-way ANOVA).
    Batch-to-batch and well-to-well variation falls in the within-condition part. The
    ratio is invariant to the scale of each feature, so raw and whitened features compare.
    """
    centred, between, n_conditions = _between_conditions(X, labels)
    if n_conditions < 2:
        raise ValueError("need at least two distinct labels (controls and a perturbation)")
    total = (centred ** 2).sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(total > 0, between / total, 0.0)
    return frac


@validate_params(top=TOP)
def concentration(X, labels, top: float = 0.25) -> float:
    """Fraction of biological variation in the top ``top`` share of features (Table 4).

    Estimator: compute eta^2 (:func:`biological_fraction`) for every feature, keep the
    ceil(top * d) features with the largest eta^2, and return their mean eta^2 -- the share
    of those features' (standardised) variance that the perturbation labels explain. A
    basis that gathers the biology into a few axes scores high; one that smears it over
    every axis, together with batch effects, scores low.
    """
    frac = biological_fraction(X, labels)
    k = max(1, int(np.ceil(top * len(frac))))
    return float(np.sort(frac)[::-1][:k].mean())


def _between_conditions(X, labels) -> tuple[np.ndarray, np.ndarray, int]:
    """(X centred, per feature the between-condition sum of squares: sum over conditions of
    n_c (mean_c - mean)^2, the number of conditions): what :func:`biological_fraction` and
    :func:`biological_variance` share."""
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels)
    if X.ndim != 2 or len(X) != len(labels):
        raise ValueError(f"X must be (n, d) with one label per row; got {X.shape} and {labels.shape}")
    _, codes = np.unique(labels, return_inverse=True)
    centred = X - X.mean(0)
    counts = np.bincount(codes).astype(np.float64)
    sums = np.zeros((len(counts), X.shape[1]))
    np.add.at(sums, codes, centred)
    return centred, (sums ** 2 / counts[:, None]).sum(0), len(counts)


def biological_variance(X, labels) -> np.ndarray:
    """Per feature, the between-condition variance: sum over conditions of n_c (mean_c -
    mean)^2, divided by the number of rows (the numerator of :func:`biological_fraction`)."""
    centred, between, _ = _between_conditions(X, labels)
    return between / len(centred)


@validate_params(top=TOP)
def top_biological_share(X, labels, top: float = 0.25, controls=None) -> float:
    """Share of the total biological variance held by the top ``top`` fraction of features.

    Features are first put in units of the control rows' standard deviation (``controls``, a
    boolean mask; all rows when None), the units of the whitened feature sets and of the
    effect vectors; then :func:`biological_variance` per feature, and :func:`top_share` of
    it. An even spread over the features gives ``top``, one biological feature gives 1. In a
    whitened space the total is the same for every rotation, so the share measures only how
    the basis distributes it.
    """
    X = np.asarray(X, dtype=np.float64)
    ref = X if controls is None else X[np.asarray(controls, dtype=bool)]
    if len(ref) < 2:
        raise ValueError("need at least two control rows to scale the features")
    sd = ref.std(0, ddof=1)
    keep = sd > 0
    return top_share(biological_variance(X[:, keep] / sd[keep], labels), top)


@validate_params(top=TOP)
def top_share(values, top: float = 0.25) -> float:
    """Share of a non-negative total held by its top ``top`` fraction of entries."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if (v < 0).any() or v.sum() == 0:
        raise ValueError("values must be non-negative with a positive sum")
    k = max(1, int(np.ceil(top * len(v))))
    return float(np.sort(v)[::-1][:k].sum() / v.sum())


def auroc(y_true, score) -> float:
    """Area under the ROC curve (1 = perfect, 0.5 = chance); needs both classes."""
    y_true = np.asarray(y_true)
    score = np.asarray(score, dtype=np.float64)
    if y_true.shape != score.shape or y_true.ndim != 1:
        raise ValueError(f"y_true and score must be 1-D of equal length, got {y_true.shape}, {score.shape}")
    if len(np.unique(y_true)) != 2:
        raise ValueError(f"AUROC needs exactly two classes, got {np.unique(y_true).tolist()}")
    return float(roc_auc_score(y_true, score))
