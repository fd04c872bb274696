"""One figure style for the whole book, and a few plots more than one chapter draws.

The book's theme (sphinx-book-theme) shows a page's figures in an article column about
:data:`COLUMN_PX` pixels wide at a 1280 px window, and shrinks any wider image to fit. A
figure drawn at :data:`DPI` with :data:`WIDTH` inches fills the column at 1:1, so its fonts
show at their size; one drawn much wider is scaled down and its ticks become unreadable. So
figures are drawn at most :data:`WIDE` inches wide (shown at 0.8x) and no text is smaller
than 9 pt: every text then shows at 10 px or more. :func:`figure_outputs` checks the
executed notebooks against that.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl
import seaborn as sns

from nearid.align.protocol import FAMILY_INFO

COLUMN_PX = 672  # sphinx-book-theme's article column at a 1280 px window
DPI = 100  # pixels per inch of the book's PNGs (no retina doubling: 1 drawn px = 1 CSS px)
WIDTH = COLUMN_PX / DPI  # inches: a figure this wide fills the column at 1:1
WIDE = 1.25 * WIDTH  # inches: the widest figure (three panels side by side), shown at 0.8x
MAX_OVERSIZE = 1.3  # a figure drawn wider than this times the width it is shown at is too small to read
MIN_TEXT_PX = 9.0  # the smallest text a reader should have to read, in CSS px as shown

# Okabe & Ito's colour-blind-safe colours (seaborn's "colorblind"), reordered so that the
# first four, which most figures use, are far apart for every kind of colour vision: the
# palette's orange and vermillion, adjacent in seaborn's order, are told apart only by hue.
BOOK_PALETTE = ["#0173B2", "#DE8F05", "#029E73", "#CC78BC", "#56B4E9", "#D55E00", "#CA9161", "#949494",
                "#ECE133", "#FBAFE4"]
OURS_PALETTE = BOOK_PALETTE
PAPER_COLOR = "0.35"
_FONTS = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "xtick.labelsize": 9, "ytick.labelsize": 9,
          "legend.fontsize": 9, "legend.title_fontsize": 9.5, "figure.titlesize": 11}


def use_style() -> None:
    """Seaborn's whitegrid at sizes that read in the book's column; called at the top of every chapter.

    Inside a kernel, figures are also shown through :func:`figure_png`, which drops the
    minor tick labels of log axes (they overlap) and records the figure's smallest text.
    """
    sns.set_theme(style="whitegrid", context="notebook", palette=BOOK_PALETTE)
    mpl.rcParams.update({"figure.dpi": DPI, "savefig.dpi": DPI, "figure.figsize": (WIDTH, 4.0),
                         "figure.autolayout": False, **_FONTS})
    _show_figures_with(figure_png)


def family_colors() -> dict[str, tuple]:
    """A fixed colour per transform family, so every chapter reads the same."""
    pal = sns.color_palette(BOOK_PALETTE, 7)
    return {**{name: pal[f.palette_index] for name, f in FAMILY_INFO.items()}, "cka": pal[6]}


def family_styles() -> dict[str, dict[str, Any]]:
    """A marker and a line style per transform family beside its colour, so lines that lie
    on top of each other still show (seaborn: ``markers=``/``dashes=`` from these)."""
    return {**{name: {"marker": f.marker, "dashes": f.dashes or ""} for name, f in FAMILY_INFO.items()},
            "cka": {"marker": "v", "dashes": (2, 2)}}


def coinciding(curves: dict[str, Any], *, tol: float) -> list[list[str]]:
    """Groups (two or more) of ``curves`` ({name: y values on a shared x}) that never differ
    by more than ``tol``: lines a reader cannot tell apart on a plot, which the figure must say."""
    import numpy as np

    groups: list[list[str]] = []
    for name, y in curves.items():
        y = np.asarray(y, dtype=float)
        for g in groups:
            if np.nanmax(np.abs(np.asarray(curves[g[0]], dtype=float) - y)) <= tol:
                g.append(name)
                break
        else:
            groups.append([name])
    return [g for g in groups if len(g) > 1]


def tidy_log_axes(fig) -> None:
    """Log axes label their major ticks only, in plain numbers. Matplotlib labels the minor
    ticks of an axis that spans less than a few decades, and those labels ("3x10^-1 4x10^-1")
    overlap. An axis with fewer than three powers of ten in view gets major ticks at 1, 2
    and 5 times each power, or, over less than a factor of ten, evenly spaced round numbers,
    so it keeps three labels or so. Ticks a chapter placed itself are kept."""
    import numpy as np
    from matplotlib import ticker

    for ax in fig.axes:
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log":
                continue
            if isinstance(axis.get_minor_formatter(), ticker.LogFormatter):
                axis.set_minor_formatter(ticker.NullFormatter())
            lo, hi = sorted(lim)
            if (getattr(axis.get_transform(), "base", 10) != 10 or not lo > 0
                    or type(axis.get_major_locator()) is not ticker.LogLocator):
                continue
            # None: matplotlib's decades (10^-2, 10^-1, ...), which read well where three or more show
            for locator in (None, ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)),
                            ticker.MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10])):
                ticks = np.asarray((locator or ticker.LogLocator(base=10)).tick_values(lo, hi))
                if ((ticks >= lo * (1 - 1e-9)) & (ticks <= hi * (1 + 1e-9))).sum() >= 3:
                    break
            if locator is None:
                continue
            axis.set_major_locator(locator)
            if isinstance(axis.get_major_formatter(), ticker.LogFormatter):
                axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))


def legend_columns(target, handles, labels, starts, **kwargs):
    """A legend with one column per group of entries: a group starts at each label in
    ``starts`` (seaborn's subtitles such as "alpha" or "weight decay"), and shorter columns
    are padded with blanks, so each group reads down its own column."""
    from matplotlib.lines import Line2D

    groups: list[list] = [[]]
    for h, lab in zip(handles, labels):
        if lab in starts and groups[-1]:
            groups.append([])
        groups[-1].append((h, lab))
    rows = max(len(g) for g in groups)
    blank = (Line2D([], [], ls="none"), "")
    entries = [e for g in groups for e in g + [blank] * (rows - len(g))]
    return target.legend([h for h, _ in entries], [lab for _, lab in entries], ncol=len(groups), **kwargs)


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels, from a PNG's header."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return struct.unpack(">II", png[16:24])


def _texts(fig) -> list:
    """The texts a figure draws: titles, axis and tick labels of the axes that show them,
    legends, annotations and the figure's own texts."""
    out = list(fig.texts)
    for leg in fig.legends:
        out += [*leg.get_texts(), leg.get_title()]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        titles = [ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)]
        out += [t for t in titles if t is not None] + list(ax.texts)
        if ax.axison:
            for axis in (ax.xaxis, ax.yaxis):
                out += [axis.label, *axis.get_majorticklabels(), *axis.get_minorticklabels()]
        if ax.get_legend() is not None:
            out += [*ax.get_legend().get_texts(), ax.get_legend().get_title()]
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def smallest_text_px(fig) -> float:
    """The smallest text of ``fig`` in pixels of its PNG at the figure's dpi (inf: no text)."""
    sizes = [t.get_fontsize() for t in _texts(fig)]
    return min(sizes) * fig.dpi / 72 if sizes else float("inf")


