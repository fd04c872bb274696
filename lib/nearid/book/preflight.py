"""What a run must pass before any work: checked in seconds, refused with one line (exit 2).

:func:`nearid.book.profiles.resolve` checks each parameter's value on its own. What it cannot
see is checked here, before a kernel starts, instead of minutes into a chapter:

* the ``NEARID_*`` environment variables the chapter's kernel and its sweep tasks read
  (:func:`check_environment`), the cache and data folders and the cache key among them;
* ``device=cuda`` on a machine where torch sees no CUDA device (:func:`check_device`);
* a Dask scheduler that does not answer (:func:`check_scheduler`): a TCP connection, then
  Dask's handshake, each within :data:`CONNECT_TIMEOUT` seconds;
* an output folder that cannot be written (:func:`check_writable`).

Only the runner imports this module, so no chapter's cache key covers it: tightening a
check re-executes nothing.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CONNECT_TIMEOUT = 5.0  # seconds for a scheduler's TCP connect, and again for Dask's handshake
FORCE_VALUES = ("", "0", "1")


class PreflightError(ValueError):
    """A run refused before any work: the message says what to change (exit code 2)."""


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """The ``NEARID_*`` variables the runner, a chapter's kernel and its sweep tasks read.

    ``NEARID_EXECUTOR`` inprocess, processes or dask (``-p executor=auto`` defers to it);
    ``NEARID_WORKERS`` a whole number >= 1; ``NEARID_SCHEDULER`` "local" or
    ``[scheme://]host:port``; ``NEARID_FORCE`` "", 0 or 1 (the runner sets it from
    ``--force`` for the kernel); ``NEARID_NUM_THREADS`` a whole number >= 1; the caches'
    and the data folder's variables (:func:`check_caches`).
    """
    from nearid.tasks import EXECUTORS

    env = os.environ if environ is None else environ
    executor = env.get("NEARID_EXECUTOR", "")
    if executor and executor not in EXECUTORS:
        raise PreflightError(f"$NEARID_EXECUTOR is {executor!r}; allowed: {', '.join(EXECUTORS)} "
                             f"(or unset: in-process)")
    workers = env.get("NEARID_WORKERS", "")
    if workers and not (workers.strip().isdigit() and int(workers) >= 1):
        raise PreflightError(f"$NEARID_WORKERS is {workers!r}; allowed: a whole number >= 1 "
                             f"(or unset: one per core)")
    scheduler = env.get("NEARID_SCHEDULER", "")
    if scheduler and scheduler != "local":
        from nearid.book.profiles.shared import scheduler_address

        try:
            scheduler_address(scheduler)
        except ValueError as exc:
            raise PreflightError(f"$NEARID_SCHEDULER: {exc}; allowed: \"local\" or a Dask scheduler "
                                 f"address [scheme://]host:port such as tcp://10.0.0.5:8786") from None
    force = env.get("NEARID_FORCE", "")
    if force not in FORCE_VALUES:
        raise PreflightError(f"$NEARID_FORCE is {force!r}; allowed: 1 (recompute sweep tasks), 0 or unset "
                             f"(`nearid run --force` sets it for the chapter's kernel)")
    threads = env.get("NEARID_NUM_THREADS", "").strip()
    if threads and not (threads.isdigit() and int(threads) >= 1):
        raise PreflightError(f"$NEARID_NUM_THREADS is {threads!r}; allowed: a whole number >= 1 (or unset: 1)")
    check_caches(env)


def check_caches(environ: Mapping[str, str] | None = None, task_cache: Path | None = None) -> None:
    """The variables that name caches, keys and data (issue 36): ``NEARID_TASK_CACHE`` and
    ``NEARID_DATA_CACHE`` folders this user can write (a file, a dangling link or a read-only
    folder there would lose computed work or fail late), ``NEARID_CACHE_KEY_FILE`` a readable
    key file, ``NEARID_DATA_CACHE_MIN_MB`` a number, ``NEARID_DATA_WORKERS`` a whole number,
    ``NEARID_DATA`` a folder; ``task_cache``, the folder used where ``NEARID_TASK_CACHE`` is
    unset (the runner's ``.cache/tasks``), like the variable. Looks, creates nothing."""
    from nearid import data, tasks
    from nearid.data import cache as data_cache

    env = os.environ if environ is None else environ
    for problem in (tasks.cache_environment_problem(env, task_cache), data_cache.environment_problem(env),
                    data.environment_problem(env)):
        if problem:
            raise PreflightError(problem)


def effective_executor(params: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str | None:
    """Where the chapter's sweep tasks run: its ``executor`` parameter, "auto" deferring to
    ``$NEARID_EXECUTOR`` (else inprocess); None for a chapter without sweep tasks."""
    if "executor" not in params:
        return None
    env = os.environ if environ is None else environ
    executor = params["executor"]
    if executor in (None, "", "auto"):
        executor = env.get("NEARID_EXECUTOR") or "inprocess"
    return executor


def effective_scheduler(params: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return params.get("scheduler") or env.get("NEARID_SCHEDULER") or ""


def check_device(chapter: str, params: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> None:
    """``device=cuda`` needs a CUDA device torch can see here, unless the sweep tasks run on a
    remote Dask cluster (whose workers may have the GPUs this machine lacks). Imports torch
    only when CUDA is asked for."""
    device = str(params.get("device", ""))
    if not device.startswith("cuda"):
        return
    env = os.environ if environ is None else environ
    remote = effective_executor(params, env) == "dask" and effective_scheduler(params, env) != "local"
    if remote:
        return
    import torch

    if torch.cuda.is_available():
        return
    why = ("this torch is built without CUDA" if torch.version.cuda is None else
           f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU"
           + (f"; CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r}" if "CUDA_VISIBLE_DEVICES" in env else ""))
    raise PreflightError(f"chapter {chapter}: -p device={device} asks for CUDA, but {why}; use device=auto "
                         f"(CUDA when present, else the CPU) or device=cpu")


_REACHED: dict[str, None] = {}  # scheduler addresses that answered, within this process


def probe_scheduler(address: str, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """None when a Dask scheduler answers at ``address``, else why not, in words.

    First a plain TCP connection (``timeout`` seconds): a refused port, an unknown host or a
    silent one are told apart. Then, for tcp://, Dask's own handshake (``timeout`` seconds
    more): a port that accepts connections may belong to something else (a proxy, another
    service), which Dask would otherwise find out about only after its own 30 s timeout.
    """
    from nearid.book.profiles.shared import scheduler_address

    scheme, host, port = scheduler_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except socket.gaierror as exc:
        return f"host {host!r} not found ({exc.strerror})"
    except (socket.timeout, TimeoutError):
        return f"no answer from {host}:{port} within {timeout:g} s (TCP connect)"
    except ConnectionRefusedError:
        return f"connection refused: nothing listens on {host}:{port}"
    except OSError as exc:
        return f"cannot connect to {host}:{port}: {exc.strerror or exc}"
    if scheme != "tcp":
        return None
    try:
        from distributed.comm import connect
    except ImportError:
        return None  # the executor reports the missing package itself
    start = time.monotonic()

    async def handshake() -> None:
        where = f"[{host}]" if ":" in host else host  # an IPv6 address
        comm = await asyncio.wait_for(connect(f"tcp://{where}:{port}", timeout=timeout), timeout)
        await comm.close()

    try:
        asyncio.run(handshake())
    except Exception as exc:  # noqa: BLE001  (whatever answers, it is not a Dask scheduler)
        waited = time.monotonic() - start
        if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
            return (f"{host}:{port} accepts connections but sent no Dask handshake within {waited:.0f} s "
                    f"(is it a Dask scheduler?)")
        return (f"{host}:{port} accepts connections but did not answer with Dask's handshake "
                f"({type(exc).__name__} reading its reply after {waited:.0f} s: is it a Dask scheduler?)")
    return None


def check_scheduler(chapter: str, params: Mapping[str, Any], environ: Mapping[str, str] | None = None,
                    timeout: float = CONNECT_TIMEOUT) -> None:
    """When the chapter's tasks go to Dask: a scheduler is named, and it answers."""
    env = os.environ if environ is None else environ
    if effective_executor(params, env) != "dask":
        return
    address = effective_scheduler(params, env)
    if not address:
        raise PreflightError(f"chapter {chapter}: executor 'dask' needs a scheduler: -p scheduler=tcp://host:8786, "
                             f"-p scheduler=local (a LocalCluster for this run) or $NEARID_SCHEDULER")
    if address == "local" or address in _REACHED:
        return
    why = probe_scheduler(address, timeout)
    if why is not None:
        raise PreflightError(f"chapter {chapter}: the Dask scheduler {address} is not reachable: {why}; "
                             f"start it (`dask scheduler`), fix the address, or use -p scheduler=local")
    _REACHED[address] = None


def check_chapter(chapter: str, params: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> None:
    """Everything a chapter about to execute needs besides its parameters' own values."""
    check_device(chapter, params, environ)
    check_scheduler(chapter, params, environ)


def check_writable(out_dir: Path) -> None:
    """The output folder exists (or can be made) and takes a new file."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out_dir, prefix=".nearid-write-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise PreflightError(f"cannot write the chapter's outputs to {out_dir}: {exc.strerror or exc}; "
                             f"make the folder writable") from None
