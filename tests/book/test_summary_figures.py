"""The summary page's figures, drawn from the committed quick-profile chapter results."""

from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from nearid.book import plotting, scorecard, summary_figures  # noqa: E402
from nearid.book.profiles import READS  # noqa: E402

REFERENCE = Path(__file__).resolve().parents[2] / "book" / "reference" / "quick"
SHOWN_PX = 672  # the width the book's theme gives a figure at 1280 px


@pytest.fixture(scope="module")
def tables():
    plotting.use_style()
    res = scorecard.load_results(REFERENCE, READS["07_summary"])
    return scorecard.claims_table(res), scorecard.comparison_table(res)


def _smallest_text_px(fig) -> float:
    """The smallest font on the figure, in pixels at the width the theme shows it."""
    fig.canvas.draw()
    scale = min(1.0, SHOWN_PX / (fig.get_figwidth() * fig.dpi))
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip() and t.get_visible()]
    return min(sizes) * fig.dpi / 72 * scale


def test_claims_map_draws_every_claim_once_in_its_verdicts_colour(tables):
    claims, _ = tables
    fig = summary_figures.plot_claims_map(claims)
    tiles = [p for ax in fig.axes for p in ax.patches if isinstance(p, Rectangle)]
    assert len(tiles) == len(claims), "one tile per claim, per-dataset claims included"
    drawn = sorted(to_hex(p.get_facecolor()).upper() for p in tiles)
    assert drawn == sorted(scorecard.VERDICT_COLORS[scorecard.shown_verdict(r)].upper()
                           for r in claims.itertuples())
    counted_ax = fig.axes[0]
    assert len(counted_ax.patches) == len(scorecard.paper_claims(claims)), "the paper's claims on the left"
    glyphs = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_text() in scorecard.VERDICT_GLYPHS.values()]
    assert len(glyphs) == len(claims), "each tile carries its verdict's glyph: colour is never the only cue"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    undecided = (claims.outcome == "not decided").any()
    assert legend == ["✓  holds", "?  inconclusive", "✗  fails", *(["○  not decided"] if undecided else [])]
    refs = {t.get_text() for ax in fig.axes for t in ax.texts}
    assert {"Table 1", "Table 2", "2", "A.3"} <= refs, "the paper's table or figure under the tiles"
    assert _smallest_text_px(fig) >= 9
    plt.close(fig)


def test_claim_tiles_keep_a_statements_subjects_together(tables):
    claims, _ = tables
    tiles = summary_figures.claim_tiles(claims)
    for _, group in tiles.groupby(["group", "chapter"]):
        x = group.x.to_numpy()
        assert (np.diff(x) > 0).all(), "tiles do not overlap"
        steps = np.round(np.diff(x), 6)
        same = (group.statement.to_numpy()[1:] == group.statement.to_numpy()[:-1])
        assert (steps[same] < steps[~same].min(initial=np.inf)).all(), "a statement's subjects sit closer"


def test_ours_vs_paper_has_one_direction_per_panel_and_cuts_off_no_point(tables):
    claims, comparison = tables
    parts = summary_figures.split_comparison(comparison)
    assert sum(len(p) for p in parts.values()) == len(comparison)
    assert set(parts["errors"].column) <= set(summary_figures.ERROR_COLUMNS)
    assert not parts["scores"].column.isin([*summary_figures.ERROR_COLUMNS, "ICA efficiency"]).any()
    fig = summary_figures.plot_ours_vs_paper(comparison, claims)
    titles = [ax.get_title() for ax in fig.axes]
    assert "lower is better" in titles[0] and all("higher" in t for t in titles[1:])
    shown = 0
    for ax in fig.axes:
        x0, x1 = sorted(ax.get_xlim())
        y0, y1 = sorted(ax.get_ylim())
        for coll in ax.collections:
            if isinstance(coll, PathCollection):  # a scatter (error bars are line collections)
                pts = np.asarray(coll.get_offsets())
                shown += len(pts)
                assert ((pts[:, 0] >= x0) & (pts[:, 0] <= x1) & (pts[:, 1] >= y0) & (pts[:, 1] <= y1)).all(), \
                    ax.get_title()
        for line in ax.lines:
            if line.get_marker() in summary_figures.VERDICT_MARKERS.values():
                xs, ys = line.get_data()
                shown += len(xs)
                assert ((xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)).all(), ax.get_title()
    assert shown == len(comparison) + len(summary_figures.directional_claims(claims))
    assert _smallest_text_px(fig) >= 9
    plt.close(fig)


def test_the_claims_panel_marks_each_claim_by_its_verdict(tables):
    claims, comparison = tables
    fig = summary_figures.plot_ours_vs_paper(comparison, claims)
    d = fig.axes[3]
    drawn = {}
    for line in d.lines:
        for v, m in summary_figures.VERDICT_MARKERS.items():
            if line.get_marker() == m:
                drawn[v] = drawn.get(v, 0) + len(line.get_xdata())
    want = summary_figures.directional_claims(claims).verdict.value_counts().to_dict()
    assert drawn == want
    plt.close(fig)
