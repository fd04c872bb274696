"""A chapter runs as one notebook and reads as several pages (nearid.book.pages): breaks where
the source says, titles from the break's heading, glued values carried to the page that pastes
them, the executed notebook untouched, and the table of contents in step with the sources."""

import copy

import nbformat
import pytest
import yaml

from nearid.book import pages, runner


def _glue_cell(key, value):
    cell = nbformat.v4.new_code_cell(f"glue({key!r}, {value!r})")
    prefix = "application/papermill.record/"
    cell.outputs = [nbformat.v4.new_output("display_data", data={prefix + "text/plain": repr(value)},
                                           metadata={"scrapbook": {"name": key, "mime_prefix": prefix}})]
    return cell


def _md(text, tag=None):
    return nbformat.v4.new_markdown_cell(text, metadata={"tags": [tag]} if tag else {})


def _chapter():
    nb = nbformat.v4.new_notebook()
    nb.cells = [_md("# A chapter\n\nIt measured {glue:text}`a:.2f`."), _glue_cell("a", 0.5),
                _md("(lbl)=\n## Later results\n\nAgain {glue:text}`a:.3f` and {glue}`b`.", "new-page:later"),
                _glue_cell("b", 2),
                _md("## Exercises\n\n```{glue:figure} fig\n```\nand {glue:text}`a`", "new-page:exercises"),
                _glue_cell("fig", 1)]
    return nb


def test_breaks_titles_and_glued_values_travel():
    nb = _chapter()
    before = copy.deepcopy(nb)
    got = pages.split(nb, "09_demo")
    assert [p.name for p in got] == ["09_demo", "09_demo-later", "09_demo-exercises"]
    assert nb == before, "the executed notebook is not changed"
    first, later, exercises = (p.notebook for p in got)
    assert len(first.cells) == 2
    assert later.cells[0].source.startswith("(lbl)=\n# Later results"), "## raised to the page title"
    carried = later.cells[1]
    assert carried.metadata["tags"] == ["remove-cell"]
    assert [o.metadata["scrapbook"]["name"] for o in carried.outputs] == ["a"], "only what it pastes and lacks"
    assert [o.metadata["scrapbook"]["name"] for o in exercises.cells[1].outputs] == ["a"]
    assert exercises.metadata == nb.metadata


def test_glued_keys_reads_roles_and_directives():
    text = "x {glue:text}`k1:.3f` y {glue}`k2` z {glue:md}`k3`\n```{glue:figure} k4\n:name: f\n```"
    assert pages.glued_keys(text) == {"k1", "k2", "k3", "k4"}


@pytest.mark.parametrize("cell, match", [
    (_md("no heading here", "new-page:x"), "must hold a '## ' heading"),
    (_md("## Two", "new-page:Bad Slug"), "slug"),
    (nbformat.v4.new_code_cell("1", metadata={"tags": ["new-page:x"]}), "markdown cell"),
])
def test_a_malformed_break_is_an_error_that_says_what_a_break_is(cell, match):
    nb = nbformat.v4.new_notebook()
    nb.cells = [_md("# T"), cell]
    with pytest.raises(ValueError, match=match):
        pages.split(nb, "09_demo")


def test_two_pages_of_one_name_are_an_error():
    nb = nbformat.v4.new_notebook()
    nb.cells = [_md("# T"), _md("## A", "new-page:a"), _md("## A again", "new-page:a")]
    with pytest.raises(ValueError, match="two pages named '09_demo-a'"):
        pages.split(nb, "09_demo")


def test_write_pages_rewrites_changed_pages_and_drops_stale_ones(tmp_path):
    executed, out = tmp_path / "executed", tmp_path / "pages"
    executed.mkdir()
    nbformat.write(_chapter(), executed / "09_demo.ipynb")
    nbformat.write(_chapter(), executed / "09_demo.failed.ipynb")  # never a page
    (out).mkdir()
    (out / "09_demo-renamed.ipynb").write_text("{}")  # a break renamed since
    (out / "09_demography.ipynb").write_text("{}")  # another chapter's page: left alone
    written = pages.write_pages(executed, out)
    assert sorted(p.name for p in written) == ["09_demo-exercises.ipynb", "09_demo-later.ipynb", "09_demo.ipynb"]
    assert sorted(p.name for p in out.iterdir()) == ["09_demo-exercises.ipynb", "09_demo-later.ipynb",
                                                     "09_demo.ipynb", "09_demography.ipynb"]
    assert pages.write_pages(executed, out) == [], "unchanged pages are not rewritten"


def test_the_table_of_contents_lists_every_page_of_every_chapter_in_order(root):
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    listed = []
    for part in toc["parts"]:
        for ch in part["chapters"]:
            listed.append(ch["file"])
            listed += [s["file"] for s in ch.get("sections", [])]
    want = [f"book/pages/{name}" for ch in runner.list_chapters(root) for name in pages.page_names(ch.source)]
    assert [f for f in listed if f.startswith("book/pages/")] == want


def test_every_chapter_page_is_at_most_about_500_source_lines(root):
    """Issue 20's aim: pages a reader can hold in mind (source lines of the page's cells)."""
    import jupytext

    for ch in runner.list_chapters(root):
        nb = jupytext.read(ch.source)
        for page in pages.split(nb, ch.key):
            lines = sum(c.source.count("\n") + 1 for c in page.notebook.cells)
            assert lines <= 500, f"{page.name}: {lines} lines"
