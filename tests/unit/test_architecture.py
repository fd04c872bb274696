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


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _top_level_imports(path: Path, known: set[str]) -> set[str]:
    """The nearid modules a module imports when it loads (not inside functions)."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {m for m in (node.module, *(f"{node.module}.{a.name}" for a in node.names)) if m in known}
    return out


def test_no_import_loop_in_the_book_machinery():
    """The runner is in parts (chapters, cachekey, locks, kernelproc, runner, bookrun, report),
    each importing only those below it when it loads; none is over 400 lines."""
    paths = {_module_name(p): p for p in (PACKAGE / "book").rglob("*.py")}
    graph = {m: _top_level_imports(p, set(paths)) - {m, "nearid.book"} for m, p in paths.items()}
    done, path = set(), []

    def visit(m):
        assert m not in path, f"import loop: {' -> '.join(path[path.index(m):] + [m])}"
        if m in done:
            return
        path.append(m)
        for n in sorted(graph[m]):
            visit(n)
        path.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
    for part in ("chapters", "cachekey", "locks", "kernelproc", "runner", "bookrun", "report"):
        lines = (PACKAGE / "book" / f"{part}.py").read_text().count("\n")
        assert lines <= 400, f"book/{part}.py has {lines} lines"
