"""The streaming engine behind :func:`nearid.align.compare`: the same maps as
:mod:`nearid.align.families`, computed from cross-products over blocks of rows.

It exists apart from the estimators because it answers another need: inputs of 100,000
rows or a grid of layers, memory-mapped or on a GPU, in float32 where the data allow,
with a progress bar whose remaining time holds. Its state travels in small frozen records:
:class:`Split` (which rows fit, which are scored), :class:`EngineSettings` (what to compute
and how), :class:`Inputs` (the matrices and their names) and :class:`_Run` (one attempt
at a precision). :func:`_compare_reference` is the slow, obviously-correct path that the
tests hold the engine to.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from nearid import linalg
from nearid.align.measures import _cka_from_moments, linear_cka
from nearid.align.protocol import (
    ICA_FAMILY,
    LINEAR,
    PERMUTATION,
    RIGID,
    ICASettings,
    check_pair,
    ica_efficiency,
    latent_diameter,
)
from nearid.align.result import AlignmentResult

# Everything except FastICA is computed from d x d cross-products of the fit rows, streamed
# over blocks of rows, so an input is never copied whole (a memory-mapped .npy is read block
# by block) and the arithmetic is a few large matrix products. Precision:
# * float32 inputs are multiplied in float32 (BLAS sgemm/ssyrk, twice as fast as float64),
#   one block of rows at a time, and the block products are summed in float64. Each block
#   is first shifted by one of its own rows, so a large common offset (the mean of
#   transformer embeddings is often far from 0) cancels exactly instead of eating digits.
#   The relative error of a cross-product is then about 1e-7 to 1e-6 of its size.
# * where that is not enough, float64 is used: when the fit rows' covariance of A (for the
#   linear family) or the whitened directions of either side (for ICA) reach below what
#   float32 sums resolve (about 10 * eps32 * trace), the fit pass is redone in float64
#   (``dtype="float64"`` forces it); eigen-decompositions, SVD, solves and the Hungarian
#   matching always run in float64 on the d x d matrices.
# * per-row errors are computed in the input precision, divided by the diameter in float64.
BLOCK_ELEMENTS = 1 << 22  # numbers per input gathered per block of rows (16 MB in float32)
MIN_BLOCK_ROWS = 256
PROGRESS_DELAY = 2.0  # seconds before a progress bar appears
# d x d decompositions of matrices narrower than this run on one BLAS thread (see _run_grid);
# wider ones (a 4,096-wide SVD takes minutes) use the threads the caller allows. No chapter
# reaches it, so their numbers never depend on the thread count.
SERIAL_DECOMPOSITION_WIDTH = 2048
# Relative cost of each piece of work, for a progress bar whose remaining time is honest:
# in multiply-adds of a float64 matrix product. Measured in CPU seconds with OpenBLAS on one
# core of an AMD EPYC (Zen 3), d = 2,048 and 4,096: a float32 product costs half as much per
# multiply-add, an SVD of a d x d matrix (LAPACK gesdd) 11 to 13 d^3, a symmetric
# eigen-decomposition (syevd) 3.7 to 4.9 d^3, and one FastICA iteration on n rows and k
# components about 2 n k^2 (two products) + 270 n k (the logcosh contrast, elementwise)
# + a k x k eigh (its symmetric decorrelation).
# Every eigenvalue and the top few axes (eigvalsh + syevr on the index range, d = 2,048,
# k = 256): 2.2 d^3.
_UNITS = dict(float32=0.5, svd=12.0, eigh=4.3, eigh_top=2.2, logcosh=270.0, gather=4.0)
_RTOL_CONSTANT = 1e-9  # as nearid.ica.Whitener: a column this flat is constant (a dead unit)


class _NeedFloat64(Exception):
    """float32 cross-products cannot resolve these data: redo the fit pass in float64."""


def _as_numpy(X):
    """numpy arrays (and memory maps) pass through; torch tensors (any device and dtype)
    become numpy arrays, half precision widened to float32; anything else via np.asarray."""
    if hasattr(X, "detach") and hasattr(X, "cpu"):
        t = X.detach().cpu()
        if t.is_floating_point() and t.element_size() < 4:  # float16, bfloat16
            t = t.float()
        return t.numpy()
    return X if isinstance(X, np.ndarray) else np.asarray(X)


def _matrix(X, name: str) -> np.ndarray:
    """A 2-D numeric array (not copied), or a ValueError that names the side."""
    X = _as_numpy(X)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (rows = inputs), got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold real numbers, got dtype {X.dtype}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {X.shape}")
    return X


def _check_rows(A, B) -> None:
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"A and B must have the same number of rows (the same inputs in the "
                         f"same order), got {A.shape[0]} and {B.shape[0]}")


def _narrow(X) -> bool:
    """True when float32 holds X's values exactly (float32 and narrower, bool, small ints)."""
    k, size = X.dtype.kind, X.dtype.itemsize
    return k == "b" or (k == "f" and size <= 4) or (k in "iu" and size <= 2)


def _check_finite(X, name: str, rows_per_block: int) -> float:
    """Scan X block by block (no full-size temporary); raise naming the side and the rows.
    Returns the largest absolute value, which decides whether float32 products can overflow."""
    if X.dtype.kind == "b":
        return 1.0
    if X.dtype.kind != "f":
        info = np.iinfo(X.dtype)
        return float(max(-int(info.min), int(info.max)))
    bad_count, bad_rows, first, largest = 0, 0, None, 0.0
    for start in range(0, X.shape[0], rows_per_block):
        blk = X[start:start + rows_per_block]
        with np.errstate(over="ignore", invalid="ignore"):
            total = blk.sum()
        if np.isfinite(total):
            largest = max(largest, float(blk.max()), -float(blk.min()))
            continue
        bad = ~np.isfinite(blk)
        if bad.any():
            rows = np.flatnonzero(bad.any(1))
            bad_count += int(bad.sum())
            bad_rows += rows.size
            first = start + int(rows[0]) if first is None else first
        else:  # finite values whose float32 sum overflowed
            largest = max(largest, float(blk.max()), -float(blk.min()))
    if bad_count:
        raise ValueError(f"{name} contains {bad_count} NaN or infinite values in {bad_rows} rows "
                         f"(first row {first})")
    return largest


