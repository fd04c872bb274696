"""Sweeps as independent tasks: run them in-process, in local processes or on a Dask cluster,
and keep every finished result so that a killed run resumes where it stopped.

A :class:`Task` is a module-level function of ``nearid`` and its keyword arguments (plain,
JSON-serialisable values, a seed among them). The function is pure: it seeds what it uses,
shares no state with other tasks, and returns arrays and numbers. :func:`run_tasks` returns
the results in the order of the tasks, whatever order they finished in.

Each result is stored under a content key: the task function's name, its arguments, the
source of every ``nearid`` module the function's module imports (:mod:`nearid.codehash`)
and the installed package versions. A task whose key is in the cache is not run again.

Where the executor and the cache come from, in order: the arguments of :func:`run_tasks`
(executor "auto" or None defers to the environment), then the environment
(``NEARID_EXECUTOR``, ``NEARID_SCHEDULER``, ``NEARID_TASK_CACHE``, ``NEARID_FORCE``), then the
defaults (in-process, no cache).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import inspect
import json
import os
import pickle
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nearid import codehash

EXECUTORS = ("inprocess", "processes", "dask")
ENV_EXECUTOR, ENV_SCHEDULER = "NEARID_EXECUTOR", "NEARID_SCHEDULER"
ENV_CACHE, ENV_FORCE = "NEARID_TASK_CACHE", "NEARID_FORCE"


@dataclass(frozen=True)
class Task:
    """One unit of a sweep: ``fn(**kwargs)``.

    ``kind`` groups tasks of the same shape (``nearid plan`` times one of each kind);
    ``label`` is the line printed when it finishes; ``gpu`` asks a Dask cluster for one GPU
    (worker resource ``GPU``); ``steps`` is the number of optimisation steps the task takes,
    for time estimates.
    """

    fn: Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    kind: str = ""
    label: str = ""
    gpu: bool = False
    steps: int | None = None

    def __post_init__(self):
        if "<locals>" in self.fn.__qualname__ or inspect.getmodule(self.fn) is None:
            raise ValueError(f"a task function must be defined at module level, got {self.fn.__qualname__}")

    @property
    def name(self) -> str:
        return f"{self.fn.__module__}:{self.fn.__qualname__}"

    def __call__(self) -> Any:
        return self.fn(**self.kwargs)


def _versions() -> str:
    return "\n".join(sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
                            if d.metadata["Name"])) + "\n" + platform.python_version()


def task_key(task: Task, versions: str | None = None) -> str:
    """The content key of a task: function, arguments, the code it runs, package versions."""
    module = importlib.import_module(task.fn.__module__)
    code = codehash.module_closure(f"import {module.__name__}\n")
    h = hashlib.sha256()
    h.update(task.name.encode())
    h.update(json.dumps(task.kwargs, sort_keys=True, default=repr).encode())
    h.update(codehash.digest_files(code.values()).encode())
    h.update((versions if versions is not None else _versions()).encode())
    return h.hexdigest()


class TaskCache:
    """Finished results on disk, one file per key, written atomically, checked when read."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.pkl"

    def get(self, key: str) -> tuple[bool, Any]:
        """(True, result) for a complete entry; (False, None) for a missing or damaged one."""
        path = self.path(key)
        try:
            blob = path.read_bytes()
        except OSError:
            return False, None
        digest, _, payload = blob.partition(b"\n")
        if hashlib.sha256(payload).hexdigest().encode() != digest:
            return False, None  # truncated or corrupted: recompute, never use
        try:
            return True, pickle.loads(payload)  # our own files, checked by their digest above
        except Exception:
            return False, None

    def put(self, key: str, result: Any) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)


def run_tasks(tasks: Sequence[Task], *, executor: str | None = None, scheduler: str | None = None,
              cache_dir: str | os.PathLike | None = None, force: bool | None = None,
              log: Callable[[str], None] | None = print) -> list[Any]:
    """Run every task (or reuse its cached result); results in the order of ``tasks``."""
    if executor in (None, "", "auto"):
        executor = os.environ.get(ENV_EXECUTOR) or "inprocess"
    scheduler = scheduler or os.environ.get(ENV_SCHEDULER) or None
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    cache_dir = cache_dir if cache_dir is not None else os.environ.get(ENV_CACHE) or None
    force = force if force is not None else os.environ.get(ENV_FORCE, "") not in ("", "0")
    cache = TaskCache(cache_dir) if cache_dir else None
    versions = _versions()
    keys = [task_key(t, versions) for t in tasks]
    results: list[Any] = [None] * len(tasks)
    todo = []
    for i, key in enumerate(keys):
        hit, value = (False, None) if (cache is None or force) else cache.get(key)
        if hit:
            results[i] = value
        else:
            todo.append(i)
    say = log or (lambda _: None)
    start = time.perf_counter()
    if executor != "inprocess":
        raise ValueError(f"executor {executor!r} is not available yet")  # replaced by the back-ends
    for i in todo:
        results[i] = tasks[i]()
        if cache is not None:
            cache.put(keys[i], results[i])
        if tasks[i].label:
            say(tasks[i].label)
    say(f"{len(tasks)} tasks: {len(tasks) - len(todo)} reused, {len(todo)} computed "
        f"({time.perf_counter() - start:.0f} s)")
    return results
