"""Generated data sets made once into a file on disk, and read memory-mapped afterwards.

The ``full`` profile's procedural images (chapter 05) and simulated cell crops (chapter 06)
take minutes to make and gigabytes to hold. :func:`cached_array` makes such an array once,
chunk by chunk, straight into an ``.npy`` file under :func:`cache_root` (``data/cache``, or
``$NEARID_DATA_CACHE``), and every later call -- another run, another task, another worker
process -- opens that file read-only and memory-mapped instead of making it again.

* The file's name is a hash of what decides its contents: the generator's parameters, the
  source of the modules that compute it (:func:`source_version`), numpy's and torch's
  versions and the kernel settings (:func:`nearid.kernels.signature`). A change to any of
  them makes another file; nothing is ever read stale.
* A file is written under a temporary name (``.<name>.<host>.<pid>.<random>.tmp``) and
  renamed to its final name only when complete, so a killed run leaves at most a temporary
  file, which no reader opens (the next maker of the same file removes it when its process
  is gone). One lock file per array lets concurrent processes make it once: the others wait
  and then read it.
* Rows are written with ``os.pwrite``, not through a writable mapping, so what has been
  written does not stay in the writer's memory (resident set): a 10 GB file is made in the
  memory of one chunk.
* The cache folder may be writable by others, so a file is never trusted for its name: each
  is signed when made (``<name>.mac``: HMAC-SHA256 of its bytes under the task cache's
  secret, :func:`nearid.tasks.cache_secret`) and checked when opened. Only a regular file of
  exactly the size its header gives is opened (a named pipe, device, folder or link in its
  place is never read); a file that fails any check (another shape, values overwritten,
  no signature: made by an older nearid) is named in a :class:`DataCacheWarning` and made
  again, never returned.
* A folder that cannot be written (read-only, full disk, a file or a dangling link in its
  place) costs no result: the generator makes the data set in memory, as it does for small
  sizes, and says so once per folder and process.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import socket
import stat
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nearid import cachefiles
from nearid.fileio import pid_alive

CACHE_ENV = "NEARID_DATA_CACHE"
WORKERS_ENV = "NEARID_DATA_WORKERS"
MIN_MB_ENV = "NEARID_DATA_CACHE_MIN_MB"
# arrays at least this large go to disk when the caller leaves ``cache`` to us (None): the
# full profile's data sets (1.3 GB and 10 GB); smoke and quick sizes (at most 110 MB) stay
# in memory. ``$NEARID_DATA_CACHE_MIN_MB`` replaces it (0: every data set to disk).
CACHE_MIN_BYTES = 256 * 2**20


def cache_root() -> Path:
    """Where generated arrays live: ``$NEARID_DATA_CACHE`` if set, else ``cache/`` under
    :func:`nearid.data.data_root` (``data/cache`` of the checkout)."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given)
    from nearid.data import data_root

    return data_root() / "cache"


def min_bytes(environ: Mapping[str, str] | None = None) -> float:
    """The size from which a data set goes to disk: ``$NEARID_DATA_CACHE_MIN_MB`` megabytes if
    set, else :data:`CACHE_MIN_BYTES`; ValueError naming the variable when it is no number."""
    env = os.environ if environ is None else environ
    given = env.get(MIN_MB_ENV, "").strip()
    if not given:
        return CACHE_MIN_BYTES
    try:
        value = float(given)
    except ValueError:
        value = -1.0
    if not value >= 0:  # NaN too
        raise ValueError(f"${MIN_MB_ENV} is {given!r}; allowed: a number of megabytes >= 0 (0: every generated "
                         f"data set to disk; unset: {CACHE_MIN_BYTES // 2**20})")
    return value * 2**20


def use_disk(cache: bool | None, nbytes: int) -> bool:
    """Whether an array of ``nbytes`` goes to disk: ``cache`` if given, else whether it is
    at least :data:`CACHE_MIN_BYTES` (or ``$NEARID_DATA_CACHE_MIN_MB``)."""
    if cache is None:
        return nbytes >= min_bytes()
    if not isinstance(cache, (bool, np.bool_)):
        raise ValueError(f"cache must be True, False or None (decide by size), got {cache!r}")
    return bool(cache)


def environment_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """One line naming the first of ``$NEARID_DATA_CACHE``, ``$NEARID_DATA_CACHE_MIN_MB`` and
    ``$NEARID_DATA_WORKERS`` that holds what it does not accept, and what it accepts; None
    when all are fine. Creates nothing: for a check before any work."""
    env = os.environ if environ is None else environ
    folder = env.get(CACHE_ENV, "")
    if folder:
        why = cachefiles.folder_problem(folder)
        if why is not None:
            return (f"${CACHE_ENV} is {folder!r}, which {why}; allowed: a folder this user can write (made if "
                    f"missing), or unset (cache/ under the data folder)")
    try:
        min_bytes(env)
    except ValueError as exc:
        return str(exc)
    workers = env.get(WORKERS_ENV, "").strip()
    if workers and not (workers.isdigit() and int(workers) >= 1):
        return f"${WORKERS_ENV} is {workers!r}; allowed: a whole number >= 1 (or unset: two for large data sets)"
    return None


