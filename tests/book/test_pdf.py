"""`make pdf`: the single-page build printed by a system Chromium, and a clear refusal without one."""

from __future__ import annotations

import pytest

from nearid.book import pdf


def test_without_a_browser_it_says_so(monkeypatch, capsys):
    monkeypatch.setenv("NEARID_CHROMIUM", "/nonexistent/chromium")
    assert pdf.find_browser() is None
    assert pdf.main([]) == 2
    assert "no Chromium found" in capsys.readouterr().err


def test_commands():
    cmd = pdf.print_command("chromium", pdf.Path("/tmp/x/index.html"), pdf.Path("/tmp/out.pdf"))
    assert cmd[0] == "chromium" and "--headless" in cmd and "--print-to-pdf=/tmp/out.pdf" in cmd
    assert cmd[-1] == "file:///tmp/x/index.html"
    assert any(a.startswith("--host-resolver-rules=MAP * ~NOTFOUND") for a in cmd)  # offline, as a reader
    build = pdf.singlehtml_command(pdf.Path("/repo"))
    assert build[1:] == ["build", "/repo", "--builder", "singlehtml"]


def test_a_failed_print_is_an_error(tmp_path):
    html = tmp_path / "index.html"
    html.write_text("<p>x</p>")
    with pytest.raises(RuntimeError, match="printed no PDF"):
        pdf.print_pdf("true", html, tmp_path / "out.pdf")  # exits 0 and writes nothing


@pytest.mark.skipif(pdf.find_browser() is None, reason="no Chromium on this machine (optional, for `make pdf`)")
def test_prints_a_page(tmp_path):
    html = tmp_path / "index.html"
    html.write_text("<html><body><h1>nearid</h1><p>a page</p></body></html>")
    out = pdf.print_pdf(pdf.find_browser(), html, tmp_path / "book.pdf")
    assert out.read_bytes()[:5] == b"%PDF-" and out.stat().st_size > 500


def test_the_single_page_is_copied_to_the_root(tmp_path):
    """Jupyter Book's index.html redirects to book/intro.html, whose asset links are written as
    if it sat at the root: the page printed is a copy there."""
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.html").write_text('<script src="_static/mathjax/tex-chtml.js"></script>')
    (tmp_path / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/intro.html" />')
    page = pdf.single_page(tmp_path)
    assert page.parent == tmp_path and "_static/mathjax" in page.read_text()
    with pytest.raises(FileNotFoundError):
        pdf.single_page(tmp_path / "nowhere")
