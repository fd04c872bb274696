"""The summary page's tables, computed from every chapter's results file.

Each chapter saves ``verdicts`` (one record per claim it tests, built with
:func:`nearid.verdicts.claim` and declared in the registry of claims, :mod:`nearid.claims`)
and, for Tables 1-4, ``paper_comparison`` (our number beside the paper's). The summary page
only reads and arranges them, so it cannot disagree with the chapters: change a chapter's
JSON and the page follows on the next build.

The page shows each verdict as a chip (glyph on a colour-blind-safe colour) that links to
the chapter section deciding it, folds a claim tested per model pair or per dataset into one
statement (:func:`statements`), and rounds every estimate and interval to the decimal its
interval's width sets (:func:`format_estimate`).
"""

from __future__ import annotations

import json
import math
import os
import re
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


def of_profile(results: dict[str, dict | None], profile: str) -> tuple[dict[str, dict | None], dict[str, str]]:
    """The results executed with ``profile`` (a chapter executed with another profile set to
    None, like one that has not run) and ``{chapter: the profile it was executed with}`` of
    those left out: a summary must never show one profile's numbers under another's name
    (`nearid run 01 --profile quick`, then `nearid run 07 --profile smoke`). Raises
    FileNotFoundError, naming what it found, when no chapter of ``profile`` is left."""
    kept: dict[str, dict | None] = {}
    other: dict[str, str] = {}
    for key, res in results.items():
        if res is not None and res.get("profile") != profile:
            other[key] = str(res.get("profile"))
            res = None
        kept[key] = res
    if not any(kept.values()):
        found = "; ".join(f"{k} was executed with the {p} profile" for k, p in other.items())
        raise FileNotFoundError(f"no chapter results of the {profile} profile to summarise ({found or 'none at all'}); "
                                f"run `nearid book --profile {profile}`")
    return kept, other


def missing_text(results: dict[str, dict | None], other: dict[str, str], profile: str) -> str:
    """The summary's sentence on the chapters it does not show: "none", or each one, and for a
    chapter executed with another profile, which one and how to rerun it in ``profile``."""
    said = []
    for key, res in results.items():
        if key in other:
            said.append(f"{key} (executed with the {other[key]} profile, not {profile}: left out; "
                        f"`nearid run {key[:2]} --profile {profile}` runs it)")
        elif res is None:
            said.append(key)
    return ", ".join(said) or "none"


CLAIM_COLUMNS = ["chapter", "claim_id", "claim", "ours_label", "kind", "paper", "ours", "low", "high", "verdict",
                 "method", "n", "unit", "min_n", "retraining", "test", "margin", "mde", "ica_converged", "section",
                 "profile", "outcome", "units_needed", "verdict_fdr"]

# What a counted claim's interval says, in the headline's words (issue 35): the raw verdict
# split where "inconclusive" hides two different findings, and a verdict that rests on an
# iterative fit that did not converge set apart instead of counted.
OUTCOMES = {
    "holds": "the interval lies on the claim's side of its bound",
    "fails": "the interval lies on the other side",
    "smaller than the paper's": "inconclusive, and the interval excludes the paper's own difference: "
                                "the effect is smaller than the paper's, the claim's bound cannot be told apart",
    "larger than the paper's": "inconclusive, and the whole interval lies above the paper's own difference",
    "underpowered": "inconclusive, and the interval holds both the bound and the paper's difference "
                    "(or the paper prints no number): too few units to tell",
    "not decided": "it rests on a FastICA fit that converged by neither route (undamped, then stabilised): "
                   "no verdict, not counted",
}


