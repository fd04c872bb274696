"""One figure style for the whole book, and a few plots more than one chapter draws."""

from __future__ import annotations

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
