"""Transform families and the errors that measure near-identifiability.

Each family is a scikit-learn-style estimator: ``fit(A, B)`` learns a map h from A's space
into B's space, ``transform(A)`` applies it, and ``score(A, B)`` is the normalised error
``mean_i ||h(a_i) - b_i||_2 / diameter(B)`` (lower is better), the quantity of Table 1.

Families, from most to least constrained:

* :class:`SignedPermutationAlignment` -- match each B axis to one A axis (Hungarian on
  |correlation|), then a per-axis sign and scale and an offset;
* :class:`RigidAlignment` -- rotation/reflection + translation (orthogonal Procrustes), by
  default with one global scale, since a model's code scale is arbitrary;
* :class:`LinearAlignment` -- any affine map (least squares with bias);
* :class:`ICAAlignment` -- unsupervised: whitening + ICA on each side separately, then a
  signed permutation between the components.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import pdist
from sklearn.base import BaseEstimator
from sklearn.linear_model import LinearRegression
from sklearn.utils.validation import check_is_fitted

from nearid.ica import DEFAULT_COMPONENTS, WhitenedICA

FAMILIES = ("permutation", "rigid", "linear", "ica")
# The ICA family's protocol, used by chapter 04 and `nearid align`: whiten each side onto the
# leading components holding this share of the fit rows' variance (at most one per ten rows;
# see nearid.ica.choose_components), fit FastICA on at most ICA_MAX_ROWS rows, and stop it
# after ICA_MAX_ITER iterations.
ICA_COMPONENTS = DEFAULT_COMPONENTS
ICA_MAX_ROWS = 20_000
ICA_MAX_ITER = 200


# --------------------------------------------------------------------------- validation
def check_pair(A, B, min_rows: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Validate two paired embedding matrices: 2-D, same row count, finite, enough rows."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    for name, X in (("A", A), ("B", B)):
        if X.ndim != 2:
            raise ValueError(f"{name} must be a 2-D array (rows = inputs), got shape {X.shape}")
        if not np.isfinite(X).all():
            bad = int((~np.isfinite(X)).sum())
            raise ValueError(f"{name} contains {bad} NaN or infinite values")
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"A and B must have the same number of rows (the same inputs in the "
                         f"same order), got {A.shape[0]} and {B.shape[0]}")
    if A.shape[0] < min_rows:
        raise ValueError(f"need at least {min_rows} rows, got {A.shape[0]}")
    return A, B


# --------------------------------------------------------------------------- errors
def latent_diameter(Z, quantile: float = 0.99, max_points: int = 2000) -> float:
    """Robust diameter of a point cloud: a high quantile of its pairwise distances.

    The plain maximum is dominated by a single outlier; the 0.99 quantile of pairwise
    distances over at most ``max_points`` evenly spaced rows (deterministic) is stable.
    """
    Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim != 2 or Z.shape[0] < 2:
        raise ValueError("latent_diameter needs a 2-D array with at least 2 rows")
    if Z.shape[0] > max_points:
        Z = Z[np.linspace(0, Z.shape[0] - 1, max_points).astype(int)]
    d = float(np.quantile(pdist(Z), quantile))
    if d == 0:
        raise ValueError("the point cloud has zero diameter (all rows equal)")
    return d


def normalised_error(pred, target, diameter: float | None = None) -> float:
    """Mean l2 distance between paired rows, divided by the target's diameter."""
    pred, target = check_pair(pred, target, min_rows=1)
    if pred.shape != target.shape:
        raise ValueError(f"shapes differ: {pred.shape} vs {target.shape}")
    diameter = latent_diameter(target) if diameter is None else diameter
    return float(np.linalg.norm(pred - target, axis=1).mean() / diameter)


# --------------------------------------------------------------------------- families
class _Alignment(BaseEstimator):
    """Shared score(): the normalised l2 error of the fitted map."""

    def score(self, A, B, diameter: float | None = None) -> float:
        return normalised_error(self.transform(A), B, diameter)

    def fit_transform(self, A, B) -> np.ndarray:
        return self.fit(A, B).transform(A)

    def _check_dims(self, A):
        check_is_fitted(self, "n_features_in_")
        A = np.asarray(A, dtype=np.float64)
        if A.ndim != 2 or A.shape[1] != self.n_features_in_:
            raise ValueError(f"expected a 2-D array with {self.n_features_in_} columns, "
                             f"got shape {A.shape}")
        return A