def figure_png(fig) -> tuple[str, dict] | None:
    """The book's PNG of a figure (base64, as IPython's inline backend draws it: tight bounding
    box at the figure's dpi) after :func:`tidy_log_axes`, with the smallest text it holds in
    the output's metadata (``{"nearid": {"smallest_text_px": ...}}``), where
    :func:`figure_outputs` reads it back."""
    from IPython.core.pylabtools import print_figure

    tidy_log_axes(fig)
    data = print_figure(fig, fmt="png", base64=True, bbox_inches="tight")
    if data is None:  # an empty figure: nothing to show
        return None
    return data, {"nearid": {"smallest_text_px": round(smallest_text_px(fig), 2)}}


def _show_figures_with(formatter) -> None:
    """Make ``formatter`` the PNG formatter of matplotlib figures in the running IPython
    kernel (nothing outside one)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import importlib

    from matplotlib.figure import Figure

    if "inline" in mpl.get_backend():  # loaded late, the backend would register its own formatter over ours
        importlib.import_module("matplotlib_inline.backend_inline")

    shell.display_formatter.formatters["image/png"].for_type(Figure, formatter)


@dataclass(frozen=True)
class ShownFigure:
    """One image output of an executed notebook, as the book shows it."""

    cell: int  # index of the code cell among the notebook's cells
    name: str | None  # the figure's label (cell metadata mystnb.figure.name)
    width_px: int  # drawn width: the PNG's pixels (or the output's width, if it sets one)
    alt: str | None  # the image's alt text (cell metadata mystnb.image.alt)
    smallest_text_px: float | None  # smallest text in drawn pixels (None: not recorded)

    @property
    def shown_px(self) -> float:
        """The width the theme shows it at: its own, or the column's if it is wider."""
        return min(self.width_px, COLUMN_PX)

    @property
    def oversize(self) -> float:
        """How many times wider it is drawn than shown (1: shown at its size)."""
        return self.width_px / self.shown_px

    @property
    def smallest_text_shown_px(self) -> float | None:
        """The smallest text as a reader sees it, in CSS px."""
        return None if self.smallest_text_px is None else self.smallest_text_px / self.oversize

    def problems(self) -> list[str]:
        """What keeps a reader from reading it ([] when nothing)."""
        out = []
        if self.oversize > MAX_OVERSIZE:
            out.append(f"drawn {self.width_px} px wide, shown at {self.shown_px:.0f} px ({self.oversize:.2f}x)")
        shown = self.smallest_text_shown_px
        if shown is not None and shown < MIN_TEXT_PX:
            out.append(f"smallest text {shown:.1f} px as shown (< {MIN_TEXT_PX:g})")
        if not self.alt:
            out.append("no alt text")
        return out