def outcome(verdict: str, low, high, paper, ica_converged) -> str:
    """The headline's word for one counted claim (:data:`OUTCOMES`): its verdict, with
    "inconclusive" split by whether the interval excludes the paper's own number for the same
    difference (``paper``, in the estimate's units), and "not decided" where the verdict rests
    on an unconverged FastICA fit (``ica_converged`` False), whatever its interval says."""
    if ica_converged is False:
        return "not decided"
    if verdict in ("holds", "fails"):
        return verdict
    if _missing(paper) or isinstance(paper, str) or _missing(low) or _missing(high):
        return "underpowered"
    if float(paper) > float(high):
        return "smaller than the paper's"
    if float(paper) < float(low):
        return "larger than the paper's"
    return "underpowered"


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
                             "ours_label": rec.get("ours_label"),
                             "kind": entry.kind if entry else "undeclared", "paper": rec.get("paper"),
                             "ours": rec["estimate"], "low": rec["low"], "high": rec["high"],
                             "verdict": rec["verdict"], "method": rec.get("method"), "n": rec.get("n"),
                             "unit": entry.unit if entry else None, "min_n": entry.min_n if entry else None,
                             "retraining": entry.retraining if entry else None,
                             "test": entry.test if entry else None, "margin": entry.margin if entry else None,
                             "mde": minimum_detectable_effect(rec["low"], rec["high"], rec.get("n"), rec.get("method")),
                             "ica_converged": rec.get("ica_converged"),
                             "section": rec["section"], "profile": res.get("profile", "?"),
                             "outcome": (outcome(rec["verdict"], rec["low"], rec["high"], rec.get("paper"),
                                                 rec.get("ica_converged")) if entry and entry.counts_as_paper_claim
                                         else None),
                             "units_needed": (_units_needed(rec, entry) if entry and entry.counts_as_paper_claim
                                              else float("nan")),
                             "verdict_fdr": None})
    out = pd.DataFrame(rows, columns=CLAIM_COLUMNS)
    out["outcome"] = out["outcome"].astype(object).where(out["outcome"].notna(), None)
    return with_fdr_verdicts(out)


def _units_needed(rec: dict, entry) -> float:
    """Units needed to detect the paper's own difference beyond the claim's bound with 80%
    power (:func:`nearid.verdicts.units_for_power`): the power calculation a minimum n should
    come from. NaN where the paper prints no number or the test is equivalence (a tie)."""
    from nearid.verdicts import units_for_power

    paper = rec.get("paper")
    if entry.test == "equivalence" or _missing(paper) or isinstance(paper, str):
        return float("nan")
    bound = -entry.margin if entry.test == "non_inferiority" else entry.margin
    return units_for_power(rec["low"], rec["high"], rec.get("n"), rec.get("method"), float(paper) - bound)


def power_markdown(claims: pd.DataFrame) -> str:
    """The counted claims with a power calculation, as a markdown table narrow enough for a
    phone: the units each interval rests on now (their kind is in :func:`units_markdown`'s
    table), how many it would need to detect the paper's own difference with 80% power at the
    spread we measured, and the minimum the registry declares (from the same calculation on a
    pilot run: ``benchmarks/power_calculation.py``)."""
    rows = claims[claims["units_needed"].notna()]
    lines = ["| claim | n now | n for the paper's effect | declared minimum |", "| --- | --: | --: | --: |"]
    for r in rows.itertuples():
        need = int(r.units_needed)
        shown = f"more than {need - 1:,}" if need > 10_000 else f"{need:,}"
        least = "–" if _missing(r.min_n) else f"{int(r.min_n):,}"
        lines.append(f"| `{r.claim_id}` ({chapter_title(r.chapter)}) | {int(r.n)} | {shown} | {least} |")
    return "\n".join(lines)


def with_fdr_verdicts(claims: pd.DataFrame) -> pd.DataFrame:
    """``claims`` with ``verdict_fdr``: each counted claim's verdict when the false discovery
    rate is controlled across all counted, decided claims at 5% (Benjamini-Hochberg,
    :func:`nearid.verdicts.fdr_verdicts`), None for rows not counted and for claims "not
    decided" (:func:`outcome`), which are not in the family. Forty-odd claims each tested at
    95% hold or fail by chance a few times; this column does not count those."""
    from nearid.claims import COUNTED_KINDS
    from nearid.verdicts import fdr_verdicts

    out = claims.copy()
    counted = out.index[out["kind"].isin(COUNTED_KINDS) & (out["outcome"] != "not decided")]
    records = {i: {k: out.at[i, k] for k in ("low", "high", "n", "method", "test", "margin")} for i in counted}
    for k, rec in records.items():  # pandas gives NaN and numpy numbers: back to plain values
        rec["n"] = None if pd.isna(rec["n"]) else int(rec["n"])
        rec["low"] = None if pd.isna(rec["low"]) else float(rec["low"])
        rec["high"] = None if pd.isna(rec["high"]) else float(rec["high"])
    out["verdict_fdr"] = pd.Series(fdr_verdicts(records), dtype=object).reindex(out.index)
    out["verdict_fdr"] = out["verdict_fdr"].astype(object).where(out["verdict_fdr"].notna(), None)
    return out