def _abs_correlation(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """|Pearson correlation| between every column of A and every column of B."""
    Az = A - A.mean(0)
    Bz = B - B.mean(0)
    sa = np.linalg.norm(Az, axis=0)
    sb = np.linalg.norm(Bz, axis=0)
    sa[sa == 0] = 1.0
    sb[sb == 0] = 1.0
    return np.abs((Az / sa).T @ (Bz / sb))


def match_columns(A, B) -> tuple[np.ndarray, np.ndarray]:
    """Hungarian matching of A's columns to B's by |correlation|; returns (rows_A, cols_B)."""
    C = _abs_correlation(np.asarray(A, float), np.asarray(B, float))
    return linear_sum_assignment(-C)


class SignedPermutationAlignment(_Alignment):
    """b_j ~ s_j * a_pi(j) + c_j: a matching, a sign and (optionally) a scale per axis.

    B axes left unmatched (when A has fewer columns) are predicted by their mean.
    """

    def __init__(self, scale: bool = True):
        self.scale = scale

    def fit(self, A, B) -> "SignedPermutationAlignment":
        A, B = check_pair(A, B)
        rows, cols = match_columns(A, B)
        Ac = A - A.mean(0)
        Bc = B - B.mean(0)
        coef = np.zeros(B.shape[1])
        src = np.full(B.shape[1], -1)
        for r, c in zip(rows, cols):
            a, b = Ac[:, r], Bc[:, c]
            ab, aa = float(a @ b), float(a @ a)
            if self.scale:
                coef[c] = ab / aa if aa > 0 else 0.0
            else:
                coef[c] = 1.0 if ab >= 0 else -1.0
            src[c] = r
        self.source_ = src
        self.coef_ = coef
        self.mean_A_ = A.mean(0)
        self.mean_B_ = B.mean(0)
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, A) -> np.ndarray:
        A = self._check_dims(A) - self.mean_A_
        out = np.tile(self.mean_B_, (A.shape[0], 1))
        m = self.source_ >= 0
        out[:, m] += A[:, self.source_[m]] * self.coef_[m]
        return out


class RigidAlignment(_Alignment):
    """Orthogonal Procrustes with translation: b ~ s * R a + t, R with orthonormal columns.

    ``scale=True`` (default) allows one global scale s, because a model's code scale is not
    fixed by its loss; normalising the error by B's diameter then makes the family
    scale-free. ``scale=False`` is the strict rigid family (s = 1).
    """

    def __init__(self, scale: bool = True):
        self.scale = scale

    def fit(self, A, B) -> "RigidAlignment":
        A, B = check_pair(A, B)
        self.mean_A_, self.mean_B_ = A.mean(0), B.mean(0)
        Ac, Bc = A - self.mean_A_, B - self.mean_B_
        U, S, Vt = np.linalg.svd(Ac.T @ Bc, full_matrices=False)
        self.rotation_ = U @ Vt  # (d_A, d_B), orthonormal columns or rows
        norm = float((Ac ** 2).sum())
        self.scale_ = float(S.sum() / norm) if (self.scale and norm > 0) else 1.0
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, A) -> np.ndarray:
        A = self._check_dims(A)
        return self.scale_ * (A - self.mean_A_) @ self.rotation_ + self.mean_B_


class LinearAlignment(_Alignment):
    """Any affine map b ~ M a + t, fitted by least squares."""

    def fit(self, A, B) -> "LinearAlignment":
        A, B = check_pair(A, B)
        self.regression_ = LinearRegression().fit(A, B)
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, A) -> np.ndarray:
        return self.regression_.predict(self._check_dims(A))


class ICAAlignment(_Alignment):
    """Unsupervised route: whiten + ICA each side, then a signed permutation of components.

    Each side is whitened and rotated to independent components *separately*
    (:class:`nearid.ica.WhitenedICA`: constant and duplicate columns dropped, whitened onto
    the leading components chosen by ``n_components``, see
    :func:`nearid.ica.choose_components`). The pairing of rows is then used for what the
    permutation family uses it for, and nothing more: matching components (Hungarian on
    |correlation|), their signs and, with ``scale=True``, one least-squares scale per matched
    component. No mixing map is regressed. The matched A components are sent into B's space
    through B's ICA mixing; B's directions outside its kept components are predicted by
    their mean. ``max_rows`` fits the two ICAs on a seeded random subset of at most that many
    rows, which bounds FastICA's cost for very many rows (None = all rows).
    """

    def __init__(self, n_components: float | int | str | None = DEFAULT_COMPONENTS,
                 random_state: int | None = 0, max_iter: int = 1000, max_rows: int | None = None,
                 scale: bool = True):
        self.n_components = n_components
        self.random_state = random_state
        self.max_iter = max_iter
        self.max_rows = max_rows
        self.scale = scale

    def fit(self, A, B) -> "ICAAlignment":
        A, B = check_pair(A, B, min_rows=3)
        if self.max_rows is not None and A.shape[0] > self.max_rows:
            rows = np.sort(np.random.default_rng(self.random_state).choice(
                A.shape[0], self.max_rows, replace=False))
            A, B = A[rows], B[rows]
        # FastICA iterates on small (k x k) matrices, where multi-threaded BLAS/LAPACK spends
        # its time waiting for threads (scipy's eigh of 128x128 took 0.3 s instead of 2 ms on
        # a busy 2-core machine): one thread is faster, and the result is the same.
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            self.ica_A_, self.ica_B_ = (
                WhitenedICA(n_components=self.n_components, random_state=self.random_state,
                            max_iter=self.max_iter).fit(X) for X in (A, B))
        SA, SB = self.ica_A_.transform(A), self.ica_B_.transform(B)
        # per-component least-squares scale, exactly as in the permutation family, so that the
        # ICA efficiency compares like with like (only the ICA rotations differ)
        self.matching_ = SignedPermutationAlignment(scale=self.scale).fit(SA, SB)
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, A) -> np.ndarray:
        SA = self.ica_A_.transform(self._check_dims(A))
        return self.ica_B_.inverse_transform(self.matching_.transform(SA))


