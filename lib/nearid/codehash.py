"""Which ``nearid`` source files a piece of code depends on, and one digest of them.

A cached result (an executed chapter, a finished sweep task) is stale exactly when code it
ran has changed. We find that code statically: parse the source with :mod:`ast`, collect
every ``import nearid...`` / ``from nearid... import ...`` (at module level *and* inside
functions, since the library imports heavy modules lazily), resolve each to its file under
the package folder, and repeat for those files. Parent packages' ``__init__.py`` files are
included, because importing a submodule runs them. Only ``.py`` files count: a stray
``notes.txt`` in the package changes no digest.

Modules loaded by name at run time (``importlib.import_module``) are invisible here; the
caller adds them as extra roots (the runner does so for a chapter's parameter module).

The other code a result depends on is the installed packages: :func:`package_versions`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import os
import sys
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "nearid"
PACKAGE_DIR = Path(__file__).resolve().parent
_VERSIONS: dict[tuple, list[str]] = {}


def package_versions() -> list[str]:
    """Every installed distribution as "name==version", sorted: what the runner's chapter keys
    and :mod:`nearid.tasks`' task keys record of the packages. Reading them takes about half a
    second, so the list is kept per state of the folders on ``sys.path`` (installing or
    removing a package changes its folder's modification time)."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            continue
    state = tuple(state)
    if state not in _VERSIONS:
        _VERSIONS.clear()
        _VERSIONS[state] = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
                                  if d.metadata["Name"])
    return list(_VERSIONS[state])


def module_file(module: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The file of ``nearid.a.b`` (``a/b.py`` or ``a/b/__init__.py``), or None if none exists."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = package_dir.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py") if parts[1:] else None, base / "__init__.py"):
        if candidate is not None and candidate.is_file():
            return candidate
    return None


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def imported_modules(source: str, module: str | None = None,
                     package_dir: Path = PACKAGE_DIR) -> set[str]:
    """``nearid`` modules that ``source`` imports anywhere in its body (existing files only).

    ``module`` (the dotted name of ``source``) resolves relative imports. ``from nearid.x
    import y`` counts ``nearid.x.y`` when that is a module, else ``nearid.x``.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if module is None:
                    continue
                anchor = module.split(".")[: -node.level]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == PACKAGE and module_file(name, package_dir) is not None:
                found.add(name)
    return found


def module_closure(source: str, extra_roots: Iterable[str] = (),
                   package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Every ``nearid`` module ``source`` reaches through imports, transitively: name -> file.

    Code that does not parse (it cannot be analysed) conservatively depends on every
    ``.py`` file of the package.
    """
    try:
        todo = set(imported_modules(source, package_dir=package_dir))
    except SyntaxError:
        return {str(p.relative_to(package_dir)): p for p in sorted(package_dir.rglob("*.py"))}
    todo |= {m for m in extra_roots if module_file(m, package_dir) is not None}
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_file(name, package_dir)
        if path is None:
            continue
        seen[name] = path
        todo |= {p for p in _parents(name) if p not in seen}
        todo |= imported_modules(path.read_text(), module=name if path.name != "__init__.py"
                                 else f"{name}.__init__", package_dir=package_dir) - set(seen)
    return dict(sorted(seen.items()))


def digest_files(files: Iterable[Path], package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 over the files' paths (relative to the package) and contents, in sorted order."""
    h = hashlib.sha256()
    for path in sorted(set(files)):
        h.update(str(path.relative_to(package_dir)).encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()
