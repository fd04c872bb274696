"""book/_ext/nearid_site.py: Jupyter Book always loads sphinx-thebe, which writes an inline
script naming an external URL (unpkg.com) into every page and links its own script; the
book's extension drops them. Checked on a one-page Sphinx site, with and without it."""

import importlib.util
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def build(root, tmp_path_factory):
    def _build(extensions):
        src = tmp_path_factory.mktemp("site")
        ext_dir = root / "book" / "_ext"
        (src / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(ext_dir)!r})\n"
                                     f"extensions = {extensions!r}\nhtml_theme = 'basic'\n")
        (src / "index.rst").write_text("A page\n======\n\nText.\n")
        out = src / "_build"
        proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "-E", str(src), str(out)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return (out / "index.html").read_text()
    return _build


def test_thebe_assets_are_dropped_from_every_page(build):
    before = build(["sphinx_thebe"])
    assert "unpkg.com" in before and "sphinx-thebe.js" in before, "sphinx-thebe no longer does this"
    after = build(["sphinx_thebe", "nearid_site"])
    assert "unpkg.com" not in after and "THEBE_JS_URL" not in after
    assert "sphinx-thebe.js" not in after and "sphinx-thebe.css" not in after
    assert "documentation_options.js" in after, "other scripts stay"


def test_only_thebe_assets_are_recognised(root):
    spec = importlib.util.spec_from_file_location("nearid_site", root / "book" / "_ext" / "nearid_site.py")
    site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site)
    assert site.is_thebe_asset("sphinx-thebe.js") and site.is_thebe_asset("_static/sphinx-thebe.css")
    assert not site.is_thebe_asset("_static/doctools.js") and not site.is_thebe_asset(None)


def test_wide_tables_are_labelled_for_the_phone_layout(root):
    spec = importlib.util.spec_from_file_location("nearid_site", root / "book" / "_ext" / "nearid_site.py")
    nearid_site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nearid_site)
    wide = ('<table class="nearid-table table" id="t"><caption>c</caption><thead><tr><th class="head">a</th>'
            '<th class="head"><p>b &amp; c</p></th><th>d</th><th>e</th></tr></thead><tbody>'
            '<tr class="row-even"><th class="stub"><p>x</p></th><td><p>1</p></td><td>2</td><td>3</td></tr>'
            '<tr><th>y</th><td>4</td><td>5</td><td>6</td></tr></tbody></table>')
    narrow = "<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>"
    out = nearid_site.label_table_cells(f"<p>before</p>{wide}<p>between</p>{narrow}")
    assert 'class="nearid-stack nearid-table table"' in out
    assert '<th class="stub" data-label="a"><p>x</p></th><td data-label="b &amp; c"><p>1</p></td>' in out
    assert '<td data-label="e">6</td>' in out and out.count("data-label=") == 8, "body cells only, in order"
    assert narrow in out, "a table of fewer than four columns is left as it is"
    grouped = ('<table><thead><tr><th>g</th><th>a</th><th>b</th><th>c</th></tr></thead><tbody>'
               '<tr><th><p>AE &amp; co</p></th><td>1</td><td>2</td><td>3</td></tr>'
               '<tr><th></th><td>4</td><td></td><td>6</td></tr></tbody></table>')
    out = nearid_site.label_table_cells(grouped)
    assert '<th data-label="g" data-repeat="AE &amp; co"></th>' in out, "a group's name, for the phone"
    assert '<td data-label="b"></td>' in out and out.count("data-repeat") == 1, "an empty value stays empty"
    assert nearid_site.label_table_cells("<table><tr><td>no head</td></tr></table>") == \
        "<table><tr><td>no head</td></tr></table>"