def _float32_overflows(largest: float, rows_per_block: int, width: int) -> bool:
    """True when float32 products of values up to ``largest`` could overflow: a block's sums of
    squares (values shifted by a row, so up to 2 * largest) over its rows or over a row's
    columns, with a margin of 1,000 for the maps' coefficients. Data far from this bound (any
    embedding of a trained model) keep the float32 path unchanged."""
    bound = 4.0 * largest ** 2 * (rows_per_block + width) * 1e3
    return bound > float(np.finfo(np.float32).max)


def split_rows(n: int, fit_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, evaluation rows) of ``n``: a seeded permutation cut at ``fit_fraction``, the
    split every comparison of :mod:`nearid.align` makes (and :mod:`nearid.identifiability`
    shares, so that its maps are fitted and scored on the same rows)."""
    order = np.random.default_rng(seed).permutation(n)
    n_fit = int(round(fit_fraction * n))
    return order[:n_fit], order[n_fit:]


def _split(n: int, width: int, fit_fraction: float, seed: int,
           fit_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, evaluation rows): a seeded permutation of the rows, cut at ``fit_fraction``.
    ``fit_rows`` keeps only the first that many of the fit rows (nested subsets for one seed:
    the evaluation rows never change)."""
    fit, evaluation = split_rows(n, fit_fraction, seed)
    n_fit = fit.size
    need = width + 2
    if n_fit < need or n - n_fit < 3:
        raise ValueError(f"too few rows: {n} rows with fit_fraction={fit_fraction} give "
                         f"{n_fit} fit and {n - n_fit} evaluation rows; need at least "
                         f"{need} fit rows (embedding width + 2) and 3 evaluation rows")
    if fit_rows is not None:
        # fewer rows than the width are allowed here (a trend's smallest subsets): the linear
        # map is then the minimum-norm least-squares one, in float64
        if not 3 <= fit_rows <= n_fit:
            raise ValueError(f"fit_rows must lie in [3, {n_fit}] (up to the {n_fit} rows of the fit "
                             f"split), got {fit_rows}")
        return fit[:fit_rows], evaluation
    return fit, evaluation


def _diameter_rows(eval_idx: np.ndarray, max_points: int = 2000) -> np.ndarray:
    """The rows latent_diameter(B[eval_idx]) uses, as indices into B."""
    if eval_idx.size <= max_points:
        return eval_idx
    return eval_idx[np.linspace(0, eval_idx.size - 1, max_points).astype(int)]


# --------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Split:
    """Which rows fit the maps and which score them.

    ``fit_idx`` and ``eval_idx`` are in the seeded permutation's order (FastICA's subsample
    and the reference path use that order); ``fit_rows`` and ``eval_rows`` are the same rows
    sorted (the order blocks are read in, kind to memory maps); ``order`` puts the per-row
    errors computed over ``eval_rows`` back into ``eval_idx``'s order."""

    fit_idx: np.ndarray
    eval_idx: np.ndarray
    fit_rows: np.ndarray
    eval_rows: np.ndarray
    order: np.ndarray

    @classmethod
    def of(cls, fit_idx: np.ndarray, eval_idx: np.ndarray) -> Split:
        """The record of a (fit rows, evaluation rows) pair from :func:`_split`."""
        order = np.argsort(eval_idx)
        return cls(fit_idx=fit_idx, eval_idx=eval_idx, fit_rows=np.sort(fit_idx), eval_rows=eval_idx[order],
                   order=order)


@dataclass(frozen=True)
class EngineSettings:
    """What the engine computes and how.

    ``families``: a tuple, any subset of :data:`nearid.align.FAMILIES`; ``want_cka``: compute
    linear CKA; ``seed``: the split's and FastICA's; ``ica``: the ICA family's protocol;
    ``dtype``: the precision asked for (None = float32 where the data allow, "float64" forces
    it); ``progress``: show a progress bar; ``rows_per_block``: rows read per block (None until
    :func:`_engine` sizes blocks from the widest input)."""

    families: tuple[str, ...]
    want_cka: bool
    seed: int
    ica: ICASettings
    dtype: str | None = None
    progress: bool = False
    rows_per_block: int | None = None

    @property
    def need_a(self) -> bool:
        """Whether A's full gram is needed (CKA, the linear family, A's whitening)."""
        return bool(self.want_cka or {LINEAR, ICA_FAMILY} & set(self.families))

    @property
    def need_b(self) -> bool:
        """Whether each B's full gram is needed (CKA, B's whitening)."""
        return bool(self.want_cka or ICA_FAMILY in self.families)


@dataclass(frozen=True)
class Inputs:
    """The matrices of a grid (every A against every B) and their names, for messages."""

    As: tuple
    Bs: tuple
    names_a: tuple[str, ...]
    names_b: tuple[str, ...]

    def describe(self, side: str, name: str) -> str:
        """How a message names one input: "A", or "A layer 'x'" when the side has several."""
        count = len(self.As if side == "A" else self.Bs)
        return side if count == 1 else f"{side} layer {name!r}"


@dataclass(frozen=True)
class _Run:
    """One attempt at the whole grid in one precision: the inputs, the split, the settings,
    the ``dtype`` of the arithmetic, the cost model and the progress bar."""

    inputs: Inputs
    split: Split
    settings: EngineSettings
    dtype: np.dtype
    work: _Work
    bar: _Progress
    notes: tuple[str, ...] = ()  # why this precision, when the output should say so


class _Moments:
    """Running sums over blocks of one matrix's rows, each block shifted by ``shift``."""

    def __init__(self, shift: np.ndarray, full: bool):
        d = shift.shape[0]
        self.shift, self.full = shift, full
        self.total = np.zeros(d)
        self.gram = np.zeros((d, d)) if full else None
        self.sq = np.zeros(d)
        self.low = np.full(d, np.inf)
        self.high = np.full(d, -np.inf)

    def add(self, X: np.ndarray) -> None:
        self.total += X.sum(0, dtype=np.float64)
        np.minimum(self.low, X.min(0), out=self.low)
        np.maximum(self.high, X.max(0), out=self.high)
        if self.full:
            self.gram += X.T @ X  # one syrk in the block's precision, summed in float64
        # the squared norms are summed the same way whether or not the gram is wanted, so a
        # family's error does not depend on which other families (or CKA) were asked for
        self.sq += np.einsum("ij,ij->j", X, X)

    def finish(self, n: int) -> "_Stats":
        dmean = self.total / n
        gram = self.gram - n * np.outer(dmean, dmean) if self.full else None
        sq = self.sq - n * dmean ** 2
        shift = self.shift.astype(np.float64)
        absmax = float(np.max(np.maximum(np.abs(self.low + shift), np.abs(self.high + shift))))
        return _Stats(n=n, shift=self.shift, dmean=dmean, gram=gram, sq=np.maximum(sq, 0.0),
                      spread=self.high - self.low, absmax=absmax)


