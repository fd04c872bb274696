"""The summary page's tables, computed from every chapter's results file.

Each chapter saves ``verdicts`` (one record per claim of the paper it tests, built with
:func:`nearid.verdicts.claim`) and, for Tables 1-4, ``paper_comparison`` (our number beside
the paper's). The summary page only reads and arranges them, so it cannot disagree with the
chapters: change a chapter's JSON and the page follows on the next build.
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


def claims_table(results: dict[str, dict | None]) -> pd.DataFrame:
    """One row per claim: chapter, claim id and words, paper's number, ours, interval, verdict,
    the section that decides it, and the profile the chapter ran with."""
    rows = []
    for key, res in results.items():
        if not res:
            continue
        for claim_id, rec in (res.get("verdicts") or {}).items():
            rows.append({"chapter": key, "claim_id": claim_id, "claim": rec["claim"], "paper": rec.get("paper"),
                         "ours": rec["estimate"], "low": rec["low"], "high": rec["high"],
                         "verdict": rec["verdict"], "method": rec.get("method"), "n": rec.get("n"),
                         "section": rec["section"], "profile": res.get("profile", "?")})
    return pd.DataFrame(rows, columns=["chapter", "claim_id", "claim", "paper", "ours", "low", "high", "verdict",
                                       "method", "n", "section", "profile"])


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


def to_markdown(claims: pd.DataFrame) -> str:
    """The claims as a MyST table; each verdict links to the chapter section deciding it."""
    lines = ["| chapter | claim | paper | ours | 95% interval | verdict | profile |",
             "| --- | --- | ---: | ---: | --- | --- | --- |"]
    for r in claims.itertuples():
        claim = str(r.claim).replace("|", "\\|")
        lines.append(f"| {chapter_title(r.chapter)} | {claim} | {_number(r.paper)} | {_number(r.ours)} | "
                     f"{_interval(r.low, r.high)} | {{ref}}`{r.verdict} <{r.section}>` | {r.profile} |")
    return "\n".join(lines)


def verdict_counts(claims: pd.DataFrame) -> dict[str, int]:
    """How many claims hold, are inconclusive, fail."""
    counts = claims["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICT_ORDER}
