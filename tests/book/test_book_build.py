"""The whole book in the smoke profile: every chapter executes, and jupyter-book builds it
under -W (warnings are errors) into a self-contained site."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nearid.book import pdf, phone, runner


@pytest.fixture(scope="module")
def built_book(tmp_path_factory, root, mnist_root):
    site = tmp_path_factory.mktemp("book")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(root / name, site / name)
    shutil.copytree(root / "book", site / "book", ignore=shutil.ignore_patterns("executed", "pages"))
    for name in ("notebooks", "data", "lib", "_static"):  # _static: the site's CSS, which the phone check measures
        (site / name).symlink_to(root / name)
    status = runner.run_book("smoke", jobs=1, root=site, progress=False)
    assert set(status) == {c.key for c in runner.list_chapters(root)}
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", str(site), "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return site / "_build" / "html"


def test_index_links_every_chapter(built_book, root):
    assert "book/intro.html" in (built_book / "index.html").read_text()  # jupyter-book's redirect
    index = (built_book / "book" / "intro.html").read_text()
    for ch in runner.list_chapters(root):
        assert f"pages/{ch.key}.html" in index
        page = (built_book / "book" / "pages" / f"{ch.key}.html").read_text()
        assert "<img" in page, f"{ch.key} shows no figure"


def test_every_page_of_a_chapter_is_built_with_its_title(built_book, root):
    """A chapter cut into pages (nearid.book.pages): each page is in the site under the title
    its break cell gives it. (A value glued on another page of the chapter that did not travel
    with the page fails the -W build above: myst-nb warns of an unknown glue key.)"""
    from nearid.book.pages import page_names

    titles = []
    for ch in runner.list_chapters(root):
        for name in page_names(ch.source)[1:]:
            html = (built_book / "book" / "pages" / f"{name}.html").read_text()
            title = re.search(r'<h1>(?:<span class="section-number">[^<]*</span>)?([^<]+)', html)
            assert title, f"{name} has no title"
            titles.append(title.group(1).strip())
            if name.endswith("-exercises"):
                assert title.group(1).strip().startswith("Exercises: "), title.group(1)
    assert len(titles) == len(set(titles)), "every page has its own sidebar title"


def test_tables_and_figures_are_numbered_by_chapter(built_book, root):
    """"Table 4.2", never "Table 39": the book's own numbers never read as the paper's Tables
    1-4 (the chapters' part of the table of contents is numbered)."""
    from nearid.book.pages import page_names

    seen = 0
    for ch in runner.list_chapters(root):
        number = int(ch.key[:2])
        for name in page_names(ch.source):
            html = (built_book / "book" / "pages" / f"{name}.html").read_text()
            for label in re.findall(r'caption-number">((?:Table|Fig\.) [^<]*)<', html):
                seen += 1
                assert re.fullmatch(rf"(Table|Fig\.) {number}\.\d+ ", label), f"{name}: {label!r}"
    assert seen > 20, "the chapters show their tables and figures with numbers"


@pytest.mark.skipif(pdf.find_browser() is None, reason="no Chromium on this machine (the phone check needs one)")
def test_every_chapter_page_reads_on_a_phone(built_book):
    """At 390 px in Chromium: no table wider than the article's column, no shown code line
    cut off, no figure whose smallest text shows below 9 px (nearid.book.phone); and at
    1280 px no shown code line cut off either."""
    site = built_book.parents[1]
    text_px = phone.drawn_text_px(sorted((site / "book" / "pages").glob("*.ipynb")))
    assert text_px, "the figures recorded the size of their text"
    said, images = [], 0
    for page in sorted((built_book / "book" / "pages").glob("*.html")):
        measured = phone.measure(pdf.find_browser(), page)
        images += sum(Path(im["src"]).stem in text_px for im in measured["images"])
        said += phone.problems(measured, text_px, page=page.name)
        wide = phone.measure(pdf.find_browser(), page, width=1280)
        said += [f"at 1280 px: {s}" for s in phone.problems({**wide, "tables": [], "images": []}, {}, page.name)]
    assert images >= 10, "the figures were found on the pages"
    assert not said, "\n".join(said)


def test_no_page_loads_anything_from_outside_the_site(built_book):
    external = re.compile(r'<(script|link|img|iframe)[^>]+(src|href)="(https?:)?//', re.I)
    offenders = {}
    for page in built_book.rglob("*.html"):
        hits = external.findall(page.read_text(errors="ignore"))
        if hits:
            offenders[str(page.relative_to(built_book))] = len(hits)
    assert not offenders, offenders
    assert (built_book / "_static" / "mathjax" / "tex-chtml.js").is_file()


def test_run_report_page(built_book):
    page = (built_book / "book" / "executed" / "how_this_book_was_run.html").read_text()
    assert "smoke" in page and "torch" in page
