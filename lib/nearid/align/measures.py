"""Similarity measures between two representations of the same inputs, each from its paper.

Every function takes ``X`` (n x p) and ``Y`` (n x q), rows the same inputs in the same
order, any real dtype (computed in float64), and returns one number. Columns are centred
first wherever the measure's definition is invariant to a common offset, so an offset of
1e4 (common in transformer embeddings) costs no digits. :data:`MEASURES` describes each:
what value means "identical", what it is invariant to, which rows it is computed on.

* kernel alignment: :func:`linear_cka` (Kornblith et al. 2019), :func:`debiased_cka`
  (unbiased HSIC, Song et al. 2012), :func:`minibatch_cka` (Nguyen et al. 2021),
  :func:`rbf_cka`;
* canonical correlations, fitted on some rows and scored on others: :func:`cca`,
  :func:`svcca` (Raghu et al. 2017), :func:`pwcca` (Morcos et al. 2018);
* geometry of the inputs: :func:`rsa` (Kriegeskorte et al. 2008), :func:`mutual_knn`
  (Huh et al. 2024);
* shape metrics (Williams et al. 2021): :func:`procrustes_angle`, :func:`bures_distance`.

Measures built on n x n matrices (:func:`debiased_cka` is not one: it has a d x d form) take
``max_rows`` and use a seeded subsample of at most that many rows, which the result states.
Intervals and the permutation baseline are :mod:`nearid.align.intervals`' job.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nearid.align.protocol import check_pair
from nearid.constraints import Interval, OrNone, Options, validate_params

MAX_ROWS = 4_000
"""Default row cap of the n x n measures: 4,000 rows make 8 million pairs, n x n float64
matrices of 128 MB, and a few seconds on one core."""
RDMS = ("euclidean", "correlation")
COMPARISONS = ("spearman", "kendall", "cosine")
KNN_METRICS = ("cosine", "euclidean")
ROWS = Interval(int, 4)
MAX_ROWS_ARG = OrNone(ROWS)  # None = every row


# --------------------------------------------------------------------------- helpers
def _centred(X: np.ndarray) -> np.ndarray:
    return X - X.mean(0)


def _subsample(X, Y, max_rows: int | None, random_state: int | None) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_rows`` rows of the pair (a seeded subsample, kept in row order)."""
    if max_rows is not None and X.shape[0] > max_rows:
        idx = np.sort(np.random.default_rng(random_state).choice(X.shape[0], max_rows, replace=False))
        X, Y = X[idx], Y[idx]
    return X, Y


def subsampled_rows(n: int, max_rows: int | None) -> int:
    """How many rows an n x n measure uses out of ``n``."""
    return n if max_rows is None else min(n, max_rows)


def _ratio(num: float, a: float, b: float) -> float:
    """num / sqrt(a b), NaN when the denominator is not positive."""
    den = a * b
    return float(num / np.sqrt(den)) if den > 0 else float("nan")


# --------------------------------------------------------------------------- kernel alignment
def linear_cka(X, Y) -> float:
    """Linear centred kernel alignment (Kornblith et al. 2019, ICML, eq. 4 with linear
    kernels): ||X'Y||_F^2 / (||X'X||_F ||Y'Y||_F) on centred columns. 1 = the same up to
    rotation and isotropic scale. It is biased upwards when the width is not small
    against the rows: two independent isotropic Gaussians give about
    sqrt(p q / ((n + p) (n + q))) (see :func:`debiased_cka`)."""
    X, Y = check_pair(X, Y)
    X, Y = _centred(X), _centred(Y)
    return _cka_from_moments(X.T @ X, Y.T @ Y, X.T @ Y)


def _cka_from_moments(gram_a, gram_b, cross) -> float:
    """Linear CKA from centred cross-products: ||A'B||_F^2 / (||A'A||_F ||B'B||_F), at most 1.

    Cauchy-Schwarz bounds it by 1; float32 block sums can round an exact rotation to
    1 + 1e-9, so the ratio is clipped (it only ever moves values above 1)."""
    num = float(np.linalg.norm(cross, "fro")) ** 2
    den = float(np.linalg.norm(gram_a, "fro")) * float(np.linalg.norm(gram_b, "fro"))
    return min(num / den, 1.0) if den > 0 else float("nan")


