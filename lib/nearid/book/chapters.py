"""The chapters of a checkout: where the project is, which ``notebooks/NN_slug.py`` exist, and
the errors a run of them raises."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nearid import codehash
from nearid.book import profiles

LIB_DIR = codehash.PACKAGE_DIR
KERNELSPEC = {"name": "python3", "language": "python", "display_name": "Python 3"}


class ChapterFailed(RuntimeError):
    """A chapter raised; the message names the chapter, the failing cell and the error."""

    def __init__(self, chapter: str, cell_index: int | None, error: str, failed_notebook: Path | None,
                 where: str | None = None):
        self.chapter, self.cell_index, self.error = chapter, cell_index, error
        self.failed_notebook = failed_notebook
        where = where or (f"in cell {cell_index}" if cell_index is not None else "before any cell ran")
        keep = f"; the failed notebook is {failed_notebook}" if failed_notebook else ""
        super().__init__(f"chapter {chapter} failed {where}: {error}{keep}")


class BookFailed(RuntimeError):
    """Some chapters of ``nearid book`` failed (the others finished); names each failure."""


@dataclass(frozen=True)
class Chapter:
    key: str  # "02_isometric_dgp"
    source: Path  # notebooks/02_isometric_dgp.py

    @property
    def number(self) -> str:
        return self.key.split("_", 1)[0]


# ----------------------------------------------------------------------------- discovery
def find_root(start: str | os.PathLike | None = None) -> Path:
    """The project root: ``$NEARID_ROOT``, else the nearest folder up with notebooks/ and lib/."""
    if os.environ.get("NEARID_ROOT"):
        root = Path(os.environ["NEARID_ROOT"]).resolve()
        if not (root / "notebooks").is_dir():
            what = "does not exist" if not root.exists() else "holds no notebooks/ folder"
            raise FileNotFoundError(f"$NEARID_ROOT is '{os.environ['NEARID_ROOT']}', which {what}; allowed: "
                                    "a nearid checkout (with notebooks/ and lib/nearid/), or unset "
                                    "(the checkout around the current folder)")
        return root
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "notebooks").is_dir() and (folder / "lib" / "nearid").is_dir():
            return folder
    raise FileNotFoundError("not inside a nearid checkout (no notebooks/ and lib/nearid/ found "
                            "here or above); cd into the repository or set NEARID_ROOT")


def list_chapters(root: Path | None = None, strict: bool = True) -> list[Chapter]:
    """Every ``notebooks/NN_slug.py``; ``strict`` makes a chapter without parameters an error."""
    root = root or find_root()
    found = []
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.py")):
        if path.stem not in profiles.CHAPTERS:
            if strict:
                raise KeyError(f"{path} has no parameter block in nearid.book.profiles.CHAPTERS")
            continue
        found.append(Chapter(path.stem, path))
    return found


def get_chapter(name: str, root: Path | None = None) -> Chapter:
    chapters = list_chapters(root, strict=False)
    for ch in chapters:
        if name in (ch.key, ch.number):
            return ch
    raise ValueError(f"unknown chapter {name!r}; valid: "
                     f"{', '.join(c.number + ' (' + c.key + ')' for c in chapters)}")


def default_out_dir(root: Path) -> Path:
    return root / "book" / "executed"


@dataclass(frozen=True)
class ChapterRun:
    """One execution of a chapter, as its outputs record it: the chapter, the profile, the
    resolved parameters and the overrides given, the content key it will be stored under and
    the digests of that key's parts (:func:`nearid.book.cachekey.key_and_parts`, kept in its ``.key``)."""

    chapter: Chapter
    profile: str
    params: dict[str, Any]
    overrides: dict[str, Any]
    key: str
    parts: dict[str, str] = field(default_factory=dict)