def comparison_table(results: dict[str, dict | None]) -> pd.DataFrame:
    """Every number of the paper's Tables 1-4 that a chapter measured, ours beside the paper's."""
    rows = [{"chapter": key, **rec} for key, res in results.items() if res
            for rec in (res.get("paper_comparison") or [])]
    df = pd.DataFrame(rows, columns=["chapter", "table", "row", "column", "ours", "paper"])
    return df.dropna(subset=["ours", "paper"]).reset_index(drop=True)


def _missing(v) -> bool:
    """None or NaN (an infinite end of an interval is a value: an interval from one unit)."""
    return v is None or (not isinstance(v, str) and bool(pd.isna(v)))


def _number(v) -> str:
    """A number as the paper prints it (three significant digits, no trailing zeros)."""
    if _missing(v):
        return "–"
    if isinstance(v, str):
        return v
    return f"{v:.3g}"


# ---------------------------------------------------------------------- numbers by their interval
def interval_decimals(low, high) -> int | None:
    """The decimal place an estimate and its interval are rounded to: one below the leading
    digit of the interval's width (width 0.014 -> 3 decimals, 0.6 -> 2, 5.4 -> 1, 30 -> 0,
    300 -> -1, i.e. tens). Digits beyond it are noise the interval already declares. None
    where the interval has no finite, positive width (then numbers keep three significant
    digits)."""
    if _missing(low) or _missing(high):
        return None
    width = float(high) - float(low)
    if not math.isfinite(width) or width <= 0:
        return None
    return 1 - math.floor(math.log10(width))


SCIENTIFIC_BEYOND = 4  # more decimals than this: write mantissa and exponent instead


def format_at(value, decimals: int | None) -> str:
    """``value`` rounded to ``decimals`` (:func:`interval_decimals`): fixed point up to
    :data:`SCIENTIFIC_BEYOND` decimals ("0.032", "1.5", "30", "300"), scientific beyond, with
    as many mantissa digits as reach the same decimal place ("9e-6", "-1.2e-5"); "–" for a
    missing value, three significant digits where ``decimals`` is None."""
    if _missing(value):
        return "–"
    v = float(value)
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    if decimals is None:
        return f"{v:.3g}"
    rounded = round(v, decimals)
    if rounded == 0:
        return f"{0:.{decimals}f}" if 0 < decimals <= SCIENTIFIC_BEYOND else "0"
    if decimals <= 0:
        return f"{rounded:.0f}"
    if decimals <= SCIENTIFIC_BEYOND:
        return f"{rounded:.{decimals}f}"
    exponent = math.floor(math.log10(abs(rounded)))
    mantissa, _, power = f"{rounded:.{max(exponent + decimals, 0)}e}".partition("e")
    return f"{mantissa}e{int(power)}"


def format_estimate(estimate, low, high) -> tuple[str, str]:
    """``("0.032", "[0.025, 0.039]")``: the estimate and its 95% interval, all three rounded to
    the decimal place the interval's width sets (:func:`interval_decimals`)."""
    d = interval_decimals(low, high)
    if _missing(low) or _missing(high):
        return format_at(estimate, d), "–"
    return format_at(estimate, d), f"[{format_at(low, d)}, {format_at(high, d)}]"


def kind_order() -> list[str]:
    """The kinds in the order the summary shows them: the paper's claims first."""
    from nearid.claims import KINDS

    return [*KINDS, "undeclared"]


def _n_cell(r) -> str:
    """n, flagged when below the declared minimum or when one training stands behind it."""
    if _missing(r.n):
        return "–"
    flags = []
    if r.min_n is not None and not pd.isna(r.min_n) and r.n < r.min_n:
        flags.append(f"below {int(r.min_n)}")
    if r.retraining == "not resampled":
        flags.append("one training")
    if r.ica_converged is False:
        flags.append("FastICA unconverged: not decided")
    return f"{int(r.n)}" + (f" ({', '.join(flags)})" if flags else "")


