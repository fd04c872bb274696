"""One run of a chapter's outputs at a time (``flock`` on ``.NN_slug.lock``), and ``timings.json``:
the history of runs, read and appended under its own lock, a damaged file kept aside."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from nearid.book import preflight
from nearid.book.chapters import Chapter
from nearid.fileio import UnsafePath, atomic_write_text, open_no_follow, refuse_symlink


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
