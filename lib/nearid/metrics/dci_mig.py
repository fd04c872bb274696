"""Secondary disentanglement scores: DCI disentanglement and MIG.

* DCI disentanglement (Eastwood & Williams 2018): fit one gradient-boosted-tree classifier
  per source from all latents, collect the importance matrix R (latents x sources), and
  score each latent by 1 - H_K(R_j / sum R_j) (entropy with base K), weighted by its share
  of the total importance. We use LightGBM's gain importances (fast, deterministic with
  a seed and one thread) instead of scikit-learn's slow GradientBoostingClassifier.
* MIG (Chen et al. 2018): latents binned into 20 equal-width histogram bins, discrete MI with
  each source, and the gap between the two most informative latents over H(source),
  averaged over sources.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import mutual_info_score

from nearid.metrics.infomec import _check, encode_sources, source_entropy


def dci_importance(sources, latents, n_estimators: int = 30, random_state: int = 0) -> np.ndarray:
    """Importance matrix R (L latents x K sources) from one LightGBM classifier per source."""
    import lightgbm as lgb

    s, z = _check(sources, latents)
    s = encode_sources(s)
    z = np.asarray(z, dtype=np.float64)
    R = np.zeros((z.shape[1], s.shape[1]))
    for i in range(s.shape[1]):
        y = s[:, i]
        if len(np.unique(y)) < 2:
            continue
        model = lgb.LGBMClassifier(n_estimators=n_estimators, learning_rate=0.1, num_leaves=8,
                                   min_child_samples=10, importance_type="gain",
                                   random_state=random_state, n_jobs=1, deterministic=True,
                                   force_row_wise=True, verbose=-1)
        model.fit(z, y)
        R[:, i] = model.feature_importances_
    return R


def dci_disentanglement(sources, latents, importance: np.ndarray | None = None,
                        random_state: int = 0) -> float:
    """Importance-weighted mean over latents of 1 - H_K(p_j): 1 = each latent serves one source."""
    R = dci_importance(sources, latents, random_state=random_state) if importance is None else np.asarray(importance, float)
    K = R.shape[1]
    if K < 2:
        raise ValueError("DCI disentanglement needs at least 2 sources")
    total = R.sum()
    if total <= 0:
        return 0.0
    row = R.sum(1)
    keep = row > 0
    P = R[keep] / row[keep, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        H = -np.where(P > 0, P * np.log(P), 0.0).sum(1) / np.log(K)
    return float(((1.0 - H) * (row[keep] / total)).sum())


def discretise(latents, n_bins: int = 20) -> np.ndarray:
    """Each latent column into ``n_bins`` equal-width histogram bins (constant columns -> 0)."""
    z = np.asarray(latents, dtype=np.float64)
    out = np.zeros(z.shape, dtype=np.int64)
    for j in range(z.shape[1]):
        if np.ptp(z[:, j]) == 0:
            continue
        edges = np.histogram_bin_edges(z[:, j], bins=n_bins)
        out[:, j] = np.digitize(z[:, j], edges[1:-1])
    return out


def mig(sources, latents, n_bins: int = 20) -> float:
    """Mutual information gap, normalised by source entropy, averaged over sources."""
    s, z = _check(sources, latents)
    s = encode_sources(s)
    if z.shape[1] < 2:
        raise ValueError("MIG needs at least 2 latents")
    zd = discretise(z, n_bins) if np.issubdtype(z.dtype, np.floating) else np.asarray(z)
    gaps = []
    for i in range(s.shape[1]):
        h = source_entropy(s[:, i])
        if h <= 0:
            continue
        mi = np.sort([mutual_info_score(s[:, i], zd[:, j]) for j in range(zd.shape[1])])[::-1]
        gaps.append((mi[0] - mi[1]) / h)
    return float(np.mean(gaps)) if gaps else float("nan")
