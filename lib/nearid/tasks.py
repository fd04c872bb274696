"""Sweeps as independent tasks: run them in-process, in local processes or on a Dask cluster,
and keep every finished result so that a killed run resumes where it stopped.

A :class:`Task` is a module-level function and its keyword arguments (plain,
JSON-serialisable values or frozen settings records of them, a seed among them). The function is pure: it seeds what it uses,
shares no state with other tasks, and returns arrays, numbers and data frames.
:func:`run_tasks` returns the results in the order of the tasks, whatever order they
finished in, whichever executor ran them:

``"inprocess"``
    one after another in this process (the default; what ``quick`` and the tests use);
``"processes"``
    a pool of fresh local processes (``concurrent.futures`` with the ``spawn`` start method),
    ``workers`` of them (``$NEARID_WORKERS``, else one per core);
``"dask"``
    a Dask distributed scheduler that already runs (``dask scheduler`` and ``dask worker``,
    or a ``distributed.LocalCluster``): ``scheduler`` is its address or a
    ``distributed.Client``; ``"local"`` starts a ``LocalCluster`` of ``workers`` processes
    for the one call (a convenience on one machine). A task with ``gpu=True`` asks for the
    worker resource ``GPU: 1``, so it runs only on workers started with ``--resources
    "GPU=1"``, one task per GPU at a time (on a cluster where no worker offers a GPU it runs
    on any worker, with a line saying so, instead of waiting for ever). We write no
    scheduler, queue or worker protocol of our own.

Every worker process (both pools) runs with one torch/BLAS thread and with the caller's
``torch.use_deterministic_algorithms`` setting, so a seeded task returns the same numbers as
in a chapter's kernel (which also uses one thread, see :func:`nearid.setup`), and with the
caller's CPU kernels (:mod:`nearid.kernels`): a local pool inherits them; a ``dask worker``
started by hand must be started in a shell that ran ``eval "$(nearid kernels --export)"``,
else it refuses the task with a message that says so. A worker also
checks that it runs the same ``nearid`` code and the same key package versions as the
caller (a long-lived Dask worker keeps the code it imported; restart workers after editing
the library), because a result is cached under the *caller's* code key.

Each result is stored under a content key (:func:`task_key`): the task function's name, its
arguments, the source of every ``nearid`` module the function's module imports
(:mod:`nearid.codehash`) and the installed package versions. A task whose key is in the cache
is not run again; ``force`` recomputes (and overwrites) every entry. Results are written by
the calling process as each task finishes, so a cluster's workers need no shared disk, and a
run killed at any moment keeps every result that finished before. Entries are stored without
pickle (:mod:`nearid.safeformat`) and authenticated with a secret kept outside the cache
(:func:`cache_secret`), so a cache folder someone else can write is at worst recomputed,
never a way to run code or to slip in numbers.

Where the executor and the cache come from, in order: the arguments of :func:`run_tasks`
(executor ``"auto"`` or None defers to the environment), then the environment
(``NEARID_EXECUTOR``, ``NEARID_SCHEDULER``, ``NEARID_WORKERS``, ``NEARID_TASK_CACHE``,
``NEARID_FORCE``), then the defaults (in-process, one worker per core, no cache).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib
import importlib.metadata
import inspect
import hmac
import json
import multiprocessing
import os
import platform
import secrets
import socket
import stat
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nearid.fileio import pid_alive
from nearid import cachefiles, codehash, kernels, safeformat
from nearid.constraints import Options

EXECUTORS = ("inprocess", "processes", "dask")
# What run_tasks' executor (and a chapter's `executor` parameter) accepts; "auto" (or None):
# $NEARID_EXECUTOR, which must name one of EXECUTORS, else inprocess.
EXECUTOR = Options(("auto", *EXECUTORS))
ENV_EXECUTOR, ENV_SCHEDULER, ENV_WORKERS = "NEARID_EXECUTOR", "NEARID_SCHEDULER", "NEARID_WORKERS"
ENV_CACHE, ENV_FORCE = "NEARID_TASK_CACHE", "NEARID_FORCE"
GPU_RESOURCE = "GPU"  # the Dask worker resource a gpu=True task asks one of
LOCAL_SCHEDULER = "local"  # scheduler="local": a LocalCluster started for one run_tasks call
WORKER_THREADS = 1  # torch and BLAS threads per worker process
# Packages whose version a worker must share with the caller (their results are cached under
# the caller's versions); the Python version is checked too.
CHECKED_PACKAGES = ("numpy", "scipy", "pandas", "scikit-learn", "torch")


# ----------------------------------------------------------------------------- tasks and keys
def _json_default(value: Any) -> Any:
    """Canonical JSON for the few non-JSON values a task argument may hold."""
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):  # by content: a repr would elide the middle of a large array
        data = np.ascontiguousarray(value)
        return {"ndarray": hashlib.sha256(data.tobytes()).hexdigest(), "dtype": str(data.dtype),
                "shape": list(data.shape)}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a frozen settings record
        return {"record": type(value).__qualname__,
                **{f.name: getattr(value, f.name) for f in dataclasses.fields(value)}}
    raise TypeError(f"task arguments must be JSON values (numbers, strings, lists, dicts; numpy "
                    f"scalars and arrays and settings records are accepted), got {type(value).__name__}: "
                    f"{value!r:.80}")


def _kwargs_json(kwargs: dict[str, Any]) -> str:
    return json.dumps(kwargs, sort_keys=True, default=_json_default)


@dataclass(frozen=True)
class Task:
    """One unit of a sweep: ``fn(**kwargs)``.

    ``kind`` groups tasks of the same shape (``nearid plan`` times one of each kind);
    ``label`` is the line printed when it finishes; ``gpu`` asks a Dask cluster for one GPU
    (worker resource ``GPU``); ``steps`` is the number of optimisation steps the full task
    takes, for time estimates (its function then accepts ``max_steps``).
    """

    fn: Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    kind: str = ""
    label: str = ""
    gpu: bool = False
    steps: int | None = None

    def __post_init__(self):
        if "<locals>" in self.fn.__qualname__ or inspect.getmodule(self.fn) is None \
                or self.fn.__module__ == "__main__":
            raise ValueError(f"a task function must be defined at module level of an importable module, "
                             f"got {self.fn.__module__}:{self.fn.__qualname__}")
        _kwargs_json(self.kwargs)  # fail now, not in the middle of a sweep

    @property
    def name(self) -> str:
        return f"{self.fn.__module__}:{self.fn.__qualname__}"

    def __call__(self) -> Any:
        return self.fn(**self.kwargs)


def _versions() -> str:
    """Every installed distribution (:func:`nearid.codehash.package_versions`) and the Python version."""
    return "\n".join(codehash.package_versions()) + "\n" + platform.python_version()


def code_digest(module_name: str) -> str:
    """sha256 of the code a task function's module runs: every ``nearid`` module it imports,
    transitively (:mod:`nearid.codehash`), and, for a module outside ``nearid`` (a test's
    helper module), its own source file too."""
    if module_name.split(".")[0] == codehash.PACKAGE:
        return codehash.digest_files(codehash.module_closure(f"import {module_name}\n").values())
    h = hashlib.sha256()
    path = inspect.getsourcefile(importlib.import_module(module_name))
    source = Path(path).read_bytes() if path else b""
    h.update(source)
    h.update(codehash.digest_files(codehash.module_closure(source.decode()).values()).encode())
    return h.hexdigest()


def task_key(task: Task, versions: str | None = None, *, code: str | None = None) -> str:
    """The content key of a task: function, arguments, the code it runs (:func:`code_digest`,
    computed unless given), package versions (``_versions()`` unless given)."""
    h = hashlib.sha256()
    h.update(task.name.encode())
    h.update(_kwargs_json(task.kwargs).encode())
    h.update((code if code is not None else code_digest(task.fn.__module__)).encode())
    h.update((versions if versions is not None else _versions()).encode())
    h.update(kernels.signature().encode())  # portable and native kernels give other numbers
    return h.hexdigest()


# ----------------------------------------------------------------------------- the cache


ENV_CACHE_KEY, ENV_CACHE_KEY_FILE = "NEARID_CACHE_KEY", "NEARID_CACHE_KEY_FILE"


def _default_key_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "nearid" / "task-cache.key"


KEY_MAX_BYTES = 4096  # a key file larger than this is not a key file (/dev/zero, a log, a disk image)
KEY_MIN_BYTES = 16  # a shorter secret is guessed in seconds (a 1-byte key in 256 tries)


def cache_secret() -> bytes:
    """The secret that authenticates task-cache entries (HMAC-SHA256), kept outside any cache.

    ``$NEARID_CACHE_KEY`` (the secret itself), else the file ``$NEARID_CACHE_KEY_FILE``, else
    ``~/.config/nearid/task-cache.key`` (``$XDG_CONFIG_HOME`` honoured), created on first use
    with 32 random bytes, readable by its owner only. A team that shares a cache folder shares
    this file on purpose (point ``NEARID_CACHE_KEY_FILE`` at it); anyone else who can write the
    folder cannot make an entry that is accepted. The file is read only if it is a regular file
    of at most :data:`KEY_MAX_BYTES` (a named pipe there would hang the run, a device fill
    its memory)."""
    given = os.environ.get(ENV_CACHE_KEY)
    if given:
        if len(given.encode()) < KEY_MIN_BYTES:
            raise RuntimeError(_short_secret(given))
        return given.encode()
    named = bool(os.environ.get(ENV_CACHE_KEY_FILE))
    path = Path(os.environ.get(ENV_CACHE_KEY_FILE) or _default_key_file())
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    if named:
        _refuse_key(path, "does not exist")  # a named file is the team's: never invent one in its place
    if os.path.lexists(path):  # a link to nothing
        _refuse_key(path, f"is a symbolic link to {os.readlink(path)}, which does not exist")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it just now
        return _read_key(path)
    except OSError as exc:
        _refuse_key(path, f"cannot be created ({exc.strerror})")
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_hex(32).encode() + b"\n")
        fh.flush()
        os.fsync(fh.fileno())
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    """The key in ``path`` (a regular file, links followed); FileNotFoundError if absent,
    else RuntimeError (:func:`_refuse_key`) when it cannot serve as a key."""
    try:
        fd, _ = cachefiles.open_entry(path, KEY_MAX_BYTES, follow=True)
    except cachefiles.BadEntry as exc:
        _refuse_key(path, str(exc))
    try:
        if os.fstat(fd).st_mode & stat.S_IWOTH:
            _refuse_key(path, "can be written by every user (anyone could set the secret; chmod o-w it)")
        key = os.read(fd, KEY_MAX_BYTES).strip()
    except OSError as exc:
        _refuse_key(path, f"cannot be read ({exc.strerror})")
    finally:
        os.close(fd)
    if not key:
        _refuse_key(path, "is empty")
    if len(key) < KEY_MIN_BYTES:
        _refuse_key(path, f"holds a secret of {len(key)} bytes, fewer than {KEY_MIN_BYTES} (one is guessed in seconds)")
    return key


def _short_secret(given: str) -> str:
    return (f"${ENV_CACHE_KEY} holds a secret of {len(given.encode())} bytes; allowed: at least {KEY_MIN_BYTES} "
            f"bytes (a shorter one is guessed in seconds), or unset (the key file)")


def _refuse_key(path: Path, why: str) -> bytes:
    raise RuntimeError(f"the task-cache key file {path} {why}; set ${ENV_CACHE_KEY_FILE} to a readable key "
                       f"file, or ${ENV_CACHE_KEY} to a secret, or run without a task cache")


def key_environment_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """One line naming ``$NEARID_CACHE_KEY_FILE`` and what it accepts, when it names no usable
    key file (and ``$NEARID_CACHE_KEY`` does not replace it); None when it is fine or unset.
    Reads nothing but the file's metadata: for a check before any work."""
    env = os.environ if environ is None else environ
    secret = env.get(ENV_CACHE_KEY, "")
    if secret:
        return _short_secret(secret) if len(secret.encode()) < KEY_MIN_BYTES else None
    given = env.get(ENV_CACHE_KEY_FILE, "")
    if not given:
        return None
    try:
        st = os.stat(given)
    except FileNotFoundError:
        why = "does not exist"
    except OSError as exc:
        why = f"cannot be read ({exc.strerror})"
    else:
        why = None
        if not stat.S_ISREG(st.st_mode):
            why = f"is {cachefiles.kind(st.st_mode)}, not a file"
        elif st.st_size == 0:
            why = "is empty"
        elif st.st_size < KEY_MIN_BYTES:
            why = f"holds {st.st_size} bytes, fewer than a secret needs ({KEY_MIN_BYTES} at least)"
        elif st.st_mode & stat.S_IWOTH:
            why = "can be written by every user (anyone could set the secret; chmod o-w it)"
        elif st.st_size > KEY_MAX_BYTES:
            why = f"holds {cachefiles.size_text(st.st_size)}, more than a key file ({KEY_MAX_BYTES} bytes at most)"
        elif not os.access(given, os.R_OK):
            why = "cannot be read by this user"
    if why is None:
        return None
    return (f"${ENV_CACHE_KEY_FILE} is {given!r}, which {why}; allowed: a readable file holding the task-cache "
            f"secret (up to {KEY_MAX_BYTES} bytes), or unset (~/.config/nearid/task-cache.key, made on first use), "
            f"or ${ENV_CACHE_KEY} set to the secret itself")