def default_workers(n_rows: int, min_rows: int) -> int:
    """Processes that make a file of ``n_rows``: ``$NEARID_DATA_WORKERS`` if set, else two
    (the book's machines have two cores) when there are at least ``min_rows`` rows, else one.
    Never more than one inside a daemonic process (which may not start others)."""
    import multiprocessing

    if multiprocessing.current_process().daemon:
        return 1
    given = os.environ.get(WORKERS_ENV, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ValueError(f"${WORKERS_ENV} must be a whole number >= 1, got {given!r}")
        return int(given)
    return min(2, os.cpu_count() or 1) if n_rows >= min_rows else 1


def check_workers(workers: int | None, n_rows: int, min_rows: int) -> int:
    """``workers`` validated (None: :func:`default_workers`), at most one per row."""
    if workers is None:
        workers = default_workers(n_rows, min_rows)
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be a whole number >= 1 (or None: automatic), got {workers!r}")
    return max(1, min(int(workers), n_rows))


def source_version(*modules) -> str:
    """A hash of the source files of ``modules``: part of every key, so that a change to the
    generator's code makes new files."""
    h = hashlib.sha256()
    for mod in modules:
        h.update(Path(mod.__file__).read_bytes())
    return h.hexdigest()[:16]


def environment_version(torch: bool = False) -> dict[str, Any]:
    """What besides the code and parameters decides the numbers: library versions and the
    kernel settings (and torch's version, when torch computes; no generator convolves, so
    whether oneDNN runs torch's convolutions is not part of it)."""
    from nearid import kernels

    env: dict[str, Any] = {"numpy": np.__version__, "kernels": kernels.signature()}
    if torch:
        import torch as _torch

        env["torch"] = _torch.__version__
    return env


def array_key(kind: str, params: dict[str, Any], shape: tuple[int, ...], dtype, version: dict[str, Any]) -> str:
    """The sha256 hex digest that names an array's file."""
    blob = json.dumps({"kind": kind, "params": params, "shape": [int(s) for s in shape],
                       "dtype": np.dtype(dtype).str, "version": version},
                      sort_keys=True, default=_jsonable)
    return hashlib.sha256(blob.encode()).hexdigest()


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot put {type(value).__name__} into a data cache key")


@dataclass(frozen=True)
class RowWriter:
    """Writes rows of an ``.npy`` file being made (C order, rows along the first axis).
    Picklable, so worker processes write their rows into the same file."""

    path: str
    offset: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def _check(self, block: np.ndarray, n: int) -> np.ndarray:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape != (n, *self.shape[1:]):
            raise ValueError(f"expected a block of shape {(n, *self.shape[1:])}, got {block.shape}")
        return block

    def write(self, start: int, block: np.ndarray) -> None:
        """Rows ``start .. start + len(block)``."""
        block = self._check(block, len(block))
        if start < 0 or start + len(block) > self.shape[0]:
            raise IndexError(f"rows {start}..{start + len(block)} outside 0..{self.shape[0]}")
        self._pwrite(start, memoryview(block).cast("B"))

    def put(self, rows, block: np.ndarray) -> None:
        """Rows ``rows`` (any order, no repeats) get the rows of ``block``; consecutive row
        numbers are written together."""
        rows = np.asarray(rows, dtype=np.int64)
        block = self._check(block, len(rows))
        if rows.size == 0:
            return
        if rows.min() < 0 or rows.max() >= self.shape[0]:
            raise IndexError(f"row numbers must lie in 0..{self.shape[0] - 1}")
        order = np.argsort(rows, kind="stable")
        rows, block = rows[order], block[order]
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, len(rows)]):
            self._pwrite(int(rows[lo]), memoryview(np.ascontiguousarray(block[lo:hi])).cast("B"))

    def _pwrite(self, start: int, data: memoryview) -> None:
        fd = os.open(self.path, os.O_WRONLY)
        try:
            pos, done = self.offset + start * self.row_bytes, 0
            while done < len(data):
                done += os.pwrite(fd, data[done:], pos + done)
        finally:
            os.close(fd)




