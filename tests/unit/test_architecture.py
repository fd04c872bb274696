"""The package's three kinds stay apart: science and experiments never import the book
machinery or the command line (walked statically with ast, lazy imports included)."""

import ast
from pathlib import Path

import pytest

import nearid

PACKAGE = Path(nearid.__file__).resolve().parent
UPWARD = ("nearid.book", "nearid.cli")
# Everything outside book/ and cli/, the package's own __init__ included (``import nearid``
# must not load the book machinery).
SCIENCE = sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in ("book", "cli"))


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return names


def test_there_are_science_and_experiment_modules():
    rel = {str(p.relative_to(PACKAGE)) for p in SCIENCE}
    assert {"align/families.py", "align/engine.py", "ica.py", "experiments/ch06_cell_microscopy.py", "data/mnist.py",
            "__init__.py", "constraints.py", "env.py"} <= rel


@pytest.mark.parametrize("path", SCIENCE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_science_and_experiments_do_not_import_book_or_cli(path):
    bad = [n for n in _imports(path) if n.startswith(UPWARD)]
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_book_does_not_import_cli():
    for path in (PACKAGE / "book").rglob("*.py"):
        assert not [n for n in _imports(path) if n.startswith("nearid.cli")], path


def test_importing_nearid_loads_no_book_machinery():
    import subprocess
    import sys

    code = "import sys, nearid; print(sorted(m for m in sys.modules if m.startswith(('nearid.book', 'nearid.cli'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