def cache_environment_problem(environ: Mapping[str, str] | None = None,
                              default: str | os.PathLike | None = None) -> str | None:
    """One line naming ``$NEARID_TASK_CACHE`` and what it accepts, when it names a path that
    cannot hold the cache (a file, a dangling link, a folder this user cannot write), else the
    key file's problem (:func:`key_environment_problem`); None when both are fine. ``default``
    is the folder used when the variable is unset (the runner's ``.cache/tasks``), checked
    then. Creates nothing: for a check before any work."""
    env = os.environ if environ is None else environ
    allowed = "allowed: a folder this user can write (made if missing), or empty for no task cache"
    folder = env.get(ENV_CACHE, "")
    if folder:
        why = cachefiles.folder_problem(folder)
        if why is not None:
            return f"${ENV_CACHE} is {folder!r}, which {why}; {allowed} (unset: .cache/tasks in the checkout)"
    elif ENV_CACHE not in env and default is not None:
        why = cachefiles.folder_problem(default)
        if why is not None:
            return f"the task cache {default} (${ENV_CACHE} unset) {why}; set ${ENV_CACHE}: {allowed}"
    return key_environment_problem(env)


class TaskCache:
    """Finished results on disk, one file per key, written atomically, authenticated when read.

    An entry is ``b"nearid-task 2 <key> <HMAC> <payload length>\\n" + payload``. The payload is
    the result in :mod:`nearid.safeformat` (an ``.npz`` archive read without pickle: reading an
    entry never runs code, whoever wrote it). The HMAC-SHA256 covers the key and the payload
    under :func:`cache_secret`, a secret kept outside the cache folder: an entry that is
    truncated, bit-flipped, moved under another key, written in the old pickle format or by
    someone without the secret is reported (``"damaged"`` or ``"unauthenticated"``) and
    recomputed, never used; so is anything at an entry's path that is not a regular file of
    the size its header declares (a named pipe, a device, a 100 GB sparse file), which is
    never opened for reading or read into memory (:meth:`read_entry`). A writer writes a
    temporary file in the entry's folder (``.<key>.entry.<host>.<pid>.<random>.tmp``, created
    new, never through a link), syncs it and renames it into place, so a reader sees a whole
    entry or none. Temporary files left by a killed writer are never
    read, and :meth:`clean` removes them (see there).
    """

    MAGIC = b"nearid-task"
    FORMAT = b"2"
    SUFFIX = ".entry"
    STALE_SECONDS = 24 * 3600  # a temporary file this old is abandoned whoever wrote it
    HEADER_BYTES = 256  # a header line is about 160 bytes: more than this before a newline is not an entry

    def __init__(self, folder: str | os.PathLike, secret: bytes | None = None):
        self.folder = Path(folder)
        self.secret = cache_secret() if secret is None else secret

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}{self.SUFFIX}"

    def _mac(self, key: str, payload: bytes) -> bytes:
        return hmac.new(self.secret, key.encode() + b"\n" + payload, hashlib.sha256).hexdigest().encode()

    def read(self, key: str) -> tuple[str, Any]:
        """("ok", result), ("missing", None), ("damaged", None) or ("unauthenticated", None)."""
        status, value, _ = self.read_entry(key)
        return status, value

    def read_entry(self, key: str) -> tuple[str, Any, str]:
        """:meth:`read`, and why an entry that is there is not used (words that follow its path).

        Bounded before anything is read: only a regular file is opened (a named pipe, device,
        folder or link at the entry's path is "damaged", never opened for reading), and its
        size (``fstat``) must be what its header says and at most
        :func:`nearid.cachefiles.memory_limit`; then the payload is read once, authenticated
        and decoded."""
        path = self.path(key)
        try:
            fd, st = cachefiles.open_entry(path, cachefiles.memory_limit())
        except FileNotFoundError:
            return "missing", None, ""
        except cachefiles.BadEntry as exc:
            return "damaged", None, str(exc)
        try:
            header, newline, _ = os.pread(fd, self.HEADER_BYTES, 0).partition(b"\n")
            fields = header.split(b" ")
            if (not newline or len(fields) != 5 or fields[:3] != [self.MAGIC, self.FORMAT, key.encode()]
                    or not fields[4].isdigit()):
                return "damaged", None, "is not a whole entry of this format"  # truncated, or another format
            start, length = len(header) + 1, int(fields[4])
            if st.st_size != start + length:
                return "damaged", None, (f"holds {cachefiles.size_text(st.st_size)}, its header says "
                                         f"{cachefiles.size_text(start + length)}")
            payload = cachefiles.read_exact(fd, length, start)
        except cachefiles.BadEntry as exc:
            return "damaged", None, str(exc)
        except OSError as exc:
            return "damaged", None, f"cannot be read ({cachefiles.oserror_text(exc)})"
        finally:
            os.close(fd)
        if not hmac.compare_digest(fields[3], self._mac(key, payload)):
            return "unauthenticated", None, "fails its authentication (altered, forged, or written under another key)"
        try:
            return "ok", safeformat.loads(payload), ""  # reads arrays and JSON, never unpickles
        except Exception as exc:  # noqa: BLE001  (whatever it holds, it is not a result we stored)
            return "damaged", None, f"cannot be decoded ({type(exc).__name__})"

    def get(self, key: str) -> tuple[bool, Any]:
        """(True, result) for an authentic entry; (False, None) otherwise."""
        status, value = self.read(key)
        return status == "ok", value

    def put(self, key: str, result: Any) -> None:
        """Store ``result``; :class:`nearid.safeformat.UnsafeValue` if it holds a value the
        safe format does not store (nothing is written then); OSError when the folder cannot
        be written (nothing is left behind then either)."""
        path = self.path(key)
        payload = safeformat.dumps(result)
        cachefiles.make_subfolder(path.parent)  # a link planted as the shard folder is refused
        header = b" ".join([self.MAGIC, self.FORMAT, key.encode(), self._mac(key, payload), str(len(payload)).encode()])
        tmp = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            with os.fdopen(cachefiles.create_new(tmp), "wb") as fh:  # a new file, never through a link
                fh.write(header + b"\n" + payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:  # the folder itself is the problem: the first error says so
                pass
            raise
        try:  # make the rename itself durable
            fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass

    def clean(self, max_age: float | None = None) -> int:
        """Remove temporary files of writers that cannot finish: written on this host by a
        process that no longer runs, or older than ``max_age`` seconds (a day by default; a
        shared cache folder may hold files of writers on other hosts). Returns how many."""
        max_age = self.STALE_SECONDS if max_age is None else max_age
        host, now, removed = socket.gethostname(), time.time(), 0
        for tmp in self.folder.glob("*/.*.tmp"):
            try:
                rest = tmp.name[1:-len(".tmp")]
                front, pid, _ = rest.rsplit(".", 2)
                writer_host = front.split(TaskCache.SUFFIX + ".", 1)[1]
                dead = writer_host == host and not pid_alive(int(pid))
                if dead or now - tmp.stat().st_mtime > max_age:
                    tmp.unlink()
                    removed += 1
            except (ValueError, IndexError, OSError):
                continue
        return removed


# ----------------------------------------------------------------------------- workers
@dataclass(frozen=True)
class WorkerSetup:
    """What a worker process sets before it runs tasks: threads, and torch's deterministic
    mode as the caller had it (None: leave it alone); and the caller's CPU kernels
    (:func:`nearid.kernels.signature`), which the worker checks it shares."""

    threads: int = WORKER_THREADS
    deterministic: bool | None = None
    warn_only: bool = True
    kernels: str = field(default_factory=kernels.signature)  # the caller's CPU kernels

    @classmethod
    def like_caller(cls) -> "WorkerSetup":
        torch = sys.modules.get("torch")
        if torch is None:
            return cls()
        return cls(deterministic=torch.are_deterministic_algorithms_enabled(),
                   warn_only=torch.is_deterministic_algorithms_warn_only_enabled())


def undo_fixed_malloc_thresholds() -> bool:
    """Give glibc's allocator back the thresholds of its steady state in a Dask worker.

    Dask's nanny starts every worker with ``MALLOC_TRIM_THRESHOLD_=65536`` (to hand memory
    back to the OS sooner). On glibc any such variable also freezes the mmap threshold at
    128 KiB, so every tensor above it is mmapped and unmapped again on each training step:
    a chapter 03 model trained in 10.5 s in a Dask worker against 6.1 s in a process pool
    (2 workers on 2 cores, same numbers). Setting the mmap and trim thresholds to what glibc's
    dynamic rule settles at for such workloads (32 MiB, 64 MiB) restored 6.3 s; only the
    speed changes, never a result. Done once per process, only when the variable is set and
    the C library is glibc; returns whether it was done.
    """
    global _MALLOC_FIXED
    if _MALLOC_FIXED or "MALLOC_TRIM_THRESHOLD_" not in os.environ or platform.libc_ver()[0] != "glibc":
        return False
    import ctypes

    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
    libc = ctypes.CDLL("libc.so.6")
    _MALLOC_FIXED = bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) and libc.mallopt(M_TRIM_THRESHOLD, 64 << 20))
    return _MALLOC_FIXED