def make_alignment(family: str, random_state: int | None = 0, **ica_params) -> _Alignment:
    """A fresh estimator for one of :data:`FAMILIES` (``ica_params`` go to ICAAlignment)."""
    if family == "permutation":
        return SignedPermutationAlignment()
    if family == "rigid":
        return RigidAlignment()
    if family == "linear":
        return LinearAlignment()
    if family == "ica":
        return ICAAlignment(random_state=random_state, **ica_params)
    raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")


# --------------------------------------------------------------------------- summaries
def ica_efficiency(permutation: float, rigid: float, ica: float) -> float:
    """(perm - ica) / (perm - rigid): the share of the perm-to-rigid gap that ICA closes."""
    gap = permutation - rigid
    if abs(gap) < 1e-9:  # no gap to close: the ratio is meaningless, not huge
        return float("nan")
    return float((permutation - ica) / gap)


def linear_cka(X, Y) -> float:
    """Linear centred kernel alignment (Kornblith et al. 2019), 1 = same up to rotation+scale."""
    X, Y = check_pair(X, Y)
    X = X - X.mean(0)
    Y = Y - Y.mean(0)
    num = np.linalg.norm(X.T @ Y, "fro") ** 2
    den = np.linalg.norm(X.T @ X, "fro") * np.linalg.norm(Y.T @ Y, "fro")
    return float(num / den) if den > 0 else float("nan")


@dataclass
class AlignmentResult:
    """Table 1 for one pair of embeddings: what :func:`compare` measured.

    ``errors[family]`` is the mean held-out l2 error of the family's map from A to B divided
    by B's diameter; ``row_errors[family]`` the same per evaluation row (for intervals);
    ``ica_components`` and ``ica_variance`` the number of whitened components each side kept
    and the share of its fit rows' variance they hold.
    """

    errors: dict[str, float]
    row_errors: dict[str, np.ndarray] = field(repr=False)
    ica_efficiency: float
    cka: float
    n_fit: int
    n_eval: int
    dim_a: int
    dim_b: int
    ica_components: tuple[int, int] | None = None
    ica_variance: tuple[float, float] | None = None

    def to_dict(self) -> dict:
        """Flat numbers (no per-row arrays): one entry per family, then the rest."""
        out: dict = dict(self.errors)
        out.update(ica_efficiency=self.ica_efficiency, cka=self.cka, n_fit=self.n_fit,
                   n_eval=self.n_eval, dim_a=self.dim_a, dim_b=self.dim_b)
        if self.ica_components is not None:
            out.update(ica_components=list(self.ica_components), ica_variance=list(self.ica_variance))
        return out

    def __str__(self) -> str:
        return format_alignment_table(self.to_dict())


