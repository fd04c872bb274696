"""The summary page's figures: every claim at a glance, and every number of Tables 1-4 ours
against the paper's.

Both read only the tables of :mod:`nearid.book.scorecard`, so they show what the chapters
saved. Verdicts are drawn in Okabe & Ito's colour-blind-safe colours
(:data:`nearid.book.scorecard.VERDICT_COLORS`) and always with a second cue (a glyph, a
marker shape), so no reader needs the colour to tell them apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nearid.align.protocol import PAPER_ORDER
from nearid.book import scorecard
from nearid.book.scorecard import VERDICT_COLORS, VERDICT_GLYPHS, VERDICT_ORDER

VERDICT_MARKERS = {"holds": "o", "inconclusive": "D", "fails": "X"}

# Tile layout of the claims map, in tile widths.
_GAP_IN = 0.14  # between the subjects of one statement
_GAP_OUT = 0.55  # between statements
_ROW = 2.5  # a chapter's row: the tiles, the paper's reference under them, a gap
SHOWN = (*VERDICT_ORDER, "not decided")  # a counted claim on an unconverged fit: no verdict shown


def _ref_label(ref: str | None) -> str | None:
    """The paper's reference under a tile: "Table 1" as it is, a figure by its number ("A.3")."""
    if not isinstance(ref, str) or not ref:
        return None
    return ref.replace("Figure ", "") if ref.startswith("Figure") else ref


def claim_tiles(claims: pd.DataFrame) -> pd.DataFrame:
    """One row per claim with where the claims map draws it: ``group`` ("counted": the
    paper's claims; "other"), ``chapter``, ``x`` (left edge, in tile widths; the subjects of
    a folded statement side by side, statements apart), ``verdict``, ``ref`` (the paper's
    figure or table, :func:`nearid.book.scorecard.paper_ref`) and ``statement`` (its
    position in :func:`nearid.book.scorecard.statements`)."""
    from nearid.claims import COUNTED_KINDS

    rows = []
    cursor: dict[tuple[str, str], float] = {}
    for k, s in scorecard.statements(claims).iterrows():
        group = "counted" if s.kind in COUNTED_KINDS else "other"
        x = cursor.get((group, s.chapter))
        x = 0.0 if x is None else x + _GAP_OUT
        for j, i in enumerate(s.rows):
            if j:
                x += _GAP_IN
            shown = ("not decided" if group == "counted" and claims["outcome"].iat[i] == "not decided"
                     else claims["verdict"].iat[i])  # an unconverged fit's verdict is not shown as one
            rows.append({"group": group, "chapter": s.chapter, "x": x, "verdict": shown,
                         "ref": s.ref if isinstance(s.ref, str) else None, "statement": k,
                         "claim_id": claims["claim_id"].iat[i]})
            x += 1.0
        cursor[(group, s.chapter)] = x
    return pd.DataFrame(rows, columns=["group", "chapter", "x", "verdict", "ref", "statement", "claim_id"])


def _ref_runs(tiles: pd.DataFrame) -> list[tuple[float, float, str]]:
    """(left, right, label) for each run of neighbouring tiles of one row citing the same
    figure or table, so "Table 1" is written once under its sixteen tiles."""
    runs: list[list] = []
    for t in tiles.itertuples():
        label = _ref_label(t.ref)
        if runs and runs[-1][2] == label:
            runs[-1][1] = t.x + 1.0
        else:
            runs.append([t.x, t.x + 1.0, label])
    return [(lo, hi, label) for lo, hi, label in runs if label]


