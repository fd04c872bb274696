"""The book's algorithms in a few lines each, as the chapters show them to a reader.

The library's versions (each docstring names its own) add what a tool needs and a reader
does not: input checks, constant and duplicate columns, rank deficiency, collapsed
directions, options. Each function here is tested equal to its library version on the same
data (tests/unit/test_teaching.py), so the code on the page is the algorithm the book's
numbers come from, not a sketch of it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def whiten(X, k: int):
    """Centre ``X`` and rotate it onto its ``k`` leading principal axes, each scaled to unit
    variance: any invertible mixing of independent sources becomes an unknown rotation.
    Library: :class:`nearid.ica.Whitener`."""
    Xc = X - X.mean(axis=0)
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    std = s[:k] / np.sqrt(len(X) - 1)  # the k components' standard deviations
    return Xc @ Vt[:k].T / std


def bilipschitz(S):
    """B(z) = 1 + L(z) for each row of a decoder's Jacobian singular values ``S`` (codes x k),
    with one scale c for the whole model, the one that makes the worst row best.
    Library: :func:`nearid.lipschitz.bilipschitz_from_singular_values`."""
    s_max, s_min = S.max(axis=1), S.min(axis=1)
    c = np.sqrt(s_max.max() * s_min.min())
    return np.maximum(s_max / c, c / s_min)


def hoyer(x):
    """Hoyer sparsity of a vector: 1 when one entry holds everything, 0 when all are equal in
    size. Library: :func:`nearid.metrics.sparsity.hoyer`."""
    n = len(x)
    return (np.sqrt(n) - np.abs(x).sum() / np.linalg.norm(x)) / (np.sqrt(n) - 1)


def top_quarter_share(X, labels, controls):
    """The share of the biological (between-condition) variance that the top quarter of the
    features holds, each feature first put in units of the control rows' standard deviation.
    Library: :func:`nearid.metrics.sparsity.top_biological_share`."""
    Z = X / X[controls].std(axis=0, ddof=1)
    condition_means = pd.DataFrame(Z).groupby(np.asarray(labels)).transform("mean").to_numpy()
    between = ((condition_means - Z.mean(axis=0)) ** 2).mean(axis=0)  # one value per feature
    top = np.sort(between)[::-1][: int(np.ceil(len(between) / 4))]
    return top.sum() / between.sum()


def feature_sets(X, controls, k: int, seed: int = 0, max_iter: int = 1_000) -> dict:
    """Chapter 06's four feature sets of well embeddings ``X``: raw; whitened on the control
    wells (PCA); then rotated by FastICA fitted on the whitened control wells, or by a random
    rotation. No perturbation label is used.
    Library: :class:`nearid.experiments.ch06_cell_microscopy.FeatureSet`."""
    from scipy.stats import ortho_group

    from nearid.ica import WhitenedICA, Whitener

    whitener = Whitener(k, None).fit(X[controls])
    pca = whitener.transform(X)
    ica = WhitenedICA("all", None, max_iter=max_iter, random_state=seed).fit(pca[controls])
    rotation = ortho_group.rvs(k, random_state=seed)
    return {"base": X, "pca": pca, "pca_ica": ica.transform(pca), "pca_rand": pca @ rotation}
