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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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


def use_disk(cache: bool | None, nbytes: int) -> bool:
    """Whether an array of ``nbytes`` goes to disk: ``cache`` if given, else whether it is
    at least :data:`CACHE_MIN_BYTES` (or ``$NEARID_DATA_CACHE_MIN_MB``)."""
    if cache is None:
        given = os.environ.get(MIN_MB_ENV, "").strip()
        if given:
            try:
                limit = float(given) * 2**20
            except ValueError:
                raise ValueError(f"${MIN_MB_ENV} must be a number of megabytes, got {given!r}") from None
        else:
            limit = CACHE_MIN_BYTES
        return nbytes >= limit
    if not isinstance(cache, (bool, np.bool_)):
        raise ValueError(f"cache must be True, False or None (decide by size), got {cache!r}")
    return bool(cache)


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
    kernel settings (and torch's, when torch computes: its version and whether oneDNN runs
    its convolutions)."""
    from nearid import kernels

    env: dict[str, Any] = {"numpy": np.__version__, "kernels": kernels.signature()}
    if torch:
        import torch as _torch

        env["torch"] = _torch.__version__
        kernels.configure_torch()  # the policy, not whatever this process last set
        env["onednn"] = bool(_torch.backends.mkldnn.enabled)
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
    """An exclusive lock on ``path.lock`` (no lock where fcntl does not exist)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: atomic renames still keep readers safe
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _open(path: Path, shape: tuple[int, ...], dtype) -> np.memmap | None:
    """The finished file read-only and memory-mapped, or None when it is absent or does not
    hold an array of this shape and dtype (then it is made again)."""
    if not path.is_file():
        return None
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError):
        return None
    if arr.shape != tuple(shape) or arr.dtype != np.dtype(dtype):
        return None
    return arr


def array_path(kind: str, key: str, root: str | os.PathLike | None = None) -> Path:
    """Where the array ``kind`` with ``key`` lives."""
    return Path(cache_root() if root is None else root) / kind / f"{kind}-{key[:24]}.npy"


def cached_array(kind: str, params: dict[str, Any], shape: tuple[int, ...], dtype,
                 fill: Callable[[RowWriter], None], *, version: dict[str, Any],
                 root: str | os.PathLike | None = None) -> np.memmap:
    """The array ``kind`` with ``params`` read-only and memory-mapped, made first if absent.

    ``fill(writer)`` must write every row through ``writer`` (:class:`RowWriter`), in any
    order, from this process or from worker processes it starts and waits for. ``version``
    is the rest of the key (code and environment, :func:`source_version`,
    :func:`environment_version`). The file is complete or absent: it is made under a
    temporary name and renamed when ``fill`` returns.
    """
    shape = tuple(int(s) for s in shape)
    key = array_key(kind, params, shape, dtype, version)
    path = array_path(kind, key, root)
    found = _open(path, shape, dtype)
    if found is not None:
        return found
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        found = _open(path, shape, dtype)  # made by another process while we waited
        if found is not None:
            return found
        _remove_stale_temporaries(path)
        tmp = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
            offset = int(mm.offset)
            del mm  # sized (sparse) with its header; rows go in by pwrite
            started = time.perf_counter()
            fill(RowWriter(str(tmp), offset, shape, np.dtype(dtype).str))
            filled = time.perf_counter()
            with open(tmp, "rb+") as fh:  # on disk before it has its name, whatever befalls the machine
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            seconds = {"fill": round(filled - started, 3), "fsync": round(time.perf_counter() - filled, 3)}
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        with contextlib.suppress(OSError):  # a description beside it, for people
            path.with_suffix(".json").write_text(json.dumps(
                {"kind": kind, "params": params, "shape": list(shape), "dtype": np.dtype(dtype).str,
                 "version": version, "python": sys.version.split()[0], "seconds": seconds},
                indent=1, sort_keys=True, default=_jsonable) + "\n")
    found = _open(path, shape, dtype)
    if found is None:
        raise OSError(f"{path} was written but cannot be read back as {shape} {np.dtype(dtype)}")
    return found