_MALLOC_FIXED = False


def prepare_worker(setup: WorkerSetup = WorkerSetup()) -> None:
    """Apply ``setup`` in this (worker) process; cheap, and safe to call before every task."""
    undo_fixed_malloc_thresholds()
    for var in kernels.THREAD_VARS:
        os.environ[var] = str(setup.threads)
    torch = sys.modules.get("torch")
    if torch is None and setup.deterministic is not None:
        import torch
    if torch is not None:
        kernels.configure_torch()
        if torch.get_num_threads() != setup.threads:
            torch.set_num_threads(setup.threads)
        if setup.deterministic is not None:
            torch.use_deterministic_algorithms(setup.deterministic, warn_only=setup.warn_only)
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if _LIMITED.get(setup.threads) == len(sys.modules):
        return  # no module loaded since the BLAS limit was last set
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # numpy then reads the variables above when it loads BLAS
        return
    threadpool_limits(setup.threads)
    _LIMITED[setup.threads] = len(sys.modules)


_LIMITED: dict[int, int] = {}  # threads -> how many modules were loaded when BLAS was limited to it


_KEY_VERSIONS: dict[str, str] = {}


def _key_versions() -> dict[str, str]:
    """Versions of CHECKED_PACKAGES and Python, read once per process (the modules a process
    has imported do not change when someone installs another version)."""
    if _KEY_VERSIONS:
        return dict(_KEY_VERSIONS)
    found = {"python": platform.python_version()}
    for name in CHECKED_PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "absent"
    _KEY_VERSIONS.update(found)
    return dict(found)


