"""The package's three kinds stay apart: science and experiments never import the book
machinery or the command line (walked statically with ast, lazy imports included)."""

import ast
from pathlib import Path

import pytest

import nearid

PACKAGE = Path(nearid.__file__).resolve().parent
UPWARD = ("nearid.book", "nearid.cli")
# The package's own __init__ re-exports two chapter conveniences (setup, pick_device) from
# nearid.book.env; it is the one module above both kinds.
SCIENCE = sorted(p for p in PACKAGE.rglob("*.py")
                 if p.relative_to(PACKAGE).parts[0] not in ("book", "cli") and p != PACKAGE / "__init__.py")


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
    assert {"align.py", "ica.py", "experiments/ch06_cellpaint.py", "data/mnist.py"} <= rel


@pytest.mark.parametrize("path", SCIENCE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_science_and_experiments_do_not_import_book_or_cli(path):
    bad = [n for n in _imports(path) if n.startswith(UPWARD)]
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_book_does_not_import_cli():
    for path in (PACKAGE / "book").rglob("*.py"):
        assert not [n for n in _imports(path) if n.startswith("nearid.cli")], path
