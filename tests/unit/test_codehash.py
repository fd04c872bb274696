"""The static import walk behind every cache key: what it follows, what it leaves out."""

from nearid import codehash
from nearid.book import runner


def _package(tmp_path, files: dict[str, str]):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_follows_lazy_relative_and_transitive_imports(tmp_path):
    pkg = _package(tmp_path, {
        "__init__.py": "", "a.py": "def f():\n    from nearid.sub import b\n",
        "sub/__init__.py": "", "sub/b.py": "from . import c\n", "sub/c.py": "x = 1\n",
        "unused.py": "import nearid.a\n", "notes.txt": "not code",
    })
    found = codehash.module_closure("import numpy\nfrom nearid import a\n", package_dir=pkg)
    assert sorted(found) == ["nearid", "nearid.a", "nearid.sub", "nearid.sub.b", "nearid.sub.c"]
    digest = codehash.digest_files(found.values(), package_dir=pkg)
    (pkg / "unused.py").write_text("# edited\n")
    (pkg / "notes.txt").write_text("edited")
    assert codehash.digest_files(codehash.module_closure("from nearid import a\n", package_dir=pkg).values(),
                                 package_dir=pkg) == digest
    (pkg / "sub" / "c.py").write_text("x = 2\n")
    assert codehash.digest_files(codehash.module_closure("from nearid import a\n", package_dir=pkg).values(),
                                 package_dir=pkg) != digest


def test_unparsable_code_depends_on_everything(tmp_path):
    pkg = _package(tmp_path, {"__init__.py": "", "a.py": "", "b/c.py": ""})
    assert len(codehash.module_closure("this is not python(", package_dir=pkg)) == 3


def test_real_chapters_cover_their_own_code_only(root):
    code = {ch.key: set(runner.chapter_code(ch)) for ch in runner.list_chapters(root)}
    assert len(code) == 7
    for key, modules in code.items():
        assert not any(m.startswith("nearid.cli") for m in modules), key
        assert "nearid.book.runner" not in modules
        assert f"nearid.book.profiles.ch{key}" in modules
        assert "nearid.book.results" in modules
    owners = {key for key, modules in code.items() if "nearid.experiments.ch06_cell_microscopy" in modules}
    assert owners == {"06_cell_microscopy"}
    assert {key for key, modules in code.items() if "nearid.book.profiles.ch04_alignment" in modules} == {"04_alignment"}