def hsic_unbiased(K: np.ndarray, L: np.ndarray) -> float:
    """The unbiased HSIC estimator of Song et al. (2012, JMLR 13, eq. 5) from n x n kernel
    matrices (n >= 4): [tr(K~L~) + 1'K~1 1'L~1 / ((n-1)(n-2)) - 2/(n-2) 1'K~L~1] / (n(n-3)),
    where K~, L~ are K, L with their diagonals set to 0. Its expectation is HSIC itself,
    so it is 0 on average for independent X and Y at any n (the biased estimator is not)."""
    n = K.shape[0]
    K, L = K.copy(), L.copy()
    np.fill_diagonal(K, 0.0)
    np.fill_diagonal(L, 0.0)
    k1, l1 = K.sum(1), L.sum(1)
    value = (np.einsum("ij,ij->", K, L) + k1.sum() * l1.sum() / ((n - 1) * (n - 2))
             - 2.0 / (n - 2) * float(k1 @ l1))
    return float(value / (n * (n - 3)))


def _hsic_unbiased_linear(X: np.ndarray, Y: np.ndarray, cross: np.ndarray) -> float:
    """:func:`hsic_unbiased` for linear kernels of centred X and Y, without n x n matrices.

    With centred columns X'1 = 0, so 1'K~1 = -sum_i k_ii and K~1 = -diag(K): every term is
    a d x d product or a sum over rows (tr(K~L~) = ||X'Y||_F^2 - sum_i k_ii l_ii)."""
    n = X.shape[0]
    k, ll = np.einsum("ij,ij->i", X, X), np.einsum("ij,ij->i", Y, Y)
    kl = float(k @ ll)
    value = float(np.einsum("ij,ij->", cross, cross)) - kl + k.sum() * ll.sum() / ((n - 1) * (n - 2)) \
        - 2.0 / (n - 2) * kl
    return value / (n * (n - 3))


def debiased_cka(X, Y) -> float:
    """Debiased linear CKA (Kornblith et al. 2019, section 3 and appendix; the estimator of
    Nguyen et al. 2021): CKA with each HSIC replaced by its unbiased estimator (Song et al.
    2012). Near 0 for independent data at any n and width, where :func:`linear_cka` is
    not; 1 on an exact rotation (the same Gram matrix on both sides). Computed from d x d
    products, on every row it is given (no n x n matrix)."""
    X, Y = check_pair(X, Y, min_rows=4)
    X, Y = _centred(X), _centred(Y)
    return _ratio(_hsic_unbiased_linear(X, Y, X.T @ Y), _hsic_unbiased_linear(X, X, X.T @ X),
                  _hsic_unbiased_linear(Y, Y, Y.T @ Y))


@validate_params(batch_size=ROWS)
def minibatch_cka(X, Y, batch_size: int = 256, random_state: int | None = 0) -> float:
    """Minibatch CKA (Nguyen, Raghu & Kornblith 2021, ICLR, eq. 3): the unbiased HSIC of
    linear kernels averaged over minibatches of ``batch_size`` rows, then
    mean HSIC(K, L) / sqrt(mean HSIC(K, K) mean HSIC(L, L)). Each batch is a seeded random
    subset; the rows left over after the last full batch are not used. Memory is one batch
    (X may be a memory map), so it suits data too large for :func:`debiased_cka`'s d x d
    products, at the price of a noisier estimate with the same expectation."""
    n = X.shape[0]
    if n != Y.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows, got {n} and {Y.shape[0]}")
    if n < batch_size:
        raise ValueError(f"need at least batch_size={batch_size} rows, got {n}")
    order = np.random.default_rng(random_state).permutation(n)
    sums = np.zeros(3)
    batches = n // batch_size
    for b in range(batches):
        idx = np.sort(order[b * batch_size:(b + 1) * batch_size])
        Xb, Yb = check_pair(X[idx], Y[idx], min_rows=4)
        Xb, Yb = _centred(Xb), _centred(Yb)  # HSIC_u is unchanged by a shift; centring keeps digits
        K, L = Xb @ Xb.T, Yb @ Yb.T
        sums += (hsic_unbiased(K, L), hsic_unbiased(K, K), hsic_unbiased(L, L))
    return _ratio(sums[0], sums[1], sums[2])


