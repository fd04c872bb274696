"""Execute chapters with papermill, skip unchanged ones, record how the book was run.

The book never executes code itself: this module runs each ``notebooks/NN_slug.py``
(jupytext) through papermill into ``book/executed/NN_slug.ipynb`` plus the chapter's
``NN_slug.json``. A content key (chapter source, resolved parameters, the ``nearid``
modules the chapter imports, installed package versions) decides whether a chapter must run
again: a change to code a chapter runs re-executes it, a change elsewhere (the command line,
the runner, another chapter's experiment) does not, and a no-op rebuild executes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import importlib.metadata
import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import platform
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nearid import codehash, kernels
from nearid.book import preflight, pricing, profiles
from nearid.fileio import UnsafePath, atomic_write_text, open_no_follow, pid_alive, refuse_symlink

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


# ----------------------------------------------------------------------------- cache key
# Data files of the package that a module reads and whose content decides what a chapter
# writes: the registry of claims (every chapter's save checks its verdicts against it; the
# summary reads kinds and units from it).
MODULE_DATA = {"nearid.claims": ("claims.yaml",)}


def chapter_code(chapter: Chapter) -> dict[str, Path]:
    """The ``nearid`` modules a chapter runs: those its source imports, transitively, plus its
    parameter module (loaded by name, so no import names it), plus the data files those
    modules read (:data:`MODULE_DATA`)."""
    code = codehash.module_closure(chapter.source.read_text(),
                                   extra_roots=[profiles.module_name(chapter.key)], package_dir=LIB_DIR)
    for module, names in MODULE_DATA.items():
        if module in code:
            for name in names:
                code[f"{module.rpartition('.')[0]}/{name}"] = code[module].with_name(name)
    return code


def affected_chapters(paths: list[str | os.PathLike],
                      root: Path | None = None) -> dict[str, tuple[list[str], list[str]]]:
    """Which chapters a change to each file re-executes: first those whose cache key covers it
    (their source, parameter module, imported ``nearid`` code and its data files), then those
    that read their results (the summary), which re-execute only if the values they read
    change. A file no key covers (a test, a prose page, a benchmark) re-executes nothing; a
    changed lock re-executes all. What a change costs, before making it (CONTRIBUTING.md)."""
    root = root or find_root()
    chapters = list_chapters(root)
    covered = {ch.key: {p.resolve() for p in (ch.source, *chapter_code(ch).values())} for ch in chapters}
    out = {}
    for raw in paths:
        path = Path(raw) if Path(raw).is_absolute() else root / raw
        if path.resolve().parent == (root / "requirements").resolve():
            hit = [ch.key for ch in chapters]  # the lock: the installed packages are in every key
        else:
            hit = [key for key, files in covered.items() if path.resolve() in files]
        readers = [ch.key for ch in chapters if set(reads(ch)) & set(hit) and ch.key not in hit]
        out[str(raw)] = (hit, readers)
    return out


def kernel_threads() -> int:
    """Threads a chapter's kernel uses, for torch and BLAS alike: ``$NEARID_NUM_THREADS``, else 1.

    It never depends on ``--jobs``: a thread count changes the order of floating-point sums,
    and a chapter must give the same numbers whether it ran alone or beside others.
    """
    raw = os.environ.get(kernels.THREADS_ENV, "").strip()
    try:
        n = int(raw or 1)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"NEARID_NUM_THREADS must be an int >= 1, got {raw!r}")
    return n


def reads(chapter: Chapter) -> tuple[str, ...]:
    """Chapters whose results this one reads (the summary reads every chapter's JSON)."""
    return tuple(profiles.READS.get(chapter.key, ()))


def _inputs_digest(chapter: Chapter, out_dir: Path | None) -> str:
    """sha256 of what a chapter reads of other chapters' results (the entries its parameter
    module names in ``READ_KEYS``, or whole files): when that changes, the chapter is stale."""
    keys = profiles.READ_KEYS.get(chapter.key)
    h = hashlib.sha256()
    for name in reads(chapter):
        path = (out_dir or Path()) / f"{name}.json"
        data = path.read_bytes() if out_dir and path.is_file() else b"missing"
        if keys is not None and data != b"missing":
            with contextlib.suppress(json.JSONDecodeError, AttributeError):
                doc = json.loads(data)
                data = json.dumps({k: doc.get(k) for k in keys}, sort_keys=True).encode()
        h.update(name.encode() + b"\0" + data)
    return h.hexdigest()


def _key_blocks(chapter: Chapter, profile: str, params: dict[str, Any], out_dir: Path | None) -> dict[str, bytes]:
    """What the cache key hashes, part by part, in order (:data:`KEY_PARTS` says each in words)."""
    blocks = {"inputs": _inputs_digest(chapter, out_dir).encode()} if reads(chapter) else {}
    blocks["source"] = chapter.source.read_bytes()
    blocks["parameters"] = json.dumps({"profile": profile, "params": params}, sort_keys=True).encode()
    blocks["code"] = codehash.digest_files(chapter_code(chapter).values(), package_dir=LIB_DIR).encode()
    blocks["packages"] = "\n".join(codehash.package_versions()).encode()
    blocks["python"] = platform.python_version().encode()
    blocks["threads"] = f"threads={kernel_threads()}".encode()
    blocks["kernels"] = kernels.signature().encode()
    return blocks


# What each part of the key covers, as `nearid verify` names a part that changed since a run.
KEY_PARTS = {"inputs": "the results of the chapters it reads", "source": "its source",
             "parameters": "its profile's parameters", "code": "the nearid code it imports",
             "packages": "the installed packages", "python": "the Python version",
             "threads": "the kernel's thread count (NEARID_NUM_THREADS)", "kernels": "the CPU kernels"}


def _digest(blocks: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for block in blocks.values():
        h.update(block)
    return h.hexdigest()


def key_and_parts(chapter: Chapter, profile: str, params: dict[str, Any],
                  out_dir: Path | None = None) -> tuple[str, dict[str, str]]:
    """:func:`cache_key`, and the sha256 of each of its parts (kept in the ``.key`` file, so
    that a stale result can say which part changed)."""
    blocks = _key_blocks(chapter, profile, params, out_dir)
    return _digest(blocks), {name: hashlib.sha256(block).hexdigest() for name, block in blocks.items()}


def cache_key(chapter: Chapter, profile: str, params: dict[str, Any], out_dir: Path | None = None) -> str:
    """sha256 of the chapter source, profile, resolved parameters, the code it imports
    (:func:`chapter_code`), the results of other chapters it reads, the installed package
    versions, the Python version, the kernel's thread count (:func:`kernel_threads`) and its
    CPU kernels (:func:`nearid.kernels.signature`: portable, or native to this CPU)."""
    return _digest(_key_blocks(chapter, profile, params, out_dir))


def _outputs(out_dir: Path, chapter: Chapter) -> dict[str, Path]:
    return {"ipynb": out_dir / f"{chapter.key}.ipynb", "json": out_dir / f"{chapter.key}.json",
            "key": out_dir / f"{chapter.key}.key", "failed": out_dir / f"{chapter.key}.failed.ipynb"}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def is_cached(chapter: Chapter, key: str, out_dir: Path) -> bool:
    """The outputs were made under ``key``, and they are the very files that run wrote: the
    ``.key`` names the sha256 of its notebook and JSON (a key written before it did so must
    at least agree with the JSON on the parameters)."""
    o = _outputs(out_dir, chapter)
    if not (o["ipynb"].is_file() and o["json"].is_file() and o["key"].is_file()):
        return False
    with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError, OSError):
        record = json.loads(o["key"].read_text())
        if record["key"] != key:
            return False
        digests = record.get("outputs")
        if digests is not None:
            return all(digests.get(name) == _sha256(o[name]) for name in ("ipynb", "json"))
        return json.loads(o["json"].read_text()).get("params") == record["params"]
    return False


def _forget_failed(out_dir: Path, chapter: Chapter) -> None:
    """Remove an earlier failure's notebook, if any (a read-only folder keeps it)."""
    failed = _outputs(out_dir, chapter)["failed"]
    if failed.exists():
        with contextlib.suppress(OSError):
            failed.unlink()


def _read_key(path: Path) -> dict[str, Any]:
    """A ``.key`` file's record; ValueError (naming it) where it is not one."""
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path.name} cannot be read ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("key"), str):
        raise ValueError(f"{path.name} is not a key record (no 'key' string)")
    return record


