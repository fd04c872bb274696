"""What every part of :mod:`nearid.align` shares, without scikit-learn: the families' names,
the declared ICA protocol (:class:`ICASettings`), the check of a pair of embeddings, the
normalised error and the ICA efficiency.

Kept apart from the estimators (:mod:`nearid.align.families`, which subclass scikit-learn's
``BaseEstimator``) so that ``import nearid.align`` and ``nearid align`` start without
loading scikit-learn (over a second) unless a family that needs it runs.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nearid.constraints import Options
from nearid.ica_protocol import DEFAULT_COMPONENTS

if TYPE_CHECKING:
    from nearid.ica import WhitenedICA


@dataclass(frozen=True)
class Family:
    """How the book and ``nearid align`` name and draw one transform family: one record, so
    a table, a plot and the command line cannot disagree on a family's words or look.

    The estimator itself is :mod:`nearid.align.families` (float64, the obvious way); the
    streaming engine's map from cross-products is :mod:`nearid.align.engine`."""

    name: str  #: the key of the family's error in every result (:data:`RIGID`)
    label: str  #: how a reader names it in a table ("signed permutation")
    metric_label: str  #: the axis label of its error in a plot
    note: str  #: one line on what the map may do (``nearid align``'s table)
    palette_index: int  #: its colour: an index into the book's palette (nearid.book.plotting)
    marker: str  #: its matplotlib marker
    dashes: tuple[float, ...] = ()  #: its seaborn line dashes (() is a solid line)
    estimator: str = ""  #: its float64 reference estimator, "module:Class" (imported when asked)
    in_paper: bool = True  #: one of the paper's families: fitted by default (PAPER_FAMILIES)

    def estimator_class(self) -> type:
        """The reference estimator's class, imported only now (scikit-learn loads with it)."""
        module, _, name = self.estimator.partition(":")
        return getattr(importlib.import_module(module), name)