def test_mark(test: str | None, margin: float | None) -> str:
    """The test in a few characters: "> 0" (superiority), "> -m" (non-inferiority within m),
    "within ±m" (equivalence); "–" for a claim the registry lacks."""
    if not isinstance(test, str):
        return "–"
    m = 0.0 if margin is None or pd.isna(margin) else float(margin)
    return {"superiority": f"> {m:g}", "non_inferiority": f"> −{m:g}", "equivalence": f"within ±{m:g}"}[test]


# ---------------------------------------------------------------------- statements: claims folded
# A claim decided once per model pair ("Pythia-160M-0 -> Pythia-160M-1: ...") or per dataset
# ("... (Falcor3D)") is one statement of the paper tested on several subjects: the summary
# shows it once, with one verdict per subject, so a chapter that splits finely does not
# fill the page.
_PAIR_FACET = re.compile(r"^(?P<facet>[^:]+? -> [^:]+?): (?P<base>.+)$")
_TRAILING_FACET = re.compile(r"^(?P<base>.+?) \((?P<facet>[^()]+)\)$")


def split_facet(text: str) -> tuple[str, str | None]:
    """("the statement", "the subject it is tested on") for a claim's text: a leading model
    pair "A -> B: " or a trailing parenthesis "(Shapes3D)"; (text, None) for neither."""
    for pattern in (_PAIR_FACET, _TRAILING_FACET):
        m = pattern.match(str(text))
        if m:
            return m["base"], m["facet"]
    return str(text), None


def short_facet(facet: str) -> str:
    """"Pythia-160M-0 -> Pythia-160M-1" -> "Pythia", "mean over datasets" -> "mean": the
    subject's first word, which tells the subjects of one statement apart."""
    return re.split(r"[-\s]", facet.strip(), maxsplit=1)[0] or facet


def _ref_key(where: str | None) -> tuple[int, int, int, str]:
    """Sort key for the paper's reference: "Figure 2" < "Figure A.3" < "Table 1" < none."""
    if not where:
        return (2, 0, 0, "")
    m = re.match(r"(Figure|Table)\s+(A\.)?(\d+)", where)
    if not m:
        return (1, 1, 10**6, where)
    return (0 if m[1] == "Figure" else 1, int(bool(m[2])), int(m[3]), "")


def paper_ref(claim_id: str) -> str | None:
    """Where the paper makes the claim, shortened to its figure or table ("Figure A.6",
    "Table 1"); None for a claim the paper does not make (a check, a hypothesis)."""
    from nearid import claims as registry

    entry = registry.registry().get(claim_id)
    where = (entry.paper or {}).get("where") if entry else None
    if not where:
        return None
    m = re.match(r"(Figure|Table)\s+A?\.?\d+", where)
    return m[0] if m else where.split(",")[0]


STATEMENT_COLUMNS = ["kind", "chapter", "text", "facets", "rows", "ref"]