def figure_outputs(nb) -> list[ShownFigure]:
    """Every PNG output of an executed notebook (a path or an nbformat notebook), in order."""
    import nbformat

    if isinstance(nb, (str, Path)):
        nb = nbformat.read(str(nb), as_version=4)
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        opts = cell.metadata.get("mystnb", {})
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png is None:
                continue
            meta = out.get("metadata", {}).get("image/png", {})
            width = int(meta["width"]) if "width" in meta else png_size(base64.b64decode(png))[0]
            found.append(ShownFigure(cell=i, name=opts.get("figure", {}).get("name"), width_px=width,
                                     alt=opts.get("image", {}).get("alt") or None,
                                     smallest_text_px=meta.get("nearid", {}).get("smallest_text_px")))
    return found


def paper_vs_ours_bars(ax, labels, ours, paper, ylabel: str, ours_err=None, title: str | None = None):
    """Side-by-side bars: ours (coloured) and the paper's (grey, hatched), labelled."""
    import numpy as np

    x = np.arange(len(labels))
    w = 0.38
    ax.bar(x - w / 2, ours, w, yerr=ours_err, label="ours", color=sns.color_palette(OURS_PALETTE)[0],
           capsize=3)
    ax.bar(x + w / 2, paper, w, label="paper", color=PAPER_COLOR, hatch="//", alpha=0.6)
    ax.set_xticks(x, labels, rotation=0)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend()
    return ax


# Okabe & Ito's bluish green and vermillion: told apart by lightness too, not by hue alone.
VERDICT_COLORS = {"holds": "#009E73", "fails": "#D55E00", "inconclusive": "0.55"}