PERMUTATION, RIGID, LINEAR, ICA_FAMILY = "permutation", "rigid", "linear", "ica"
"""The four families' names, the keys of their errors in every result: typed here once, and
imported wherever code names one family."""
_ESTIMATORS = "nearid.align.families"
FAMILY_INFO: dict[str, Family] = {f.name: f for f in (
    Family(PERMUTATION, "signed permutation", "signed-permutation error", "signed permutation + per-axis scale",
           palette_index=0, marker="o", estimator=f"{_ESTIMATORS}:SignedPermutationAlignment"),
    Family(RIGID, "rigid", "rigid (rotation + scale) error", "rotation/reflection + global scale + shift",
           palette_index=1, marker="s", dashes=(4, 2), estimator=f"{_ESTIMATORS}:RigidAlignment"),
    Family(LINEAR, "linear", "linear (affine) error", "any affine map", palette_index=2, marker="^",
           dashes=(1, 1.5), estimator=f"{_ESTIMATORS}:LinearAlignment"),
    Family(ICA_FAMILY, "whitening + ICA", "whiten + ICA error", "whiten + ICA each side, match components",
           palette_index=3, marker="D", dashes=(6, 2, 1, 2), estimator=f"{_ESTIMATORS}:ICAAlignment"),
)}
"""Every transform family, from most to least constrained but ICA last (the order of
:data:`FAMILIES`, which every result and table keeps)."""
FAMILIES = tuple(FAMILY_INFO)
PAPER_FAMILIES = tuple(name for name, family in FAMILY_INFO.items() if family.in_paper)
"""What every entry point fits when no family is named (compare, the chapters, ``nearid
align``): a family added with ``in_paper=False`` is there to be asked for by name and moves
no published number and no JSON key."""
PAPER_ORDER = (PERMUTATION, ICA_FAMILY, RIGID, LINEAR)
"""The paper's ordering of the families' errors, worst to best (its Table 1): what chapter 04
tests link by link and the summary plots against the paper."""
FAMILY = Options(lambda: tuple(FAMILY_INFO), noun="family")  # the registry as it is when checked
# The ICA family's protocol, used by chapter 04 and `nearid align`: whiten each side onto the
# leading components holding this share of the fit rows' variance (at most one per ten rows;
# see nearid.ica.choose_components), fit FastICA on at most ICA_MAX_ROWS rows, and stop it
# after ICA_MAX_ITER iterations. `nearid align` and compare_layers also cap the number of
# components at ICA_MAX_COMPONENTS; compare() caps nothing unless asked (ica_max_components).
ICA_COMPONENTS = DEFAULT_COMPONENTS
ICA_MAX_ROWS = 20_000
ICA_MAX_ITER = 200
ICA_MAX_COMPONENTS = 256
"""At most this many whitened components per side in ``nearid align`` (and
:func:`compare_layers`), whatever the variance rule asks: it bounds the ICA stage's cost and
keeps FastICA in the regime where its estimates are good.

* Cost. One iteration of parallel FastICA on n white rows and k components is two
  (k x n) by (n x k) products, 4 n k^2 flops, plus a k x k eigen-decomposition (O(k^3))
  (Hyvarinen 1999, IEEE TNN 10(3)). With n <= ICA_MAX_ROWS = 20,000 and at most
  ICA_MAX_ITER = 200 iterations, k = 256 bounds a side at about 1 TFLOP (5 GFLOP per
  iteration: under a minute per side on one core). The 95% rule on 20,000 x 4,096
  embeddings (256 planted sources plus noise) asked for 881 components: 12x the
  per-iteration cost at equal rows, and FastICA needs more iterations as k grows.
* Accuracy. Even at the optimum, the mean squared interference of each of the k - 1 other
  sources in an estimated component is of order 1/n per source (the Cramer-Rao bound for
  ICA, Tichavsky, Koldovsky & Oja 2006, IEEE TSP 54(4)), so it grows as (k - 1)/n. The
  rows rule (nearid.ica.ROWS_PER_COMPONENT) allows n/k = 10; 256 keeps n/k >= 39 for the
  10,000 fit rows of a 20,000-row file and >= 78 at ICA_MAX_ROWS.
* Nothing a chapter computes changes: chapters call compare() and WhitenedICA without a
  cap (their largest setting is 64 components, ch04's ica_grid).

When the cap binds, ICA sees the 256 leading principal components of each side, and the
output says so (``ica_components_by_rule``, ``ica_max_components``, and the share of the
variance those components hold). ``--ica-max-components 0`` lifts it."""

EFFICIENCY_MIN_GAP = float(np.sqrt(np.finfo(np.float32).eps))
"""The smallest perm - rigid gap (in units of B's diameter, 3.45e-4) for which
:func:`ica_efficiency` is a number; below it the efficiency is NaN ("n/a", JSON null).

The errors are mean row distances divided by B's diameter, so the data's scale is 1. The
fast path fits every map from float32 cross-products, which carry relative errors of about
1e-7 to 1e-6 of their size, and the d x d solves behind the maps amplify that by their
conditioning. Measured on float32 embeddings (2,000 to 4,000 rows, 16 to 64 columns, with
and without a large offset) compared with themselves or with a signed permutation of
themselves, where perm and rigid are both exactly 0, the computed errors were 1e-7 to
7e-7 and their gap 1e-7 to 6e-7 (1e-15 in float64): the efficiency came out as -2e5 to
-9e5. A gap below sqrt(eps32) = 3.45e-4 of the diameter -- the usual threshold below which
a difference of two float32 results has lost half its digits, and 500 times the largest
round-off gap measured -- is taken as no gap. The paper's gaps are 0.069 to 0.176; the
smallest in this book's reference results is 0.0046 (smoke) and 0.031 (quick)."""