def plot_claims_map(claims: pd.DataFrame, *, width: float = 6.4):
    """Every claim as a tile coloured by its verdict (with its glyph), one row per chapter,
    the paper's claims on the left and the rows not counted as its claims (ties, checks of
    our method, our hypotheses) on the right; a claim tested per model pair or per dataset
    shows its subjects side by side. Under the tiles: the paper's figure or table; under
    each chapter's name: its tally of the paper's claims. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    tiles = claim_tiles(claims)
    chapters = list(dict.fromkeys(claims["chapter"]))
    span = {g: max(float(tiles.loc[tiles.group == g, "x"].max() + 1.0) if (tiles.group == g).any() else 0.0, 4.0)
            for g in ("counted", "other")}
    label_in = 1.5  # inches for the chapter names
    sep = 1.2  # tile widths between the two panels
    unit = min((width - label_in - 0.1) / (span["counted"] + span["other"] + sep), 0.26)  # inches per tile width
    head_in = 0.55
    height = unit * _ROW * len(chapters) + head_in
    fig = plt.figure(figsize=(width, height))
    bottom, top = 0.02 / height, 1 - head_in / height
    axes, x0 = {}, label_in / width
    for g in ("counted", "other"):
        w = span[g] * unit / width
        axes[g] = fig.add_axes((x0, bottom, w, top - bottom))
        x0 += w + sep * unit / width
    glyph_pt = max(7.0, min(10.0, unit * 72 * 0.6))  # the glyph fills about 60% of a tile
    counted = tiles[tiles.group == "counted"]
    for g, ax in axes.items():
        ax.set_xlim(0, span[g])
        ax.set_ylim(_ROW * len(chapters), 0)
        ax.axis("off")
        ax.text(0, -0.25, "the paper's claims" if g == "counted" else "not counted", fontsize=9,
                fontweight="bold", va="bottom", ha="left", clip_on=False)
        for r, chapter in enumerate(chapters):
            y = r * _ROW + 0.2
            mine = tiles[(tiles.group == g) & (tiles.chapter == chapter)]
            if g == "counted":
                ax.text(-0.6, y + 0.5, scorecard.chapter_title(chapter), ha="right", va="center", fontsize=9,
                        clip_on=False)
                counts = counted[counted.chapter == chapter]["verdict"].value_counts()
                tally = "  ".join(f"{counts[v]}{VERDICT_GLYPHS[v]}" for v in SHOWN if counts.get(v, 0))
                ax.text(-0.6, y + 1.2, tally or "no claim of the paper", ha="right", va="top", fontsize=7.5,
                        color="0.3", clip_on=False)
            if mine.empty:
                ax.text(0.1, y + 0.5, "–", va="center", fontsize=8, color="0.5")
                continue
            for t in mine.itertuples():
                ax.add_patch(Rectangle((t.x, y), 1.0, 1.0, facecolor=VERDICT_COLORS[t.verdict],
                                       edgecolor="0.55" if t.verdict == "not decided" else "white", linewidth=0.8))
                ax.text(t.x + 0.5, y + 0.53, VERDICT_GLYPHS[t.verdict], ha="center", va="center", fontsize=glyph_pt,
                        fontweight="bold", color="black")
            for lo, hi, label in _ref_runs(mine):
                if hi - lo > 1.5:  # a bracket under a run of tiles citing one table
                    ax.plot([lo + 0.1, hi - 0.1], [y + 1.12, y + 1.12], color="0.6", lw=0.7)
                ax.text((lo + hi) / 2, y + 1.18, label, ha="center", va="top", fontsize=7.5, color="0.3")
    handles = [Patch(facecolor=VERDICT_COLORS[v], edgecolor="0.55" if v == "not decided" else "white",
                     label=f"{VERDICT_GLYPHS[v]}  {v}")
               for v in SHOWN if v in VERDICT_ORDER or (tiles.verdict == v).any()]
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(label_in / width, 1.0), ncol=len(handles), frameon=False,
               fontsize=9, handlelength=1.1, handleheight=1.1, columnspacing=1.4, borderaxespad=0.1)
    return fig


# --------------------------------------------------------------------------- ours against the paper
ERROR_COLUMNS = PAPER_ORDER
EFFICIENCY_COLUMN = "ICA efficiency"


def split_comparison(comparison: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The numbers of Tables 1-4 by the direction in which they are better: ``errors`` (Table 1's
    alignment errors: lower is better), ``efficiency`` (Table 1's ICA efficiency, the share of
    the permutation-rigid gap ICA closes: higher is better, and on its own scale, which runs
    below 0), ``scores`` (everything else: InfoM/E/C, AUROC, sparsity, concentration: higher
    is better)."""
    is_t1 = comparison["table"] == "Table 1"
    errors = is_t1 & comparison["column"].isin(ERROR_COLUMNS)
    efficiency = is_t1 & (comparison["column"] == EFFICIENCY_COLUMN)
    return {"errors": comparison[errors], "efficiency": comparison[efficiency],
            "scores": comparison[~errors & ~efficiency]}


def _limits(*values, pad: float = 0.06, include=(0.0,)) -> tuple[float, float]:
    """Axis limits that hold every finite value (and ``include``), padded so no marker is cut."""
    v = np.concatenate([np.asarray(x, dtype=float).ravel() for x in values] + [np.asarray(include, dtype=float)])
    v = v[np.isfinite(v)]
    lo, hi = float(v.min()), float(v.max())
    margin = pad * (hi - lo or 1.0)
    return lo - margin, hi + margin


def _square(ax, x, y, include=(0.0,)) -> None:
    lo, hi = _limits(x, y, include=include)
    ax.plot([lo, hi], [lo, hi], color="0.55", lw=0.9, zorder=0)
    ax.set(xlim=(lo, hi), ylim=(lo, hi), aspect="equal")


def _score_kind(column: str) -> str:
    """"Falcor3D InfoM" -> "InfoM", "AUROC PCA + ICA" -> "AUROC", "concentration" -> "concentration"."""
    for word in ("InfoM", "InfoE", "InfoC", "AUROC", "sparsity", "concentration"):
        if word in column:
            return word
    return column