def plot_intervals(ax, x, intervals, *, horizontal: bool = False, paper=None, verdicts=None,
                   threshold: float | None = 0.0, **style):
    """Estimates with their 95% intervals against ``x`` (or, ``horizontal``, against rows ``x``
    with the estimate on the x axis), the one way every chapter draws a verdict.
    ``intervals`` is (estimates, lows, highs), one of each per point.

    Infinite ends (an interval from a single unit) are drawn as the estimate, so nothing runs
    off the axes. ``paper`` adds the paper's numbers as grey crosses (NaN or None: none).
    ``verdicts`` colours each point by its verdict (:data:`VERDICT_COLORS`) instead of
    ``color``. ``threshold`` draws the line a claim must clear (None: no line). ``style``:
    matplotlib's ``errorbar`` options (``fmt`` "o" and ``capsize`` 3 by default; ``label`` goes
    to the first group of points).
    """
    import numpy as np

    estimate, low, high = intervals
    style = {"fmt": "o", "capsize": 3, **style}
    label, color = style.pop("label", None), style.pop("color", None)
    x = np.asarray(x, dtype=float)
    est = np.asarray(estimate, dtype=float)
    lo = np.where(np.isfinite(low), low, est)
    hi = np.where(np.isfinite(high), high, est)
    err = [est - lo, hi - est]
    colors = [VERDICT_COLORS[v] for v in verdicts] if verdicts is not None else [color] * len(est)
    groups = {}
    for i, c in enumerate(colors):
        groups.setdefault(c, []).append(i)
    for n, (c, idx) in enumerate(groups.items()):
        idx = np.asarray(idx)
        e = [err[0][idx], err[1][idx]]
        kw = dict(style, color=c, label=label if n == 0 else None)
        if horizontal:
            ax.errorbar(est[idx], x[idx], xerr=e, **kw)
        else:
            ax.errorbar(x[idx], est[idx], yerr=e, **kw)
    if paper is not None:
        p = np.asarray([np.nan if v is None else v for v in paper], dtype=float)
        shown = np.isfinite(p)
        if shown.any():
            px, py = (p[shown], x[shown]) if horizontal else (x[shown], p[shown])
            ax.scatter(px, py, marker="x", color=PAPER_COLOR, label="paper", zorder=3)
    if threshold is not None:
        (ax.axvline if horizontal else ax.axhline)(threshold, color="0.3", lw=0.8, ls="--")
    return ax


# --------------------------------------------------------------------------- layer maps
METRIC_LABELS = {**{name: f.metric_label for name, f in FAMILY_INFO.items()}, "cka": "linear CKA"}


def plot_layer_matrix(df, path: str | Path | None = None, *, title: str | None = None, ax=None):
    """A labelled seaborn heatmap of :func:`nearid.align.compare_layers`'s DataFrame.

    Rows are model A's layers, columns model B's; each cell carries its value. The colour
    scale is reversed for errors, so "more alike" is always the brighter colour; errors use
    the data's range, CKA its full range [0, 1]. With ``path`` the figure is saved (format
    from the suffix) and closed; returns the matplotlib Axes.
    """
    import matplotlib

    if path is not None and ax is None:
        matplotlib.use("Agg")  # no display needed to write a file
    import matplotlib.pyplot as plt
    import seaborn as sns

    metric = df.attrs.get("metric", "value")
    lower = df.attrs.get("lower_is_better", metric != "cka")
    n_a, n_b = df.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.75 * n_b + 1.5, 1.0 + 0.6 * n_a + 0.8))
    label = METRIC_LABELS.get(metric, metric) + (" (lower = more alike)" if lower else " (higher = more alike)")
    bounds = dict(vmin=0.0, vmax=1.0) if metric == "cka" else {}
    sns.heatmap(df.astype(float), ax=ax, annot=n_a * n_b <= 400, fmt=".2f", cmap="viridis_r" if lower else "viridis",
                square=False, linewidths=0.5, cbar_kws={"label": label}, **bounds)
    ax.set_xlabel("model B layer")
    ax.set_ylabel("model A layer")
    if title is None:
        split = ""
        if "n_fit" in df.attrs:
            split = (f"; on {df.attrs['n_fit']} rows" if metric == "cka" else
                     f"; fitted on {df.attrs['n_fit']} rows, scored on {df.attrs['n_eval']}")
        title = f"Layer by layer: {METRIC_LABELS.get(metric, metric)}{split}"
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="x", rotation=45)
    ax.tick_params(axis="y", rotation=0)
    fig = ax.figure
    fig.tight_layout()
    if path is not None:
        import io

        from nearid.fileio import atomic_write_bytes

        path = Path(path)
        buf = io.BytesIO()
        fig.savefig(buf, dpi=150, format=path.suffix.lstrip(".").lower() or None)
        atomic_write_bytes(path, buf.getvalue())  # never through a link planted at the path
        plt.close(fig)
    return ax