def statements(claims: pd.DataFrame) -> pd.DataFrame:
    """One row per statement: the claims of one chapter and kind whose texts differ only in
    the subject (:func:`split_facet`) folded together, with ``facets`` (short subject names,
    "mean ..." last; empty for an unfolded claim) and ``rows`` (positions in ``claims``, in
    the facets' order). Ordered as the summary shows them: kind (:func:`kind_order`), chapter,
    then the paper's figures and tables in their order (:func:`paper_ref`)."""
    order = {k: i for i, k in enumerate(kind_order())}
    chapters = list(dict.fromkeys(claims["chapter"]))
    groups: dict[tuple, list[int]] = {}
    split = [split_facet(t) for t in claims["claim"]]
    counts: dict[tuple, int] = {}
    for i, (base, facet) in enumerate(split):
        if facet is not None:
            key = (claims["chapter"].iat[i], claims["kind"].iat[i], base)
            counts[key] = counts.get(key, 0) + 1
    for i, (base, facet) in enumerate(split):
        key = (claims["chapter"].iat[i], claims["kind"].iat[i], base)
        if facet is None or counts.get(key, 0) < 2:
            key = (*key[:2], str(claims["claim"].iat[i]), i)  # not folded: the claim alone
        groups.setdefault(key, []).append(i)
    rows = []
    for key, members in groups.items():
        folded = len(key) == 3
        if folded:
            members = sorted(members, key=lambda i: split[i][1].startswith("mean"))  # stable
            short = [short_facet(split[i][1]) for i in members]
            facets = short if len(set(short)) == len(short) else [split[i][1] for i in members]
        else:
            facets = []
        first = members[0]
        ref = paper_ref(claims["claim_id"].iat[first])
        rows.append({"kind": key[1], "chapter": key[0], "text": key[2], "facets": tuple(facets),
                     "rows": tuple(members), "ref": ref,
                     "_order": (order.get(key[1], len(order)), chapters.index(key[0]), _ref_key(ref), first)})
    out = pd.DataFrame(rows, columns=[*STATEMENT_COLUMNS, "_order"])
    out = out.iloc[sorted(range(len(out)), key=lambda i: out["_order"].iat[i])]
    return out.drop(columns="_order").reset_index(drop=True)


# ---------------------------------------------------------------------- verdicts as the page shows them
VERDICT_GLYPHS = {"holds": "✓", "inconclusive": "?", "fails": "✗", "not decided": "○"}
# Okabe & Ito's colour-blind-safe palette: bluish green, grey, vermillion (black text reads on each).
VERDICT_COLORS = {"holds": "#009E73", "inconclusive": "#BBBBBB", "fails": "#D55E00", "not decided": "#FFFFFF"}


def verdict_chip(verdict: str) -> str:
    """The verdict's glyph on its colour, as inline HTML (the colour is never the only cue)."""
    color = VERDICT_COLORS.get(verdict, "#FFFFFF")
    glyph = VERDICT_GLYPHS.get(verdict, "·")
    return (f'<span style="display:inline-block;min-width:1.4em;text-align:center;border-radius:0.25em;'
            f'background:{color};color:#000;font-weight:700" title="{verdict}">{glyph}</span>')


def verdict_cell(verdict: str, section: str, label: str | None = None) -> str:
    """The chip and a link to the section that decides the claim (its text: the verdict, or
    the subject for a folded statement)."""
    return f'{verdict_chip(verdict)} {{ref}}`{label or verdict} <{section}>`'


def numbers_text(r) -> str:
    """"ours 0.033 [0.025, 0.039], paper 0.052" for one claim (no paper part where the paper
    prints no number)."""
    ours = _nowrap(" ".join(format_estimate(r.ours, r.low, r.high)))
    return f"ours {ours}" + ("" if _missing(r.paper) else f", paper {_nowrap(_number(r.paper))}")


def legend_markdown() -> str:
    """One line that says what the chips mean (a counted claim on an unconverged fit shows
    "not decided")."""
    return " · ".join(f"{verdict_chip(v)} {v}" for v in (*VERDICT_ORDER, "not decided"))


def _nowrap(text: str) -> str:
    return f'<span style="white-space:nowrap">{text}</span>'


def _escape(text) -> str:
    return str(text).replace("|", "\\|")


def _table(caption: str, name: str, header: str, align: str, lines: list[str]) -> str:
    """A MyST table directive: captioned, so the book numbers it, and named for {numref}."""
    return f":::{{table}} {caption}\n:name: {name}\n\n{header}\n{align}\n" + "\n".join(lines) + "\n:::"


def shown_verdict(r) -> str:
    """The verdict a row shows: "not decided" for a counted claim on an unconverged fit
    (:func:`outcome`), else its verdict."""
    return "not decided" if getattr(r, "outcome", None) == "not decided" else r.verdict


