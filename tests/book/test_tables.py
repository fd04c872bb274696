"""nearid.book.tables: numbers formatted alike, and a DataFrame as a numbered MyST table that
docutils parses into a real table (caption, label, header, one row per frame row)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from docutils.core import publish_doctree
from myst_parser.parsers.docutils_ import Parser

from nearid.book import tables


def doctree(source: str):
    """Parse MyST the way the book does (list-table, dollar math), without Sphinx."""
    return publish_doctree(source, parser=Parser(),
                           settings_overrides={"myst_enable_extensions": ["dollarmath"], "report_level": 2,
                                               "halt_level": 2})


def cells(table_node) -> list[list[str]]:
    return [[entry.astext() for entry in row.children] for row in table_node.findall(lambda n: n.tagname == "row")]


@pytest.mark.parametrize("x, decimals, signed, text", [
    (0.19619, 3, False, "0.196"),
    (-0.00001, 3, False, "0.000"),  # never "-0.000"
    (-0.00001, 3, True, "0.000"),
    (0.0481, 3, True, "+0.048"),
    (1234.5, 0, False, "1,234"),  # banker's rounding of the half is Python's
    (12, None, False, "12"),
    (np.int64(3), 2, True, "+3"),
    (float("nan"), 3, False, "–"),
    (None, 3, False, "–"),
    (float("-inf"), 3, True, "-inf"),
    (True, None, False, "yes"),
    ("text", 3, False, "text"),
])
def test_format_number(x, decimals, signed, text):
    assert tables.format_number(x, decimals, signed=signed) == text


@pytest.mark.parametrize("x, text", [(0.0581, "0.0581"), (-0.00948, "-0.00948"), (1.5, "1.50"), (0.0, "0"),
                                     (1.67e-16, "1.67e-16"), (2_500_000.0, "2.50e+06"), (7, "7")])
def test_significant(x, text):
    assert tables.significant(x) == text


def test_a_column_gets_one_number_of_decimals_from_its_typical_value():
    fmt = tables.column_format([0.0334, 0.2072, 2.0618])
    assert [fmt(v) for v in (0.0334, 0.2072, 2.0618)] == ["0.033", "0.207", "2.062"]
    tiny = tables.column_format([1e-16, 2e-16, 0.0])
    assert tiny(1.234e-16) == "1.23e-16" and tiny(0.0) == "0"
    ints = tables.column_format([16, 512])
    assert ints(512) == "512"


@pytest.mark.parametrize("est, lo, hi, text", [
    (0.0481, 0.0182, 0.0815, "+0.048 [+0.018, +0.082]"),  # width 0.063: two significant digits of it
    (0.894, 0.816, 1.0, "+0.89 [+0.82, +1.00]"),
    (-4.67e-08, -1.98e-07, 1.04e-07, "-4.7e-08 [-2.0e-07, +1.0e-07]"),
    (0.5, -math.inf, math.inf, "+0.50 [-inf, +inf]"),
])
def test_interval_digits_follow_its_width(est, lo, hi, text):
    assert tables.interval(est, lo, hi) == text


def test_a_frame_becomes_a_numbered_captioned_table():
    frame = pd.DataFrame({"error": [0.19619, 1.7e-16], "note": ["*not* math: $5", "# - + |"]},
                         index=pd.Index(["signed permutation", "rigid"], name="family"))
    source = tables.markdown(frame, "Errors per family, $\\delta = 0$.", "tbl-test",
                             formats={"error": tables.significant})
    tree = doctree(source)
    [table] = list(tree.findall(lambda n: n.tagname == "table"))
    assert "tbl-test" in table["ids"]
    assert table.next_node(lambda n: n.tagname == "title").astext() == "Errors per family, \\delta = 0."
    assert list(table.findall(lambda n: n.tagname == "math"))  # the caption's math is math
    assert cells(table) == [["family", "error", "note"],
                            ["signed permutation", "0.196", "*not* math: $5"],  # cell text stays literal
                            ["rigid", "1.70e-16", "# - + |"]]


def test_outer_index_levels_are_named_once_per_group():
    frame = pd.DataFrame({"v": [1.0, 2.0, 3.0]},
                         index=pd.MultiIndex.from_tuples([("a", "x"), ("a", "y"), ("b", "x")], names=["g", "h"]))
    rows = cells(next(doctree(tables.markdown(frame, "c", "tbl-g")).findall(lambda n: n.tagname == "table")))
    assert [r[:2] for r in rows] == [["g", "h"], ["a", "x"], ["", "y"], ["b", "x"]]


def test_multiindex_columns_are_joined():
    frame = pd.DataFrame([[1.0, 2.0]], columns=pd.MultiIndex.from_tuples([("InfoM", "AE"), ("InfoM", "AE + ICA")]))
    rows = cells(next(doctree(tables.markdown(frame, "c", "tbl-m", index=False)).findall(
        lambda n: n.tagname == "table")))
    assert rows[0] == ["InfoM · AE", "InfoM · AE + ICA"]


@pytest.mark.parametrize("caption, label", [("two\nlines", "tbl-a"), ("", "tbl-a"), ("ok", "tbl a"), ("ok", "1tbl")])
def test_bad_caption_or_label_is_refused(caption, label):
    with pytest.raises(ValueError):
        tables.markdown(pd.DataFrame({"a": [1]}), caption, label)


def test_table_is_markdown_for_the_notebook():
    shown = tables.table(pd.DataFrame({"a": [1.0]}), "c", "tbl-x")
    assert shown._repr_markdown_().startswith("```{list-table} c")


def test_a_cell_with_ours_and_the_papers_number_keeps_each_on_its_line():
    text = tables.beside_paper(tables.mean_sd(0.4812, 0.0501), 0.34)
    assert text == "0.48\u00a0±\u00a00.05\npaper\u00a00.34"
    table = next(doctree(tables.markdown(pd.DataFrame({"InfoM": [text]}), "c", "tbl-p", index=False)).findall(
        lambda n: n.tagname == "table"))
    [entry] = [e for e in table.findall(lambda n: n.tagname == "entry") if "paper" in e.astext()]
    lines = [t.astext() for t in entry.findall(lambda n: n.tagname == "#text")
             if t.astext().strip() and t.parent.tagname != "raw"]
    assert lines == ["0.48\u00a0±\u00a00.05", "paper\u00a00.34"]  # a line break between them
    assert any("<br" in r.astext() for r in entry.findall(lambda n: n.tagname == "raw"))