def directional_claims(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims the paper prints a number for and that say "higher" (a superiority or
    non-inferiority test), oriented so that above the threshold is the paper's side."""
    keep = claims["paper"].notna() & claims["test"].isin(["superiority", "non_inferiority"])
    return claims[keep]


def plot_ours_vs_paper(comparison: pd.DataFrame, claims: pd.DataFrame, *, width: float = 6.4):
    """Four panels, each with one direction of "better": Table 1's errors (lower), the scores
    of Tables 2-4 (higher), Table 1's ICA efficiency (higher; the paper's range shaded) and
    the claims of the paper that say "higher", our difference against the paper's, coloured
    and shaped by verdict. Limits hold every point. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from nearid.book import plotting

    parts = split_comparison(comparison)
    fig, axs = plt.subplots(2, 2, figsize=(width, width * 0.98), layout="constrained")
    (a, b), (c, d) = axs

    errors = parts["errors"]
    colors = plotting.family_colors()
    for family in ERROR_COLUMNS:
        sub = errors[errors["column"] == family]
        if len(sub):
            a.scatter(sub.paper, sub.ours, s=26, color=colors[family], label=family, edgecolor="white", lw=0.4)
    if len(errors):
        _square(a, errors.paper, errors.ours)
        a.legend(fontsize=8, loc="upper left", handletextpad=0.2, borderaxespad=0.3)
    a.set(title="Table 1 errors: lower is better", xlabel="the paper's", ylabel="ours")

    scores = parts["scores"].assign(kind=lambda df: df["column"].map(_score_kind))
    if len(scores):
        kinds = list(dict.fromkeys(scores["kind"]))
        palette = dict(zip(kinds, sns.color_palette("colorblind", len(kinds))))
        markers = dict(zip(kinds, "osD^vP"))
        for k in kinds:
            sub = scores[scores["kind"] == k]
            b.scatter(sub.paper, sub.ours, s=18, color=palette[k], marker=markers[k], label=k, edgecolor="white",
                      lw=0.3)
        _square(b, scores.paper, scores.ours)
        b.legend(fontsize=8, loc="upper left", handletextpad=0.1, borderaxespad=0.3, labelspacing=0.3, ncol=2,
                 columnspacing=0.6)
    b.set(title="Tables 2-4 scores: higher is better", xlabel="the paper's", ylabel="ours")

    eff = parts["efficiency"]
    if len(eff):
        from nearid.paper import TABLE1_EFFICIENCY_RANGE

        c.axhspan(*TABLE1_EFFICIENCY_RANGE, color="0.88", zorder=0, label="the paper's range")
        c.scatter(eff.paper, eff.ours, s=28, color=colors["ica"], edgecolor="white", lw=0.4, zorder=3)
        xlo, xhi = _limits(eff.paper, include=TABLE1_EFFICIENCY_RANGE, pad=0.15)
        ylo, yhi = _limits(eff.ours, include=(0.0, *TABLE1_EFFICIENCY_RANGE))
        c.plot([xlo, xhi], [xlo, xhi], color="0.55", lw=0.9, zorder=0)
        c.set(xlim=(xlo, xhi), ylim=(ylo, yhi))
        for r in eff.itertuples():
            c.annotate(scorecard.short_facet(str(r.row)), (r.paper, r.ours), textcoords="offset points",
                       xytext=(4, 3), fontsize=7.5, color="0.25")
        c.legend(fontsize=8, loc="lower left", borderaxespad=0.3)
    c.set(title="Table 1 ICA efficiency: higher is better", xlabel="the paper's", ylabel="ours")

    dc = directional_claims(claims)
    if len(dc):
        est = dc["ours"].to_numpy(float)
        lo = np.where(np.isfinite(dc["low"].to_numpy(float)), dc["low"].to_numpy(float), est)
        hi = np.where(np.isfinite(dc["high"].to_numpy(float)), dc["high"].to_numpy(float), est)
        for v in VERDICT_ORDER:
            m = (dc["verdict"] == v).to_numpy()
            if m.any():
                d.errorbar(dc["paper"].to_numpy(float)[m], est[m], yerr=[est[m] - lo[m], hi[m] - est[m]],
                           fmt=VERDICT_MARKERS[v], ms=4.5, color=VERDICT_COLORS[v], ecolor=VERDICT_COLORS[v],
                           elinewidth=0.9, capsize=0, label=f"{v} ({int(m.sum())})", mec="0.2", mew=0.3)
        xlo, xhi = _limits(dc["paper"])
        ylo, yhi = _limits(lo, hi)
        d.axhline(0, color="0.3", lw=0.8, ls="--")
        both = (min(xlo, ylo), max(xhi, yhi))
        d.plot(both, both, color="0.55", lw=0.9, zorder=0)
        d.set(xlim=(xlo, xhi), ylim=(ylo, yhi))
        d.legend(fontsize=8, loc="upper right", borderaxespad=0.3, handletextpad=0.2)
    d.set(title="Claims saying \"higher\": above 0 is\nthe paper's side", xlabel="the paper's difference",
          ylabel="ours, with 95% interval")
    for ax in axs.flat:
        ax.title.set_fontsize(9.5)
        ax.xaxis.label.set_fontsize(9)
        ax.yaxis.label.set_fontsize(9)
        ax.tick_params(labelsize=8)
    return fig