@dataclass
class _Stats:
    """One matrix on the fit rows: centred sums of products (``gram``, or only the diagonal
    ``sq``), the mean as ``shift + dmean``, and each column's range (to find dead units)."""

    n: int
    shift: np.ndarray
    dmean: np.ndarray
    gram: np.ndarray | None
    sq: np.ndarray
    spread: np.ndarray
    absmax: float
    cache: dict = field(default_factory=dict)

    @property
    def mean(self) -> np.ndarray:
        return self.shift.astype(np.float64) + self.dmean

    @property
    def nonconstant(self) -> np.ndarray:
        return self.spread > _RTOL_CONSTANT * max(self.absmax, 1e-300)


def _gather(X, idx: np.ndarray, dtype) -> np.ndarray:
    blk = X[idx]
    return blk if blk.dtype == dtype else blk.astype(dtype)


def _fit_pass(A, stats_bs, run: _Run, tick):
    """One pass over the fit rows: A's and each B's moments (B's unless given) and every A'B."""
    Bs, rows, dtype = run.inputs.Bs, run.split.fit_rows, run.dtype
    full_a, full_b, rows_per_block = run.settings.need_a, run.settings.need_b, run.settings.rows_per_block
    shift_a = np.array(A[rows[0]], dtype=dtype)
    acc_a = _Moments(shift_a, full_a)
    shifts_b = [s.shift if s else np.array(B[rows[0]], dtype=dtype) for B, s in zip(Bs, stats_bs)]
    acc_b = [None if s else _Moments(sh, full_b) for s, sh in zip(stats_bs, shifts_b)]
    cross = [np.zeros((A.shape[1], B.shape[1])) for B in Bs]
    for start in range(0, len(rows), rows_per_block):
        idx = rows[start:start + rows_per_block]
        Xa = _gather(A, idx, dtype)
        Xa -= shift_a
        acc_a.add(Xa)
        for j, B in enumerate(Bs):
            Xb = _gather(B, idx, dtype)
            Xb -= shifts_b[j]
            if acc_b[j]:
                acc_b[j].add(Xb)
            cross[j] += Xa.T @ Xb  # sgemm/dgemm of one block, summed in float64
        tick(idx.size)
    n = len(rows)
    stats_a = acc_a.finish(n)
    stats_bs = [s or acc.finish(n) for s, acc in zip(stats_bs, acc_b)]
    for j, sb in enumerate(stats_bs):
        cross[j] -= n * np.outer(stats_a.dmean, sb.dmean)
    return stats_a, stats_bs, cross


