"""The entry points: :func:`compare` (Table 1 for one pair), :func:`alignment_table` and
:func:`compare_layers` (every layer of A against every layer of B).

They check the arguments, gather them into the engine's frozen records
(:class:`~nearid.align.engine.EngineSettings`, :class:`~nearid.align.families.ICASettings`)
and hand the work to the streaming engine (:mod:`nearid.align.engine`) or, for checks, to
the float64 reference path; what comes back is an
:class:`~nearid.align.result.AlignmentResult`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from nearid.align.engine import EngineSettings, _check_finite, _check_rows, _compare_reference, _engine, _matrix, _split
from nearid.align.intervals import (
    N_PERMUTATIONS,
    N_RESAMPLES,
    MeasureSettings,
    check_measure_params,
    evaluate_measures,
    mean_interval,
)
from nearid.align.measures import MAX_ROWS as MEASURE_ROWS
from nearid.align.measures import MAX_ROWS_ARG, MEASURE, MEASURES
from nearid.align.protocol import (
    FAMILIES,
    PAPER_FAMILIES,
    RIGID,
    FAMILY,
    ICA_COMPONENTS,
    ICA_MAX_COMPONENTS,
    ICA_MAX_ITER,
    ICA_MAX_ROWS,
    ica_settings,
)
from nearid.align.result import AlignmentResult
from nearid.constraints import FRACTION, Interval, ListOf, Options, validate_params
from nearid.ica_protocol import COMPONENTS, MAX_COMPONENTS, MAX_ROWS

if TYPE_CHECKING:
    import pandas as pd

METRICS = FAMILIES + tuple(MEASURES)
# What the entry points' arguments accept, declared once for compare, alignment_table and
# compare_layers (the ica_* arguments are WhitenedICA's parameters under other names).
ICA_ARGUMENTS = dict(ica_components=COMPONENTS, ica_max_rows=MAX_ROWS, ica_max_components=MAX_COMPONENTS)
DTYPE = Options((None, "float64"))  # None: float32 where the data allow it
# (fit_rows, in [3, the rows of the fit split], is checked on the data by the engine.)
MEASURE_ARGUMENTS = dict(measures=ListOf(MEASURE, min_len=0), max_rows=MAX_ROWS_ARG,
                         n_resamples=Interval(int, 2), n_permutations=Interval(int, 1))


@validate_params(families=ListOf(FAMILY, min_len=0), dtype=DTYPE, fit_fraction=FRACTION, **ICA_ARGUMENTS,
                 **MEASURE_ARGUMENTS)
def compare(A, B, *, fit_fraction: float = 0.5, seed: int = 0, families=PAPER_FAMILIES,
            ica_components: float | int | str | None = ICA_COMPONENTS, ica_max_rows: int | None = None,
            ica_max_iter: int = 1000, cka: bool = True, dtype: str | None = None,
            progress: bool = False, reference: bool = False, fit_rows: int | None = None,
            ica_max_components: int | None = None, measures=("cka",), max_rows: int | None = MEASURE_ROWS,
            intervals: bool = False, n_resamples: int = N_RESAMPLES, n_permutations: int = N_PERMUTATIONS,
            measure_params: dict | None = None) -> AlignmentResult:
    """Fit every family on a random ``fit_fraction`` of the rows, score it on the rest, and
    compute every similarity measure asked for.

    Only what is asked runs: ``families=()`` fits no map (no FastICA unless "ica" is asked),
    ``measures`` is any subset of :data:`nearid.align.MEASURES` (default linear CKA alone;
    ``cka=False`` drops it, the older spelling). Measures that fit nothing are computed on
    the fit rows, the n x n ones (RBF CKA, RSA, mutual kNN) on a seeded subsample of at most
    ``max_rows`` of them, and CCA, SVCCA and PWCCA are fitted on the fit rows and scored on
    the held-out rows (``result.measure_rows`` says which, per measure). ``measure_params``
    sets the measures' own options: ``bandwidth`` (RBF CKA), ``rdm`` and ``comparison``
    (RSA), ``k`` and ``knn_metric`` (mutual kNN), ``batch_size`` (minibatch CKA),
    ``svcca_variance``. ``intervals=True`` adds a 95% interval to every measure and error
    (from ``n_resamples`` half-samples of its rows) and, to every measure, the baseline with
    B's rows shuffled (``n_permutations`` shuffles): see :mod:`nearid.align.intervals`.

    ``A`` and ``B`` hold embeddings of the same inputs, row for row: numpy arrays (memory-
    mapped ones are read block by block, never copied whole) or torch tensors of any dtype
    on any device. ``families`` is any subset of :data:`FAMILIES` (default: the paper's four,
    :data:`PAPER_FAMILIES`; it may be empty when only ``cka`` is wanted). The ``ica_*``
    arguments set the ICA family's protocol (see
    :class:`ICAAlignment`; ``ica_max_rows`` = None fits FastICA on every fit row);
    ``nearid align`` and :func:`compare_layers` pass the declared protocol,
    ``ica_max_rows=ICA_MAX_ROWS, ica_max_iter=ICA_MAX_ITER``, which bounds FastICA's cost
    for many rows, and ``ica_max_components=ICA_MAX_COMPONENTS``, which bounds it for wide
    embeddings (the default None caps nothing: the chapters' protocol; ``result.ica_cap_bound``
    says whether the cap lowered a side's components). CKA is linear CKA on the fit rows (it
    fits nothing, so it needs no held-out rows).

    A decomposition that does not converge (LAPACK's "SVD did not converge") is retried
    with a more robust driver (:mod:`nearid.linalg`), and FastICA failing numerically is
    refitted (see :class:`nearid.ica.WhitenedICA`); ``result.fallbacks`` says which ran.

    Everything but FastICA is computed from d x d cross-products accumulated over blocks
    of rows; see the README section on ``nearid align`` for what runs in float32.
    ``dtype``: None = float32 arithmetic when both inputs are float32 (or narrower) and the
    data are well enough conditioned for it, else float64; "float64" forces float64.
    ``result.dtype`` says which was used.
    ``progress`` shows a progress bar on stderr when the work takes more than a few seconds.
    ``reference=True`` runs the slow, obviously-correct path instead (float64 copies, one
    scikit-learn-style estimator per family fitted on the fit rows); tests check that both
    agree.
    ``fit_rows`` fits on only the first that many rows of the (seeded) fit split and scores
    on the same held-out rows: nested fit sets for a trend over the number of fit rows, by
    the very computation that gives the full table (``fit_rows`` = all fit rows is the table).
    """
    import time

    start = time.perf_counter()
    families = tuple(families)
    measures = tuple(m for m in dict.fromkeys(measures) if cka or m != "cka")
    want_cka = "cka" in measures
    settings = EngineSettings(families=families, want_cka=want_cka, seed=seed, dtype=dtype, progress=progress,
                              ica=ica_settings(ica_components=ica_components, ica_max_rows=ica_max_rows,
                                               ica_max_iter=ica_max_iter, ica_max_components=ica_max_components))
    A, B = _matrix(A, "A"), _matrix(B, "B")
    _check_rows(A, B)
    fit_idx, eval_idx = _split(A.shape[0], max(A.shape[1], B.shape[1]), fit_fraction, seed, fit_rows)
    if reference:
        res = _compare_reference(A, B, settings, fit_fraction=fit_fraction, fit_rows=fit_rows)
    elif families or want_cka:
        grid, _ = _engine([A], [B], settings, fit_fraction=fit_fraction, fit_rows=fit_rows)
        res = grid[0][0]
    else:  # measures only: no map to fit, no cross-products to stream
        for name, X in (("A", A), ("B", B)):
            _check_finite(X, name, 1 << 12)
        res = AlignmentResult(errors={}, row_errors={}, ica_efficiency=float("nan"), cka=float("nan"),
                              n_fit=int(fit_idx.size), n_eval=int(eval_idx.size), dim_a=int(A.shape[1]),
                              dim_b=int(B.shape[1]))
    check_measure_params(measure_params)
    _add_measures(res, A, B, (fit_idx, eval_idx), measures,
                  MeasureSettings(seed=seed, max_rows=max_rows, intervals=intervals, n_resamples=n_resamples,
                                  n_permutations=n_permutations, params=measure_params), progress=progress)
    res.seconds = time.perf_counter() - start
    return res


def _add_measures(res: AlignmentResult, A, B, split, measures, settings: MeasureSettings,
                  progress: bool = False) -> None:
    """Fill ``res.measures`` (and, with ``settings.intervals``, the intervals and baselines) in
    place; ``split`` is (fit rows, held-out rows)."""
    reports = evaluate_measures(measures, A, B, *split, settings,
                                values={"cka": res.cka} if "cka" in measures else None, progress=progress)
    res.measures = {name: r.value for name, r in reports.items()}
    res.measure_rows = {name: r.rows for name, r in reports.items()}
    if settings.intervals:
        res.intervals = {fam: mean_interval(rows, settings.n_resamples, settings.seed)
                         for fam, rows in res.row_errors.items()}
        res.intervals.update({name: r.interval for name, r in reports.items()})
        res.baselines = {name: r.baseline for name, r in reports.items()}


@validate_params(families=ListOf(FAMILY, min_len=0), fit_fraction=FRACTION, measures=ListOf(MEASURE, min_len=0),
                 **ICA_ARGUMENTS)
def alignment_table(A, B, *, fit_fraction: float = 0.5, seed: int = 0, families=PAPER_FAMILIES,
                    ica_components: float | int | str | None = ICA_COMPONENTS,
                    ica_max_rows: int | None = None, ica_max_iter: int = 1000,
                    ica_max_components: int | None = None, measures=("cka",)) -> dict:
    """:func:`compare` as a flat dict (one error per family, efficiency, CKA, split sizes, and
    one entry per other measure asked for)."""
    return compare(A, B, fit_fraction=fit_fraction, seed=seed, families=families,
                   ica_components=ica_components, ica_max_rows=ica_max_rows,
                   ica_max_iter=ica_max_iter, ica_max_components=ica_max_components, measures=measures).to_dict()


@validate_params(metric=Options(METRICS, noun="metric"), fit_fraction=FRACTION, dtype=DTYPE, max_rows=MAX_ROWS_ARG,
                 **ICA_ARGUMENTS)
def compare_layers(layers_a: Mapping[str, object], layers_b: Mapping[str, object], *,
                   metric: str = RIGID, fit_fraction: float = 0.5, seed: int = 0,
                   ica_components: float | int | str | None = ICA_COMPONENTS,
                   ica_max_rows: int | None = ICA_MAX_ROWS, ica_max_iter: int = ICA_MAX_ITER,
                   dtype: str | None = None, progress: bool = False,
                   ica_max_components: int | None = ICA_MAX_COMPONENTS, max_rows: int | None = MEASURE_ROWS,
                   measure_params: dict | None = None) -> pd.DataFrame:
    """Compare every layer of model A with every layer of model B: a pandas DataFrame.

    ``layers_a`` and ``layers_b`` map layer names to (rows, features) embeddings of the same
    inputs in the same order (every array in both must have the same number of rows; widths
    may differ). Row ``i``, column ``j`` of the result is :func:`compare` of A's layer ``i``
    with B's layer ``j`` under ``metric``:

    * a family of :data:`FAMILIES` (:data:`RIGID` by default): the held-out error of that family's map from
      A's layer to B's, divided by the B layer's diameter (0 = identical; lower = more alike);
    * "cka": linear CKA on the fit rows (1 = same up to rotation and scale; higher = more
      alike);
    * any other of :data:`MEASURES`: that measure on its rows, as :func:`compare` computes it
      (``max_rows``, ``measure_params``); ``attrs["measure_rows"]`` says which rows.

    Every pair uses the same fit/held-out split (``fit_fraction``, ``seed``), so the numbers
    in a row or column are comparable; each layer's ICA is fitted once and reused, with the
    protocol of ``nearid align`` (FastICA on at most ``ica_max_rows`` fit rows, at most
    ``ica_max_iter`` iterations, at most ``ica_max_components`` components per side). The
    frame's ``attrs`` record the metric, whether lower is better, the split sizes, and any
    numerical fallbacks used (``fallbacks``).
    """
    import pandas as pd

    names = []
    mats = []
    for side, layers in (("A", layers_a), ("B", layers_b)):
        if not isinstance(layers, Mapping) or not layers:
            raise ValueError(f"layers_{side.lower()} must be a non-empty mapping of layer name -> array")
        names.append([str(k) for k in layers])
        mats.append([_matrix(v, f"{side} layer {k!r}") for k, v in layers.items()])
    rows = {f"A layer {k!r}": X.shape[0] for k, X in zip(names[0], mats[0])}
    rows.update({f"B layer {k!r}": X.shape[0] for k, X in zip(names[1], mats[1])})
    if len(set(rows.values())) > 1:
        listing = ", ".join(f"{k}: {v}" for k, v in rows.items())
        raise ValueError(f"every layer must have the same rows (the same inputs in the same order); "
                         f"row counts differ: {listing}")
    if metric in MEASURES and metric != "cka":
        return _measure_grid(metric, names, mats, fit_fraction=fit_fraction, seed=seed, max_rows=max_rows,
                             params=measure_params)
    families = () if metric == "cka" else (metric,)
    settings = EngineSettings(families=families, want_cka=metric == "cka", seed=seed, dtype=dtype,
                              progress=progress,
                              ica=ica_settings(ica_components=ica_components, ica_max_rows=ica_max_rows,
                                               ica_max_iter=ica_max_iter, ica_max_components=ica_max_components))
    grid, split = _engine(mats[0], mats[1], settings, fit_fraction=fit_fraction, names=(names[0], names[1]))
    values = [[(r.cka if metric == "cka" else r.errors[metric]) for r in row] for row in grid]
    df = pd.DataFrame(values, index=pd.Index(names[0], name="A layer"),
                      columns=pd.Index(names[1], name="B layer"))
    df.attrs.update(metric=metric, lower_is_better=metric != "cka", n_fit=split[0], n_eval=split[1],
                    fit_fraction=fit_fraction, seed=seed, dtype=grid[0][0].dtype)
    notes = list(dict.fromkeys(note for row in grid for r in row for note in r.fallbacks))
    if notes:
        df.attrs["fallbacks"] = notes
    return df


def _measure_grid(metric: str, names, mats, *, fit_fraction, seed, max_rows, params) -> pd.DataFrame:
    """compare_layers for a measure the engine does not stream: one measure per pair of layers."""
    import pandas as pd

    width = max(X.shape[1] for X in mats[0] + mats[1])
    fit_idx, eval_idx = _split(mats[0][0].shape[0], width, fit_fraction, seed)
    for side, layers in zip("AB", mats):
        for name, X in zip(names[0 if side == "A" else 1], layers):
            _check_finite(X, f"{side} layer {name!r}", 1 << 12)
    settings = MeasureSettings(seed=seed, max_rows=max_rows, params=params)
    reports = [[evaluate_measures([metric], A, B, fit_idx, eval_idx, settings)[metric] for B in mats[1]]
               for A in mats[0]]
    df = pd.DataFrame([[r.value for r in row] for row in reports], index=pd.Index(names[0], name="A layer"),
                      columns=pd.Index(names[1], name="B layer"))
    df.attrs.update(metric=metric, lower_is_better=not MEASURES[metric].higher_is_better, n_fit=int(fit_idx.size),
                    n_eval=int(eval_idx.size), fit_fraction=fit_fraction, seed=seed, dtype="float64",
                    measure_rows=reports[0][0].rows)
    return df