def _output_edits(o: dict[str, Path], record: dict[str, Any]) -> list[str]:
    """Outputs that are not the files their run wrote (the sha256 its ``.key`` names)."""
    digests = record.get("outputs")
    if not isinstance(digests, dict):
        return [f"{o['key'].name} records no sha256 of its outputs (written by an older runner)"]
    found = []
    for name in ("json", "ipynb"):
        if not o[name].is_file():
            found.append(f"{o[name].name} is missing")
        elif digests.get(name) != _sha256(o[name]):
            found.append(f"edited: {o[name].name} is not the file its run wrote (its sha256 differs from "
                         f"the one in {o['key'].name})")
    return found


def _staleness(chapter: Chapter, profile: str, record: dict[str, Any], out_dir: Path) -> str | None:
    """Which parts of the key changed since the run that wrote ``record``; None if none did."""
    key, parts = key_and_parts(chapter, profile, profiles.resolve(chapter.key, profile), out_dir)
    if record["key"] == key:
        return None
    before = record.get("parts")
    if not isinstance(before, dict) or not before:
        return ("stale: its source, parameters, the code it imports or the packages changed since it ran "
                "(its key predates per-part records)")
    names = [name for name, digest in parts.items() if before.get(name) != digest]
    others = [KEY_PARTS[name] for name in names if name != "parameters"]
    said = [f"{', '.join(others)} changed since it ran"] if others else []
    if "parameters" in names:
        said.append(f"it ran with other parameters than the {profile} profile's as it stands "
                    "(the profile changed since, or it ran with -p overrides)")
    return "stale: " + ("; ".join(said) or "its key changed since it ran")


def result_problem(chapter: str, profile: str, out_dir: Path, root: Path | None = None) -> str | None:
    """Why the executed results of ``chapter`` in ``out_dir`` are not what the current code gives
    in ``profile`` (None when they are): its last run failed (``NN_slug.failed.ipynb`` is
    there), its outputs are not the files its run wrote (sha256 against the ``.key``), or the
    current cache key (source, parameters, code, packages, ...) is not the one it ran under.
    `nearid verify` reports these instead of comparing, and ``--update`` refuses them."""
    ch = get_chapter(chapter, root)
    o = _outputs(out_dir, ch)
    rerun = f"rerun it (`nearid run {ch.number} --profile {profile}`)"
    with chapter_lock(out_dir, ch, exclusive=False):
        if os.path.lexists(o["failed"]):
            return f"its last run failed ({o['failed'].name} is there), so its results are from an earlier run; {rerun}"
        if not o["key"].is_file():
            return f"no {o['key'].name} beside its results, so nothing says which run made them; {rerun}"
        try:
            record = _read_key(o["key"])
        except ValueError as exc:
            return f"{exc}; {rerun}"
        found = _output_edits(o, record)
        stale = _staleness(ch, profile, record, out_dir)
    if stale:
        found.append(stale)
    return f"{'; '.join(found)}; {rerun}" if found else None


def _unsafe(path: Path) -> str | None:
    """What makes ``path`` no place for an output: "a symbolic link" (a write would go through
    it), "not a regular file" (a FIFO blocks its reader for good), or None."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        return "not a regular file"
    return None


def check_output_paths(out_dir: Path, chapters: list[Chapter], pages_dir: Path | None = None) -> None:
    """Refuse, before any work, a symbolic link (or a FIFO, a device) where a run of
    ``chapters`` writes or reads its own files: their outputs, locks and hidden files in
    ``out_dir``, ``timings.json``, the report page, and anything in ``pages_dir`` (which holds
    only pages the runner writes). A run that went on would write through the link, outside
    the checkout (:mod:`nearid.fileio`), or hang on the FIFO."""
    paths = [out_dir / "timings.json", out_dir / ".timings.lock", out_dir / REPORT_NAME]
    for ch in chapters:
        paths += [*_outputs(out_dir, ch).values(), out_dir / f".{ch.key}.lock",
                  *out_dir.glob(f".{ch.key}.*")]
    if pages_dir is not None and pages_dir.is_dir():
        paths += sorted(pages_dir.iterdir())
    found = sorted({f"{p} is {what}" for p in paths if (what := _unsafe(p))})
    if found:
        raise UnsafePath(f"refusing to run: {', '.join(found)}, where the runner writes its outputs (a write "
                         "would go through a link, outside the checkout); remove it and run again")


# ----------------------------------------------------------------------------- locks
def _open_lock(path: Path, create: bool):
    """The lock file opened for flock (made if ``create``), never through a link (refused:
    :class:`~nearid.fileio.UnsafePath`), or None where it cannot be opened: a read-only
    folder, in which no run can write outputs either."""
    attempts = [(os.O_RDWR | os.O_CREAT, "r+")] if create else []
    for flags, mode in [*attempts, (os.O_RDONLY, "r")]:
        with contextlib.suppress(OSError):
            return open_no_follow(path, flags, mode)
    return None


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _holder(path: Path) -> str:
    """Who holds a chapter's lock, from what its holder wrote into the lock file."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        rec = json.loads(path.read_text())
        os.kill(int(rec["pid"]), 0)  # alive (on this machine)?
        return f"`{rec['command']}` (pid {rec['pid']}, started {rec['started']})"
    with contextlib.suppress(OSError):
        if path.stat().st_size == 0:  # no run executes it: a shared holder checks its outputs
            return "another run (reading the chapter's outputs)"
    return "another run"


