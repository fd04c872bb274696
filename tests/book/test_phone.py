"""The phone check: tables wider than the column and figures whose text shows too small are
named; a page measured in a real Chromium when the machine has one."""

import base64
import hashlib
import json

import pytest

from nearid.book import pdf, phone


def test_problems_name_wide_tables_and_small_text():
    measured = {"column": 358, "tables": [{"index": 0, "width": 358.5, "column": 358, "caption": "fits"},
                                          {"index": 1, "width": 500, "column": 358, "caption": "Table 3, ours"}],
                "images": [{"src": "../../_images/aa.png", "shown": 358, "drawn": 840},
                           {"src": "../../_images/bb.png", "shown": 672, "drawn": 672},
                           {"src": "../../_images/cc.png", "shown": 100, "drawn": 840}]}
    measured["code"] = [{"width": 600, "scroll": 600, "text": "x = 1"}, {"width": 600, "scroll": 750, "text": "y"}]
    said = phone.problems(measured, {"aa": 12.5, "bb": 12.5}, page="p.html")
    assert len(said) == 3 and "runs 150 px past its box" in said[1]
    said = [said[0], said[2]]
    assert "table 2 ('Table 3, ours') is 500 px wide in a 358 px column" in said[0]
    assert "smallest text at 5.3 px" in said[1], "12.5 px drawn, shown at 358/840"
    assert phone.problems({"tables": [], "images": measured["images"][1:2]}, {"bb": 12.5}) == []


def test_drawn_text_is_read_from_the_outputs_by_the_images_content(tmp_path):
    png = b"\x89PNG\r\n\x1a\nfake"
    nb = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "data": {"image/png": base64.b64encode(png).decode()},
         "metadata": {"image/png": {"nearid": {"smallest_text_px": 11.0}}}},
        {"output_type": "display_data", "data": {"image/png": base64.b64encode(b"other").decode()}, "metadata": {}}]}]}
    path = tmp_path / "a.ipynb"
    path.write_text(json.dumps(nb))
    assert phone.drawn_text_px([path]) == {hashlib.sha256(png).hexdigest(): 11.0}


@pytest.mark.skipif(pdf.find_browser() is None, reason="no Chromium on this machine")
def test_a_page_is_measured_at_a_phones_width(tmp_path):
    page = tmp_path / "p.html"
    page.write_text('<html><head><meta name="viewport" content="width=device-width"></head><body><article>'
                    '<table style="width:600px"><caption>wide</caption><tr><td>x</td></tr></table>'
                    '<table><tr><td>narrow</td></tr></table></article></body></html>')
    m = phone.measure(pdf.find_browser(), page)
    assert m["viewport"] == phone.PHONE_WIDTH
    assert round(m["tables"][0]["width"]) == 600 and m["tables"][1]["width"] < phone.PHONE_WIDTH
    said = phone.problems(m, {})
    assert len(said) == 1 and "'wide'" in said[0]
    assert not list(tmp_path.glob(".phone-*")), "the measured copy is removed"
