"""The summary page's tables, computed from every chapter's results file.

Each chapter saves ``verdicts`` (one record per claim it tests, built with
:func:`nearid.verdicts.claim` and declared in the registry of claims, :mod:`nearid.claims`)
and, for Tables 1-4, ``paper_comparison`` (our number beside the paper's). The summary page
only reads and arranges them, so it cannot disagree with the chapters: change a chapter's
JSON and the page follows on the next build.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

VERDICT_ORDER = ("holds", "inconclusive", "fails")


def chapter_title(key: str) -> str:
    """ "04_alignment" -> "04 alignment" (the chapter number first, as in the table of contents)."""
    number, _, slug = key.partition("_")
    return f"{number} {slug.replace('_', ' ')}"


def load_results(folder: str | os.PathLike, chapters: Iterable[str]) -> dict[str, dict | None]:
    """Each chapter's results JSON from ``folder`` (None for a chapter that has not run)."""
    out = {}
    for key in chapters:
        path = Path(folder) / f"{key}.json"
        out[key] = json.loads(path.read_text()) if path.is_file() else None
    if not any(out.values()):
        raise FileNotFoundError(f"no chapter results in {folder}; run the chapters first (nearid book)")
    return out


CLAIM_COLUMNS = ["chapter", "claim_id", "claim", "kind", "paper", "ours", "low", "high", "verdict", "method", "n",
                 "unit", "min_n", "retraining", "test", "margin", "mde", "ica_converged", "section", "profile"]


def claims_table(results: dict[str, dict | None]) -> pd.DataFrame:
    """One row per decided claim (each chapter's ``verdicts`` and ``hypotheses``), joined to
    its entry in the registry of claims (:mod:`nearid.claims`): kind, test, resampling unit
    and its declared minimum, whether retraining is resampled, and the minimum detectable
    effect at 80% power, and ``ica_converged`` (False where the verdict rests on a FastICA fit
    that did not converge; None where no ICA fit is recorded). A claim the registry lacks is
    kept, as kind "undeclared"."""
    from nearid import claims as registry
    from nearid.book.results import CLAIM_BLOCKS
    from nearid.verdicts import minimum_detectable_effect

    declared = registry.registry()
    rows = []
    for key, res in results.items():
        if not res:
            continue
        for block in CLAIM_BLOCKS:
            for claim_id, rec in (res.get(block) or {}).items():
                entry = declared.get(claim_id)
                rows.append({"chapter": key, "claim_id": claim_id, "claim": rec["claim"],
                             "kind": entry.kind if entry else "undeclared", "paper": rec.get("paper"),
                             "ours": rec["estimate"], "low": rec["low"], "high": rec["high"],
                             "verdict": rec["verdict"], "method": rec.get("method"), "n": rec.get("n"),
                             "unit": entry.unit if entry else None, "min_n": entry.min_n if entry else None,
                             "retraining": entry.retraining if entry else None,
                             "test": entry.test if entry else None, "margin": entry.margin if entry else None,
                             "mde": minimum_detectable_effect(rec["low"], rec["high"], rec.get("n"), rec.get("method")),
                             "ica_converged": rec.get("ica_converged"),
                             "section": rec["section"], "profile": res.get("profile", "?")})
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def comparison_table(results: dict[str, dict | None]) -> pd.DataFrame:
    """Every number of the paper's Tables 1-4 that a chapter measured, ours beside the paper's."""
    rows = [{"chapter": key, **rec} for key, res in results.items() if res
            for rec in (res.get("paper_comparison") or [])]
    df = pd.DataFrame(rows, columns=["chapter", "table", "row", "column", "ours", "paper"])
    return df.dropna(subset=["ours", "paper"]).reset_index(drop=True)


def _number(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, str):
        return v
    return f"{v:.3g}"


def _interval(low, high) -> str:
    if any(x is None or (isinstance(x, float) and not math.isfinite(x)) for x in (low, high)):
        return "–"
    return f"[{low:.3g}, {high:.3g}]"


def kind_order() -> list[str]:
    """The kinds in the order the summary shows them: the paper's claims first."""
    from nearid.claims import KINDS

    return [*KINDS, "undeclared"]


def _n_cell(r) -> str:
    """n, flagged when below the declared minimum or when one training stands behind it."""
    if r.n is None or (isinstance(r.n, float) and not math.isfinite(r.n)):
        return "–"
    flags = []
    if r.min_n is not None and not pd.isna(r.min_n) and r.n < r.min_n:
        flags.append(f"below {int(r.min_n)}")
    if r.retraining == "not resampled":
        flags.append("one training")
    if r.ica_converged is False:
        flags.append("FastICA unconverged")
    return f"{int(r.n)}" + (f" ({', '.join(flags)})" if flags else "")