# --------------------------------------------------------------------------- ICA settings
@dataclass(frozen=True)
class ICASettings:
    """The ICA family's protocol, in the keyword names of :class:`ICAAlignment` and
    :class:`nearid.ica.WhitenedICA`: the whitening rule (``n_components``, see
    :func:`nearid.ica.choose_components`), FastICA on at most ``max_rows`` rows (None = all)
    for at most ``max_iter`` iterations, and at most ``max_components`` whitened components
    per side (None = no cap). Build it with :func:`ica_settings`."""

    n_components: float | int | str | None = ICA_COMPONENTS
    max_rows: int | None = None
    max_iter: int = 1000
    max_components: int | None = None

    def params(self) -> dict[str, Any]:
        """Keyword arguments of :class:`ICAAlignment` and :class:`nearid.ica.WhitenedICA`."""
        return asdict(self)

    def whitened_ica(self, random_state: int | None) -> WhitenedICA:
        """A fresh (unfitted) :class:`nearid.ica.WhitenedICA` with this protocol."""
        from nearid.ica import WhitenedICA

        return WhitenedICA(random_state=random_state, **self.params())

    def compare_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`nearid.align.compare` (``ica_components``, ``ica_max_rows``,
        ``ica_max_iter``, and ``ica_max_components`` only when a cap is set: None is compare's
        default, and helpers that forward the chapters' uncapped protocol do not take it)."""
        out: dict[str, Any] = dict(ica_components=self.n_components, ica_max_rows=self.max_rows,
                                   ica_max_iter=self.max_iter)
        if self.max_components is not None:
            out["ica_max_components"] = self.max_components
        return out


def ica_settings(*, ica_components: float | int | str | None = ICA_COMPONENTS, ica_max_rows: int | None = None,
                 ica_max_iter: int = 1000, ica_max_components: int | None = None) -> ICASettings:
    """The one place the ICA protocol is assembled: :func:`nearid.align.compare`'s ``ica_*``
    arguments (same names, same defaults) as an :class:`ICASettings` record. Nothing is
    validated here: the entry points check their arguments (:data:`nearid.align.api.ICA_ARGUMENTS`)
    and :class:`nearid.ica.WhitenedICA` its parameters."""
    return ICASettings(n_components=ica_components, max_rows=ica_max_rows, max_iter=ica_max_iter,
                       max_components=ica_max_components)


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
    # pairwise distances from matrix products (|x|^2 + |y|^2 - 2 x.y on centred rows), 256
    # rows at a time, into one array of the n(n-1)/2 distances: several times faster than
    # scipy's pdist for 2000 x 768 and equal to it within 1e-12 relative
    Z = Z - Z.mean(0)
    sq = np.einsum("ij,ij->i", Z, Z)
    n = Z.shape[0]
    dist = np.empty(n * (n - 1) // 2)
    at, step = 0, 256
    for start in range(0, n - 1, step):
        stop = min(start + step, n - 1)
        G = Z[start:stop] @ Z[start:].T
        for i in range(stop - start):  # row start + i against every later row
            row = G[i, i + 1:]
            row *= -2
            row += sq[start + i]
            row += sq[start + i + 1:]
            dist[at:at + row.size] = row
            at += row.size
    np.sqrt(np.maximum(dist, 0.0, out=dist), out=dist)
    d = float(np.quantile(dist, quantile, overwrite_input=True))
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


# --------------------------------------------------------------------------- summaries
def ica_efficiency(permutation: float, rigid: float, ica: float,
                   min_gap: float = EFFICIENCY_MIN_GAP) -> float:
    """(perm - ica) / (perm - rigid): the share of the perm-to-rigid gap that ICA closes.

    NaN (not defined) when ``|perm - rigid| < min_gap``: the errors are in units of B's
    diameter, and a gap below :data:`EFFICIENCY_MIN_GAP` (sqrt of float32's eps, 3.45e-4)
    is within the round-off of the float32 computation behind them, so the ratio would be
    round-off magnified (A against itself printed -260696952% with a 1e-9 guard), not a
    share. NaN is "n/a" in ``nearid align``'s table and null in its JSON. A bootstrap over
    rows passes its own ``min_gap`` (chapter 04 keeps 1e-9: a resample's gap is a statistical
    draw, not a new computation with new round-off).
    """
    gap = permutation - rigid
    if not abs(gap) >= min_gap:  # no gap to close (or a NaN error): the ratio means nothing
        return float("nan")
    return float((permutation - ica) / gap)
