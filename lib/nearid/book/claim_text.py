"""The summary's answer in words: one short paragraph per claim of the paper, grouped by the
part of the paper that makes it, each saying what the paper says, what we find, why we read
it so, and what would change our mind.

Every word that depends on a result is computed from the claims table
(:func:`nearid.book.scorecard.claims_table`): the outcome (:data:`scorecard.OUTCOMES`), the
estimate and interval rounded as the tables round them (:func:`scorecard.format_estimate`),
the units an interval rests on, the power calculation. Nothing here is typed per claim, so
a rebuild with other numbers rewrites the paragraphs.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from nearid.book import scorecard
from nearid.standins import labelled

# The part of the paper each chapter tests, as a reader would look it up there.
PAPER_PARTS = {
    "01_definitions": "Definitions: ICA recovers independent sources",
    "02_isometric_dgp": "The isometric toy data-generating process",
    "03_bilipschitz": "Bi-Lipschitz decoders on MNIST",
    "04_alignment": "Cross-model alignment",
    "05_disentanglement": "Disentanglement benchmarks",
    "06_cell_microscopy": "Cell microscopy",
}

# Why an interval reads as it does, per outcome (the bound is the claim's, in the estimate's units).
WHY = {
    "holds": "the whole 95% interval lies {side} {bound}",
    "fails": "the whole 95% interval lies {other} {bound}",
    "smaller than the paper's": "the interval holds {bound} but not the paper's {paper}: whatever the effect is, "
                                "it is smaller than the paper's",
    "larger than the paper's": "the interval holds {bound} and lies wholly above the paper's {paper}",
    "underpowered": "the interval holds both {bound} and the paper's number: {n} {units} cannot tell them apart",
    "not decided": "the fit behind it is a FastICA run that stopped at its iteration cap, and an iterative fit "
                   "that did not converge is evidence neither way",
}


def _bound(r) -> str:
    m = 0.0 if scorecard._missing(r.margin) else float(r.margin)
    if r.test == "equivalence":
        return f"±{m:g}"
    return f"−{m:g}" if r.test == "non_inferiority" and m else f"{m:g}"


def unit_words(unit) -> str:
    """"independently trained replicates of the pair (each its mean ...), Student's t" ->
    "independently trained replicates of the pair": what n counts, without the method."""
    text = "units" if scorecard._missing(unit) else str(unit)
    return text.split(",")[0].split(" (")[0].strip() or "units"


def change_mind(r) -> str:
    """What result would reverse our reading of one claim: a converged fit for an undecided
    claim, the power calculation's n for an underpowered one, the paper's own models for a
    decided one (ours are stand-ins)."""
    units = unit_words(r.unit)
    if r.outcome == "not decided":
        return "a FastICA fit that converges on the same embeddings (more iterations or more fit rows)"
    if r.outcome == "underpowered":
        need = r.units_needed
        if scorecard._missing(need) or not math.isfinite(float(need)):
            return f"more {units} than the {int(r.n)} we have"
        return f"about {int(need):,} {units} (the power calculation for the paper's own difference; we have {int(r.n)})"
    if r.outcome in ("smaller than the paper's", "larger than the paper's"):
        return ("the same test on models or data nearer the paper's (the `full` profile) giving an interval "
                "that holds the paper's number")
    if r.test == "equivalence":
        side = "reaches outside" if r.outcome == "holds" else "lies inside"
    else:
        side = "reaches" if r.outcome == "holds" else "crosses back over"
    return (f"an interval over more {units}, or on the paper's own models instead of our stand-ins, "
            f"that {side} {_bound(r)}")


def finding(r, facet: str | None = None) -> str:
    """"ResNet: **fails** (ours, ResNet-18 seed 0 -> seed 1: −0.016 [−0.030, −0.001], paper
    0.07; n = 5)": the outcome, then what our number measures (the chapter's label for it:
    our stand-in models, or the difference taken) and its interval."""
    est, ci = scorecard.format_estimate(r.ours, r.low, r.high)
    paper = "" if scorecard._missing(r.paper) else f", paper {scorecard._number(r.paper)}"
    n = "" if scorecard._missing(r.n) else f"; n = {int(r.n)}"
    head = f"{labelled(facet)}: " if facet else ""
    label = getattr(r, "ours_label", None)
    ours = "ours" if scorecard._missing(label) else f"ours, {label}:"
    return f"{head}**{r.outcome}** ({ours} {est} {ci}{paper}{n})"


def _reasons(rows: list, facets: list[str | None]) -> str:
    """Each outcome's reason once, naming the subjects it applies to when there are several."""
    said = []
    by_outcome: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_outcome.setdefault(r.outcome, []).append(i)
    for outcome, idx in by_outcome.items():
        r = rows[idx[0]]
        eq = r.test == "equivalence"
        text = WHY[outcome].format(bound=_bound(r), paper=scorecard._number(r.paper),
                                   side="inside" if eq else "on the claim's side of",
                                   other="outside" if eq else "on the other side of",
                                   n="–" if scorecard._missing(r.n) else int(r.n), units=unit_words(r.unit))
        who = [facets[i] for i in idx if facets[i]]
        said.append(f"for {', '.join(who)}, {text}" if who and len(rows) > 1 else text)
    caveats = []
    if any(r.retraining == "not resampled" for r in rows):
        caveats.append("the interval is over evaluation units of one trained model, so it leaves out the "
                       "variance of retraining")
    if any(not scorecard._missing(r.min_n) and not scorecard._missing(r.n) and r.n < r.min_n for r in rows):
        caveats.append("it rests on fewer units than the registry's declared minimum")
    return "; ".join(said + caveats)


