"""The book's figure style and its checker: figures drawn for the theme's column, log axes
whose tick labels do not overlap, every image with alt text."""

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nearid.book import plotting  # noqa: E402


@pytest.fixture
def style():
    """The book's style, undone afterwards so other tests keep matplotlib's defaults."""
    with matplotlib.rc_context():
        plotting.use_style()
        yield
    plt.close("all")


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def _notebook(*cells) -> nbformat.NotebookNode:
    """A notebook of code cells, each (metadata, PNG base64 or None, output metadata)."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# a page"))
    for meta, png, out_meta in cells:
        cell = nbformat.v4.new_code_cell("plt.show()", metadata=meta)
        if png is not None:
            cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"},
                                                   metadata={"image/png": out_meta} if out_meta else {})]
        nb.cells.append(cell)
    return nb


def test_png_size_reads_the_header():
    fig = plt.figure(figsize=(3, 2), dpi=50)
    assert plotting.png_size(base64.b64decode(_png(fig)))[1] > 0
    with pytest.raises(ValueError, match="not a PNG"):
        plotting.png_size(b"GIF89a" + bytes(30))
    plt.close(fig)


def test_figure_outputs_lists_width_alt_and_text_size():
    small, wide = plt.figure(figsize=(2, 1), dpi=100), plt.figure(figsize=(12, 1), dpi=100)
    nb = _notebook(({"mystnb": {"figure": {"name": "fig-a"}, "image": {"alt": "A bar chart of things."}}},
                    _png(small), {"nearid": {"smallest_text_px": 12.5}}),
                   ({}, None, None),  # a code cell without an image
                   ({"mystnb": {"figure": {"name": "fig-b"}}}, _png(wide), {"nearid": {"smallest_text_px": 12.5}}),
                   ({}, _png(small), {"width": 1000}))  # an output that sets its CSS width
    a, b, c = plotting.figure_outputs(nb)
    assert (a.cell, a.name, a.alt) == (1, "fig-a", "A bar chart of things.")
    assert a.width_px < plotting.COLUMN_PX and a.oversize == 1 and a.smallest_text_shown_px == 12.5
    assert a.problems() == []
    assert (b.cell, b.alt) == (3, None) and b.width_px > 1100
    assert b.oversize == pytest.approx(b.width_px / plotting.COLUMN_PX)
    assert b.smallest_text_shown_px == pytest.approx(12.5 / b.oversize)
    found = " | ".join(b.problems())
    assert "drawn" in found and "smallest text" in found and "no alt text" in found
    assert c.width_px == 1000 and c.smallest_text_px is None and c.name is None
    plt.close("all")


def test_figure_outputs_reads_a_file(tmp_path):
    fig = plt.figure(figsize=(2, 1), dpi=100)
    path = tmp_path / "nb.ipynb"
    nbformat.write(_notebook(({"mystnb": {"image": {"alt": "x"}}}, _png(fig), None)), str(path))
    (f,) = plotting.figure_outputs(path)
    assert f.alt == "x" and f.smallest_text_px is None
    plt.close(fig)


def test_book_style_draws_a_wide_figure_legible_in_the_column(style):
    """The widest figure the style allows, three panels with titles, legends and a log axis,
    shows with no text under MIN_TEXT_PX and within MAX_OVERSIZE of the column."""
    fig, axes = plt.subplots(1, 3, figsize=(plotting.WIDE, 3))
    for ax in axes:
        ax.plot([1, 10, 100], [0.2, 0.3, 0.5], "o-", label="ours")
        ax.set(xscale="log", xlabel="budget", ylabel="score", title="a panel")
        ax.legend(title="source")
    fig.tight_layout()
    data, meta = plotting.figure_png(fig)
    width = plotting.png_size(base64.b64decode(data))[0]
    shown = plotting.ShownFigure(cell=0, name=None, width_px=width, alt="three panels",
                                 smallest_text_px=meta["nearid"]["smallest_text_px"])
    assert shown.problems() == []
    assert shown.smallest_text_shown_px >= plotting.MIN_TEXT_PX


def test_smallest_text_px_finds_the_smallest_drawn_text(style):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.text(0.5, 0.5, "tiny", fontsize=6)
    ax.text(0.5, 0.2, "", fontsize=2)  # empty: not drawn
    assert plotting.smallest_text_px(fig) == pytest.approx(6 * plotting.DPI / 72)
    ax.set_axis_off()  # tick labels of a hidden axis do not count, the annotation still does
    assert plotting.smallest_text_px(fig) == pytest.approx(6 * plotting.DPI / 72)


def _labels(axis, which="major"):
    ticks = axis.get_majorticklabels() if which == "major" else axis.get_minorticklabels()
    lo, hi = sorted(axis.get_view_interval())
    return [t.get_text() for t in ticks
            if t.get_text() and lo * (1 - 1e-9) <= t.get_position()[axis is axis.axes.yaxis] <= hi * (1 + 1e-9)]


@pytest.mark.parametrize("lo, hi, expect", [(0.18, 0.6, None), (200, 1000, ["200", "500", "1000"]),
                                            (1.02, 1.5, None)])
def test_tidy_log_axes_labels_a_narrow_log_axis_in_plain_numbers(style, lo, hi, expect):
    fig, ax = plt.subplots()
    ax.plot([lo, hi], [1, 2])
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    fig.canvas.draw()
    assert _labels(ax.xaxis, "minor"), "matplotlib labels minor ticks here: the overlap this fixes"
    plotting.tidy_log_axes(fig)
    fig.canvas.draw()
    labels = _labels(ax.xaxis)
    assert not _labels(ax.xaxis, "minor")
    assert len(labels) >= 3 and all("10^" not in t and "times" not in t for t in labels)
    if expect:
        assert labels == expect
    values = [float(t.replace("\N{MINUS SIGN}", "-")) for t in labels]
    assert values == sorted(values) and lo <= values[0] and values[-1] <= hi


def test_tidy_log_axes_keeps_decades_and_ticks_a_chapter_set(style):
    fig, (wide, fixed) = plt.subplots(1, 2)
    wide.plot([1e-3, 10], [1, 2])
    wide.set_xscale("log")
    fixed.plot([100, 400], [1, 2])
    fixed.set_xscale("log", base=2)
    fixed.set_xticks([100, 200, 400], ["100", "200", "400"])
    before = type(wide.xaxis.get_major_locator())
    plotting.tidy_log_axes(fig)
    fig.canvas.draw()
    assert type(wide.xaxis.get_major_locator()) is before  # four decades: matplotlib's own ticks
    assert [t.get_text() for t in fixed.get_xticklabels()] == ["100", "200", "400"]
    assert not _labels(fixed.xaxis, "minor")


def test_coinciding_groups_lines_a_reader_cannot_tell_apart():
    curves = {"permutation": [0.2, 0.21], "rigid": [0.0, 0.03], "linear": [0.0, 0.0301], "ica": [0.001, 0.03]}
    assert plotting.coinciding(curves, tol=0.002) == [["rigid", "linear", "ica"]]
    assert plotting.coinciding(curves, tol=1e-6) == []


def test_legend_columns_gives_each_group_its_own_column(style):
    fig, ax = plt.subplots()
    for lab in ("a", "b", "c"):
        ax.plot([0, 1], [0, 1], label=lab)
    handles, labels = ax.get_legend_handles_labels()
    leg = plotting.legend_columns(ax, handles, labels, starts=("c",))
    fig.canvas.draw()
    texts = {t.get_text(): t.get_window_extent() for t in leg.get_texts()}
    assert list(texts) == ["a", "b", "c", ""]  # "c" starts a column, padded with one blank
    assert texts["a"].x0 == texts["b"].x0 < texts["c"].x0
    assert texts["c"].y0 == texts["a"].y0


def test_family_styles_and_colours_tell_every_family_apart():
    colors, styles = plotting.family_colors(), plotting.family_styles()
    assert set(colors) == set(styles)
    assert len({tuple(np.round(c, 3)) for c in colors.values()}) == len(colors)
    assert len({s["marker"] for s in styles.values()}) == len(styles)
    assert len({str(s["dashes"]) for s in styles.values()}) == len(styles)


def _chapters():
    from pathlib import Path

    from nearid.book import runner

    root = Path(__file__).resolve().parents[2]
    return [pytest.param(ch, id=ch.key) for ch in runner.list_chapters(root)]


@pytest.mark.parametrize("chapter", _chapters())
def test_every_figure_cell_says_what_it_shows(chapter):
    """A figure the book numbers (cell metadata mystnb.figure) carries alt text (mystnb.image.alt)
    that a screen reader can read instead of the image's file name, a hash."""
    import jupytext

    for cell in jupytext.read(chapter.source).cells:
        opts = cell.metadata.get("mystnb", {})
        if "figure" in opts:
            alt = opts.get("image", {}).get("alt", "")
            assert len(alt.split()) >= 8, f"{chapter.key}: figure {opts['figure'].get('name')} has no alt text"
