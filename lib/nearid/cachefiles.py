"""Cache entries read and written so that no entry can stop a run and no full disk loses work.

Both caches (the task cache of :mod:`nearid.tasks`, the generated arrays of
:mod:`nearid.data.cache`) live in folders that other people may write and on disks that fill
up. What they share lives here:

* :func:`open_entry` opens an entry without following a symbolic link and without blocking
  (``read`` on a named pipe waits for ever), takes regular files only and checks the size
  from ``fstat`` before a byte is read: a 100 GB sparse file is refused, never loaded.
* :func:`read_exact` reads a checked length in chunks, never past what ``fstat`` promised.
* :func:`folder_problem` says, without creating anything, why a folder cannot hold a cache
  (a file, a dangling link, a folder this user cannot write), so a run can refuse it before
  any work.
* :func:`write_atomically` writes a small file under a unique temporary name that no planted
  link can redirect, then renames it into place.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

CHUNK = 16 << 20  # bytes per read: large files are read and hashed in pieces of this size
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class BadEntry(Exception):
    """An entry that is not read; the message says why (the caller names the file)."""


def memory_limit() -> int:
    """The most bytes an entry read into memory may hold: half the physical memory (a larger
    one could not be loaded beside the values it decodes into)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):  # not POSIX: no bound we can compute
        return 1 << 62


def size_text(n: int) -> str:
    """Bytes for people: 1.2 GB, 310 kB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words."""
    for test, name in ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_entry(path: str | os.PathLike, max_bytes: int, *, follow: bool = False) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``path`` and its ``fstat``.

    FileNotFoundError when nothing is there (nor can be: a file where one of the path's
    folders should be); :class:`BadEntry` when something is there that
    must not be read: a link (unless ``follow``), a named pipe, a device, a folder, a file
    larger than ``max_bytes``, or one that cannot be opened. Nothing is read here."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        raise
    except NotADirectoryError:  # a file where a folder of the path should be: no entry there
        raise FileNotFoundError(errno.ENOENT, "no such entry", str(path)) from None
    except OSError as exc:
        raise BadEntry(f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):  # before open(): opening a device may itself do something
        raise BadEntry(f"is {kind(st.st_mode)}, not a regular file")
    try:
        fd = os.open(path, _READ_FLAGS | (0 if follow else _NOFOLLOW))
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadEntry("is a symbolic link, not a regular file") from None
        raise BadEntry(f"cannot be opened ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)  # what was opened, whatever was swapped in since lstat
        if not stat.S_ISREG(st.st_mode):
            raise BadEntry(f"is {kind(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise BadEntry(f"holds {size_text(st.st_size)}, more than the {size_text(max_bytes)} "
                           f"an entry may hold on this machine")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_exact(fd: int, length: int, offset: int = 0) -> bytes:
    """``length`` bytes from ``offset``, read in chunks; BadEntry when the file is shorter."""
    buf = bytearray(length)
    view, done = memoryview(buf), 0
    while done < length:
        got = os.pread(fd, min(CHUNK, length - done), offset + done)
        if not got:
            raise BadEntry(f"ends after {size_text(offset + done)}, shorter than it says")
        view[done:done + len(got)] = got
        done += len(got)
    return bytes(buf)


def _nearest_existing(path: Path) -> Path | None:
    for folder in (path, *path.parents):
        if os.path.lexists(folder):
            return folder
    return None


def folder_problem(folder: str | os.PathLike) -> str | None:
    """Why ``folder`` cannot hold a cache, in words that follow its name (None: it can, or
    it can be made). Creates nothing: a run that refuses it leaves no trace."""
    path = Path(folder).absolute()
    found = _nearest_existing(path)
    if found is None:
        return None
    if found.is_symlink() and not found.exists():
        where = "is" if found == path else f"cannot be made: {found} is"
        return f"{where} a symbolic link to {os.readlink(found)}, which does not exist"
    try:
        mode = os.stat(found).st_mode
    except OSError as exc:
        return f"cannot be checked ({exc.strerror or exc})"
    if not stat.S_ISDIR(mode):
        return f"is {kind(mode)}, not a folder" if found == path else \
            f"cannot be made: {found} is {kind(mode)}, not a folder"
    if not os.access(found, os.W_OK | os.X_OK):
        return "is a folder this user cannot write" if found == path else \
            f"cannot be made: this user cannot write {found}"
    return None


def make_subfolder(folder: Path) -> None:
    """Make ``folder`` (a cache's own sub-folder) if missing; OSError when a link or anything
    but a folder is in its place, so no write is redirected through a planted link. (The
    cache's root may be a link on purpose: only the folders a cache makes are checked.)"""
    folder.mkdir(parents=True, exist_ok=True)
    mode = os.lstat(folder).st_mode
    if not stat.S_ISDIR(mode):
        raise OSError(errno.ENOTDIR, f"{folder} is {kind(mode)}, not a folder")


def oserror_text(exc: OSError) -> str:
    """An OSError in a few words (its strerror, else its text)."""
    return exc.strerror or str(exc) or type(exc).__name__


def temporary_name(path: Path) -> Path:
    """A unique temporary name beside ``path`` (never read as an entry: it starts with a dot)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")


def create_new(path: Path, mode: int = 0o666) -> int:
    """A descriptor of a new file at ``path``: never an existing file, never through a link."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)


def write_atomically(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` or what it held before: written under a new temporary name,
    synced, then renamed (a link at ``path`` is replaced, never followed)."""
    tmp = temporary_name(path)
    try:
        fd = create_new(tmp)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