def _claims_lines(claims: pd.DataFrame, stmts: pd.DataFrame) -> list[str]:
    """One table line per statement, in two columns so a phone shows both: the verdict, and
    the statement with its numbers under it. A folded statement shows one chip per subject
    in the verdict column and, under the statement, one line per subject: its chip, its
    name (linked) with what stands in for it (:func:`nearid.standins.labelled`), its numbers."""
    from nearid.standins import labelled

    small = '<span style="font-size:0.9em">'
    lines = []
    for s in stmts.itertuples():
        rs = [claims.iloc[i] for i in s.rows]
        text = f"{rs[0].chapter[:2]} · {_escape(s.text)}"
        if s.facets:
            verdict = " ".join(verdict_chip(shown_verdict(r)) for r in rs)
            numbers = "<br>".join(f"{verdict_cell(shown_verdict(r), r.section, labelled(f))}: {numbers_text(r)}"
                                  for r, f in zip(rs, s.facets))
        else:
            verdict = verdict_cell(shown_verdict(rs[0]), rs[0].section)
            numbers = numbers_text(rs[0])
        lines.append(f"| {verdict} | {text}<br>{small}{numbers}</span> |")
    return lines


def _detail_lines(claims: pd.DataFrame, stmts: pd.DataFrame) -> list[str]:
    """One line per claim, folded ones unfolded, in the order of ``stmts``: its chip, its id
    in the registry, how its interval is read, its MDE (rounded as its interval), n, and its
    verdict under false discovery rate control and its outcome (:func:`outcome`; counted
    claims only)."""
    lines = []
    for s in stmts.itertuples():
        for i in s.rows:
            r = claims.iloc[i]
            d = interval_decimals(r.low, r.high)
            fdr = "" if r.verdict_fdr is None else verdict_chip(r.verdict_fdr)
            said = "" if _missing(r.outcome) else r.outcome
            lines.append(f"| {verdict_chip(r.verdict)} | `{r.claim_id}` | {test_mark(r.test, r.margin)} | "
                         f"{format_at(r.mde, d)} | {_n_cell(r)} | {fdr} | {said} |")
    return lines


def to_markdown(claims: pd.DataFrame) -> str:
    """The claims as MyST tables, one per kind, each captioned with its tally and narrow
    enough for a phone: the verdict first (a coloured chip and a link to the chapter section
    deciding it), then the statement with our estimate, its 95% interval and the paper's
    number under it; a claim decided per model pair or per dataset is one row with one
    verdict per subject (:func:`statements`). Each table's test, MDE and n, claim by claim,
    sit in a collapsed dropdown under it."""
    from nearid.claims import KINDS

    stmts = statements(claims)
    blocks = [legend_markdown()]
    for kind in kind_order():
        sub = stmts[stmts["kind"] == kind]
        if sub.empty:
            continue
        tally = verdict_counts(claims[claims["kind"] == kind])
        caption = KINDS.get(kind, "claims missing from the registry")
        title = f"{caption[0].upper()}{caption[1:]}"
        said = ", ".join(f"{k} {word}" for word, k in tally.items() if k)
        blocks.append(_table(f"{title}: {said}.", f"tbl-07-{kind.replace('_', '-')}",
                             "| verdict | claim, ours [95% interval], the paper's number |", "| :-- | :-- |",
                             _claims_lines(claims, sub)))
        detail = _table(f"{title}: the test, MDE and n of each row, its verdict with the false discovery "
                        "rate controlled across the counted claims (BH) and its outcome in the headline.",
                        f"tbl-07-{kind.replace('_', '-')}-detail",
                        "| | claim (registry id) | test | MDE | n | BH | outcome |",
                        "| :-- | :-- | :-- | --: | :-- | :-- | :-- |",
                        _detail_lines(claims, sub))
        blocks.append(f"::::{{dropdown}} Test, MDE, n, BH verdict and outcome of each row\n{detail}\n::::")
    return "\n\n".join(blocks)


def chapter_tallies(claims: pd.DataFrame) -> pd.DataFrame:
    """Per chapter: the paper's claims (the counted kinds, :func:`paper_claims`) by outcome
    (:data:`OUTCOMES`; an outcome no chapter has is left out), and how many other rows it
    decides (ties, aggregates, checks of the method, hypotheses); a last row "all" sums them."""
    counted = paper_claims(claims)
    present = [o for o in OUTCOMES if (counted["outcome"] == o).any()] or list(VERDICT_ORDER)
    rows = []
    for chapter in dict.fromkeys(claims["chapter"]):
        mine = counted[counted["chapter"] == chapter]
        rows.append({"chapter": chapter, **{o: int((mine["outcome"] == o).sum()) for o in present},
                     "other": int((claims["chapter"] == chapter).sum() - len(mine))})
    out = pd.DataFrame(rows, columns=["chapter", *present, "other"])
    total = {"chapter": "all", **{c: int(out[c].sum()) for c in [*present, "other"]}}
    return pd.concat([out, pd.DataFrame([total])], ignore_index=True)


