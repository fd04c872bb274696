"""The chapter's kernel process: the environment it inherits, the kernel manager that starts
:mod:`nearid.book.kernel` (and stops it after a Ctrl-C or SIGTERM), and the signal handling of
a run."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from nearid import kernels
from nearid.book.cachekey import kernel_threads
from nearid.fileio import atomic_write_text

TASK_CACHE = Path(".cache") / "tasks"  # under the project root; NEARID_TASK_CACHE overrides


_ENV_LOCK = threading.Lock()


_ENV_LOCK = threading.Lock()
_ENV_USERS = 0  # runs in this process inside _kernel_environment (run_book runs chapters in threads)


_ENV_USERS = 0  # runs in this process inside _kernel_environment (run_book runs chapters in threads)
_ENV_SAVED: dict[str, str | None] = {}


@contextlib.contextmanager
def _kernel_environment(root: Path, force: bool):
    """What the chapter's kernel inherits: where finished sweep tasks are kept
    (:mod:`nearid.tasks`), whether ``--force`` asked to recompute them, and its thread count
    (:func:`kernel_threads`, for torch and the BLAS libraries alike).

    ``os.environ`` is the process's: chapters that run in threads at once share one save and
    one restore (the first in saves, the last out restores), so an interleaving cannot leave a
    chapter's ``NEARID_TASK_CACHE`` behind for the rest of the process."""
    global _ENV_USERS
    names = ("NEARID_TASK_CACHE", "NEARID_FORCE", *kernels.THREAD_VARS)
    with _ENV_LOCK:
        if _ENV_USERS == 0:
            _ENV_SAVED.clear()
            _ENV_SAVED.update({k: os.environ.get(k) for k in names})
        _ENV_USERS += 1
        threads = str(kernel_threads())
        os.environ.setdefault("NEARID_TASK_CACHE", str(root / TASK_CACHE))
        # --force turns it on; without it the caller's own NEARID_FORCE=1 is kept, not undone.
        os.environ["NEARID_FORCE"] = "1" if force else _ENV_SAVED.get("NEARID_FORCE") or "0"
        for var in kernels.THREAD_VARS:
            os.environ[var] = threads
    try:
        yield
    finally:
        with _ENV_LOCK:
            _ENV_USERS -= 1
            if _ENV_USERS == 0:
                for k, v in _ENV_SAVED.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v


_KERNELS: set = set()  # provisioners of the kernels this process has started and not seen end


_KERNELS: set = set()  # provisioners of the kernels this process has started and not seen end
INTERRUPTED = threading.Event()  # set by interrupt_once: a Ctrl-C is unwinding this process


def _curve_ready() -> bool:
    """Whether the chapter kernel's sockets can be encrypted with CurveZMQ: pyzmq has Curve
    and ipykernel reads Curve keys from its connection file (7.x does)."""
    import zmq

    if not zmq.has("curve"):
        return False
    from ipykernel.kernelapp import IPKernelApp

    return "curve_secretkey" in IPKernelApp.class_trait_names()


def _quiet_interrupted_run(loop) -> None:
    """After a Ctrl-C: what the interrupted execution would still print is of no use to the
    reader (papermill's "Kernel died while waiting for execute reply", asyncio's "Task
    exception was never retrieved" for the cell the kill cut short); one line says it all."""
    logging.getLogger("papermill").disabled = True
    loop.set_exception_handler(lambda loop, context: None)


def _papermill_writes_without_following_links() -> None:
    """papermill saves the working notebook after every cell with ``open(path, "w")``, which
    would write through a link planted at ``.NN_slug.running.*.ipynb`` while the chapter runs:
    its local handler is swapped for one that writes a fresh file and renames it into place
    (:func:`nearid.fileio.atomic_write_text`, refusing a link). Idempotent."""
    from papermill.iorw import LocalHandler, papermill_io
    from papermill.utils import chdir

    class NoFollowHandler(LocalHandler):
        def write(self, buf, path):
            with chdir(self._cwd):
                atomic_write_text(path, buf)

    papermill_io._handlers = [(scheme, NoFollowHandler() if scheme == "local" and type(h) is LocalHandler else h)
                              for scheme, h in papermill_io._handlers]


