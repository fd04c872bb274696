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
