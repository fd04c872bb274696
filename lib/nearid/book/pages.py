"""The book's pages, cut from the executed chapters.

A chapter runs as one notebook (one kernel, one results JSON, one cache entry), but a reader
takes it in pages a few hundred lines long. In a chapter's source, a markdown cell tagged
``new-page:<slug>`` starts a new page named ``NN_slug-<slug>``; the first ``##`` heading
of that cell becomes the page's title. Values a page's prose pastes with ``{glue}`` but
that another page of the chapter computed travel with it, in a hidden cell, so every page
renders on its own. The executed notebook itself is never changed: the pages are derived
from it (``book/pages/``, rebuilt after every run), so the cache and ``nearid verify`` see
exactly what ran.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from nearid.fileio import atomic_write_text, refuse_symlink

NEW_PAGE = "new-page:"
PAGES_DIR = Path("book") / "pages"
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# {glue}`key`, {glue:text}`key:.3f`, and the directive forms ```{glue:figure} key
_GLUE_ROLE = re.compile(r"\{glue(?::[a-z]+)?\}`([^`:]+)")
_GLUE_DIRECTIVE = re.compile(r"^[`:]{3,}\{glue(?::[a-z]+)?\}\s+(\S+)", re.M)


@dataclass(frozen=True)
class Page:
    """One page: its document name (``04_alignment-layers``) and its notebook."""

    name: str
    notebook: Any


def _page_slug(cell: Any) -> str | None:
    tags = [t for t in cell.get("metadata", {}).get("tags", []) if t.startswith(NEW_PAGE)]
    if not tags:
        return None
    slug = tags[0][len(NEW_PAGE):]
    if len(tags) > 1 or cell.get("cell_type") != "markdown" or not _SLUG.fullmatch(slug):
        raise ValueError(f"a page break is one markdown cell tagged '{NEW_PAGE}<slug>' (slug: lower-case "
                         f"words joined by '-'), got tags {tags} on a {cell.get('cell_type')} cell")
    return slug


def glued_keys(text: str) -> set[str]:
    """The glue keys a piece of MyST markdown pastes."""
    return set(_GLUE_ROLE.findall(text)) | set(_GLUE_DIRECTIVE.findall(text))


def _glue_outputs(cell: Any) -> dict[str, Any]:
    """{key: output} of the values a code cell glued (myst-nb marks them ``scrapbook``)."""
    out = {}
    for o in cell.get("outputs", []):
        name = o.get("metadata", {}).get("scrapbook", {}).get("name")
        if name:
            out[name] = o
    return out


def _as_title(cell: Any, where: str) -> Any:
    """The page-break cell with its first ``##`` heading raised to the page's ``#`` title."""
    cell = copy.deepcopy(cell)
    lines = cell.source.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("## "):
            lines[i] = line[1:]
            cell.source = "\n".join(lines)
            return cell
    raise ValueError(f"{where}: the cell that starts a page must hold a '## ' heading (the page's title)")


def split(nb: Any, key: str) -> list[Page]:
    """The pages of executed chapter ``key``: the cells before the first page break, then one
    page per break. Raises ValueError on a malformed break or two pages of one name."""
    groups: list[tuple[str, list]] = [(key, [])]
    for cell in nb.cells:
        slug = _page_slug(cell)
        if slug is not None:
            name = f"{key}-{slug}"
            if any(name == g[0] for g in groups):
                raise ValueError(f"{key}: two pages named {name!r}")
            groups.append((name, [_as_title(cell, name)]))
        else:
            groups[-1][1].append(cell)
    glued: dict[str, tuple[str, Any]] = {}
    for name, cells in groups:
        for cell in cells:
            for k, o in _glue_outputs(cell).items():
                glued[k] = (name, o)
    pages = []
    for name, cells in groups:
        here = {k for c in cells for k in _glue_outputs(c)}
        wanted = sorted(k for c in cells if c.cell_type == "markdown" for k in glued_keys(c.source))
        borrowed = [glued[k][1] for k in dict.fromkeys(wanted) if k not in here and k in glued]
        if borrowed:
            carrier = nbformat.v4.new_code_cell(source="# values glued on another page of this chapter",
                                                metadata={"tags": ["remove-cell"]})
            carrier.outputs = [copy.deepcopy(o) for o in borrowed]
            carrier.id = f"glued-{len(pages)}"  # a fixed id: the same run gives the same page, byte for byte
            cells = [cells[0], carrier, *cells[1:]]
        page = nbformat.v4.new_notebook(metadata=copy.deepcopy(nb.metadata))
        page.cells = cells
        pages.append(Page(name, page))
    return pages


def page_names(source: Path) -> list[str]:
    """The pages a chapter's jupytext source will give (for the table of contents' test)."""
    import jupytext

    key = Path(source).stem
    nb = jupytext.read(source)
    return [key] + [f"{key}-{s}" for s in (_page_slug(c) for c in nb.cells) if s is not None]


def write_pages(executed_dir: Path, pages_dir: Path, keys: list[str] | None = None) -> list[Path]:
    """Cut every executed chapter in ``executed_dir`` (or those in ``keys``) into its pages in
    ``pages_dir``; a page is rewritten only when it changed, through a temporary file of a unique
    name (:func:`nearid.fileio.atomic_write_text`), never through a link: one where a page
    belongs is refused (:class:`nearid.fileio.UnsafePath`). Returns the pages written."""
    pages_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(Path(executed_dir).glob("[0-9][0-9]_*.ipynb")):
        key = path.stem
        if (keys is not None and key not in keys) or ".failed" in key:
            continue
        pages = split(nbformat.read(path, as_version=4), key)
        names = {p.name for p in pages}
        for stale in [*pages_dir.glob(f"{key}.ipynb"), *pages_dir.glob(f"{key}-*.ipynb")]:
            if stale.stem not in names:  # a page break renamed or removed since the last run
                stale.unlink()
        for page in pages:
            target = pages_dir / f"{page.name}.ipynb"
            refuse_symlink(target)
            text = nbformat.writes(page.notebook)
            if not target.is_file() or target.read_text() != text:
                atomic_write_text(target, text)
                written.append(target)
    return written