def _remove_stale_temporaries(path: Path) -> None:
    """Temporary files of ``path`` left by killed processes of this host."""
    host = socket.gethostname()
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        parts = tmp.name[len(path.name) + 2:].split(".")  # host (may hold dots), pid, random, "tmp"
        if (len(parts) >= 4 and ".".join(parts[:-3]) == host and parts[-3].isdigit()
                and not pid_alive(int(parts[-3]))):
            with contextlib.suppress(OSError):
                tmp.unlink()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path.lock`` (no lock where fcntl does not exist). The lock file
    is opened without following a link, and must be a regular file (OSError otherwise)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: atomic renames still keep readers safe
        yield
        return
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{lock} is {cachefiles.kind(os.fstat(fd).st_mode)}, not a lock file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class DataCacheWarning(UserWarning):
    """A cached array that was not used (made again) or a cache folder that cannot be written."""


SIGNATURE_MAGIC = b"nearid-data 1"
_UNWRITABLE: set[str] = set()  # folders whose write failure this process has reported


def _signature_path(path: Path) -> Path:
    return path.with_suffix(".mac")


def _mac(secret: bytes, key: str, fh, size: int) -> bytes:
    """HMAC-SHA256 of the whole file (header and rows) under the task cache's secret, read in
    chunks from the open file ``fh`` (never the whole file in memory)."""
    mac = hmac.new(secret, SIGNATURE_MAGIC + b" " + key.encode() + b"\n", hashlib.sha256)
    fh.seek(0)
    done = 0
    while done < size:
        chunk = fh.read(min(cachefiles.CHUNK, size - done))
        if not chunk:
            raise cachefiles.BadEntry(f"ends after {cachefiles.size_text(done)}, shorter than it was")
        mac.update(chunk)
        done += len(chunk)
    return mac.hexdigest().encode()


def _signature_line(key: str, size: int, mac: bytes) -> bytes:
    return b" ".join([SIGNATURE_MAGIC, key.encode(), str(size).encode(), mac]) + b"\n"


def _read_signature(path: Path) -> bytes:
    """The signature file's line; FileNotFoundError or BadEntry when there is none to trust."""
    fd, _ = cachefiles.open_entry(_signature_path(path), 4096)
    try:
        return cachefiles.read_exact(fd, os.fstat(fd).st_size).strip()
    finally:
        os.close(fd)


def _open(path: Path, key: str, shape: tuple[int, ...], dtype) -> tuple[np.memmap | None, str]:
    """The finished file read-only and memory-mapped, or None and why it is not used ("" when
    there is no file): it must be a regular file (no link, pipe or device is opened for
    reading) of exactly the size its ``.npy`` header gives for this shape and dtype, and its
    bytes must match the signature written beside it when it was made (HMAC-SHA256 under
    :func:`nearid.tasks.cache_secret`): a file overwritten with other values of the same shape,
    or made by an older nearid, is never returned. Every open hashes the whole file, in chunks
    (about a second per GB; the full profile's largest, 10 GB, is opened once per task that
    trains on it): file times are too coarse (milliseconds) to tell a rewrite from the
    original, so nothing is taken on trust. What is checked is what is mapped: the same
    descriptor (a later change to the file would still show through the mapping, which is the
    nature of a memory map)."""
    dtype = np.dtype(dtype)
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    try:
        fd, st = cachefiles.open_entry(path, expected + 2**20)  # the header is far below a MiB
    except FileNotFoundError:
        return None, ""
    except cachefiles.BadEntry as exc:
        return None, str(exc)
    with os.fdopen(fd, "rb") as fh:
        try:
            version = np.lib.format.read_magic(fh)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            found_shape, fortran, found_dtype = reader(fh)
        except (ValueError, TypeError, OSError, SyntaxError) as exc:  # whatever its header holds
            return None, f"is not an .npy file ({str(exc)[:200]})"
        if tuple(found_shape) != tuple(shape) or found_dtype != dtype or fortran:
            return None, (f"holds {tuple(found_shape)} {found_dtype}{' (Fortran order)' if fortran else ''}, "
                          f"expected {tuple(shape)} {dtype}")
        offset = fh.tell()
        if st.st_size != offset + expected:
            return None, f"holds {st.st_size} bytes, its header says {offset + expected}"
        try:
            signature = _read_signature(path)
        except FileNotFoundError:
            return None, f"has no signature {_signature_path(path).name} (made by an older nearid, or not by nearid)"
        except cachefiles.BadEntry as exc:
            return None, f"has a signature file that {exc}"
        try:
            mine = _signature_line(key, st.st_size, _mac(_secret(), key, fh, st.st_size)).strip()
        except (cachefiles.BadEntry, OSError) as exc:
            return None, f"cannot be read ({exc})"
        if not hmac.compare_digest(mine, signature):
            return None, ("does not match its signature (its values were changed, or it was made under "
                          "another task-cache key)")
        if expected == 0:
            return _empty(shape, dtype), ""
        arr = np.memmap(fh, dtype=dtype, mode="r", offset=offset, shape=tuple(shape))
    return arr, ""