@contextlib.contextmanager
def chapter_lock(out_dir: Path, chapter: Chapter, exclusive: bool = True, about: str = "",
                 say=_say):
    """One run of a chapter's outputs at a time: ``flock`` on ``out_dir/.NN_slug.lock``.

    A run that executes holds it exclusively, from before its kernel starts until the notebook,
    JSON and key are in place and its timing is recorded; a cache check holds it shared, so it
    never reads a key beside the outputs of another run. A run that finds the lock taken says
    who holds it and waits, without a timeout (a chapter of the ``full`` profile may run for
    hours; Ctrl-C stops waiting). A shared lock is skipped where the lock file does not exist
    (no run of the chapter has started in ``out_dir``) or cannot be opened.
    """
    path = out_dir / f".{chapter.key}.lock"
    if exclusive:
        out_dir.mkdir(parents=True, exist_ok=True)
    # a reader never makes the file: no file, no run of this chapter has started in this folder
    fh = _open_lock(path, create=True) if exclusive else _open_lock(path, create=False) if os.path.lexists(path) else None
    if fh is None:
        if exclusive:
            raise preflight.PreflightError(f"cannot open the lock file {path}; make {out_dir} writable")
        yield
        return
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(fh, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"chapter {chapter.key}: {_holder(path)} is running it; waiting for it to finish "
                f"(Ctrl-C to stop waiting)")
            fcntl.flock(fh, mode)
        if exclusive:
            with contextlib.suppress(OSError):
                fh.seek(0)
                fh.truncate()
                fh.write(json.dumps({"pid": os.getpid(), "host": platform.node(), "command": about or chapter.key,
                                     "started": dt.datetime.now().isoformat(timespec="seconds")}) + "\n")
                fh.flush()
        yield
    finally:
        if exclusive:  # a later holder may only read (shared, writes nothing): leave no stale name
            with contextlib.suppress(OSError):
                fh.seek(0)
                fh.truncate()
        fh.close()  # releases the lock


@contextlib.contextmanager
def _timings_lock(out_dir: Path):
    """Exclusive ``flock`` on ``out_dir/.timings.lock`` (timings.json and the report page are
    read and rewritten by concurrent runs); none where the folder is read-only."""
    fh = _open_lock(out_dir / ".timings.lock", create=True)
    try:
        if fh is not None:
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield
    finally:
        if fh is not None:
            fh.close()


# ----------------------------------------------------------------------------- execution
def default_out_dir(root: Path) -> Path:
    return root / "book" / "executed"


def _disk_full(exc: BaseException, folder: Path) -> str | None:
    """A full disk or a file-size limit, said with the folder and its free space (the OSError
    names neither: papermill saves the working notebook there after every cell)."""
    import errno
    import shutil

    if not isinstance(exc, OSError) or exc.errno not in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return None
    free = ""
    with contextlib.suppress(OSError):
        free = f" ({shutil.disk_usage(folder).free / 2 ** 20:.1f} MB free there)"
    return (f"{exc.strerror} writing to {folder}{free}: free space there (or raise ulimit -f) and rerun; "
            "the last good outputs are kept")


def _memory_hint(name: str, value: str) -> str:
    """Out of address space, a shared library or an array fails to load; say so beside it."""
    if name == "MemoryError" or "failed to map segment" in str(value) or "cannot allocate memory" in str(value):
        return " (out of memory, or a memory limit such as ulimit -v: raise it or run a smaller profile)"
    return ""


def _device_description() -> str:
    """The device for timings.json; a record of a failure must not fail itself (torch may not
    load at all, e.g. under a low ``ulimit -v``, which is likely why the chapter failed)."""
    from nearid.env import device_description
    try:
        return device_description()
    except (ImportError, OSError, MemoryError) as exc:
        return f"unknown (torch could not load: {type(exc).__name__}: {str(exc).splitlines()[0][:200]})"


def _timing_problem(records: Any) -> str | None:
    """What makes parsed timings.json not a list of run records (None: it is one)."""
    if not isinstance(records, list):
        return f"it holds a JSON {type(records).__name__}, not a list of records"
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or not isinstance(rec.get("chapter"), str):
            return f"record {i} is not a run record (an object with a 'chapter')"
        if rec.get("status") == "ok" and not (isinstance(rec.get("wall_s"), (int, float))
                                              and isinstance(rec.get("profile"), str)):
            return f"record {i} ({rec['chapter']}) lacks its wall time or profile"
        if not isinstance(rec.get("overrides") or {}, dict):
            return f"record {i} ({rec['chapter']}) has overrides that are not an object"
    return None


def _parse_timings(text: str) -> tuple[list[dict], str | None]:
    """(records, None), or ([], what is wrong) for a damaged timings.json."""
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], f"not valid JSON: {exc}"
    problem = _timing_problem(records)
    return ([], problem) if problem else (records, None)


