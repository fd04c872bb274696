"""``nearid book``: every chapter, cached ones skipped, the rest priced first and run in up to
``--jobs`` processes at once, with a progress bar over chapters."""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
from pathlib import Path

from nearid.book import (
    preflight,
    pricing,
    profiles,
    runner,
)
from nearid.book.cachekey import _forget_failed, cache_key, check_output_paths, is_cached, kernel_threads, reads
from nearid.book.chapters import BookFailed, Chapter, ChapterFailed, default_out_dir, find_root, get_chapter, list_chapters
from nearid.book.kernelproc import TASK_CACHE, Terminated, handle_stop_signals
from nearid.book.locks import _parse_timings, _say
from nearid.book.pricing import REFERENCE_SECONDS
from nearid.book.report import _pages_dir, try_write_pages, try_write_run_report


def default_jobs() -> int:
    """Chapters side by side by default: one per core (each kernel uses :func:`kernel_threads`).

    Chapters are independent, so the book's wall time approaches that of its longest chapter;
    on the smoke book here (2 cores, loaded by other work) two jobs took 214 s and 309 s where
    one took 379 s and 477 s, with identical numbers (benchmarks/README.md, "Chapters side by side").
    """
    return max(1, os.cpu_count() or 1)


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
        _, outcome = runner.run_chapter_outcome(chapter, profile, {}, out_dir, force, root, price="no")
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
            _, outcome = runner.run_chapter_outcome(ch.key, profile, {}, out, force, root, price="no")
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