def test_mark(test: str | None, margin: float | None) -> str:
    """The test in a few characters: "> 0" (superiority), "> -m" (non-inferiority within m),
    "within ±m" (equivalence); "–" for a claim the registry lacks."""
    if not isinstance(test, str):
        return "–"
    m = 0.0 if margin is None or pd.isna(margin) else float(margin)
    return {"superiority": f"> {m:g}", "non_inferiority": f"> −{m:g}", "equivalence": f"within ±{m:g}"}[test]


def to_markdown(claims: pd.DataFrame) -> str:
    """The claims as MyST tables, one per kind (a bold caption with its tally above each);
    each verdict links to the chapter section deciding it."""
    from nearid.claims import KINDS

    blocks = []
    for kind in kind_order():
        sub = claims[claims["kind"] == kind]
        if sub.empty:
            continue
        tally = verdict_counts(sub)
        caption = KINDS.get(kind, "claims missing from the registry")
        blocks.append(f"**{caption[0].upper()}{caption[1:]}**: " + ", ".join(
            f"{k} {word}" for word, k in tally.items() if k) + ".")
        lines = ["| chapter | claim | paper | ours | test | 95% interval | MDE | n | verdict |",
                 "| --- | --- | ---: | ---: | --- | --- | ---: | ---: | --- |"]
        for r in sub.itertuples():
            claim = str(r.claim).replace("|", "\\|")
            lines.append(f"| {chapter_title(r.chapter)} | {claim} | {_number(r.paper)} | {_number(r.ours)} | "
                         f"{test_mark(r.test, r.margin)} | {_interval(r.low, r.high)} | {_number(r.mde)} | "
                         f"{_n_cell(r)} | {{ref}}`{r.verdict} <{r.section}>` |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def verdict_counts(claims: pd.DataFrame) -> dict[str, int]:
    """How many claims hold, are inconclusive, fail."""
    counts = claims["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICT_ORDER}


def counts_by_kind(claims: pd.DataFrame) -> dict[str, dict[str, int]]:
    """:func:`verdict_counts` for each kind present, in :func:`kind_order`."""
    return {k: verdict_counts(claims[claims["kind"] == k]) for k in kind_order() if (claims["kind"] == k).any()}


def paper_claims(claims: pd.DataFrame) -> pd.DataFrame:
    """The rows that count as the paper's claims: its claims in words and its tables' orderings
    (not ties it prints as 0, checks of our method or our own hypotheses)."""
    from nearid.claims import COUNTED_KINDS

    return claims[claims["kind"].isin(COUNTED_KINDS)]


def units_markdown(claims: pd.DataFrame) -> str:
    """Per chapter and resampling unit (from the registry): how many verdicts rest on it, their
    n and their minimum detectable effects (range), as a MyST table: what each chapter's
    intervals resample, and how much they can see."""
    def span(values, fmt) -> str:
        v = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
        if v.empty:
            return "–"
        lo, hi = v.min(), v.max()
        return fmt(lo) if lo == hi else f"{fmt(lo)} to {fmt(hi)}"

    lines = ["| chapter | resampling unit | verdicts | n | MDE |", "| --- | --- | ---: | ---: | ---: |"]
    for (chapter, unit), g in claims.groupby(["chapter", claims["unit"].fillna("(not in the registry)")],
                                             sort=False):
        lines.append(f"| {chapter_title(chapter)} | {str(unit).replace('|', '/')} | {len(g)} | "
                     f"{span(g.n, lambda x: f'{int(x)}')} | {span(g.mde, lambda x: f'{x:.3g}')} |")
    return "\n".join(lines)


def history_markdown(history: pd.DataFrame) -> str:
    """The appendix's table of earlier protocols (:func:`nearid.claims.history_rows` plus
    ``verdict_now``) as a MyST table narrow enough for the page: claim, when it changed, the
    protocol then and its verdict, and today's verdict (today's protocol is in the chapter)."""
    lines = ["| claim | changed in | protocol then | verdict then | verdict now |",
             "| --- | --- | --- | --- | --- |"]
    for r in history.itertuples():
        lines.append(f"| `{r.claim_id}` ({chapter_title(r.chapter)}) | {r.until} | {r.protocol_then} | "
                     f"{r.verdict_then} | {r.verdict_now} |")
    return "\n".join(lines)