def _warn(message: str) -> None:
    warnings.warn(message, DataCacheWarning, stacklevel=4)


def _report_unwritable(folder: Path, exc: OSError) -> None:
    """Once per folder and process: its data sets are made in memory, not kept."""
    if str(folder) in _UNWRITABLE:
        return
    _UNWRITABLE.add(str(folder))
    _warn(f"data cache: cannot write {folder} ({cachefiles.oserror_text(exc)}); generated data sets are "
          f"made in memory and not kept (set ${CACHE_ENV} to a folder you can write)")


def array_path(kind: str, key: str, root: str | os.PathLike | None = None) -> Path:
    """Where the array ``kind`` with ``key`` lives."""
    return Path(cache_root() if root is None else root) / kind / f"{kind}-{key[:24]}.npy"


def cached_array(kind: str, params: dict[str, Any], shape: tuple[int, ...], dtype,
                 fill: Callable[[RowWriter], None], *, version: dict[str, Any],
                 root: str | os.PathLike | None = None,
                 compute: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """The array ``kind`` with ``params`` read-only and memory-mapped, made first if absent.

    ``fill(writer)`` must write every row through ``writer`` (:class:`RowWriter`), in any
    order, from this process or from worker processes it starts and waits for. ``version``
    is the rest of the key (code and environment, :func:`source_version`,
    :func:`environment_version`). The file is complete or absent: it is made under a
    temporary name and renamed when ``fill`` returns, after a signature of its bytes
    (``.mac``, HMAC-SHA256 under :func:`nearid.tasks.cache_secret`) is written beside it.

    A file that is there but not used (another shape, altered values, no signature, a named
    pipe or a link in its place) is made again, with a :class:`DataCacheWarning` naming it.
    When the folder cannot be written (read-only, full disk, a file or a dangling link in its
    place), ``compute()`` makes the array in memory instead, with one warning per folder and
    process; without ``compute`` the OSError is raised.
    """
    shape = tuple(int(s) for s in shape)
    key = array_key(kind, params, shape, dtype, version)
    path = array_path(kind, key, root)
    found, why = _open(path, key, shape, dtype)
    if found is not None:
        return found
    try:
        return _make(path, key, shape, dtype, fill, why, {
            "kind": kind, "params": params, "shape": list(shape), "dtype": np.dtype(dtype).str,
            "version": version, "python": sys.version.split()[0]})
    except OSError as exc:
        if compute is None:
            raise
        _report_unwritable(path.parent, exc)
        return compute()


def _make(path: Path, key: str, shape: tuple[int, ...], dtype, fill: Callable[[RowWriter], None], why: str,
          description: dict[str, Any]) -> np.memmap:
    """Make the file under the lock (unless another process made it meanwhile), sign it and
    return it opened; ``why`` is why the file found before was not used."""
    cachefiles.make_subfolder(path.parent)  # a link planted as the kind's folder is refused
    with _locked(path):
        found, why_now = _open(path, key, shape, dtype)  # made by another process while we waited
        if found is not None:
            return found
        why = why_now or why
        if why:
            _warn(f"data cache: {path} {why}; made again")
        _remove_stale_temporaries(path)
        tmp = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            os.close(cachefiles.create_new(tmp))  # a new file, never through a link planted at its name
            mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
            offset = int(mm.offset)
            del mm  # sized (sparse) with its header; rows go in by pwrite
            started = time.perf_counter()
            fill(RowWriter(str(tmp), offset, shape, np.dtype(dtype).str))
            filled = time.perf_counter()
            with open(tmp, "rb") as fh:  # on disk before it has its name, whatever befalls the machine
                os.fsync(fh.fileno())
                size = os.fstat(fh.fileno()).st_size
                signature = _signature_line(key, size, _mac(_secret(), key, fh, size))
                cachefiles.write_atomically(_signature_path(path), signature)
                os.replace(tmp, path)
                # the very bytes just signed (this inode), not whatever may sit at the path by now
                made = np.memmap(fh, dtype=dtype, mode="r", offset=offset, shape=shape) if size > offset \
                    else _empty(shape, dtype)
            seconds = {"fill": round(filled - started, 3), "fsync": round(time.perf_counter() - filled, 3)}
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        with contextlib.suppress(OSError):  # a description beside it, for people
            cachefiles.write_atomically(path.with_suffix(".json"), (json.dumps(
                {**description, "seconds": seconds}, indent=1, sort_keys=True, default=_jsonable) + "\n").encode())
    return made


def _empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """A read-only array of no elements (a file of no rows has nothing to map)."""
    arr = np.zeros(shape, dtype)
    arr.flags.writeable = False
    return arr


def _secret() -> bytes:
    from nearid.tasks import cache_secret

    return cache_secret()