_WORKER_CODE: dict[str, str] = {}  # module -> code digest when this process first ran it


def _check_kernels(caller: str) -> None:
    """A worker computes with the caller's CPU kernels (:mod:`nearid.kernels`), or refuses."""
    kernels.apply()  # a worker that has not loaded numpy or torch yet still gets them in time
    kernels.configure_torch()
    # settings only (a setting made after numpy loaded counts): asking the loaded libraries
    # (threadpoolctl's ctypes callbacks) from a Dask worker thread trips a CPython 3.11 bug
    mine = kernels.signature()
    if mine != caller:
        why = "; ".join(kernels.setting_problems()) or f"its kernels are {mine!r}, the caller's {caller!r}"
        raise RuntimeError(f"worker {socket.gethostname()} (pid {os.getpid()}) does not compute with the "
                           f"caller's CPU kernels: {why}. Start workers in a shell that ran "
                           "`eval \"$(nearid kernels --export)\"` (the same NEARID_NATIVE_KERNELS as the caller)")


def _worker_code_digest(module: str, tries: int = 5) -> str:
    """:func:`code_digest` in a worker. CPython 3.11 keeps the AST validator's recursion depth
    per interpreter, not per thread (gh-106905), so ``ast.parse`` while another thread of a
    Dask worker compiles code can raise a spurious "AST constructor recursion depth mismatch";
    the parse is pure, so it is simply retried."""
    for attempt in range(tries):
        try:
            return code_digest(module)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == tries - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def _check_worker(module: str, code: str, versions: dict[str, str]) -> None:
    if module not in _WORKER_CODE:
        _WORKER_CODE[module] = _worker_code_digest(module)
    mine = _WORKER_CODE[module]
    if mine != code:
        raise RuntimeError(f"worker {socket.gethostname()} (pid {os.getpid()}) runs other code for {module} "
                           "than the caller (the library changed since this worker imported it?); restart the "
                           "workers (client.restart(), or restart `dask worker`) so their results match their keys")
    ours = _key_versions()
    if ours != versions:
        diff = ", ".join(f"{k} {ours.get(k)} here vs {v} in the caller" for k, v in versions.items()
                         if ours.get(k) != v)
        raise RuntimeError(f"worker {socket.gethostname()} has other package versions than the caller: {diff}")


