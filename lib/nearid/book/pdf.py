"""The book as one PDF: Jupyter Book's single-page HTML build, printed by headless Chromium.

Why this route: Jupyter Book's own ``pdfhtml`` builder launches pyppeteer, which downloads a
Chromium of its own at run time (nothing downloads here), and its ``pdflatex`` builder needs
a TeX installation and loses the executed outputs' HTML tables. One HTML page printed by a
browser keeps what a reader sees on the site, MathJax included (served from the build
itself). Chromium comes from the system (Debian: ``apt-get install chromium``; or set
``NEARID_CHROMIUM`` to a Chrome/Chromium binary); without one the command says so and exits 2.

``make pdf`` (or ``python -m nearid.book.pdf`` after ``make book``) writes
``_build/nearid-book.pdf``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from nearid.fileio import atomic_write_text, refuse_symlink

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PRINT_SECONDS = 300  # the whole book on one page: MathJax typesets every formula before printing


def find_browser() -> str | None:
    """A headless-capable Chromium: ``$NEARID_CHROMIUM``, else the first of BROWSERS on PATH."""
    chosen = os.environ.get("NEARID_CHROMIUM")
    if chosen:
        return chosen if Path(chosen).exists() else None
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def singlehtml_command(root: Path) -> list[str]:
    """Jupyter Book's single-page build of the executed book (into ``_build/singlehtml``)."""
    return [str(Path(sys.executable).with_name("jupyter-book")), "build", str(root), "--builder", "singlehtml"]


def single_page(folder: Path) -> Path:
    """The single page, at the build's root. Jupyter Book writes ``index.html`` as a redirect
    to the root document (``book/intro.html``), whose links Sphinx computes as if it sat at the
    root (``_static/...``, ``_images/...``): copied there, every asset and MathJax resolve."""
    index = folder / "index.html"
    if not index.exists():
        raise FileNotFoundError(f"{index}: the single-page build wrote no index")
    found = re.search(r'url=([^"\s]+\.html)', index.read_text())
    if not found:
        return index
    page = folder / "nearid-book.html"
    atomic_write_text(page, (folder / found.group(1)).read_text())
    return page


def print_command(browser: str, html: Path, pdf: Path, budget_ms: int = 60_000) -> list[str]:
    """Headless Chromium printing ``html`` to ``pdf`` with every non-local host unreachable
    (what prints is what an offline reader sees) and time for MathJax to finish."""
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", f"--virtual-time-budget={budget_ms}",
            "--no-pdf-header-footer", f"--print-to-pdf={pdf}", html.resolve().as_uri()]


def print_pdf(browser: str, html: Path, pdf: Path) -> Path:
    """Print one HTML file to ``pdf``; RuntimeError (with Chromium's last words) if no PDF came.
    Chromium prints to a fresh name beside it, renamed over ``pdf``: a link planted at ``pdf``
    is refused, never written through (:mod:`nearid.fileio`)."""
    refuse_symlink(pdf)
    pdf.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=pdf.parent, prefix=f".{pdf.name}.", suffix=".tmp.pdf")
    os.close(fd)
    tmp = Path(name)
    try:
        done = subprocess.run(print_command(browser, html, tmp), capture_output=True, text=True,
                              timeout=PRINT_SECONDS)
        with open(tmp, "rb") as fh:
            printed = fh.read(5) == b"%PDF-"
        if not printed:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"{browser} printed no PDF from {html} (exit {done.returncode}): " + " | ".join(tail))
        os.chmod(tmp, 0o644)
        os.replace(tmp, pdf)
    finally:
        tmp.unlink(missing_ok=True)
    return pdf


def main(argv: list[str] | None = None) -> int:
    from nearid.book.runner import find_root

    ap = argparse.ArgumentParser(prog="python -m nearid.book.pdf", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="_build/nearid-book.pdf", help="the PDF to write (default %(default)s)")
    ap.add_argument("--no-build", action="store_true", help="print an existing _build/singlehtml")
    args = ap.parse_args(argv)
    root = find_root()
    browser = find_browser()
    if browser is None:
        print("nearid pdf: no Chromium found (looked for $NEARID_CHROMIUM, " + ", ".join(BROWSERS) + "); "
              "install one (Debian: apt-get install chromium) or read the HTML book", file=sys.stderr)
        return 2
    if not (root / "book" / "pages").is_dir():
        print("nearid pdf: no executed pages under book/pages: run `make book` first", file=sys.stderr)
        return 2
    if not args.no_build:
        rc = subprocess.call(singlehtml_command(root), cwd=root)
        if rc != 0:
            print(f"nearid pdf: the single-page build failed (exit {rc})", file=sys.stderr)
            return 1
    try:
        pdf = print_pdf(browser, single_page(root / "_build" / "singlehtml"), root / args.out)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"nearid pdf: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {pdf.relative_to(root) if pdf.is_relative_to(root) else pdf} ({pdf.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