def compare(A, B, *, fit_fraction: float = 0.5, seed: int = 0, families=FAMILIES,
            ica_components: float | int | str | None = ICA_COMPONENTS, ica_max_rows: int | None = None,
            ica_max_iter: int = 1000) -> AlignmentResult:
    """Fit every family on a random ``fit_fraction`` of the rows, score it on the rest.

    ``A`` and ``B`` (numpy arrays or torch tensors) hold embeddings of the same inputs, row
    for row. The ``ica_*`` arguments set the ICA family's protocol (see
    :class:`ICAAlignment`); CKA is linear CKA on the evaluation rows.
    """
    A, B = check_pair(_as_numpy(A), _as_numpy(B))
    if not 0 < fit_fraction < 1:
        raise ValueError(f"fit_fraction must lie in (0, 1), got {fit_fraction}")
    n = A.shape[0]
    n_fit = int(round(fit_fraction * n))
    need = max(A.shape[1], B.shape[1]) + 2
    if n_fit < need or n - n_fit < 3:
        raise ValueError(f"too few rows: {n} rows with fit_fraction={fit_fraction} give "
                         f"{n_fit} fit and {n - n_fit} evaluation rows; need at least "
                         f"{need} fit rows (embedding width + 2) and 3 evaluation rows")
    order = np.random.default_rng(seed).permutation(n)
    fit_idx, eval_idx = order[:n_fit], order[n_fit:]
    diameter = latent_diameter(B[eval_idx])
    errors, rows = {}, {}
    ica_info = None
    for family in families:
        ica_params = dict(n_components=ica_components, max_rows=ica_max_rows,
                          max_iter=ica_max_iter) if family == "ica" else {}
        est = make_alignment(family, random_state=seed, **ica_params).fit(A[fit_idx], B[fit_idx])
        rows[family] = np.linalg.norm(est.transform(A[eval_idx]) - B[eval_idx], axis=1) / diameter
        errors[family] = float(rows[family].mean())
        if family == "ica":
            ica_info = ((est.ica_A_.n_components_, est.ica_B_.n_components_),
                        (est.ica_A_.variance_kept_, est.ica_B_.variance_kept_))
    eff = (ica_efficiency(errors["permutation"], errors["rigid"], errors["ica"])
           if {"permutation", "rigid", "ica"} <= set(errors) else float("nan"))
    return AlignmentResult(errors=errors, row_errors=rows, ica_efficiency=eff,
                           cka=linear_cka(A[eval_idx], B[eval_idx]), n_fit=int(n_fit),
                           n_eval=int(n - n_fit), dim_a=int(A.shape[1]), dim_b=int(B.shape[1]),
                           ica_components=None if ica_info is None else ica_info[0],
                           ica_variance=None if ica_info is None else ica_info[1])


def _as_numpy(X):
    """numpy arrays pass through; torch tensors (any device) become numpy arrays."""
    if hasattr(X, "detach") and hasattr(X, "cpu"):
        return X.detach().cpu().numpy()
    return X


def alignment_table(A, B, fit_fraction: float = 0.5, seed: int = 0, families=FAMILIES,
                    ica_components: float | int | str | None = ICA_COMPONENTS,
                    ica_max_rows: int | None = None, ica_max_iter: int = 1000) -> dict:
    """:func:`compare` as a flat dict (one error per family, efficiency, CKA, split sizes)."""
    return compare(A, B, fit_fraction=fit_fraction, seed=seed, families=families,
                   ica_components=ica_components, ica_max_rows=ica_max_rows,
                   ica_max_iter=ica_max_iter).to_dict()


def format_alignment_table(res: dict) -> str:
    """The text table ``nearid align`` prints: one line of explanation per family."""
    def num(v):
        return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

    eff = res["ica_efficiency"]
    eff_s = "n/a" if eff is None or math.isnan(eff) else f"{100 * eff:.0f}%"
    rows = [
        ("permutation", num(res["permutation"]), "signed permutation + per-axis scale"),
        ("rigid", num(res["rigid"]), "rotation/reflection + global scale + shift"),
        ("linear", num(res["linear"]), "any affine map"),
        ("ica", num(res["ica"]), "whiten + ICA each side, match components"),
        ("ica efficiency", eff_s, "(perm - ica) / (perm - rigid)"),
        ("linear CKA", num(res["cka"]), "similarity, 1 = same up to rotation + scale"),
    ]
    head = (f"A: {res['dim_a']}-d, B: {res['dim_b']}-d; fitted on {res['n_fit']} rows, "
            f"evaluated on {res['n_eval']} held-out rows\n"
            "error = mean ||h(a) - b|| / diameter(B)   (0 = identical, lower is better)\n")
    width = max(len(r[0]) for r in rows)
    body = "\n".join(f"{name:<{width}}  {val:>6}   {note}" for name, val, note in rows)
    return head + body


def mean_corr_coef(Z, U) -> float:
    """MCC: mean |Pearson correlation| of matched pairs (Hungarian) between Z and U columns."""
    Z, U = check_pair(Z, U)
    C = _abs_correlation(Z, U)
    r, c = linear_sum_assignment(-C)
    return float(C[r, c].mean())


def amari_distance(W, A) -> float:
    """Amari distance of P = W A from a scaled permutation, in [0, 1]; 0 = perfect unmixing."""
    P = np.abs(np.asarray(W, float) @ np.asarray(A, float))
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"W @ A must be square, got shape {P.shape}")
    n = P.shape[0]
    if n < 2:
        return 0.0
    rows = (P.sum(1) / P.max(1) - 1).sum()
    cols = (P.sum(0) / P.max(0) - 1).sum()
    return float((rows + cols) / (2 * n * (n - 1)))