def paragraph(claims: pd.DataFrame, statement) -> str:
    """One statement (a row of :func:`scorecard.statements`) as a paragraph: the paper's words
    and where it says them, our finding per subject, why, and what would change our mind."""
    from nearid import claims as registry

    rows = [claims.iloc[i] for i in statement.rows]
    facets = list(statement.facets) or [None]
    entry = registry.registry().get(rows[0].claim_id)
    words = (entry.paper or {}).get("words") if entry else None
    where = statement.ref or "the paper"
    says = f"*{where}*: {words.rstrip('.')}." if words else f"*{where}*."
    tested = re.sub(r"^(Figure|Table) [A-Z]?\.?\d+[^:]*: ", "", str(statement.text))  # the paper's place is said above
    found = "; ".join(finding(r, f) for r, f in zip(rows, facets))
    minds = "; or ".join(dict.fromkeys(change_mind(r) for r in rows))
    return (f"{says} We test that {tested} ({{ref}}`its test <{rows[0].section}>`). "
            f"We find {found}. Why: {_reasons(rows, facets)}. What would change our mind: {minds}.")


def claims_markdown(claims: pd.DataFrame) -> str:
    """Every counted claim of the paper (:data:`nearid.claims.COUNTED_KINDS`) as paragraphs
    under one bold title per part of the paper (:data:`PAPER_PARTS`), in the chapters' order;
    the empty string when no counted claim has a result."""
    from nearid.claims import COUNTED_KINDS

    counted = claims[claims["kind"].isin(COUNTED_KINDS)]
    if counted.empty:
        return ""
    stmts = scorecard.statements(counted)
    blocks = []
    for chapter in dict.fromkeys(stmts["chapter"]):
        mine = stmts[stmts["chapter"] == chapter]
        refs = ", ".join(dict.fromkeys(r for r in mine["ref"] if r))
        title = PAPER_PARTS.get(chapter, scorecard.chapter_title(chapter))
        # bold, not a heading: a heading inside a cell's output is not a section of the page
        blocks.append(f"**{title}" + (f" ({refs})" if refs else "") + "**")
        blocks += [paragraph(counted, s) for s in mine.itertuples()]
    return "\n\n".join(blocks)


def _counted_words(counts: dict[str, int]) -> str:
    """{"holds": 4, "fails": 0, ...} -> "4 hold, 1 is inconclusive": the non-zero ones, in order."""
    verbs = {"holds": ("holds", "hold"), "fails": ("fails", "fail"),
             "inconclusive": ("is inconclusive", "are inconclusive"),
             "not decided": ("is not decided (its FastICA fit settled by neither route)",
                             "are not decided (their FastICA fits settled by neither route)")}
    said = [f"{k} {verbs[word][k != 1]}" for word, k in counts.items() if k]
    if not said:
        return "none"
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def tally_text(chapter: str, records: dict, profile: str) -> str:
    """A chapter's key-takeaway line, from the claim records it decides on its first page:
    "of the paper's 5 claims decided here, 4 hold and 1 is inconclusive" (the headline's
    outcomes: an inconclusive claim is one word here, a claim on an unconverged FastICA fit
    "not decided"); for a chapter that decides none of the paper's claims, its checks of our
    method."""
    claims = scorecard.claims_table({chapter: {"profile": profile, "verdicts": dict(records)}})
    counted = scorecard.paper_claims(claims)
    if counted.empty:
        checks = scorecard.verdict_counts(claims)
        return (f"this chapter decides no claim of the paper; of its {len(claims)} checks of our method, "
                f"{_counted_words(checks)}")
    outcomes = scorecard.outcome_counts(counted)
    inconclusive = sum(k for o, k in outcomes.items() if scorecard.OUTCOME_VERDICT[o] == "inconclusive")
    counts = {"holds": outcomes["holds"], "fails": outcomes["fails"], "inconclusive": inconclusive,
              "not decided": outcomes["not decided"]}
    return f"of the paper's {len(counted)} claims decided here, {_counted_words(counts)}"
