"""Execute chapters with papermill, skip unchanged ones, record how the book was run.

The book never executes code itself: this module runs each ``notebooks/NN_slug.py``
(jupytext) through papermill into ``book/executed/NN_slug.ipynb`` plus the chapter's
``NN_slug.json``. A content key (chapter source, resolved parameters, the ``nearid``
modules the chapter imports, installed package versions) decides whether a chapter must run
again: a change to code a chapter runs re-executes it, a change elsewhere (the command line,
the runner, another chapter's experiment) does not, and a no-op rebuild executes nothing.

The work is in parts, each a module of ``nearid.book``: :mod:`~nearid.book.chapters` (which
chapters exist), :mod:`~nearid.book.cachekey` (when one must run again),
:mod:`~nearid.book.locks` (one run at a time, ``timings.json``), :mod:`~nearid.book.kernelproc`
(the kernel process and signals), this module (one chapter's execution),
:mod:`~nearid.book.bookrun` (the whole book) and :mod:`~nearid.book.report` (the run report and
the pages). Their public names are importable from here too, as before.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import platform
import secrets
import time
from pathlib import Path
from typing import Any

from nearid.book import preflight, pricing, profiles
from nearid.constraints import Options
from nearid.book.cachekey import (  # noqa: F401 - re-exported: nearid.book.runner.<name> as before
    KEY_PARTS,
    MODULE_DATA,
    REPORT_NAME,
    _digest,
    _forget_failed,
    _inputs_digest,
    _key_blocks,
    _output_edits,
    _outputs,
    _read_key,
    _sha256,
    _staleness,
    _unsafe,
    affected_chapters,
    cache_key,
    chapter_code,
    check_output_paths,
    is_cached,
    kernel_threads,
    key_and_parts,
    reads,
    result_problem,
)
from nearid.book.chapters import (  # noqa: F401 - re-exported: nearid.book.runner.<name> as before
    KERNELSPEC,
    LIB_DIR,
    BookFailed,
    Chapter,
    ChapterFailed,
    ChapterRun,
    default_out_dir,
    find_root,
    get_chapter,
    list_chapters,
)
from nearid.book.kernelproc import (  # noqa: F401 - re-exported: nearid.book.runner.<name> as before
    _ENV_LOCK,
    _ENV_SAVED,
    _ENV_USERS,
    _KERNELS,
    INTERRUPTED,
    STOP_SIGNALS,
    TASK_CACHE,
    Terminated,
    _curve_ready,
    _kernel_environment,
    _kernel_manager_class,
    _papermill_writes_without_following_links,
    _quiet_interrupted_run,
    _stop_kernels,
    handle_stop_signals,
    interrupt_once,
    restore_signals,
)
from nearid.book.locks import (  # noqa: F401 - re-exported: nearid.book.runner.<name> as before
    _append_timing,
    _holder,
    _open_lock,
    _parse_timings,
    _read_timings,
    _say,
    _timing_problem,
    _timings_lock,
    chapter_lock,
)
from nearid.book.pricing import REFERENCE_SECONDS  # noqa: F401 - re-exported
from nearid.book.report import (  # noqa: F401 - re-exported: nearid.book.runner.<name> as before
    KEY_PACKAGES,
    _git,
    _kernel_lines,
    _lock_lines,
    _pages_dir,
    _profile_lines,
    _provenance,
    _provenance_lines,
    _public_url,
    _size_text,
    _write_run_report,
    try_write_pages,
    try_write_run_report,
    write_run_report,
)
from nearid.fileio import UnsafePath, atomic_write_text, pid_alive, refuse_symlink


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


def _remove_stale_running(out_dir: Path, chapter: Chapter) -> None:
    """Hidden files of runs of this chapter that were killed (SIGKILL, power loss): their
    names carry the pid that wrote them."""
    for path in out_dir.glob(f".{chapter.key}.running.*"):
        with contextlib.suppress(ValueError, IndexError, OSError):
            pid = int(path.name.split(".running.", 1)[1].split("-", 1)[0])
            if not pid_alive(pid):
                path.unlink()


def execute(run: ChapterRun, out_dir: Path, root: Path, force: bool = False) -> dict[str, Any]:
    """Run one chapter through papermill; move outputs into place only on success.

    The caller holds the chapter's lock (:func:`chapter_lock`; :func:`run_chapter` does).
    The chapter runs into hidden files named for this run (``.NN_slug.running.PID-RANDOM.*``),
    so no other run can remove or overwrite them. ``force`` makes the chapter recompute its
    sweep tasks instead of reusing finished ones. An interrupt (Ctrl-C) kills the kernel and
    removes the hidden files; the last good outputs stay as they were.
    """
    chapter = run.chapter
    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_running(out_dir, chapter)
    o = _outputs(out_dir, chapter)
    tag = f"{os.getpid()}-{secrets.token_hex(4)}"
    tmp_nb = out_dir / f".{chapter.key}.running.{tag}.ipynb"
    tmp_json = out_dir / f".{chapter.key}.running.{tag}.json"
    INTERRUPTED.clear()
    try:
        return _execute(run, o, (tmp_nb, tmp_json), root, force)
    except KeyboardInterrupt:
        _stop_kernels()  # also dies with this process; stop it now for callers that go on
        logging.getLogger("papermill").disabled = False
        raise
    finally:  # whatever happened, no hidden half-written output stays behind
        for p in (tmp_nb, tmp_json):
            with contextlib.suppress(OSError):
                p.unlink(missing_ok=True)


def _commit(run: ChapterRun, o: dict[str, Path], tmp_nb: Path, tmp_json: Path) -> None:
    """Move a successful run's notebook and JSON into place, then its key.

    The old key goes first, so that a crash part-way leaves no key (the next run executes
    again) rather than a key beside another run's outputs; the new one names the sha256 of
    the notebook and JSON it belongs to (:func:`is_cached` checks them) and of each part of
    the key (:func:`key_and_parts`, for `nearid verify`). A link planted at an output while
    the chapter ran is refused (:class:`~nearid.fileio.UnsafePath`), nothing moved."""
    for path in o.values():
        refuse_symlink(path)
    _annotate_parameters(tmp_nb, run.chapter, run.profile, run.overrides)
    o["key"].unlink(missing_ok=True)
    os.replace(tmp_nb, o["ipynb"])
    os.replace(tmp_json, o["json"])
    o["failed"].unlink(missing_ok=True)
    atomic_write_text(o["key"], json.dumps({"key": run.key, "profile": run.profile, "params": run.params,
                                            "code": sorted(chapter_code(run.chapter)), "parts": run.parts,
                                            "outputs": {"ipynb": _sha256(o["ipynb"]),
                                                        "json": _sha256(o["json"])}}) + "\n")


def _execute(run: ChapterRun, o: dict[str, Path], tmp: tuple[Path, Path], root: Path, force: bool) -> dict[str, Any]:
    import jupytext
    import papermill as pm

    chapter, profile, overrides = run.chapter, run.profile, run.overrides
    tmp_nb, tmp_json = tmp
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
        _commit(run, o, tmp_nb, tmp_json)
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


PRICE = Options(("check", "say", "no"), noun="price")


def run_chapter_outcome(chapter: str, profile: str = "quick", overrides: dict[str, Any] | None = None,
                        out_dir: str | os.PathLike | None = None, force: bool = False,
                        root: str | os.PathLike | None = None, say=_say,
                        price: str = "check") -> tuple[dict[str, Any], str]:
    """:func:`run_chapter`, and whether the results were "executed" now or "cached".

    A run that must execute is priced first (:mod:`nearid.book.pricing`, one line to ``say``):
    ``price="check"`` refuses it above ``$NEARID_MAX_HOURS`` (2 h), "say" (``--yes``) says the
    estimate and starts anyway, "no" skips the estimate (the book prices all its chapters
    together).

    Before any work: the parameters (:func:`nearid.book.profiles.resolve`), the ``NEARID_*``
    environment, and, when the chapter must execute, its device, its Dask scheduler and the
    output folder (:mod:`nearid.book.preflight`); each refusal is a ValueError naming what to
    change. The cache is read under the chapter's lock (:func:`chapter_lock`, shared) and a
    run executes under it (exclusive), so two runs of one chapter never mix their outputs.
    """
    PRICE.check("price", price)
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
    if price != "no":
        cost = pricing.price(ch.key, profile, params, out, device=pricing.device_kind(params))
        if cost.worth_saying:
            say(f"estimate: {cost.describe()}")
        pricing.check([cost], yes=price == "say")
    about = " ".join(["nearid run", ch.number, "--profile", profile, *(f"-p {k}={v!r}" for k, v in overrides.items()),
                      *(["--force"] if force else [])])
    with chapter_lock(out, ch, exclusive=True, about=about, say=say):
        results = cached()  # another run may have made these very outputs while this one waited
        if results is not None:
            return results, "cached"
        key, parts = key_and_parts(ch, profile, params, out)  # the results it reads may have changed meanwhile
        return execute(ChapterRun(ch, profile, dict(params), overrides, key, parts or {}), out, root, force=force), \
            "executed"


_BOOK_RUN = ("run_book", "default_jobs", "_expected_seconds", "_run_parallel", "_chapter_process")


def __getattr__(name: str):
    """The whole-book run lives in :mod:`nearid.book.bookrun`, which runs chapters through this
    module: its names are looked up there when first asked for here (no import loop)."""
    if name in _BOOK_RUN:
        from nearid.book import bookrun

        return getattr(bookrun, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
