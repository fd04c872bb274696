"""What a comparison returns and how it is printed: :class:`AlignmentResult` and the text table.

Kept apart from the estimators (:mod:`nearid.align.families`) and from the engine that
fills it (:mod:`nearid.align.engine`), so that both the streaming path and the float64
reference path build the same record, and ``nearid align`` prints it the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from nearid.align.measures import MEASURES
from nearid.align.protocol import EFFICIENCY_MIN_GAP, FAMILY_INFO
from nearid.ica_protocol import LOW_VARIANCE


@dataclass
class AlignmentResult:
    """Table 1 for one pair of embeddings: what :func:`nearid.align.compare` measured.

    ``errors[family]`` is the mean held-out l2 error of the family's map from A to B divided
    by B's diameter; ``row_errors[family]`` the same per evaluation row (for intervals);
    ``cka`` linear CKA on the fit rows; ``ica_components`` and ``ica_variance`` the number
    of whitened components each side kept and the share of its fit rows' variance they
    hold; ``ica_converged`` whether each side's FastICA converged; ``dtype`` the precision
    the cross-products were computed in; ``seconds`` the wall time of the comparison and
    ``timings`` its split by stage (for a layer grid: the whole grid's).
    ``ica_max_components`` is the cap on components that was applied (None = none) and
    ``ica_components_by_rule`` what the variance rule asked for before it (the cap bound
    on a side where the two differ); ``fallbacks`` lists the numerical fallbacks used
    (a decomposition retried with another LAPACK driver, FastICA refitted; empty = none).
    ``measures`` holds every similarity measure asked for (linear CKA as "cka", the same
    number as ``cka``) and ``measure_rows`` the rows each was computed on, in words;
    ``intervals`` (measures and errors) and ``baselines`` (measures: mean, low and high
    with B's rows shuffled) are filled when intervals were asked for
    (:mod:`nearid.align.intervals`); ``threads`` is the BLAS thread count the command ran
    with (None from Python: whatever the caller set).
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
    ica_converged: tuple[bool, bool] | None = None
    dtype: str = "float64"
    seconds: float | None = None
    timings: dict[str, float] = field(default_factory=dict, repr=False)
    ica_max_components: int | None = None
    ica_components_by_rule: tuple[int, int] | None = None
    fallbacks: list[str] = field(default_factory=list)
    measures: dict[str, float] = field(default_factory=dict)
    measure_rows: dict[str, str] = field(default_factory=dict)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    baselines: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    threads: int | None = None

    @property
    def ica_cap_bound(self) -> tuple[bool, bool] | None:
        """Whether ``ica_max_components`` lowered each side's number of components."""
        if self.ica_components is None or self.ica_components_by_rule is None or self.ica_max_components is None:
            return None
        return tuple(bool(k < r) for k, r in zip(self.ica_components, self.ica_components_by_rule))

    def to_dict(self) -> dict:
        """Flat numbers (no per-row arrays): one entry per family, then the rest. The cap's
        keys (``ica_max_components``, ``ica_components_by_rule``, ``ica_cap_bound``) appear
        when a cap was applied, ``fallbacks`` when one was used. Each measure asked for has
        its own key (``measures`` lists them, ``measure_rows`` says on which rows; both only
        when a measure other than linear CKA was asked for), and
        ``intervals`` ({name: [low, high]}) and ``baselines`` ({name: {mean, low, high}})
        appear when intervals were computed."""
        out: dict = dict(self.errors)
        out.update(ica_efficiency=self.ica_efficiency, cka=self.cka, n_fit=self.n_fit,
                   n_eval=self.n_eval, dim_a=self.dim_a, dim_b=self.dim_b)
        if set(self.measures) - {"cka"}:  # (linear CKA alone: the record the chapters have always kept)
            out.update(self.measures)
            out.update(measures=list(self.measures), measure_rows=dict(self.measure_rows))
        if self.intervals:
            out.update(intervals={k: None if v is None else list(v) for k, v in self.intervals.items()},
                       baselines={k: None if v is None else dict(zip(("mean", "low", "high"), v))
                                  for k, v in self.baselines.items()})
        if self.threads is not None:
            out.update(threads=self.threads)
        if self.ica_components is not None:
            out.update(ica_components=list(self.ica_components), ica_variance=list(self.ica_variance))
            if self.ica_max_components is not None:
                out.update(ica_max_components=self.ica_max_components,
                           ica_components_by_rule=list(self.ica_components_by_rule),
                           ica_cap_bound=list(self.ica_cap_bound))
        if self.fallbacks:
            out.update(fallbacks=list(self.fallbacks))
        return out

    def __str__(self) -> str:
        return format_alignment_table(self.to_dict())

    def __repr__(self) -> str:
        def num(v):
            return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

        errs = ", ".join(f"{k}={num(v)}" for k, v in self.errors.items())
        lines = [f"AlignmentResult(A {self.dim_a}-d -> B {self.dim_b}-d; {self.n_fit} fit rows, "
                 f"{self.n_eval} held-out rows; {self.dtype})",
                 f"  errors (lower = more alike): {errs}" if errs else "  errors: none computed",
                 f"  ica_efficiency={num(self.ica_efficiency)}, cka={num(self.cka)}"]
        others = {k: v for k, v in self.measures.items() if k != "cka"}
        if others:
            lines.append("  measures: " + ", ".join(f"{k}={num(v)}" for k, v in others.items()))
        if self.ica_components is not None:
            lines.append(f"  ica_components={self.ica_components}, ica_variance=("
                         f"{self.ica_variance[0]:.2f}, {self.ica_variance[1]:.2f})")
            if self.ica_max_components is not None:
                lines.append(f"  ica_max_components={self.ica_max_components}, ica_components_by_rule="
                             f"{self.ica_components_by_rule}")
        lines += [f"  fallback: {note}" for note in self.fallbacks]
        return "\n".join(lines)



def format_alignment_table(res: dict) -> str:
    """The text table ``nearid align`` prints: one line of explanation per family.

    A warning line follows when a side's whitened components hold less than half of its
    variance (the ICA row then sees little of that side)."""
    def num(v):
        return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

    eff = res.get("ica_efficiency")
    eff_s = "n/a" if eff is None or math.isnan(eff) else f"{100 * eff:.0f}%"
    eff_note = "(perm - ica) / (perm - rigid)"
    if eff_s == "n/a" and all(isinstance(res.get(f), float) for f in ("permutation", "rigid")):
        if abs(res["permutation"] - res["rigid"]) < EFFICIENCY_MIN_GAP:
            eff_note += (f"; not defined: perm and rigid differ by less than {EFFICIENCY_MIN_GAP:.1e} "
                         "(numerical noise), there is no gap to close")
    notes = {name: family.note for name, family in FAMILY_INFO.items()}
    intervals = res.get("intervals") or {}

    def val(key):
        low_high = intervals.get(key)
        text = num(res.get(key))
        return text if not low_high else f"{text} [{num(low_high[0])}, {num(low_high[1])}]"

    rows = [(fam, val(fam), note) for fam, note in notes.items() if fam in res]
    if all(f in res for f in ("permutation", "rigid", "ica")):
        rows.append(("ica efficiency", eff_s, eff_note))
    where = res.get("measure_rows") or {}
    names = res.get("measures")
    if names is None:  # a dict from before measures were selectable: linear CKA on the fit rows
        names, where = ["cka"], {"cka": f"on the {res['n_fit']} fit rows"}
    baselines = res.get("baselines") or {}
    for name in names:
        spec = MEASURES[name]
        note = f"{'similarity' if spec.higher_is_better else 'distance'}, {num(spec.identical)} = same up to " \
               f"{spec.invariant}; {where.get(name, 'on the fit rows')}"
        null = baselines.get(name)
        if null:
            note += f"; rows shuffled: {num(null['mean'])} [{num(null['low'])}, {num(null['high'])}]"
        rows.append((spec.label, val(name), note))
    fitted_any = any(f in res for f in notes)
    head = (f"A: {res['dim_a']}-d, B: {res['dim_b']}-d; "
            + (f"fitted on {res['n_fit']} rows, evaluated on {res['n_eval']} held-out rows\n" if fitted_any else
               f"{res['n_fit']} fit rows, {res['n_eval']} held-out rows\n")
            + ("error = mean ||h(a) - b|| / diameter(B)   (0 = identical, lower is better)\n" if fitted_any else "")
            + ("[low, high]: 95% interval from half-samples of the rows; rows shuffled: the measure "
               "when A and B are unrelated (mean [2.5%, 97.5%])\n" if intervals else ""))
    if not rows:
        return head + "nothing was asked for"
    width = max(len(r[0]) for r in rows)
    vwidth = max(len(r[1]) for r in rows)
    body = "\n".join(f"{name:<{width}}  {v:>{vwidth}}   {note}" for name, v, note in rows)
    comps, var = res.get("ica_components"), res.get("ica_variance")
    if comps is not None and var is not None:
        body += (f"\nICA whitened components: A {comps[0]} ({100 * var[0]:.0f}% of its variance), "
                 f"B {comps[1]} ({100 * var[1]:.0f}%)")
        cap, by_rule = res.get("ica_max_components"), res.get("ica_components_by_rule")
        if cap is not None and by_rule is not None:
            bound = [side for side, k, r in zip("AB", comps, by_rule) if k < r]
            if bound:
                body += (f"; capped at {cap} per side (the rule asked for A {by_rule[0]}, B {by_rule[1]}; "
                         "--ica-max-components)")
            else:
                body += f"; cap {cap} per side, not reached"
        for side, k, v in (("A", comps[0], var[0]), ("B", comps[1], var[1])):
            if v is not None and v < LOW_VARIANCE:
                body += (f"\nwarning: {side}'s {k} whitened components hold only {100 * v:.0f}% of its "
                         "variance; the ICA row sees little of it (raise --ica-components)")
    converged = res.get("ica_converged")
    if converged is not None:
        for side, ok in zip("AB", converged):
            if not ok:
                body += (f"\nnote: FastICA stopped at its iteration cap on {side}, undamped and stabilised; its "
                         "components may be rotated away from the independent axes")
    for note in res.get("fallbacks") or ():
        body += f"\nnumerical fallback: {note}"
    return head + body