def _sq_distances(X: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between the rows of a centred X (n x n, >= 0)."""
    sq = np.einsum("ij,ij->i", X, X)
    D = X @ X.T
    D *= -2
    D += sq[:, None]
    D += sq[None, :]
    np.maximum(D, 0.0, out=D)
    np.fill_diagonal(D, 0.0)
    return D


def _double_centre(K: np.ndarray) -> np.ndarray:
    """HKH with H = I - 11'/n."""
    K = K - K.mean(0)
    return K - K.mean(1)[:, None]


@validate_params(max_rows=MAX_ROWS_ARG)
def rbf_cka(X, Y, bandwidth: float = 1.0, max_rows: int | None = MAX_ROWS, random_state: int | None = 0) -> float:
    """CKA with Gaussian (RBF) kernels (Kornblith et al. 2019, section 3):
    <HKH, HLH>_F / (||HKH||_F ||HLH||_F), K_ij = exp(-||x_i - x_j||^2 / (2 s^2)) with s =
    ``bandwidth`` times the median distance between distinct rows (Kornblith et al. use 0.2
    to 0.8 of the median; 1 is the common default). The median bandwidth makes it
    invariant to rotation and isotropic scale; it sees non-linear (local) structure that
    linear CKA misses. n x n: on a seeded subsample of at most ``max_rows`` rows."""
    X, Y = check_pair(X, Y, min_rows=4)
    X, Y = _subsample(X, Y, max_rows, random_state)
    grams = []
    for Z in (X, Y):
        D = _sq_distances(_centred(Z))
        med = float(np.median(D[np.triu_indices_from(D, 1)]))
        if med <= 0:
            return float("nan")
        grams.append(_double_centre(np.exp(-D / (2 * bandwidth ** 2 * med))))
    K, L = grams
    return min(_ratio(float(np.einsum("ij,ij->", K, L)), float(np.einsum("ij,ij->", K, K)),
                      float(np.einsum("ij,ij->", L, L))), 1.0)


# --------------------------------------------------------------------------- canonical correlations
@dataclass(frozen=True)
class CCAFit:
    """Canonical directions fitted on some rows: ``mean_x``, ``mean_y``, the directions as
    columns of ``a`` and ``b`` (one pair per canonical correlation, strongest first) and
    the fit rows' own (in-sample) correlations ``rho``."""

    mean_x: np.ndarray
    mean_y: np.ndarray
    a: np.ndarray
    b: np.ndarray
    rho: np.ndarray

    def correlations(self, X, Y) -> np.ndarray:
        """Pearson correlation of each pair of canonical variates on the rows of X and Y."""
        X, Y = check_pair(X, Y, min_rows=3)
        U = _centred((X - self.mean_x) @ self.a)
        V = _centred((Y - self.mean_y) @ self.b)
        nu, nv = np.linalg.norm(U, axis=0), np.linalg.norm(V, axis=0)
        ok = (nu > 0) & (nv > 0)
        out = np.zeros(U.shape[1])
        out[ok] = np.einsum("ij,ij->j", U[:, ok], V[:, ok]) / (nu[ok] * nv[ok])
        return out


def _basis(Xc: np.ndarray, variance: float | None) -> np.ndarray:
    """Columns W with Xc W orthonormal: the principal axes of Xc'Xc over the square roots of
    their eigenvalues, on every direction whose variance is above round-off (``variance`` =
    None) or on the leading ones holding that share of the variance (SVCCA's first step).

    From the d x d cross-product (n d^2 + d^3 flops), not an SVD of the n x d rows (about
    four times the cost at 10,000 x 768); it resolves directions down to sqrt(d eps) of the
    largest singular value, far below anything canonical correlations can use."""
    lam, V = np.linalg.eigh(Xc.T @ Xc)
    lam, V = lam[::-1], V[:, ::-1]
    keep = lam > lam[0] * max(Xc.shape) * np.finfo(np.float64).eps if lam.size and lam[0] > 0 else lam > np.inf
    r = int(keep.sum())
    if variance is not None and r:
        share = np.cumsum(lam[:r]) / np.sum(lam[:r])
        r = int(np.searchsorted(share, variance - 1e-12) + 1)
    if r == 0:
        raise ValueError("a side is constant on the fit rows: no canonical direction")
    return V[:, :r] / np.sqrt(lam[:r])


def fit_cca(X, Y, variance: float | None = None) -> CCAFit:
    """Canonical correlation analysis (Hotelling 1936) on the rows of X and Y: whiten each
    side (an SVD), then the SVD of the whitened cross-product gives the canonical pairs.
    ``variance``: first keep each side's leading principal directions holding that share of
    its variance (SVCCA, Raghu et al. 2017; None = every direction)."""
    X, Y = check_pair(X, Y, min_rows=3)
    mx, my = X.mean(0), Y.mean(0)
    Xc, Yc = X - mx, Y - my
    Wx, Wy = _basis(Xc, variance), _basis(Yc, variance)
    P, rho, Qt = np.linalg.svd((Xc @ Wx).T @ (Yc @ Wy), full_matrices=False)
    return CCAFit(mean_x=mx, mean_y=my, a=Wx @ P, b=Wy @ Qt.T, rho=np.clip(rho, 0.0, 1.0))


def _held_out(X, Y, X_eval, Y_eval) -> tuple:
    """The rows a fitted measure is scored on: the held-out pair, or the fit rows."""
    return (X, Y) if X_eval is None else (X_eval, Y_eval)


def cca(X, Y, X_eval=None, Y_eval=None) -> float:
    """Mean canonical correlation: CCA fitted on (X, Y), the correlation of each canonical
    pair on (X_eval, Y_eval), averaged (1 = identical up to any invertible linear map,
    about 0 for independent data). In-sample (no ``X_eval``) it overfits: on n rows the
    first p + q - (n - 1) canonical correlations are exactly 1 whatever the data, which is
    why :func:`nearid.align.compare` scores it on held-out rows."""
    Xe, Ye = _held_out(X, Y, X_eval, Y_eval)
    return float(fit_cca(X, Y).correlations(Xe, Ye).mean())


def svcca(X, Y, X_eval=None, Y_eval=None, variance: float = 0.99) -> float:
    """SVCCA (Raghu et al. 2017, NeurIPS): keep each side's leading principal directions
    holding ``variance`` (0.99, the paper's) of its variance, then the mean canonical
    correlation between them (fitted on (X, Y), scored on (X_eval, Y_eval) as :func:`cca`).
    Invariant to rotation and isotropic scale; not to every invertible linear map (the
    truncation depends on the variances)."""
    Xe, Ye = _held_out(X, Y, X_eval, Y_eval)
    return float(fit_cca(X, Y, variance=variance).correlations(Xe, Ye).mean())


def pwcca(X, Y, X_eval=None, Y_eval=None) -> float:
    """Projection-weighted CCA (Morcos, Raghu & Bengio 2018, NeurIPS, eq. 2): the canonical
    correlations rho_i weighted by how much of X each canonical variate h_i accounts for,
    alpha_i = sum_j |<h_i, x_j>| over X's centred columns x_j (h_i of unit norm), so that
    directions carrying little of X count little. Asymmetric: the weights come from X (A).
    Fitted on (X, Y), scored on (X_eval, Y_eval) as :func:`cca`."""
    Xe, Ye = _held_out(X, Y, X_eval, Y_eval)
    return pwcca_score(fit_cca(X, Y), Xe, Ye)


def pwcca_score(fit: CCAFit, X, Y) -> float:
    """:func:`pwcca` of fitted canonical directions on the rows of X and Y."""
    rho = fit.correlations(X, Y)
    Xc = _centred(check_pair(X, Y)[0])
    H = Xc @ fit.a
    norms = np.linalg.norm(H, axis=0)
    norms[norms == 0] = 1.0
    alpha = np.abs((H / norms).T @ Xc).sum(1)
    return float(alpha @ rho / alpha.sum()) if alpha.sum() > 0 else float("nan")


# --------------------------------------------------------------------------- geometry of the inputs
@validate_params(metric=Options(RDMS, noun="RDM distance"))
def rdm(X, metric: str = "euclidean") -> np.ndarray:
    """A representational dissimilarity matrix (Kriegeskorte, Mur & Bandettini 2008): the
    distance between every pair of rows, as its upper triangle (n(n-1)/2 numbers, row
    major). "euclidean" on centred columns; "correlation" is 1 - Pearson r between two
    rows' patterns across features."""
    X = check_pair(X, X)[0]
    if metric == "euclidean":
        D = np.sqrt(_sq_distances(_centred(X)))
    else:
        Z = X - X.mean(1, keepdims=True)
        norms = np.linalg.norm(Z, axis=1)
        norms[norms == 0] = 1.0
        Z /= norms[:, None]
        D = 1.0 - Z @ Z.T
    return D[np.triu_indices_from(D, 1)]


@validate_params(rdm_metric=Options(RDMS, noun="RDM distance"), comparison=Options(COMPARISONS, noun="comparison"),
                 max_rows=MAX_ROWS_ARG)
def rsa(X, Y, rdm_metric: str = "euclidean", comparison: str = "spearman", max_rows: int | None = MAX_ROWS,
        random_state: int | None = 0) -> float:
    """Representational similarity analysis (Kriegeskorte et al. 2008): the RDMs of X and Y
    (:func:`rdm`), compared by Spearman's rho (the usual choice), Kendall's tau-b or the
    cosine of the two distance vectors (not centred, as in rsatoolbox: far from 0 even for
    independent data, since distances are positive; rsatoolbox's "euclidean" RDM holds squared
    distances / p, so its cosine differs from ours while the rank comparisons agree:
    ``benchmarks/align_peers.md``). 1 = the same geometry. Euclidean RDMs
    are invariant to rotation, translation and (with a rank comparison or cosine) isotropic
    scale. n x n: on a seeded subsample of at most ``max_rows`` rows."""
    X, Y = check_pair(X, Y, min_rows=3)
    X, Y = _subsample(X, Y, max_rows, random_state)
    u, v = rdm(X, rdm_metric), rdm(Y, rdm_metric)
    if comparison == "kendall":
        from scipy.stats import kendalltau

        return float(kendalltau(u, v).statistic)
    if comparison == "spearman":
        from scipy.stats import rankdata

        u, v = rankdata(u), rankdata(v)
        u -= u.mean()
        v -= v.mean()
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    return float(u @ v / (nu * nv)) if nu > 0 and nv > 0 else float("nan")


def _neighbours(X: np.ndarray, k: int, metric: str) -> np.ndarray:
    """Boolean n x n: row i marks the k nearest other rows of i."""
    X = _centred(X)
    if metric == "cosine":
        norms = np.linalg.norm(X, axis=1)
        norms[norms == 0] = 1.0
        X = X / norms[:, None]
        S = X @ X.T
    else:
        S = -_sq_distances(X)
    np.fill_diagonal(S, -np.inf)
    idx = np.argpartition(-S, k - 1, axis=1)[:, :k]
    mask = np.zeros(S.shape, dtype=bool)
    np.put_along_axis(mask, idx, True, axis=1)
    return mask


@validate_params(k=Interval(int, 1), metric=Options(KNN_METRICS, noun="metric"), max_rows=MAX_ROWS_ARG)
def mutual_knn(X, Y, k: int = 10, metric: str = "cosine", max_rows: int | None = MAX_ROWS,
               random_state: int | None = 0) -> float:
    """Mutual k-nearest-neighbour alignment (Huh, Cheung, Wang & Isola 2024, ICML, the
    Platonic representation hypothesis): for each row, the share of its k nearest
    neighbours in X that are also among its k nearest in Y, averaged over rows. Neighbours
    by cosine similarity of the centred rows (Huh et al. use normalised features) or
    Euclidean distance. 1 = the same neighbourhoods; independent data give k / (n - 1) on
    average. Invariant to rotation, isotropic scale and translation. n x n: on a seeded
    subsample of at most ``max_rows`` rows."""
    X, Y = check_pair(X, Y, min_rows=3)
    X, Y = _subsample(X, Y, max_rows, random_state)
    if k >= X.shape[0]:
        raise ValueError(f"k must be below the number of rows ({X.shape[0]}), got {k}")
    shared = (_neighbours(X, k, metric) & _neighbours(Y, k, metric)).sum(1)
    return float(shared.mean() / k)


# --------------------------------------------------------------------------- shape metrics
def _shape_chord(X, Y) -> float:
    """min over rotations Q of ||X^ Q - Y^||_F for the centred sides scaled to unit Frobenius
    norm (the narrower side padded with zeros): sqrt(2 - 2 ||X^'Y^||_*), computed as the
    residual itself, so that an exact rotation gives round-off (1e-16), not the
    sqrt(eps) = 1e-8 that 2 - 2 (1 - eps) leaves."""
    X, Y = check_pair(X, Y)
    X, Y = _centred(X), _centred(Y)
    nx, ny = float(np.linalg.norm(X)), float(np.linalg.norm(Y))
    if nx == 0 or ny == 0:
        return float("nan")
    X, Y = X / nx, Y / ny
    if X.shape[1] < Y.shape[1]:  # symmetric: keep the wider side as X
        X, Y = Y, X
    U, _, Vt = np.linalg.svd(X.T @ Y, full_matrices=False)  # U: p x q, orthonormal columns
    XU = X @ U
    outside = X - XU @ U.T  # the part of X^ no rotation can bring into Y^'s q dimensions
    return float(np.sqrt(np.einsum("ij,ij->", outside, outside) + np.sum((XU @ Vt - Y) ** 2)))


def procrustes_angle(X, Y) -> float:
    """Angular Procrustes shape distance (Williams, Kunz, Kornblith & Linderman 2021,
    NeurIPS, eq. 7 with alpha = 1): arccos(||X'Y||_* / (||X||_F ||Y||_F)) on centred
    columns, in radians: 0 = the same up to rotation/reflection, translation and isotropic
    scale, pi/2 at most. A metric (it obeys the triangle inequality), unlike CKA. Widths
    may differ (the narrower side is padded with zeros). Computed as 2 arcsin(c / 2) from
    the chord c of :func:`bures_distance`, which is exact near 0 where arccos is not."""
    return float(2.0 * np.arcsin(min(_shape_chord(X, Y) / 2.0, 1.0)))


def bures_distance(X, Y) -> float:
    """Normalised Bures distance between the two (centred) Gram matrices XX' and YY', each
    scaled to unit trace: sqrt(2 - 2 F), with F = ||X'Y||_* / (||X||_F ||Y||_F) their
    fidelity (Bures 1969; it equals the Procrustes size-and-shape distance of the sides
    scaled to unit norm: Williams et al. 2021, Harvey et al. 2024). 0 = identical up to
    rotation and isotropic scale, sqrt(2) at most; it is 2 sin(theta / 2) of
    :func:`procrustes_angle`'s theta: the chord where the angle is the arc."""
    return _shape_chord(X, Y)


# --------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Measure:
    """One measure as ``nearid align`` runs it: its ``label``, the value an exact rotation
    gives (``identical``), whether higher means more alike, whether it is ``fitted`` (fit on
    the fit rows, scored on the held-out rows) or ``pairwise`` (n x n: on at most
    ``max_rows`` of the fit rows), and what it is ``invariant`` to."""

    name: str
    label: str
    identical: float
    higher_is_better: bool
    invariant: str
    fitted: bool = False
    pairwise: bool = False


MEASURES: dict[str, Measure] = {m.name: m for m in (
    Measure("cka", "linear CKA", 1.0, True, "rotation, isotropic scale, translation"),
    Measure("debiased_cka", "debiased CKA", 1.0, True, "rotation, isotropic scale, translation"),
    Measure("minibatch_cka", "minibatch CKA", 1.0, True, "rotation, isotropic scale, translation"),
    Measure("rbf_cka", "RBF CKA", 1.0, True, "rotation, isotropic scale, translation", pairwise=True),
    Measure("cca", "mean CCA", 1.0, True, "any invertible linear map, translation", fitted=True),
    Measure("svcca", "SVCCA", 1.0, True, "rotation, isotropic scale, translation", fitted=True),
    Measure("pwcca", "PWCCA", 1.0, True, "any invertible linear map of B; signed permutation and "
            "isotropic scale of A", fitted=True),
    Measure("rsa", "RSA", 1.0, True, "rotation, isotropic scale, translation", pairwise=True),
    Measure("mutual_knn", "mutual kNN", 1.0, True, "rotation, isotropic scale, translation", pairwise=True),
    Measure("procrustes", "Procrustes angle", 0.0, False, "rotation, isotropic scale, translation"),
    Measure("bures", "Bures distance", 0.0, False, "rotation, isotropic scale, translation"),
)}
MEASURE = Options(tuple(MEASURES), noun="measure")