# the tally table's column heads, short enough for a phone (the caption says what each means)
OUTCOME_SHORT = {"smaller than the paper's": "smaller", "larger than the paper's": "larger",
                 "underpowered": "few units", "not decided": "undecided"}
OUTCOME_VERDICT = {"holds": "holds", "fails": "fails", "smaller than the paper's": "inconclusive",
                   "larger than the paper's": "inconclusive", "underpowered": "inconclusive",
                   "not decided": "not decided"}


def tallies_markdown(tallies: pd.DataFrame) -> str:
    """:func:`chapter_tallies` as a captioned MyST table, each outcome column headed by its
    verdict's chip and its name."""
    outcomes = [c for c in tallies.columns if c not in ("chapter", "other")]
    head = " | ".join(f"{verdict_chip(OUTCOME_VERDICT.get(o, o))} {OUTCOME_SHORT.get(o, o)}" for o in outcomes)
    lines = []
    for r in tallies.to_dict(orient="records"):
        name = "**all**" if r["chapter"] == "all" else chapter_title(r["chapter"])
        cells = [f"**{r[o]}**" if r["chapter"] == "all" else str(r[o]) for o in outcomes]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['other']} |")
    caption = ("The paper's claims per chapter by outcome: hold, fail, \"smaller\": inconclusive with an effect "
               "smaller than the paper's (the interval excludes the paper's difference), \"few units\": "
               "inconclusive otherwise (underpowered), \"undecided\": not decided (an unconverged FastICA fit); "
               "\"other\": ties, aggregates of rows counted on their own, checks of our method and our hypotheses, "
               "not counted.")
    align = "| :-- | " + " | ".join("--:" for _ in outcomes) + " | --: |"
    return _table(caption, "tbl-07-tallies", f"| chapter | {head} | other |", align, lines)


def outcome_counts(claims: pd.DataFrame) -> dict[str, int]:
    """How many counted claims have each outcome (:data:`OUTCOMES`, every one, zeros included)."""
    counts = claims["outcome"].value_counts()
    return {o: int(counts.get(o, 0)) for o in OUTCOMES}


def verdict_counts(claims: pd.DataFrame, column: str = "verdict") -> dict[str, int]:
    """How many claims hold, are inconclusive, fail (by ``column``: "verdict", or
    "verdict_fdr" for the verdicts under false discovery rate control)."""
    counts = claims[column].value_counts()
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


def without_tracker(text: str) -> str:
    """A registry line as a reader sees it: the date and the reason, without our issue number
    ("2026-12-02, issue 21 (quick seeds 3 -> 5)" -> "2026-12-02 (quick seeds 3 -> 5)"): a
    reader of the book cannot look our tracker up."""
    return re.sub(r"\s{2,}", " ", re.sub(r",?\s*\bissues? \d+(?:\s*(?:and|,)\s*\d+)*\b", " ", str(text))).strip()


def history_markdown(history: pd.DataFrame) -> str:
    """The appendix's table of earlier protocols (:func:`nearid.claims.history_rows` plus
    ``verdict_now``) as a MyST table narrow enough for the page: claim, when it changed, the
    verdict then and now (today's with its chip), and the protocol then (today's protocol is
    in the chapter)."""
    lines = ["| claim | changed in | verdict then, now | protocol then |", "| --- | --- | --- | --- |"]
    for r in history.itertuples():
        now = f"{verdict_chip(r.verdict_now)} {r.verdict_now}" if r.verdict_now in VERDICT_GLYPHS else r.verdict_now
        when = without_tracker(r.until)
        lines.append(f"| `{r.claim_id}` ({chapter_title(r.chapter)}) | {when} | then {r.verdict_then};<br>"
                     f"now {now} | {r.protocol_then} |")
    return "\n".join(lines)
