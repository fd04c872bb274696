"""Small file helpers shared by the science and the book: writes that never leave half a file,
and never write through a symbolic link.

A link planted where an output belongs (``book/executed/.01_definitions.lock`` pointing at a
file of the user's) would turn the runner's next write into a write outside the checkout:
every output is therefore made under a fresh name (``mkstemp``: ``O_CREAT | O_EXCL``, which
never follows a link) and renamed over its place (``os.replace`` replaces a link, never its
target), files that are opened in place (locks) are opened with ``O_NOFOLLOW``, and a link
found where an output belongs is refused with :class:`UnsafePath`, naming it.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import IO


class UnsafePath(ValueError):
    """A symbolic link (or a FIFO, a device) sits where an output belongs: refused before
    anything is written through it (the command line's exit code 2)."""


def _describe_link(path: str | os.PathLike) -> str:
    try:
        return f"a symbolic link to {os.readlink(path)}"
    except OSError:
        return "a symbolic link"


def refuse_symlink(path: str | os.PathLike) -> None:
    """Raise :class:`UnsafePath` if ``path`` itself is a symbolic link (a link in a folder
    above it is the user's choice of where outputs live, and is followed)."""
    if os.path.islink(path):
        raise UnsafePath(f"refusing to write {path}: it is {_describe_link(path)}, where an output "
                         f"belongs; remove it and run again")


def new_file_problem(path: str | os.PathLike) -> str | None:
    """Why a command could not write its output file ``path`` (a link, a folder or a pipe
    there; its folder not one and not makeable, or not writable), in words; None when it
    could (a missing folder is made when the file is written). Looks, creates nothing: a
    command checks its outputs before its work, not after."""
    from nearid.cachefiles import folder_problem

    path = Path(path)
    if os.path.islink(path):
        return f"{path} is {_describe_link(path)}"
    if os.path.exists(path) and not os.path.isfile(path):
        return f"{path} is {'a folder' if os.path.isdir(path) else 'not a regular file'}"
    why = folder_problem(path.parent)
    return None if why is None else f"its folder {path.parent} {why}"


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """:func:`atomic_write_text` for bytes (an image, a PDF)."""
    _atomic_write(path, data, "wb")


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write via a temporary file of a unique name in the same folder, then rename: never a
    half file, never a write through a link (one at ``path`` is refused)."""
    _atomic_write(path, text, "w")


def _atomic_write(path: str | os.PathLike, data: str | bytes, mode: str) -> None:
    path = Path(path)
    refuse_symlink(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; outputs are meant to be read
        os.replace(tmp, path)  # a link planted meanwhile is replaced, its target untouched
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def open_no_follow(path: str | os.PathLike, flags: int, mode: str) -> IO:
    """``open`` for a file used in place (a lock): ``os.open(path, flags | O_NOFOLLOW)``,
    refusing a link (:class:`UnsafePath`) and anything but a regular file (a FIFO would block
    the reader); ``mode`` is the ``fdopen`` mode matching ``flags``. Other errors are OSError."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"refusing to open {path}: it is {_describe_link(path)}, where the runner's "
                             f"own file belongs; remove it and run again") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(f"refusing to open {path}: it is not a regular file; remove it and run again")
    os.set_blocking(fd, True)
    return os.fdopen(fd, mode)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists (one owned by someone else counts): a
    temporary file or lock left by a dead process may be cleaned up, never a living one's."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, owned by another user
        return True
    return True
