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