def _signed_matching(cross, sq_a, sq_b, scale: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """SignedPermutationAlignment.fit from centred sums: (source A column or -1, coefficient)
    for every B column; Hungarian matching on |correlation|."""
    from scipy.optimize import linear_sum_assignment

    na, nb = np.sqrt(sq_a), np.sqrt(sq_b)
    na[na == 0] = 1.0
    nb[nb == 0] = 1.0
    corr = np.abs(cross) / np.outer(na, nb)
    rows, cols = linear_sum_assignment(-corr)
    src = np.full(cross.shape[1], -1)
    coef = np.zeros(cross.shape[1])
    for r, c in zip(rows, cols):
        ab, aa = cross[r, c], sq_a[r]
        coef[c] = (ab / aa if aa > 0 else 0.0) if scale else (1.0 if ab >= 0 else -1.0)
        src[c] = r
    return src, coef


def _float32_floor(gram: np.ndarray) -> float:
    """Smallest variance (on the scale of ``gram``) that float32 block sums resolve."""
    return 10 * float(np.finfo(np.float32).eps) * float(np.trace(gram))


def _pca(stats: _Stats, columns: np.ndarray, dtype, side: str = "", tick=None, top: int | None = None):
    """Principal (variances, axes) of the fit rows' covariance on ``columns`` (cached), and
    whether float32 sums left directions unresolved. A fallback LAPACK driver, if one was
    needed, is recorded in ``stats.cache["notes"]``; ``tick(d)`` is called after a new one.
    ``top``: only the first ``top`` axes are needed (every variance is still computed; see
    :func:`_top_axes`); a cached decomposition with every axis serves such a call too."""
    full_key = ("pca", columns.tobytes())
    cache_key = full_key if top is None else ("pca", columns.tobytes(), top)
    if full_key in stats.cache:
        return stats.cache[full_key]
    if cache_key not in stats.cache:
        from nearid.ica_protocol import pca_from_covariance

        cov = stats.gram[np.ix_(columns, columns)] / (stats.n - 1)
        rel = max(stats.n, int(columns.sum())) * float(np.finfo(np.float64).eps)
        floor = _float32_floor(cov) if dtype == np.float32 else 0.0
        notes = stats.cache.setdefault("notes", [])
        var, axes = pca_from_covariance(cov, rel, abs_tol=floor, notes=notes, top=top)
        notes[:] = [n if n.startswith(f"{side}: ") else f"{side}: {n}" for n in notes] if side else notes
        stats.cache[cache_key] = (var, axes, dtype == np.float32 and var.size < int(columns.sum()))
        if tick is not None:
            tick(int(columns.sum()))
    return stats.cache[cache_key]


def _top_axes(width: int, max_components: int | None) -> int | None:
    """How many principal axes one side's ICA needs, when computing only those pays: a wide
    side (no chapter reaches SERIAL_DECOMPOSITION_WIDTH, so their numbers are untouched)
    whose whitener is capped at a few components (a quarter of the width or fewer). Then
    every variance (for the component rule) and the top axes cost about half of a full
    eigen-decomposition (:func:`nearid.linalg.eigh_top`); else None (every axis)."""
    if max_components is None or width < SERIAL_DECOMPOSITION_WIDTH or 4 * max_components > width:
        return None
    return int(max_components)


def _surely_unresolved(stats: _Stats, columns: np.ndarray) -> bool:
    """True when a float32 covariance certainly has a direction below what its sums resolve,
    so that :func:`_pca` would report it unresolved: a Cholesky factorisation (d^3 / 3
    flops, a twentieth of the eigen-decomposition) of the covariance minus half the float32
    floor fails only if an eigenvalue lies below half the floor, up to round-off of about
    d eps64 ||cov|| -- orders of magnitude below the floor. Used before wide
    decompositions, so that data needing float64 switch before minutes of float32 work;
    False (no shortcut) decides nothing: _pca still decides."""
    cov = stats.gram[np.ix_(columns, columns)] / (stats.n - 1)
    shifted = cov - 0.5 * _float32_floor(cov) * np.eye(cov.shape[0])
    try:
        np.linalg.cholesky(shifted)
    except np.linalg.LinAlgError:
        return True
    return False


def _duplicates(X, stats: _Stats, keep: np.ndarray, rows, rows_per_block) -> dict[int, int]:
    """Columns equal (on the fit rows) to an earlier kept column, as nearid.ica finds them:
    candidates from the moments (same mean, variance of the difference ~ 0), checked exactly."""
    cols = np.flatnonzero(keep)
    if cols.size < 2:
        return {}
    g = stats.gram[np.ix_(cols, cols)]
    dg = np.diag(g)
    diff_var = dg[:, None] + dg[None, :] - 2 * g
    mean = stats.mean[cols]
    scale = np.abs(mean)[:, None] + np.abs(mean)[None, :] + np.sqrt(dg / stats.n)[:, None]
    cand = np.triu((diff_var <= 1e-5 * (dg[:, None] + dg[None, :]))
                   & (np.abs(mean[:, None] - mean[None, :]) <= 1e-5 * scale), 1)
    pairs = np.argwhere(cand)
    if pairs.size == 0:
        return {}
    equal = np.ones(len(pairs), dtype=bool)
    involved = np.unique(pairs)
    pos = {c: i for i, c in enumerate(involved)}
    left = np.array([pos[i] for i in pairs[:, 0]])
    right = np.array([pos[j] for j in pairs[:, 1]])
    for start in range(0, len(rows), rows_per_block):
        blk = np.asarray(X[rows[start:start + rows_per_block]][:, cols[involved]])
        equal &= (blk[:, left] == blk[:, right]).all(0)
    dups: dict[int, int] = {}
    for (i, j), same in zip(pairs, equal):
        ci, cj = int(cols[i]), int(cols[j])
        if same and ci not in dups and cj not in dups:
            dups[cj] = ci
    return dups


def _kept_columns(X, stats: _Stats, fit_idx, rows_per_block) -> tuple[np.ndarray, dict[int, int]]:
    """The columns nearid.ica.Whitener would keep (not constant, not a copy of an earlier
    one) and the duplicates it would drop, from the moments and a check of the candidates."""
    if "kept" not in stats.cache:
        keep = stats.nonconstant.copy()
        if not keep.any():
            raise ValueError("every column is constant on the fit rows: nothing to whiten")
        dups = _duplicates(X, stats, keep, np.sort(fit_idx), rows_per_block)
        for j in dups:
            keep[j] = False
        stats.cache["kept"] = (keep, dups)
    return stats.cache["kept"]


def _side_ica(X, stats: _Stats, side: str, run: _Run):
    """WhitenedICA of one side: whitening from the fit rows' moments, FastICA on the subsample."""
    if ICA_FAMILY in stats.cache:
        return stats.cache[ICA_FAMILY]
    from nearid.ica import Whitener, choose_components, ica_rows

    fit_idx, dtype, bar, work = run.split.fit_idx, run.dtype, run.bar, run.work
    rows_per_block, seed, proto = run.settings.rows_per_block, run.settings.seed, run.settings.ica

    keep, dups = _kept_columns(X, stats, fit_idx, rows_per_block)
    top = _top_axes(int(keep.sum()), proto.max_components)
    if ("pca", keep.tobytes()) not in stats.cache:
        what = f"top {top} of {int(keep.sum())}" if top else f"{int(keep.sum())}-wide eigh"
        bar.describe(f"ica {side}: principal axes ({what})", now=int(keep.sum()) >= SERIAL_DECOMPOSITION_WIDTH)
    var, axes, unresolved = _pca(stats, keep, dtype, side, lambda d: bar.tick(work.eigh(d, top)), top=top)
    if unresolved:
        cap = stats.n if proto.max_rows is None else min(stats.n, proto.max_rows)
        if choose_components(var, cap, proto.n_components, max_components=proto.max_components) >= var.size:
            raise _NeedFloat64  # the rule reaches into directions float32 sums cannot resolve
    whitener = Whitener.from_moments(stats.mean, stats.gram / (stats.n - 1), stats.n, kept_columns=keep,
                                     duplicates=dups, pca=(var, axes), n_components=proto.n_components,
                                     max_rows=proto.max_rows, max_components=proto.max_components)
    pos = ica_rows(stats.n, proto.max_rows, seed)
    rows = fit_idx if pos is None else fit_idx[pos]
    # whiten the subsample block by block in the data's precision (Whitener.transform would
    # copy it to float64 first): centre as in the fit pass, drop the dead/duplicate columns
    W = whitener.whitening_.astype(dtype)
    Z = np.empty((rows.size, whitener.n_components_))
    all_kept = bool(keep.all())
    for start in range(0, rows.size, rows_per_block):
        Xc = _gather(X, rows[start:start + rows_per_block], dtype)
        Xc -= stats.shift
        Xc -= stats.dmean.astype(dtype)
        Z[start:start + Xc.shape[0]] = (Xc if all_kept else Xc[:, keep]) @ W  # k columns, then float64
    k, n = whitener.n_components_, rows.size
    # the plan counted this side at the most components it could get: correct it to k
    bar.grow(work.ica(n, k, X.shape[1], proto.max_iter)
             - work.ica(n, _ica_components_guess(X.shape[1], n, proto.max_components), X.shape[1], proto.max_iter))
    bar.tick(work.f * n * X.shape[1] * k)  # the whitened subsample
    per_iteration, done = work.ica_iteration(n, k), [0]

    def on_iteration():
        done[0] += 1
        bar.describe(f"ica {side}: FastICA, {k} components on {n} rows, iteration {done[0]} (at most "
                     f"{proto.max_iter})")
        bar.tick(per_iteration)

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # reported as ica_converged
        ica = proto.whitened_ica(seed).fit_whitened(
            whitener, Z, on_iteration=on_iteration if bar.bar is not None else None)
    bar.tick(max(0, proto.max_iter - done[0]) * per_iteration)  # converged early: the rest is not needed
    stats.cache.setdefault("notes", []).extend(f"{side}: {note}" for note in ica.fallbacks_)
    stats.cache[ICA_FAMILY] = ica
    return ica


STREAMED = (PERMUTATION, RIGID, LINEAR, ICA_FAMILY)
"""The families whose map this engine computes from its cross-products. Any other family in
the registry (:data:`nearid.align.FAMILY_INFO`) is fitted by its own float64 reference
estimator on the fit rows, held in memory (:func:`_estimator_errors`): a new family needs no
code here, only its record and its estimator."""


def _estimator_errors(A, B, families: list[str], run: _Run) -> dict[str, np.ndarray]:
    """Per-row errors ||h(a) - b|| on the held-out rows (``eval_rows``' order) of families the
    engine has no map for: each one's reference estimator, fitted in float64 on the fit rows
    (as ``compare(reference=True)`` fits every family)."""
    from nearid.align.families import make_alignment

    split, seed = run.split, run.settings.seed
    A_fit, B_fit = (np.asarray(X[split.fit_idx], dtype=np.float64) for X in (A, B))
    A_eval, B_eval = (np.asarray(X[split.eval_rows], dtype=np.float64) for X in (A, B))
    return {fam: np.linalg.norm(make_alignment(fam, random_state=seed).fit(A_fit, B_fit).transform(A_eval) - B_eval,
                                axis=1)
            for fam in families}


def _fit_maps(A, B, sa: _Stats, sb: _Stats, cross, run: _Run) -> tuple[dict, dict]:
    """Every requested family's map from A to B, from the moments (and FastICA)."""
    families, fit_idx, dtype, bar, work = run.settings.families, run.split.fit_idx, run.dtype, run.bar, run.work
    rows_per_block = run.settings.rows_per_block
    maps, info = {}, {}
    notes: list[str] = []
    if {PERMUTATION, ICA_FAMILY} & set(families):
        perm = _signed_matching(cross, sa.sq, sb.sq)  # the ICA family predicts B's unseen directions by it
        if PERMUTATION in families:
            maps[PERMUTATION] = perm
    # the linear family first (the maps do not depend on the order): when float32 sums cannot
    # resolve A, the switch to float64 then comes before the rigid family's SVD, not after
    if LINEAR in families:
        cols, _ = _kept_columns(A, sa, fit_idx, rows_per_block)
        if (dtype == np.float32 and int(cols.sum()) >= SERIAL_DECOMPOSITION_WIDTH
                and ("pca", cols.tobytes()) not in sa.cache and _surely_unresolved(sa, cols)):
            raise _NeedFloat64  # as below, found without the eigen-decomposition
        wide = int(cols.sum()) >= SERIAL_DECOMPOSITION_WIDTH
        bar.describe(f"fitting maps: principal axes of A ({int(cols.sum())}-wide eigh)", now=wide)
        var, axes, unresolved = _pca(sa, cols, dtype, "A", lambda d: bar.tick(work.eigh(d)))
        if unresolved:
            raise _NeedFloat64  # least squares would need directions float32 sums cannot resolve
        M = np.zeros(cross.shape)
        # minimum-norm least squares on the columns that are neither constant nor copies of
        # another (a copy gets no weight; its twin carries it): pinv(A'A) A'B
        M[cols] = axes @ ((axes.T @ cross[cols]) / ((sa.n - 1) * var)[:, None])
        maps[LINEAR] = M
    if RIGID in families:
        bar.describe(f"fitting maps: rigid SVD ({cross.shape[0]} x {cross.shape[1]})",
                     now=min(cross.shape) >= SERIAL_DECOMPOSITION_WIDTH)
        U, S, Vt = linalg.svd(cross, notes, what="rigid SVD")
        bar.tick(work.svd(*cross.shape))
        norm = float(sa.sq.sum())
        maps[RIGID] = (S.sum() / norm if norm > 0 else 1.0) * (U @ Vt)
    maps = {f: maps[f] for f in (PERMUTATION, RIGID, LINEAR) if f in maps}
    if ICA_FAMILY in families:
        bar.stage(ICA_FAMILY)
        ica_a, ica_b = (_side_ica(X, st, side, run) for X, st, side in ((A, sa, "A"), (B, sb, "B")))
        bar.stage("fitting maps")
        Ua, Ub = ica_a.unmixing_.T, ica_b.unmixing_.T  # centred columns -> sources (0 on dropped)
        cs = Ua.T @ cross @ Ub
        sq_sa = np.einsum("ij,ij->j", Ua, sa.gram @ Ua)
        sq_sb = np.einsum("ij,ij->j", Ub, sb.gram @ Ub)
        src, coef = _signed_matching(cs, sq_sa, sq_sb)
        L = np.zeros((Ua.shape[0], Ub.shape[1]))
        m = src >= 0
        L[:, m] = Ua[:, src[m]] * coef[m]
        # B's directions outside its kept components: the permutation family's prediction,
        # projected onto them (nearid.align.ICAAlignment), so ICA pays no floor there
        maps[ICA_FAMILY] = (L, ica_b.mixing_.T, perm, Ub)
        info = dict(ica_components=(ica_a.n_components_, ica_b.n_components_),
                    ica_variance=(ica_a.variance_kept_, ica_b.variance_kept_),
                    ica_converged=(bool(ica_a.converged_), bool(ica_b.converged_)),
                    ica_components_by_rule=(ica_a.whitener_.n_components_by_rule_,
                                            ica_b.whitener_.n_components_by_rule_))
    notes += sa.cache.get("notes", []) + sb.cache.get("notes", [])
    info["fallbacks"] = list(dict.fromkeys(notes))
    return maps, info


def _eval_pass(A, sa: _Stats, sbs, maps_per_b, run: _Run, tick) -> list[dict]:
    """Per-row errors ||h(a) - b|| of every map on the held-out rows (sorted: ``eval_rows``)."""
    Bs, rows, dtype, rows_per_block = run.inputs.Bs, run.split.eval_rows, run.dtype, run.settings.rows_per_block
    out = [{fam: np.empty(rows.size) for fam in maps} for maps in maps_per_b]
    prepared = []
    for maps in maps_per_b:
        # one product per family, never one stacked product: a BLAS kernel may round the
        # columns of a wider product differently, and a family's error must not depend on
        # which other families were asked for
        prep = {"dense": {f: np.ascontiguousarray(maps[f], dtype=dtype) for f in (RIGID, LINEAR) if f in maps}}
        if ICA_FAMILY in maps:
            L, mix, (src, coef), Ub = maps[ICA_FAMILY]
            prep[ICA_FAMILY] = (L.astype(dtype), np.ascontiguousarray(mix, dtype=dtype), np.where(src >= 0, src, 0),
                           np.where(src >= 0, coef, 0.0).astype(dtype), np.ascontiguousarray(Ub, dtype=dtype))
        if PERMUTATION in maps:
            src, coef = maps[PERMUTATION]
            prep["perm"] = (np.where(src >= 0, src, 0), np.where(src >= 0, coef, 0.0).astype(dtype))
        prepared.append(prep)
    a1, a2 = sa.shift, sa.dmean.astype(dtype)
    for start in range(0, rows.size, rows_per_block):
        idx = rows[start:start + rows_per_block]
        sl = slice(start, start + idx.size)
        Ac = _gather(A, idx, dtype)
        Ac -= a1  # centre in two steps (a row of the data, then a small remainder): exact
        Ac -= a2  # enough in float32 even when the mean is far from 0
        for j, (B, sb, prep) in enumerate(zip(Bs, sbs, prepared)):
            Bc = _gather(B, idx, dtype)
            Bc -= sb.shift
            Bc -= sb.dmean.astype(dtype)
            for fam, M in prep["dense"].items():
                E = Ac @ M
                E -= Bc
                out[j][fam][sl] = np.sqrt(np.einsum("ij,ij->i", E, E))
            if ICA_FAMILY in prep:
                L, mix, src, coef, Ub = prep[ICA_FAMILY]
                Pr = Ac[:, src]
                Pr *= coef  # the permutation family's prediction (centred)
                E = (Ac @ L) @ mix
                E += Pr
                E -= (Pr @ Ub) @ mix  # ... on B's directions outside the kept components only
                E -= Bc
                out[j][ICA_FAMILY][sl] = np.sqrt(np.einsum("ij,ij->i", E, E))
            if "perm" in prep:
                src, coef = prep["perm"]
                E = Ac[:, src]
                E *= coef
                E -= Bc
                out[j][PERMUTATION][sl] = np.sqrt(np.einsum("ij,ij->i", E, E))
        tick(idx.size)
    return out


class _Work:
    """The estimated cost of each piece of the engine's work (units: see ``_UNITS``)."""

    def __init__(self, float32: bool):
        self.f = _UNITS["float32"] if float32 else 1.0

    def fit(self, rows, da, dbs, gram_a, gram_b) -> float:
        """One pass of the cross-products over ``rows`` rows (A'B, and the grams asked for)."""
        per_row = da * sum(dbs) + (da * da / 2 if gram_a else 0) + (sum(d * d for d in dbs) / 2 if gram_b else 0)
        return rows * (self.f * per_row + _UNITS["gather"] * (da + sum(dbs)))

    def evaluate(self, rows, da, dbs, families, ks) -> float:
        dense = len({RIGID, LINEAR} & set(families))
        per_row = sum(dense * da * db + (k * (da + db) if ICA_FAMILY in families else 0) + db for db, k in zip(dbs, ks))
        return rows * (self.f * per_row + _UNITS["gather"] * (da + sum(dbs)))

    @staticmethod
    def svd(m, n) -> float:
        return _UNITS["svd"] * m * n * min(m, n)

    @staticmethod
    def eigh(d, top: int | None = None) -> float:
        return (_UNITS["eigh_top"] if top else _UNITS["eigh"]) * d ** 3

    @staticmethod
    def ica_iteration(n, k) -> float:
        return 2 * n * k * k + _UNITS["logcosh"] * n * k + _UNITS["eigh"] * k ** 3

    def ica(self, n, k, d, max_iter) -> float:
        """One side's FastICA, at most ``max_iter`` iterations, and whitening its rows."""
        return max_iter * self.ica_iteration(n, k) + self.f * n * d * k


class _Progress:
    """A tqdm bar on stderr that appears only when the work lasts more than PROGRESS_DELAY,
    and the wall time of each stage (``timings``), shown or not.

    The bar counts estimated work (:class:`_Work`), not steps: a block of rows, a d x d
    decomposition and a FastICA iteration each advance it by their cost, so its percentage
    and remaining time hold for wide inputs, where decompositions and FastICA dominate
    (FastICA is counted at its iteration cap, then the bar jumps when it converges early)."""

    def __init__(self, enabled: bool, total: float, desc: str):
        import time

        self.clock = time.perf_counter
        self.timings: dict[str, float] = {}
        self.current, self.since = "validate", self.clock()
        self.started = self.since
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, delay=PROGRESS_DELAY, file=sys.stderr, leave=False,
                            dynamic_ncols=True, smoothing=0,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} elapsed, about {remaining} left")

    def tick(self, n: float = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def describe(self, text: str, now: bool = False) -> None:
        """Show ``text`` at the next update, or ``now`` (before a long decomposition, which
        updates nothing while it runs) once the bar is past its delay."""
        if self.bar is not None:
            self.bar.set_description_str(text, refresh=now and self.clock() - self.started >= PROGRESS_DELAY)

    def stage(self, name: str) -> None:
        """Start timing stage ``name`` (and show it on the bar)."""
        now = self.clock()
        self.timings[self.current] = self.timings.get(self.current, 0.0) + now - self.since
        self.current, self.since = name, now
        self.describe(name)

    def grow(self, n: float) -> None:
        if self.bar is not None:
            self.bar.total += n
            self.bar.refresh()

    def replan(self, remaining: float) -> None:
        """The work still to do is ``remaining`` (after a change of plan, e.g. float64)."""
        if self.bar is not None:
            self.bar.total = self.bar.n + remaining
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _engine(As, Bs, settings: EngineSettings, *, fit_fraction: float, fit_rows: int | None = None,
            names=None) -> tuple[list[list[AlignmentResult]], tuple[int, int]]:
    """compare() for every (A, B) pair of the lists: a grid of AlignmentResult, and (n_fit, n_eval).

    ``fit_fraction`` and ``fit_rows`` set the split (see :func:`_split`), ``names`` the layer
    names (lists for A and B) that messages use."""
    dtype = settings.dtype  # the arguments were checked by the entry points (nearid.align.api)
    names = names or (["A"], ["B"])
    n = As[0].shape[0]
    width = max(X.shape[1] for X in list(As) + list(Bs))
    split = Split.of(*_split(n, width, fit_fraction, settings.seed, fit_rows))
    # Blocks are sized by the widest single input, not by the sum over a layer grid: float32
    # block products summed in float64 round differently at other block boundaries, so a
    # cell of a grid of same-width layers is the very number compare() gives for that pair
    # (unless the grid or the pair needs float64 where the other does not: the precision is
    # chosen per call, from what the requested families need).
    settings = replace(settings, rows_per_block=max(MIN_BLOCK_ROWS, BLOCK_ELEMENTS // width))
    inputs = Inputs(As=tuple(As), Bs=tuple(Bs), names_a=tuple(names[0]), names_b=tuple(names[1]))
    float32 = dtype is None and all(map(_narrow, inputs.As + inputs.Bs))
    bar = _Progress(settings.progress, _planned_work(_Work(float32), inputs, split, settings), "nearid align")
    try:
        return _engine_run(inputs, split, settings, bar)
    finally:
        bar.close()


def _ica_components_guess(d, n_rows, max_components) -> int:
    """The most components a side's ICA can get (the rows rule, the cap, the width)."""
    from nearid.ica_protocol import ROWS_PER_COMPONENT

    k = min(d, max(1, n_rows // ROWS_PER_COMPONENT))
    return k if max_components is None else min(k, max_components)


def _planned_work(work: _Work, inputs: Inputs, split: Split, settings: EngineSettings) -> float:
    """The whole grid's estimated work, for the progress bar (see :class:`_Work`)."""
    n_fit, n_eval, families = split.fit_rows.size, split.eval_rows.size, settings.families
    ica_max_iter, ica_max_components = settings.ica.max_iter, settings.ica.max_components
    ica_rows = n_fit if settings.ica.max_rows is None else min(n_fit, settings.ica.max_rows)
    das, dbs = [X.shape[1] for X in inputs.As], [X.shape[1] for X in inputs.Bs]
    need_a, need_b = settings.need_a, settings.need_b
    ks = [_ica_components_guess(d, ica_rows, ica_max_components) for d in dbs]
    total = 0.0
    for i, da in enumerate(das):
        total += work.fit(n_fit, da, dbs, need_a, need_b and i == 0)
        if LINEAR in families:
            total += work.eigh(da)
        elif ICA_FAMILY in families:
            total += work.eigh(da, _top_axes(da, ica_max_components))
        if RIGID in families:
            total += sum(work.svd(da, db) for db in dbs)
        if ICA_FAMILY in families:
            total += work.ica(ica_rows, _ica_components_guess(da, ica_rows, ica_max_components), da, ica_max_iter)
        if families:
            total += work.evaluate(n_eval, da, dbs, families, ks)
    if ICA_FAMILY in families:
        total += sum(work.eigh(db, _top_axes(db, ica_max_components)) + work.ica(ica_rows, k, db, ica_max_iter)
                     for db, k in zip(dbs, ks))
    return total


def _engine_run(inputs: Inputs, split: Split, settings: EngineSettings, bar: _Progress):
    """Checks that need a pass over the data, then the grid: in float32 where the data allow,
    again in float64 when float32 sums cannot resolve them."""
    largest = 0.0
    for label, mats, names in (("A", inputs.As, inputs.names_a), ("B", inputs.Bs, inputs.names_b)):
        for name, X in zip(names, mats):
            largest = max(largest, _check_finite(X, inputs.describe(label, name),
                                                 max(MIN_BLOCK_ROWS, BLOCK_ELEMENTS // X.shape[1])))
    diameters = [float("nan")] * len(inputs.Bs) if not settings.families else []
    for name, B in zip(inputs.names_b, inputs.Bs) if settings.families else ():  # only errors need it
        try:
            diameters.append(latent_diameter(np.asarray(B[_diameter_rows(split.eval_idx)], dtype=np.float64)))
        except ValueError:
            raise ValueError(f"{inputs.describe('B', name)} is constant on the held-out rows (every row the same "
                             "vector): its diameter is 0, so no error can be normalised") from None
    narrow = settings.dtype is None and all(map(_narrow, inputs.As + inputs.Bs))
    notes: tuple[str, ...] = ()
    width = max(X.shape[1] for X in inputs.As + inputs.Bs)
    if narrow and _float32_overflows(largest, settings.rows_per_block, width):
        narrow = False
        notes = (f"computed in float64: values up to {largest:.1e} would overflow float32 sums of products",)
        bar.replan(_planned_work(_Work(False), inputs, split, settings))
        bar.describe("float64 (values too large for float32)")
    floats = ["float32", "float64"] if narrow else ["float64"]
    for attempt, prec in enumerate(floats):
        try:
            grid = _run_grid(_Run(inputs=inputs, split=split, settings=settings, dtype=np.dtype(prec),
                                  work=_Work(prec == "float32"), bar=bar, notes=notes), diameters)
            bar.replan(0.0)  # what was estimated is done: 100%
            bar.stage("done")
            for row in grid:
                for res in row:
                    res.timings = dict(bar.timings)
            return grid, (int(split.fit_idx.size), int(split.eval_idx.size))
        except _NeedFloat64:
            if attempt + 1 == len(floats):
                raise AssertionError("float64 sums were judged unresolved") from None  # pragma: no cover
            bar.replan(_planned_work(_Work(False), inputs, split, settings))
            bar.describe("float64 (ill-conditioned data)")
    raise AssertionError("unreachable")  # pragma: no cover


def _run_grid(run: _Run, diameters: list[float]) -> list[list[AlignmentResult]]:
    """Every (A, B) cell in one precision: the fit pass, the maps, the held-out errors."""
    inputs, split, settings, dt, bar, work = run.inputs, run.split, run.settings, run.dtype, run.bar, run.work
    families, want_cka, need_a, need_b = settings.families, settings.want_cka, settings.need_a, settings.need_b
    As, Bs = inputs.As, inputs.Bs
    stats_bs = [None] * len(Bs)
    grid = []
    dbs = [B.shape[1] for B in Bs]
    for i, A in enumerate(As):
        bar.stage("cross-products")
        da, gram_b = A.shape[1], need_b and stats_bs[0] is None
        sa, stats_bs, crosses = _fit_pass(A, stats_bs, run,
                                          lambda rows: bar.tick(work.fit(rows, da, dbs, need_a, gram_b)))
        for label, st, name in [("A", sa, inputs.names_a[i])] + [
                ("B", sb, nb) for sb, nb in zip(stats_bs, inputs.names_b)]:
            if not st.nonconstant.any():
                raise ValueError(f"{inputs.describe(label, name)} is constant on the fit rows (every row the same "
                                 "vector): there is nothing to align")
        bar.stage("fitting maps")
        # d x d decompositions (SVD, eigh) and FastICA's small matrices: one BLAS thread. More
        # threads gain little at this size and, on a machine other jobs keep busy, spin-wait
        # (an SVD of 768 x 768 took 10 s instead of 1 s with 2 threads on 2 shared cores).
        # From SERIAL_DECOMPOSITION_WIDTH on, a decomposition takes minutes and the threads
        # the caller allows (nearid align: the idle cores) pay; FastICA keeps one thread.
        from threadpoolctl import threadpool_limits

        serial = max([da, *dbs]) < SERIAL_DECOMPOSITION_WIDTH
        with threadpool_limits(limits=1 if serial else None):
            fitted = [_fit_maps(A, B, sa, sb, C, run) for B, sb, C in zip(Bs, stats_bs, crosses)]
        bar.stage("held-out errors")
        ks = [(info.get("ica_components") or (0, 0))[1] for _, info in fitted]
        errs = (_eval_pass(A, sa, stats_bs, [m for m, _ in fitted], run,
                           lambda rows: bar.tick(work.evaluate(rows, da, dbs, families, ks)))
                if families else [{} for _ in Bs])
        others = [fam for fam in families if fam not in STREAMED]
        for B, e in zip(Bs, errs) if others else ():
            e.update(_estimator_errors(A, B, others, run))
        row = []
        for j, (B, sb, C, (maps, info)) in enumerate(zip(Bs, stats_bs, crosses, fitted)):
            rows_err = {}
            for fam in families:
                e = np.empty(split.eval_rows.size)
                e[split.order] = errs[j][fam] / diameters[j]
                if not np.isfinite(e).all():
                    if dt == np.float32:
                        raise _NeedFloat64  # a map's coefficients took float32 products past its range
                    raise ValueError("the errors overflowed: values too large for float32 arithmetic; "
                                     "pass dtype='float64'")
                rows_err[fam] = e
            errors = {fam: float(rows_err[fam].mean()) for fam in families}
            eff = (ica_efficiency(errors[PERMUTATION], errors[RIGID], errors[ICA_FAMILY])
                   if {PERMUTATION, RIGID, ICA_FAMILY} <= set(errors) else float("nan"))
            cka = _cka_from_moments(sa.gram, sb.gram, C) if want_cka else float("nan")
            row.append(AlignmentResult(errors=errors, row_errors=rows_err, ica_efficiency=eff, cka=cka,
                                       n_fit=int(split.fit_idx.size), n_eval=int(split.eval_rows.size),
                                       dim_a=int(A.shape[1]), dim_b=int(B.shape[1]),
                                       ica_components=info.get("ica_components"),
                                       ica_variance=info.get("ica_variance"),
                                       ica_converged=info.get("ica_converged"), dtype=dt.name,
                                       ica_max_components=(settings.ica.max_components
                                                           if ICA_FAMILY in families else None),
                                       ica_components_by_rule=info.get("ica_components_by_rule"),
                                       fallbacks=[*run.notes, *info.get("fallbacks", [])]))
        grid.append(row)
    return grid


def _compare_reference(A, B, settings: EngineSettings, *, fit_fraction: float,
                       fit_rows: int | None = None) -> AlignmentResult:
    """The obviously-correct path: float64 copies, one estimator per family (slow, for checks)."""
    from sklearn.exceptions import ConvergenceWarning

    from nearid.align.families import make_alignment

    seed, ica = settings.seed, settings.ica
    A, B = check_pair(A, B)
    fit_idx, eval_idx = _split(A.shape[0], max(A.shape[1], B.shape[1]), fit_fraction, seed, fit_rows)
    A_fit, B_fit, A_eval, B_eval = A[fit_idx], B[fit_idx], A[eval_idx], B[eval_idx]
    for name, X in (("A", A_fit), ("B", B_fit)):
        if np.ptp(X, axis=0).max() == 0:
            raise ValueError(f"{name} is constant on the fit rows (every row the same vector): "
                             "there is nothing to align")
    try:
        diameter = latent_diameter(B_eval)
    except ValueError:
        raise ValueError("B is constant on the held-out rows (every row the same vector): its diameter "
                         "is 0, so no error can be normalised") from None
    errors, rows, info, notes = {}, {}, {}, []
    for family in settings.families:
        ica_params = ica.params() if family == ICA_FAMILY else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est = make_alignment(family, random_state=seed, **ica_params).fit(A_fit, B_fit)
        rows[family] = np.linalg.norm(est.transform(A_eval) - B_eval, axis=1) / diameter
        errors[family] = float(rows[family].mean())
        notes += getattr(est, "fallbacks_", [])
        if family == ICA_FAMILY:
            info = dict(ica_components=(est.ica_A_.n_components_, est.ica_B_.n_components_),
                        ica_variance=(est.ica_A_.variance_kept_, est.ica_B_.variance_kept_),
                        ica_converged=(bool(est.ica_A_.converged_), bool(est.ica_B_.converged_)),
                        ica_components_by_rule=(est.ica_A_.whitener_.n_components_by_rule_,
                                                est.ica_B_.whitener_.n_components_by_rule_),
                        ica_max_components=ica.max_components)
            notes += [f"{side}: {n}" for side, ica_side in (("A", est.ica_A_), ("B", est.ica_B_))
                      for n in ica_side.fallbacks_]
    eff = (ica_efficiency(errors[PERMUTATION], errors[RIGID], errors[ICA_FAMILY])
           if {PERMUTATION, RIGID, ICA_FAMILY} <= set(errors) else float("nan"))
    return AlignmentResult(errors=errors, row_errors=rows, ica_efficiency=eff,
                           cka=linear_cka(A_fit, B_fit) if settings.want_cka else float("nan"),
                           n_fit=int(fit_idx.size), n_eval=int(eval_idx.size), dim_a=int(A.shape[1]),
                           dim_b=int(B.shape[1]), dtype="float64", fallbacks=notes, **info)