def execute_task(task: Task, code: str, setup: WorkerSetup, versions: dict[str, str]) -> Any:
    """What a worker runs for one task: set threads, check code and versions, call it."""
    prepare_worker(setup)
    _check_kernels(setup.kernels)
    _check_worker(task.fn.__module__, code, versions)
    return task()


def _annotate(exc: BaseException, task: Task) -> BaseException:
    if hasattr(exc, "add_note"):  # Python 3.11+
        exc.add_note(f"in task {task.label or task.name} {_kwargs_json(task.kwargs):.300}")
    return exc


@dataclass
class _Job:
    key: str
    task: Task
    code: str


def _inprocess(jobs: list[_Job], **_) -> Iterator[tuple[int, Any]]:
    for j, job in enumerate(jobs):
        try:
            result = job.task()
        except Exception as exc:
            raise _annotate(exc, job.task)
        yield j, result


def _processes(jobs: list[_Job], *, workers: int, setup: WorkerSetup, versions: dict[str, str],
               **_) -> Iterator[tuple[int, Any]]:
    """A spawn pool (fork after torch has started threads can deadlock), one thread each.

    On the first failure, tasks not yet started are cancelled, running ones finish (their
    results are kept), then the failure is raised."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    pool = ProcessPoolExecutor(max_workers=max(1, min(workers, len(jobs))),
                               mp_context=multiprocessing.get_context("spawn"),
                               initializer=prepare_worker, initargs=(setup,))
    try:
        futures = {pool.submit(execute_task, job.task, job.code, setup, versions): j for j, job in enumerate(jobs)}
        delivered: set[int] = set()
        for fut in as_completed(futures):
            j = futures[fut]
            exc = fut.exception()
            if exc is not None:
                pool.shutdown(wait=True, cancel_futures=True)
                for other, i in futures.items():
                    if i not in delivered and other.done() and not other.cancelled() and other.exception() is None:
                        delivered.add(i)
                        yield i, other.result()
                raise _annotate(exc, jobs[j].task)
            delivered.add(j)
            yield j, fut.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _cluster_has_gpus(client, say: Callable[[str], None]) -> bool:
    """Whether gpu tasks should ask for the ``GPU`` resource: yes when a connected worker
    offers one. On a cluster without any (CPU workers only) they would wait for ever, so they
    then run on any worker, and we say so. Waits for the first worker to connect."""
    client.wait_for_workers(1)
    offers = [w.get("resources", {}).get(GPU_RESOURCE, 0) for w in client.scheduler_info()["workers"].values()]
    if not any(offers):
        say(f"no Dask worker offers a {GPU_RESOURCE} resource: tasks marked gpu run on any worker "
            f"(start GPU workers with --resources \"{GPU_RESOURCE}=1\")")
    return any(offers)


def _dask(jobs: list[_Job], *, scheduler: Any, workers: int, setup: WorkerSetup, versions: dict[str, str],
          say: Callable[[str], None] = print, **_) -> Iterator[tuple[int, Any]]:
    """Submit every task to a running Dask scheduler; gpu tasks ask for one ``GPU`` resource.
    ``scheduler="local"`` starts a ``distributed.LocalCluster`` of ``workers`` processes (one
    thread and one ``GPU`` resource each) for this call only.

    On the first failure, results that already came back are kept, the remaining tasks are
    cancelled (running ones are abandoned: Dask cannot stop a running function) and the
    failure is raised."""
    try:
        import distributed
    except ImportError as exc:
        raise RuntimeError("executor 'dask' needs the packages dask and distributed "
                           "(pip install 'dask[distributed]')") from exc
    cluster = None
    if isinstance(scheduler, distributed.Client):
        client, own = scheduler, False
    elif scheduler == LOCAL_SCHEDULER:
        cluster = distributed.LocalCluster(n_workers=max(1, min(workers, len(jobs))), processes=True,
                                           threads_per_worker=1, resources={GPU_RESOURCE: 1}, dashboard_address=":0")
        client, own = distributed.Client(cluster), True
    else:
        if not scheduler:
            raise ValueError(f"executor 'dask' needs a scheduler address: pass scheduler= (a chapter: "
                             f"-p scheduler=tcp://host:8786) or set ${ENV_SCHEDULER}")
        try:
            client, own = distributed.Client(scheduler), True
        except (OSError, TimeoutError) as exc:
            raise RuntimeError(f"cannot connect to the Dask scheduler at {scheduler}: {exc}") from exc
    try:
        gpu = any(job.task.gpu for job in jobs) and _cluster_has_gpus(client, say)
        futures = {}
        for j, job in enumerate(jobs):
            name = (job.task.kind or job.task.fn.__name__).replace("-", "_")
            fut = client.submit(execute_task, job.task, job.code, setup, versions, key=f"nearid_{name}-{job.key}",
                                resources={GPU_RESOURCE: 1} if job.task.gpu and gpu else None)
            futures[fut] = j
        pending = set(futures)
        for fut in distributed.as_completed(list(futures)):
            pending.discard(fut)
            j = futures[fut]
            if fut.status != "finished":
                if fut.status == "error":  # the worker's exception, with its traceback
                    exc = fut.exception().with_traceback(fut.traceback())
                else:
                    exc = RuntimeError(f"task {jobs[j].task.label or jobs[j].task.name} ended as {fut.status}")
                done = [f for f in pending if f.status == "finished"]  # keep what already came back
                client.cancel([f for f in futures if f.status != "finished"])  # the failed one too: release it
                for f in done:
                    yield futures[f], f.result()
                raise _annotate(exc, jobs[j].task)
            yield j, fut.result()
    finally:
        if own:
            client.close()
        if cluster is not None:
            cluster.close()


_BACKENDS = {"inprocess": _inprocess, "processes": _processes, "dask": _dask}


class _CacheWrites:
    """Whether a run still writes its results to the cache: it stops at the first write the
    folder refuses (read-only, full, not a folder), which the summary then says once, with
    how many results went uncached; a folder known to be unusable is not tried at all."""

    def __init__(self, cache: TaskCache | None):
        self.cache, self.why, self.skipped = cache, "", 0
        if cache is not None:
            problem = cachefiles.folder_problem(cache.folder)
            self.why = f"the task cache {cache.folder} {problem}" if problem else ""

    def ready(self) -> bool:
        return self.cache is not None and not self.why

    def skip(self) -> None:
        self.skipped += self.cache is not None

    def failed(self, exc: OSError) -> None:
        self.why = f"the task cache {self.cache.folder} cannot be written ({cachefiles.oserror_text(exc)})"
        self.skipped += 1

    def note(self) -> str:
        if not self.skipped:
            return ""
        return f"{self.skipped} result{'s' if self.skipped > 1 else ''} not cached: {self.why}; every result was used"


def _in_notebook_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return shell is not None and hasattr(shell, "kernel")


def runner_log(line: str) -> None:
    """A line for whoever runs the book, not for its reader ("80 tasks: 0 reused, 80 computed
    (...)", a damaged cache entry named): on stderr, and inside a chapter's kernel on the
    terminal that runs the chapter rather than in the page. ipykernel sends what is written to
    the process's descriptors to the page too, but ``sys.stderr.fileno()`` there is its copy of
    the original stderr, which only the terminal sees."""
    text = line if line.endswith("\n") else line + "\n"
    if _in_notebook_kernel():
        try:
            os.write(sys.stderr.fileno(), text.encode(errors="replace"))
            return
        except (OSError, ValueError, AttributeError):
            # ipykernel does not redirect the descriptors (it does not under pytest): then the
            # process's own stderr is the terminal's and never reaches the page
            stream = sys.__stderr__ or sys.stderr
            stream.write(text)
            stream.flush()
            return
    sys.stderr.write(text)
    sys.stderr.flush()


# ----------------------------------------------------------------------------- the runner
def run_tasks(tasks: Sequence[Task], *, executor: str | None = None, scheduler: Any = None,
              cache_dir: str | os.PathLike | None = None, force: bool | None = None,
              workers: int | None = None, progress: bool | None = None,
              log: Callable[[str], None] | None = runner_log) -> list[Any]:
    """Run every task (or reuse its cached result); results in the order of ``tasks``.

    ``executor``: "inprocess", "processes", "dask", or "auto"/None for ``$NEARID_EXECUTOR``
    (else in-process). ``scheduler`` (dask): an address such as "tcp://host:8786", a
    ``distributed.Client``, or "local" (a LocalCluster for this call); default
    ``$NEARID_SCHEDULER``. ``workers`` (processes, and a local cluster): how many worker
    processes, default ``$NEARID_WORKERS`` else one per core. ``cache_dir``: default
    ``$NEARID_TASK_CACHE``, else no cache. ``force``: recompute cached tasks (default
    ``$NEARID_FORCE``). ``progress``: a bar over tasks on stderr; by default shown except
    inside a notebook kernel, where the page gets no bar and no line per task. ``log``
    receives each finished task's label (when no bar is shown, outside a kernel or with
    ``progress=False``) and, always, the summary line "N tasks: R reused, C computed (...)".

    Identical tasks (same key) run once. The first failing task stops the run (see the
    executors) and is raised with a note naming it; every result that finished is cached.

    The cache never costs a result: an entry that cannot be used is recomputed and the first
    one is named in the summary; a cache folder that cannot be written (read-only, full, a
    file or a dangling link in its place) is said once in the summary ("N results not cached:
    the task cache ... cannot be written (...)") while every result is used and the run goes
    on. The runner refuses such a ``$NEARID_TASK_CACHE`` before any work
    (:func:`cache_environment_problem`).
    """
    tasks = list(tasks)
    for t in tasks:
        if not isinstance(t, Task):
            raise TypeError(f"run_tasks takes nearid.tasks.Task objects, got {type(t).__name__}")
    EXECUTOR.check("executor", executor or "auto")
    if executor in (None, "", "auto"):
        executor = os.environ.get(ENV_EXECUTOR) or "inprocess"
        Options(EXECUTORS).check(f"${ENV_EXECUTOR}", executor)
    scheduler = scheduler or os.environ.get(ENV_SCHEDULER) or None
    if not workers:
        try:
            workers = int(os.environ.get(ENV_WORKERS, "0") or 0) or os.cpu_count() or 1
        except ValueError:
            raise ValueError(f"${ENV_WORKERS} must be a whole number, got {os.environ[ENV_WORKERS]!r}") from None
    cache_dir = cache_dir if cache_dir is not None else os.environ.get(ENV_CACHE) or None
    force = force if force is not None else os.environ.get(ENV_FORCE, "") not in ("", "0")
    cache = TaskCache(cache_dir) if cache_dir else None
    say = log or (lambda _: None)

    versions = _versions()
    codes: dict[str, str] = {}
    keys = []
    for t in tasks:
        if t.fn.__module__ not in codes:
            codes[t.fn.__module__] = code_digest(t.fn.__module__)
        keys.append(task_key(t, versions, code=codes[t.fn.__module__]))
    results: list[Any] = [None] * len(tasks)
    waiting: dict[str, list[int]] = {}  # key -> task indices, in task order
    damaged = forged = cleaned = unsafe = 0
    bad: list[str] = []  # "<path> <why>" of each entry not used
    unwritable = _CacheWrites(cache)
    if cache is not None:
        cleaned = cache.clean()
    for i, key in enumerate(keys):
        if key in waiting:
            waiting[key].append(i)
            continue
        status, value, why = ("missing", None, "") if (cache is None or force) else cache.read_entry(key)
        if status == "ok":
            results[i] = value
        else:
            damaged += status == "damaged"
            forged += status == "unauthenticated"
            if why:
                bad.append(f"{cache.path(key)} {why}")
            waiting[key] = [i]
    reused = len(tasks) - sum(len(v) for v in waiting.values())
    jobs = [_Job(key, tasks[idx[0]], codes[tasks[idx[0]].fn.__module__]) for key, idx in waiting.items()]

    # Inside a notebook kernel (a chapter run by papermill) every byte written to stdout or
    # stderr, even the process's own descriptors (ipykernel forwards them), lands in the page:
    # there, no bar and no line per task, only the summary line below.
    in_kernel = _in_notebook_kernel()
    show = (not in_kernel) if progress is None else progress
    bar = None
    if show and tasks:
        from tqdm.std import tqdm
        bar = tqdm(total=len(tasks), initial=reused, desc=f"tasks ({executor})", unit="task", file=sys.stderr,
                   dynamic_ncols=True)
    start = time.perf_counter()
    try:
        if jobs:
            backend = _BACKENDS[executor](jobs, scheduler=scheduler, workers=workers, say=say,
                                          setup=WorkerSetup.like_caller(), versions=_key_versions())
            for j, result in backend:
                job = jobs[j]
                if unwritable.ready():
                    try:
                        cache.put(job.key, result)
                    except safeformat.UnsafeValue as exc:  # the result is used; only its reuse is lost
                        unsafe += 1
                        say(f"not cached ({job.task.label or job.task.name}): {exc}")
                    except OSError as exc:  # read-only, full, or not a folder: the result is used
                        unwritable.failed(exc)
                else:
                    unwritable.skip()
                indices = waiting[job.key]
                for n, i in enumerate(indices):
                    results[i] = result if n == 0 else copy.deepcopy(result)
                if bar is not None:
                    bar.update(len(indices))
                    if job.task.label:
                        bar.set_postfix_str(job.task.label, refresh=True)
                elif job.task.label and not (in_kernel and progress is None):
                    say(job.task.label)
    except BaseException as exc:  # a failed task: the results it cost not to cache are said with it
        if unwritable.note() and hasattr(exc, "add_note"):
            exc.add_note(unwritable.note())
        raise
    finally:
        if bar is not None:
            bar.close()
    pool = f" x{max(1, min(workers, len(jobs)))}"
    notes = [f"{time.perf_counter() - start:.0f} s",
             executor + (pool if executor == "processes" or scheduler == LOCAL_SCHEDULER else "")]
    if damaged:
        notes.append(f"{damaged} damaged cache entr{'y' if damaged == 1 else 'ies'} recomputed")
    if forged:
        notes.append(f"{forged} unauthenticated cache entr{'y' if forged == 1 else 'ies'} (altered, forged or "
                     f"written under another ${ENV_CACHE_KEY_FILE}) recomputed")
    if bad:
        notes.append(f"{bad[0]:.400}" + (f"; {len(bad) - 1} more" if len(bad) > 1 else ""))
    if unwritable.note():
        notes.append(unwritable.note())
    if unsafe:
        notes.append(f"{unsafe} result{'s' if unsafe > 1 else ''} not cached (not storable without pickle)")
    if cleaned:
        notes.append(f"{cleaned} abandoned temporary file{'s' if cleaned > 1 else ''} removed")
    say(f"{len(tasks)} tasks: {reused} reused, {len(tasks) - reused} computed ({', '.join(notes)})")
    return results