def _read_timings(out_dir: Path, say=_say) -> list[dict]:
    """The records of ``out_dir/timings.json`` (the caller holds :func:`_timings_lock`). A
    damaged file is never overwritten: it is moved aside to ``timings.json.damaged-<UTC
    time>``, one line says so, and the history starts again; a link there is refused."""
    path = out_dir / "timings.json"
    if not os.path.lexists(path):
        return []
    refuse_symlink(path)
    if not path.is_file():
        raise UnsafePath(f"refusing to read {path}: it is not a regular file; remove it and run again")
    try:
        records, problem = _parse_timings(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        records, problem = [], f"not UTF-8 text: {exc}"
    if problem is None:
        return records
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while os.path.lexists(aside):
        aside, n = path.with_name(f"{path.name}.damaged-{stamp}-{n}"), n + 1
    os.replace(path, aside)
    say(f"note: {path} was damaged ({problem}); kept as {aside.name}, and a new history started")
    return []


def _append_timing(out_dir: Path, entry: dict[str, Any]) -> None:
    """Append one record to timings.json under a file lock (chapters may run in parallel)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with _timings_lock(out_dir):
        records = _read_timings(out_dir)
        records.append(entry)
        atomic_write_text(out_dir / "timings.json", json.dumps(records, indent=1) + "\n")


def _failing_cell(nb_path: Path) -> int | None:
    import nbformat

    with contextlib.suppress(Exception):
        nb = nbformat.read(nb_path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
                return i
        # no error output: the kernel died (SIGKILL, out of memory, a full disk) in the cell
        # papermill had marked running when it last saved the notebook
        marks = [(i, cell.get("metadata", {}).get("papermill", {})) for i, cell in enumerate(nb.cells)
                 if cell.get("cell_type") == "code"]
        for i, mark in marks:
            if mark.get("status") == "running":
                return i
        # or, where papermill closed every mark, the first code cell that never started after
        # some that did (papermill saves a cell's start with its end)
        started = [i for i, mark in marks if mark.get("start_time")]
        if started:
            return next((i for i, mark in marks if i > started[-1] and not mark.get("start_time")), None)
    return None


def _annotate_parameters(nb_path: Path, chapter: Chapter, profile: str, overrides: dict) -> None:
    """Hide papermill's injected cell (it holds a temporary path) and say how the page ran."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    for i, cell in enumerate(nb.cells):
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
            ov = " ".join(f"-p {k}={v!r}" for k, v in overrides.items())
            text = (f"```{{note}}\nThis page was executed with the **{profile}** profile"
                    f"{' and overrides ' + ', '.join(f'`{k}={v!r}`' for k, v in overrides.items()) if overrides else ''}"
                    f". To rerun it: `nearid run {chapter.number} --profile {profile}"
                    f"{' ' + ov if ov else ''}`.\n```")
            nb.cells.insert(i + 1, nbformat.v4.new_markdown_cell(text))
            break
    text = nbformat.writes(nb)
    atomic_write_text(nb_path, text if text.endswith("\n") else text + "\n")  # as nbformat.write does


TASK_CACHE = Path(".cache") / "tasks"  # under the project root; NEARID_TASK_CACHE overrides


_ENV_LOCK = threading.Lock()
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




def _remove_stale_running(out_dir: Path, chapter: Chapter) -> None:
    """Hidden files of runs of this chapter that were killed (SIGKILL, power loss): their
    names carry the pid that wrote them."""
    for path in out_dir.glob(f".{chapter.key}.running.*"):
        with contextlib.suppress(ValueError, IndexError, OSError):
            pid = int(path.name.split(".running.", 1)[1].split("-", 1)[0])
            if not pid_alive(pid):
                path.unlink()


def execute(chapter: Chapter, profile: str, params: dict[str, Any], overrides: dict[str, Any],
            out_dir: Path, root: Path, key: str, force: bool = False,
            parts: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one chapter through papermill; move outputs into place only on success.

    The caller holds the chapter's lock (:func:`chapter_lock`; :func:`run_chapter` does).
    The chapter runs into hidden files named for this run (``.NN_slug.running.PID-RANDOM.*``),
    so no other run can remove or overwrite them. ``force`` makes the chapter recompute its
    sweep tasks instead of reusing finished ones; ``parts`` are the digests of the key's parts
    (:func:`key_and_parts`), kept in its ``.key``. An interrupt (Ctrl-C) kills the kernel and
    removes the hidden files; the last good outputs stay as they were.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_running(out_dir, chapter)
    o = _outputs(out_dir, chapter)
    run = f"{os.getpid()}-{secrets.token_hex(4)}"
    tmp_nb = out_dir / f".{chapter.key}.running.{run}.ipynb"
    tmp_json = out_dir / f".{chapter.key}.running.{run}.json"
    INTERRUPTED.clear()
    try:
        return _execute(chapter, profile, params, overrides, o, tmp_nb, tmp_json, root, key, force, parts)
    except KeyboardInterrupt:
        _stop_kernels()  # also dies with this process; stop it now for callers that go on
        logging.getLogger("papermill").disabled = False
        raise
    finally:  # whatever happened, no hidden half-written output stays behind
        for p in (tmp_nb, tmp_json):
            with contextlib.suppress(OSError):
                p.unlink(missing_ok=True)


def _commit(chapter: Chapter, profile: str, params: dict, overrides: dict, o: dict[str, Path],
            tmp_nb: Path, tmp_json: Path, key: str, parts: dict[str, str] | None = None) -> None:
    """Move a successful run's notebook and JSON into place, then its key.

    The old key goes first, so that a crash part-way leaves no key (the next run executes
    again) rather than a key beside another run's outputs; the new one names the sha256 of
    the notebook and JSON it belongs to (:func:`is_cached` checks them) and of each part of
    the key (:func:`key_and_parts`, for `nearid verify`). A link planted at an output while
    the chapter ran is refused (:class:`~nearid.fileio.UnsafePath`), nothing moved."""
    for path in o.values():
        refuse_symlink(path)
    _annotate_parameters(tmp_nb, chapter, profile, overrides)
    o["key"].unlink(missing_ok=True)
    os.replace(tmp_nb, o["ipynb"])
    os.replace(tmp_json, o["json"])
    o["failed"].unlink(missing_ok=True)
    atomic_write_text(o["key"], json.dumps({"key": key, "profile": profile, "params": params,
                                            "code": sorted(chapter_code(chapter)), "parts": parts or {},
                                            "outputs": {"ipynb": _sha256(o["ipynb"]),
                                                        "json": _sha256(o["json"])}}) + "\n")


def _execute(chapter, profile, params, overrides, o, tmp_nb, tmp_json, root, key, force, parts) -> dict[str, Any]:
    import jupytext
    import papermill as pm

    nb = jupytext.read(chapter.source)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.setdefault("language_info", {"name": "python"})
    start = time.perf_counter()
    status, error, results = "ok", None, None

    def record(status: str, device: str | None = None) -> None:
        _append_timing(o["json"].parent, {
            "chapter": chapter.key, "profile": profile, "overrides": overrides, "status": status,
            "wall_s": round(time.perf_counter() - start, 2), "device": device or _device_description(),
            "threads": kernel_threads(),
            "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "host": platform.node(), "pid": os.getpid(),
        })

    _papermill_writes_without_following_links()
    try:
        with _kernel_environment(root, force):
            pm.execute_notebook(nb, str(tmp_nb), kernel_name=KERNELSPEC["name"], progress_bar=False,
                                log_output=False, cwd=str(root), kernel_manager_class=_kernel_manager_class(),
                                parameters={"profile": profile, "overrides": overrides,
                                            "results_path": str(tmp_json)})
        if not tmp_json.is_file():
            raise ChapterFailed(chapter.key, None, "the chapter finished but wrote no results "
                                "(call nearid.book.results.save(results_path, ...))", None)
        results = json.loads(tmp_json.read_text())
        _commit(chapter, profile, params, overrides, o, tmp_nb, tmp_json, key, parts)
    except UnsafePath:
        raise  # a link where an output belongs: refused, nothing written through it (exit code 2)
    except pm.PapermillExecutionError as exc:
        status = "failed"
        os.replace(tmp_nb, o["failed"])
        error = ChapterFailed(chapter.key, _failing_cell(o["failed"]),
                              f"{exc.ename}: {exc.evalue}{_memory_hint(exc.ename, exc.evalue)}", o["failed"])
    except ChapterFailed as exc:
        status, error = "failed", exc
    except KeyboardInterrupt as exc:
        how = "terminated" if isinstance(exc, Terminated) else "interrupted"  # SIGTERM, or Ctrl-C
        with contextlib.suppress(Exception):
            record(how, device=f"not recorded ({how})")
        raise
    except Exception as exc:  # kernel died, bad notebook, outputs that could not be moved, ...
        status = "failed"
        failed = None
        if tmp_nb.is_file():
            os.replace(tmp_nb, o["failed"])
            failed = o["failed"]
        cell = _failing_cell(failed) if failed else None
        full = _disk_full(exc, o["json"].parent)
        error = ChapterFailed(chapter.key, cell, full or f"{type(exc).__name__}: {exc}", failed,
                              where=(f"while writing its outputs{f' after cell {cell}' if cell is not None else ''}"
                                     if full else None))
    record(status)  # after the outputs are in place: what happened, not what was hoped for
    if error is not None:
        raise error
    return results


def run_chapter(chapter: str, profile: str = "quick", overrides: dict[str, Any] | None = None,
                out_dir: str | os.PathLike | None = None, force: bool = False,
                root: str | os.PathLike | None = None) -> dict[str, Any]:
    """Execute one chapter (or reuse its cached output) and return its results dict.

    A run that succeeds, or finds its outputs cached, removes a ``NN_slug.failed.ipynb`` left
    by an earlier failure: what the reader sees is the last good run.
    """
    return run_chapter_outcome(chapter, profile, overrides, out_dir, force, root)[0]


def run_chapter_outcome(chapter: str, profile: str = "quick", overrides: dict[str, Any] | None = None,
                        out_dir: str | os.PathLike | None = None, force: bool = False,
                        root: str | os.PathLike | None = None, say=_say, yes: bool = False,
                        priced: bool = True) -> tuple[dict[str, Any], str]:
    """:func:`run_chapter`, and whether the results were "executed" now or "cached".

    A run that must execute is priced first (:mod:`nearid.book.pricing`, one line to ``say``)
    and refused above ``$NEARID_MAX_HOURS`` (2 h) unless ``yes``; ``priced=False`` skips it
    (the book prices all its chapters together).

    Before any work: the parameters (:func:`nearid.book.profiles.resolve`), the ``NEARID_*``
    environment, and, when the chapter must execute, its device, its Dask scheduler and the
    output folder (:mod:`nearid.book.preflight`); each refusal is a ValueError naming what to
    change. The cache is read under the chapter's lock (:func:`chapter_lock`, shared) and a
    run executes under it (exclusive), so two runs of one chapter never mix their outputs.
    """
    root = Path(root) if root else find_root()
    ch = get_chapter(chapter, root)
    overrides = dict(overrides or {})
    params = profiles.resolve(ch.key, profile, overrides)  # fails fast on bad input
    preflight.check_environment()
    out = Path(out_dir) if out_dir else default_out_dir(root)
    check_output_paths(out, [ch], _pages_dir(out, root))

    def cached() -> dict[str, Any] | None:
        if force or not is_cached(ch, cache_key(ch, profile, params, out), out):
            return None
        _forget_failed(out, ch)
        return json.loads(_outputs(out, ch)["json"].read_text())

    with chapter_lock(out, ch, exclusive=False, say=say):
        results = cached()
    if results is not None:
        return results, "cached"
    preflight.check_chapter(ch.key, params)
    preflight.check_caches(task_cache=root / TASK_CACHE)  # the kernel's default cache: before it computes
    preflight.check_writable(out)
    if priced:
        cost = pricing.price(ch.key, profile, params, out, device=pricing.device_kind(params))
        if cost.worth_saying:
            say(f"estimate: {cost.describe()}")
        pricing.check([cost], yes=yes)
    about = " ".join(["nearid run", ch.number, "--profile", profile, *(f"-p {k}={v!r}" for k, v in overrides.items()),
                      *(["--force"] if force else [])])
    with chapter_lock(out, ch, exclusive=True, about=about, say=say):
        results = cached()  # another run may have made these very outputs while this one waited
        if results is not None:
            return results, "cached"
        key, parts = key_and_parts(ch, profile, params, out)  # the results it reads may have changed meanwhile
        return execute(ch, profile, dict(params), overrides, out, root, key, force=force, parts=parts), "executed"


def default_jobs() -> int:
    """Chapters side by side by default: one per core (each kernel uses :func:`kernel_threads`).

    Chapters are independent, so the book's wall time approaches that of its longest chapter;
    on the smoke book here (2 cores, loaded by other work) two jobs took 214 s and 309 s where
    one took 379 s and 477 s, with identical numbers (benchmarks/README.md, "Chapters side by side").
    """
    return max(1, os.cpu_count() or 1)


# Wall seconds of each chapter in one fresh default quick build (two chapters side by side,
# one torch thread each) of a406541 on a 2-core AMD EPYC (Zen 3) VM, 2026-12-04, under py-spy:
# the whole build took 32:43 (benchmarks/README.md, "Issue 34"). Used only to start the
# longest chapters first when an output folder has no timings of its own yet (a fresh clone),
# and to price a chapter that has never run here: chapter 05 takes longer than all chapters
# but 04 together, and 04 as long as all the rest, so starting either late would leave a core
# idle for many minutes. Never a result.
REFERENCE_SECONDS = {
    "quick": {"01_definitions": 40, "02_isometric_dgp": 101, "03_bilipschitz": 565,
              "04_alignment": 1046, "05_disentanglement": 1778, "06_cell_microscopy": 317},
}


def _expected_seconds(out: Path, profile: str) -> dict[str, float]:
    """Each chapter's last successful wall time in this profile (from timings.json), else
    the reference machine's (:data:`REFERENCE_SECONDS`; quick's proportions for `full`)."""
    seen: dict[str, float] = dict(REFERENCE_SECONDS.get(profile, REFERENCE_SECONDS["quick"]))
    records: list[dict] = []
    with contextlib.suppress(OSError, UnicodeDecodeError):  # damaged: moved aside when a record is added
        records = _parse_timings((out / "timings.json").read_text())[0]
    for rec in records:
        if rec.get("status") == "ok" and rec.get("profile") == profile:
            seen[rec["chapter"]] = float(rec["wall_s"])
    return seen


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


def _chapter_process(conn, chapter: str, profile: str, out_dir: Path, force: bool, root: Path,
                     parent: int) -> None:
    """Body of one chapter's process: run it, send back (outcome, message), never a traceback.
    It dies with the runner (and its kernel with it), like the kernel itself."""
    from nearid.book.kernel import set_parent_death_signal

    set_parent_death_signal()
    if os.getppid() != parent:
        os._exit(1)
    handle_stop_signals()
    try:
        _, outcome = run_chapter_outcome(chapter, profile, {}, out_dir, force, root, priced=False)
        conn.send(("ran" if outcome == "executed" else "cached", ""))
    except ChapterFailed as exc:
        conn.send(("failed", str(exc)))
    except KeyboardInterrupt:
        conn.send(("interrupted", ""))
    except Exception as exc:  # reported as this chapter's failure
        conn.send(("failed", f"chapter {chapter} failed: {type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _run_parallel(todo: list[Chapter], jobs: int, profile: str, out: Path, force: bool, root: Path,
                  on_done) -> None:
    """Run ``todo`` in that order, at most ``jobs`` processes at a time; ``on_done(key,
    outcome, message)`` as each ends. Ctrl-C interrupts every chapter process, waits for them
    to clean up (each stops its kernel) and raises KeyboardInterrupt."""
    ctx = multiprocessing.get_context("fork")  # the children see this process's state (tests rely on it)
    queue, running = list(todo), {}
    try:
        while queue or running:
            while queue and len(running) < jobs:
                ch = queue.pop(0)
                parent_end, child_end = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_chapter_process, name=f"nearid-{ch.key}",
                                   args=(child_end, ch.key, profile, out, force, root, os.getpid()))
                proc.start()
                child_end.close()
                running[ch.key] = (proc, parent_end)
            multiprocessing.connection.wait([c for _, c in running.values()]
                                            + [p.sentinel for p, _ in running.values()])
            for key, (proc, conn) in list(running.items()):
                if conn.poll() or not proc.is_alive():
                    try:
                        outcome, message = conn.recv()
                    except EOFError:
                        proc.join()
                        outcome, message = "failed", f"chapter {key} failed: its process died " \
                                                     f"(exit code {proc.exitcode})"
                    proc.join()
                    conn.close()
                    del running[key]
                    on_done(key, outcome, message)
    except KeyboardInterrupt as exc:
        passed_on = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT  # recorded as it came
        for proc, _ in running.values():
            with contextlib.suppress(OSError):
                os.kill(proc.pid, passed_on)
        deadline = time.monotonic() + 20
        for proc, _ in running.values():
            proc.join(max(0.1, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
        raise


def run_book(profile: str = "quick", jobs: int | None = None, only: list[str] | None = None,
             force: bool = False, root: str | os.PathLike | None = None,
             out_dir: str | os.PathLike | None = None, progress: bool = True, yes: bool = False) -> dict[str, str]:
    """Execute every chapter (or ``only`` some), ``jobs`` at a time; returns chapter -> status.

    The chapters to execute are priced together first and refused above ``$NEARID_MAX_HOURS``
    unless ``yes`` (:mod:`nearid.book.pricing`).

    ``jobs`` defaults to :func:`default_jobs` (one chapter per core); the longest chapters
    (by their last recorded wall time, or the reference machine's) start first. Every chapter's kernel uses
    :func:`kernel_threads` threads whatever ``jobs`` is, so the numbers are the same as with
    ``jobs=1``. Raises :class:`BookFailed` (a RuntimeError) listing every failed chapter after
    the others have finished; outputs of chapters that succeeded are kept. What
    :func:`run_chapter_outcome` checks before any work is checked here for every chapter
    before the first one starts.
    """
    from tqdm.auto import tqdm

    root = Path(root) if root else find_root()
    out = Path(out_dir) if out_dir else default_out_dir(root)
    if profile not in profiles.PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid: {', '.join(profiles.PROFILES)}")
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    kernel_threads()  # a bad NEARID_NUM_THREADS fails here, before any work
    preflight.check_environment()
    chapters = list_chapters(root)
    if only:  # `--only 01 01` or `--only 1 01_definitions` names one chapter: run it once
        chapters = list({ch.key: ch for ch in (get_chapter(name, root) for name in only)}.values())
    check_output_paths(out, chapters, _pages_dir(out, root))
    # chapters that read other chapters' results (the summary) run after those, one by one
    later = [ch for ch in chapters if reads(ch)]
    chapters = [ch for ch in chapters if not reads(ch)]
    todo, status = [], {}
    for ch in chapters:
        params = profiles.resolve(ch.key, profile)
        if not force and is_cached(ch, cache_key(ch, profile, params), out):
            status[ch.key] = "cached"
            _forget_failed(out, ch)
        else:
            todo.append(ch)
    for ch in [*todo, *later]:  # device, scheduler: before any chapter starts
        preflight.check_chapter(ch.key, profiles.resolve(ch.key, profile))
    if todo or any(force or not is_cached(ch, cache_key(ch, profile, profiles.resolve(ch.key, profile), out), out)
                   for ch in later):
        preflight.check_caches(task_cache=root / TASK_CACHE)
        preflight.check_writable(out)
    costs = []
    for ch in todo:
        params = profiles.resolve(ch.key, profile)
        costs.append(pricing.price(ch.key, profile, params, out, device=pricing.device_kind(params)))
        if costs[-1].worth_saying:
            _say(f"estimate: {costs[-1].describe()}")
    pricing.check(costs, yes=yes)
    failures: list[str] = []
    bar = tqdm(total=len(chapters) + len(later), desc=f"chapters ({profile})", unit="ch",
               disable=not progress, file=sys.stderr, initial=len(chapters) - len(todo))

    def done(key: str, outcome: str, message: str) -> None:
        status[key] = outcome
        if message:
            failures.append(message)
        bar.update()

    def run_one(ch: Chapter) -> None:
        bar.set_postfix_str(ch.key)
        try:
            _, outcome = run_chapter_outcome(ch.key, profile, {}, out, force, root, priced=False)
            done(ch.key, "ran" if outcome == "executed" else "cached", "")
        except ChapterFailed as exc:
            done(ch.key, "failed", str(exc))

    try:
        if jobs == 1 or len(todo) <= 1:
            for ch in todo:
                run_one(ch)
        elif todo:
            expected = _expected_seconds(out, profile)
            todo.sort(key=lambda c: -expected.get(c.key, 0.0))  # longest first; stable otherwise
            _run_parallel(todo, jobs, profile, out, force, root, done)
        if "interrupted" not in status.values():
            for ch in later:  # after the chapters whose results they read, whose keys they include
                if not force and is_cached(ch, cache_key(ch, profile, profiles.resolve(ch.key, profile), out), out):
                    status[ch.key] = "cached"
                    _forget_failed(out, ch)
                    bar.update()
                else:
                    run_one(ch)
    finally:
        bar.close()
        if out.is_dir():
            for problem in (try_write_run_report(out, root), try_write_pages(out, root)):
                if problem:
                    _say(problem)
    if "interrupted" in status.values():
        raise KeyboardInterrupt
    if failures:
        raise BookFailed("; ".join(failures))
    return status


# ----------------------------------------------------------------------------- report page
REPORT_NAME = "how_this_book_was_run.md"
KEY_PACKAGES = ("torch", "torchvision", "numpy", "scipy", "scikit-learn", "pandas", "timm", "transformers",
                "lightgbm", "dask", "papermill", "jupyter-book", "nearid")


def _lock_lines(root: Path | None) -> list[str]:
    """Which lock the environment was installed from (file hashes), and whether it still is."""
    from nearid.book import lockfile

    if root is None or not all((root / rel).is_file() for rel in lockfile.LOCK_FILES):
        return ["No lock file was found beside this book (`requirements/lock.txt`), so the "
                "versions below are all that is known of the environment.", ""]
    lines = ["The environment is installed from a lock (`make setup`; `make lock` regenerates it): "
             "every package at an exact version, with the hashes of its files.", "",
             "| lock file | sha256 | packages |", "| --- | --- | ---: |"]
    for rel in lockfile.LOCK_FILES:
        lines.append(f"| `{rel}` | `{lockfile.digest(root / rel)}` | {len(lockfile.read_lock(root / rel))} |")
    try:
        verdict = str(lockfile.compare(lockfile.locked(root)))
    except ValueError as exc:
        verdict = f"the lock cannot be read: {exc}"
    lines += ["", f"When this page was written, {verdict}.", ""]
    return lines


def _kernel_lines(out_dir: Path, latest: dict[str, dict]) -> list[str]:
    """Which CPU kernels computed each chapter's numbers (its JSON's ``kernels`` record)."""
    lines = ["## CPU kernels", "",
             "Which kernels torch, MKL, oneDNN, OpenBLAS and numpy run depends on the instruction set "
             "of the CPU, and kernels sum in different orders, so unpinned they give other numbers on "
             "other CPUs. The book pins one choice that every x86-64 CPU with AVX2 offers "
             "(`nearid.kernels`), set before torch and numpy load in every chapter kernel and task "
             "worker; `NEARID_NATIVE_KERNELS=1` lets each library choose its fastest kernels instead "
             "and marks the results as not portable. GPUs and non-x86 CPUs are outside this choice.", "",
             "| setting | value | what it pins |", "| --- | --- | --- |"]
    for var, value in {**kernels.PORTABLE_SETTINGS, **kernels.TORCH_SETTINGS}.items():
        lines.append(f"| `{var}` | `{value}` | {kernels.WHAT[var]} |")
    lines += ["", "| chapter | kernels | portable | CPU |", "| --- | --- | --- | --- |"]
    for key in sorted(latest):
        rec = None
        with contextlib.suppress(OSError, json.JSONDecodeError, AttributeError):
            rec = json.loads((out_dir / f"{key}.json").read_text()).get("kernels")
        if not rec:
            lines.append(f"| {key} | not recorded | no | |")
            continue
        why = "; ".join(rec.get("problems") or [])
        lines.append(f"| {key} | {rec.get('mode')} | {'yes' if rec.get('portable') else 'no: ' + why} | "
                     f"{rec.get('cpu', '')} |")
    return [*lines, ""]


def write_run_report(out_dir: Path, root: Path | None = None) -> Path:
    """The "How this book was run" page, generated from timings.json, the lock and the
    installed versions. ``root`` (the checkout, where the lock lives) defaults to the folder
    two levels above ``out_dir`` (``<root>/book/executed``)."""
    if root is None:
        parents = Path(out_dir).resolve().parents
        root = parents[1] if len(parents) > 1 else None
    with _timings_lock(out_dir):  # not beside a run that is appending its record
        return _write_run_report(out_dir, root)


def try_write_run_report(out_dir: Path, root: Path | None = None) -> str | None:
    """:func:`write_run_report`, or one line saying why it could not be rewritten (a
    read-only folder serves cached results all the same)."""
    try:
        write_run_report(out_dir, root)
    except OSError as exc:
        return (f"note: {Path(out_dir) / REPORT_NAME} was not rewritten "
                f"({exc.strerror or exc}); the chapter's outputs are unaffected")
    return None


def _pages_dir(out_dir: Path, root: Path) -> Path | None:
    """Where the book's pages are cut to after a run into ``out_dir`` (None: not the book's folder)."""
    from nearid.book import pages

    return root / pages.PAGES_DIR if Path(out_dir).resolve() == default_out_dir(root).resolve() else None


def try_write_pages(out_dir: Path, root: Path | None = None) -> str | None:
    """Cut the executed chapters into the book's pages (:mod:`nearid.book.pages`) when
    ``out_dir`` is the book's own folder; one line saying why not if that fails."""
    from nearid.book import pages

    root = Path(root) if root is not None else find_root()
    if Path(out_dir).resolve() != default_out_dir(root).resolve():
        return None
    try:
        pages.write_pages(out_dir, root / pages.PAGES_DIR)
    except (OSError, ValueError) as exc:
        return f"note: the book's pages in {pages.PAGES_DIR} were not rewritten ({exc})"
    return None


def _git(root: Path, *args: str) -> str | None:
    """One line of ``git -C root ARGS``, or None (no git, not a checkout, an error)."""
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                              check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() or None


def _public_url(url: str) -> str:
    """A remote's address without any user name or token written into it."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        return f"{scheme}://{rest.split('@', 1)[1]}"
    return url


def _provenance(root: Path | None) -> dict[str, str]:
    """Where this build's code came from and when this page was written, computed each time:
    the repository (the checkout's ``origin`` remote), the commit (``git rev-parse --short
    HEAD``, and whether tracked files differ from it) and the time in UTC. Outside a git
    checkout, or when ``root`` is only inside another repository, the commit is "unknown"."""
    written = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    top = _git(root, "rev-parse", "--show-toplevel") if root is not None else None
    if top is None or Path(top).resolve() != Path(root).resolve():
        unknown = "unknown (the book was not run from a git checkout)"
        return {"repository": unknown, "commit": unknown, "written": written}
    remote = _git(root, "config", "--get", "remote.origin.url")
    commit = _git(root, "rev-parse", "--short", "HEAD")
    if commit is None:
        commit = "unknown (no commit yet)"
    elif _git(root, "status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes to tracked files)"
    repository = _public_url(remote) if remote else "not recorded (this checkout has no `origin` remote)"
    return {"repository": repository, "commit": commit, "written": written}


def _provenance_lines(root: Path | None) -> list[str]:
    info = _provenance(root)
    return ["## This build", "",
            "| what | value |", "| --- | --- |",
            f"| repository | {info['repository']} |",
            f"| commit | {info['commit']} |",
            f"| this page written (UTC) | {info['written']} |", "",
            "The repository, the commit and the time are read from the checkout and the clock when the "
            "runner writes this page, at the end of each run (`nearid book` builds the site right after); "
            "none of them is typed.", ""]


def _size_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"{len(value)} values" if len(value) > 4 else "[" + ", ".join(map(str, value)) + "]"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _profile_lines() -> list[str]:
    """What each profile runs, beside what the paper ran (nearid.paper.SETUPS): ``full`` is the
    largest we define, not the paper's models."""
    from nearid import paper

    lines = ["## What each profile runs", "",
             "Every profile runs the same code on stand-ins we can train or generate offline; `full` is the "
             "largest we define (for one GPU), not the paper's models or data. The sizes below are the "
             "profiles' defaults (`nearid params NN` lists every parameter).", "",
             "| chapter | the paper | what we run instead | smoke | quick | full |",
             "| --- | --- | --- | --- | --- | --- |"]
    for key in profiles.CHAPTERS:
        sizes, stand_in = profiles.SCALES.get(key, ((), ""))
        if not sizes:
            continue
        cells = ["; ".join(f"{name} {_size_text(profiles.CHAPTERS[key][p][name])}" for name in sizes)
                 for p in profiles.PROFILES]
        lines.append(f"| {key} | {paper.SETUPS.get(key, '')} | {stand_in} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _write_run_report(out_dir: Path, root: Path | None) -> Path:
    records = _read_timings(out_dir)
    latest: dict[str, dict] = {}
    for rec in records:
        if rec.get("status") == "ok":
            latest[rec["chapter"]] = rec
    lines = ["# How this book was run", "",
             "Every number in this book was computed by executing the chapter sources in "
             "`notebooks/` with papermill (`nearid book`); the book itself runs no code. This page "
             "is written by the runner from `book/executed/timings.json` at the end of each run.", "",
             *_provenance_lines(root),
             "## Chapters", "",
             "| chapter | profile | overrides | wall time (s) | device | finished (UTC) |",
             "| --- | --- | --- | ---: | --- | --- |"]
    for key in sorted(latest):
        r = latest[key]
        ov = ", ".join(f"{k}={v}" for k, v in (r.get("overrides") or {}).items()) or "none"
        lines.append(f"| {key} | {r['profile']} | {ov} | {r['wall_s']:.1f} | {r.get('device', '')} | "
                     f"{r.get('finished', '')} |")
    total = sum(r["wall_s"] for r in latest.values())
    lines += ["", f"Total execution time of the chapters shown: {total:.0f} s.", "",
              *_kernel_lines(out_dir, latest),
              "## Software", "", *_lock_lines(root), "| package | version |", "| --- | --- |"]
    for name in KEY_PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            lines.append(f"| {name} | {importlib.metadata.version(name)} |")
    lines += [f"| python | {platform.python_version()} |", ""]
    lines += _profile_lines()
    lines += ["## When a chapter runs again", "",
              "`nearid book` skips a chapter whose outputs were made under the same *cache key*: "
              "a sha256 of the chapter's source (`notebooks/NN_slug.py`), its profile and resolved "
              "parameters, the source of every `nearid` module the chapter imports (found by "
              "walking its imports statically, lazy imports inside functions included, plus the "
              "chapter's own parameter module), the versions of every installed package and the "
              "Python version. Editing the command line, the runner or another chapter's "
              "experiment re-executes nothing here; of the files that are not Python code only the "
              "registry of claims (`lib/nearid/claims.yaml`) counts, for every chapter.",
              "", "| chapter | `nearid` modules its key covers |", "| --- | --- |"]
    for key_file in sorted(out_dir.glob("*.key")):
        with contextlib.suppress(json.JSONDecodeError, KeyError, OSError):
            modules = json.loads(key_file.read_text())["code"]
            shown = ", ".join(f"`{m.removeprefix('nearid.') if m != 'nearid' else m}`" for m in modules)
            lines.append(f"| {key_file.stem} | {shown} |")
    lines += ["", "To rerun one chapter: `nearid run 02 --profile full -p seeds=10`; see "
              "{doc}`how to rerun a chapter <../rerun>` for profiles and options.", ""]
    report = out_dir / REPORT_NAME
    atomic_write_text(report, "\n".join(lines))
    return report
