"""One figure style for the whole book, and a few plots more than one chapter draws."""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import seaborn as sns

PAPER_COLOR = "0.35"
OURS_PALETTE = "colorblind"


def use_style() -> None:
    """Seaborn's whitegrid with readable sizes; called at the top of every chapter."""
    sns.set_theme(style="whitegrid", context="notebook", palette=OURS_PALETTE)
    mpl.rcParams.update({"figure.dpi": 110, "savefig.dpi": 110, "figure.figsize": (6.4, 4.0),
                         "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 9,
                         "figure.autolayout": False})


def family_colors() -> dict[str, tuple]:
    """A fixed colour per transform family, so every chapter reads the same."""
    pal = sns.color_palette(OURS_PALETTE, 5)
    return {"permutation": pal[0], "rigid": pal[1], "linear": pal[2], "ica": pal[3], "cka": pal[4]}


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


VERDICT_COLORS = {"holds": "tab:green", "fails": "tab:red", "inconclusive": "0.5"}


def plot_intervals(ax, x, estimate, low, high, *, horizontal: bool = False, paper=None, verdicts=None,
                   threshold: float | None = 0.0, label: str | None = None, color=None, fmt: str = "o",
                   capsize: float = 3):
    """Estimates with their 95% intervals against ``x`` (or, ``horizontal``, against rows ``x``
    with the estimate on the x axis), the one way every chapter draws a verdict.

    Infinite ends (an interval from a single unit) are drawn as the estimate, so nothing runs
    off the axes. ``paper`` adds the paper's numbers as grey crosses (NaN or None: none).
    ``verdicts`` colours each point by its verdict (:data:`VERDICT_COLORS`) instead of
    ``color``. ``threshold`` draws the line a claim must clear (None: no line).
    """
    import numpy as np

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
        kw = dict(fmt=fmt, capsize=capsize, color=c, label=label if n == 0 else None)
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
METRIC_LABELS = {
    "permutation": "signed-permutation error",
    "rigid": "rigid (rotation + scale) error",
    "linear": "linear (affine) error",
    "ica": "whiten + ICA error",
    "cka": "linear CKA",
}


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
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150)
        plt.close(fig)
    return ax