def _kernel_manager_class() -> type:
    """A kernel manager that starts :mod:`nearid.book.kernel` (a kernel that dies with this
    process) in this very Python, whatever kernelspecs are installed, and remembers it so an
    interrupted run can stop it (:func:`_stop_kernels`).

    Its sockets are encrypted (CurveZMQ keys made for each kernel, where pyzmq and ipykernel
    support it): over plain TCP ipykernel warns on every start that its traffic could be read,
    and encrypting answers the warning instead of hiding it (measured: no slower here).

    It never interrupts (SIGINT) a kernel it shuts down. jupyter_client does so before every
    shutdown, so that a busy kernel can take the request; a chapter's kernel is idle at the
    end of a run, and after a Ctrl-C it is killed at once instead: interrupted while its
    sockets closed, it printed a 20-line ZMQError traceback onto the terminal.
    """
    import asyncio

    from jupyter_client import AsyncKernelManager
    from traitlets import default

    class GuardedKernelManager(AsyncKernelManager):
        @default("transport_encryption")
        def _default_transport_encryption(self):
            return "required" if _curve_ready() else "disabled"

        def _kernel_supports_curve_encryption(self) -> bool:
            return _curve_ready()  # the kernel is always nearid.book.kernel, i.e. ipykernel

        async def _async_interrupt_kernel(self):
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

        async def shutdown_kernel(self, now: bool = False, restart: bool = False):
            # (AsyncKernelManager.shutdown_kernel *is* _async_shutdown_kernel: override the name
            # nbclient calls)
            if INTERRUPTED.is_set() or isinstance(sys.exc_info()[1], KeyboardInterrupt):
                now = True
                _quiet_interrupted_run(asyncio.get_running_loop())
            await self._async_shutdown_kernel(now=now, restart=restart)

        def format_kernel_cmd(self, extra_arguments=None):
            return [sys.executable, "-m", "nearid.book.kernel", "-f", os.path.realpath(self.connection_file),
                    *(extra_arguments or [])]

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            await super()._async_launch_kernel(kernel_cmd, **kw)
            for prov in list(_KERNELS):  # forget kernels that have ended
                if getattr(prov, "process", None) is None or prov.process.poll() is not None:
                    _KERNELS.discard(prov)
            _KERNELS.add(self.provisioner)

    return GuardedKernelManager


def _stop_kernels() -> None:
    """Kill every kernel this process started that still runs, with its process group."""
    for prov in list(_KERNELS):
        _KERNELS.discard(prov)
        proc = getattr(prov, "process", None)
        if proc is None or proc.poll() is not None:
            continue
        with contextlib.suppress(OSError):
            if getattr(prov, "pgid", None):
                os.killpg(prov.pgid, signal.SIGKILL)
            else:
                proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a batch system's time limit): unwound like a Ctrl-C, the kernel
    stopped, the hidden files removed, the run recorded, and the exit code 143 (128 + 15)."""


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def interrupt_once(signum, frame) -> None:
    """SIGINT and SIGTERM handler: raise KeyboardInterrupt (:class:`Terminated` for SIGTERM)
    once, then ignore both, so that a second Ctrl-C (or the runner passing the first one on)
    cannot break the clean-up."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    INTERRUPTED.set()
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def handle_stop_signals() -> dict:
    """Install :func:`interrupt_once` for SIGINT and SIGTERM (main thread only); returns the
    previous handlers, for :func:`restore_signals`."""
    return {sig: signal.signal(sig, interrupt_once) for sig in STOP_SIGNALS}


def restore_signals(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
