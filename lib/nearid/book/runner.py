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
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nearid import codehash
from nearid.book import profiles
from nearid.fileio import atomic_write_text

LIB_DIR = codehash.PACKAGE_DIR
KERNELSPEC = {"name": "python3", "language": "python", "display_name": "Python 3"}


class ChapterFailed(RuntimeError):
    """A chapter raised; the message names the chapter, the failing cell and the error."""

    def __init__(self, chapter: str, cell_index: int | None, error: str, failed_notebook: Path | None):
        self.chapter, self.cell_index, self.error = chapter, cell_index, error
        self.failed_notebook = failed_notebook
        where = f"cell {cell_index}" if cell_index is not None else "before any cell ran"
        keep = f"; the failed notebook is {failed_notebook}" if failed_notebook else ""
        super().__init__(f"chapter {chapter} failed in {where}: {error}{keep}")


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
        return Path(os.environ["NEARID_ROOT"]).resolve()
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
def _package_versions() -> list[str]:
    return sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
                  if d.metadata["Name"])


def chapter_code(chapter: Chapter) -> dict[str, Path]:
    """The ``nearid`` modules a chapter runs: those its source imports, transitively, plus its
    parameter module (loaded by name, so no import names it)."""
    return codehash.module_closure(chapter.source.read_text(),
                                   extra_roots=[profiles.module_name(chapter.key)], package_dir=LIB_DIR)


def reads(chapter: Chapter) -> tuple[str, ...]:
    """Chapters whose results this one reads (the summary reads every chapter's JSON)."""
    return tuple(profiles.READS.get(chapter.key, ()))


def _inputs_digest(chapter: Chapter, out_dir: Path | None) -> str:
    """sha256 of the results files a chapter reads: when one changes, the chapter is stale."""
    h = hashlib.sha256()
    for name in reads(chapter):
        path = (out_dir or Path()) / f"{name}.json"
        h.update(name.encode() + b"\0" + (path.read_bytes() if out_dir and path.is_file() else b"missing"))
    return h.hexdigest()


def cache_key(chapter: Chapter, profile: str, params: dict[str, Any], out_dir: Path | None = None) -> str:
    """sha256 of the chapter source, profile, resolved parameters, the code it imports
    (:func:`chapter_code`), the results of other chapters it reads, the installed package
    versions and the Python version."""
    h = hashlib.sha256()
    if reads(chapter):
        h.update(_inputs_digest(chapter, out_dir).encode())
    h.update(chapter.source.read_bytes())
    h.update(json.dumps({"profile": profile, "params": params}, sort_keys=True).encode())
    h.update(codehash.digest_files(chapter_code(chapter).values(), package_dir=LIB_DIR).encode())
    h.update("\n".join(_package_versions()).encode())
    h.update(platform.python_version().encode())
    return h.hexdigest()


def _outputs(out_dir: Path, chapter: Chapter) -> dict[str, Path]:
    return {"ipynb": out_dir / f"{chapter.key}.ipynb", "json": out_dir / f"{chapter.key}.json",
            "key": out_dir / f"{chapter.key}.key", "failed": out_dir / f"{chapter.key}.failed.ipynb"}


def is_cached(chapter: Chapter, key: str, out_dir: Path) -> bool:
    o = _outputs(out_dir, chapter)
    if not (o["ipynb"].is_file() and o["json"].is_file() and o["key"].is_file()):
        return False
    with contextlib.suppress(ValueError, KeyError):
        return json.loads(o["key"].read_text())["key"] == key
    return False


# ----------------------------------------------------------------------------- execution
def _device_description() -> str:
    from nearid.book.env import device_description
    return device_description()


def _append_timing(out_dir: Path, entry: dict[str, Any]) -> None:
    """Append one record to timings.json under a file lock (chapters may run in parallel)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".timings.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = out_dir / "timings.json"
        records = []
        if path.is_file():
            with contextlib.suppress(json.JSONDecodeError):
                records = json.loads(path.read_text())
        records.append(entry)
        atomic_write_text(path, json.dumps(records, indent=1) + "\n")


def _failing_cell(nb_path: Path) -> int | None:
    import nbformat

    with contextlib.suppress(Exception):
        nb = nbformat.read(nb_path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
                return i
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
    tmp = nb_path.with_suffix(".annotated")
    nbformat.write(nb, tmp)
    os.replace(tmp, nb_path)


TASK_CACHE = Path(".cache") / "tasks"  # under the project root; NEARID_TASK_CACHE overrides


@contextlib.contextmanager
def _kernel_environment(root: Path, force: bool):
    """What the chapter's kernel inherits: where finished sweep tasks are kept
    (:mod:`nearid.tasks`), and whether ``--force`` asked to recompute them."""
    saved = {k: os.environ.get(k) for k in ("NEARID_TASK_CACHE", "NEARID_FORCE")}
    os.environ.setdefault("NEARID_TASK_CACHE", str(root / TASK_CACHE))
    os.environ["NEARID_FORCE"] = "1" if force else "0"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def execute(chapter: Chapter, profile: str, params: dict[str, Any], overrides: dict[str, Any],
            out_dir: Path, root: Path, key: str, force: bool = False) -> dict[str, Any]:
    """Run one chapter through papermill; move outputs into place only on success.

    ``force`` makes the chapter recompute its sweep tasks instead of reusing finished ones.
    """
    import jupytext
    import papermill as pm

    out_dir.mkdir(parents=True, exist_ok=True)
    o = _outputs(out_dir, chapter)
    tmp_nb = out_dir / f".{chapter.key}.running.ipynb"
    tmp_json = out_dir / f".{chapter.key}.running.json"
    for p in (tmp_nb, tmp_json):
        p.unlink(missing_ok=True)
    nb = jupytext.read(chapter.source)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.setdefault("language_info", {"name": "python"})
    start = time.perf_counter()
    status, error = "ok", None
    try:
        with _kernel_environment(root, force):
            pm.execute_notebook(nb, str(tmp_nb), kernel_name=KERNELSPEC["name"], progress_bar=False,
                                log_output=False, cwd=str(root),
                                parameters={"profile": profile, "overrides": overrides,
                                            "results_path": str(tmp_json)})
        if not tmp_json.is_file():
            raise ChapterFailed(chapter.key, None, "the chapter finished but wrote no results "
                                "(call nearid.book.results.save(results_path, ...))", None)
    except pm.PapermillExecutionError as exc:
        status = "failed"
        os.replace(tmp_nb, o["failed"])
        error = ChapterFailed(chapter.key, _failing_cell(o["failed"]),
                              f"{exc.ename}: {exc.evalue}", o["failed"])
    except ChapterFailed as exc:
        status, error = "failed", exc
    except Exception as exc:  # kernel died, bad notebook, ...
        status = "failed"
        failed = None
        if tmp_nb.is_file():
            os.replace(tmp_nb, o["failed"])
            failed = o["failed"]
        error = ChapterFailed(chapter.key, _failing_cell(failed) if failed else None,
                              f"{type(exc).__name__}: {exc}", failed)
    wall = time.perf_counter() - start
    _append_timing(out_dir, {
        "chapter": chapter.key, "profile": profile, "overrides": overrides, "status": status,
        "wall_s": round(wall, 2), "device": _device_description(),
        "threads": int(os.environ.get("NEARID_NUM_THREADS", "0") or 0) or None,
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(), "host": platform.node(),
    })
    if error is not None:
        tmp_json.unlink(missing_ok=True)
        raise error
    results = json.loads(tmp_json.read_text())
    _annotate_parameters(tmp_nb, chapter, profile, overrides)
    os.replace(tmp_nb, o["ipynb"])
    os.replace(tmp_json, o["json"])
    o["failed"].unlink(missing_ok=True)
    atomic_write_text(o["key"], json.dumps({"key": key, "profile": profile, "params": params,
                                            "code": sorted(chapter_code(chapter))}) + "\n")
    return results


def default_out_dir(root: Path) -> Path:
    return root / "book" / "executed"


def run_chapter(chapter: str, profile: str = "quick", overrides: dict[str, Any] | None = None,
                out_dir: str | os.PathLike | None = None, force: bool = False,
                root: str | os.PathLike | None = None) -> dict[str, Any]:
    """Execute one chapter (or reuse its cached output) and return its results dict."""
    root = Path(root) if root else find_root()
    ch = get_chapter(chapter, root)
    overrides = dict(overrides or {})
    params = profiles.resolve(ch.key, profile, overrides)  # fails fast on bad input
    out = Path(out_dir) if out_dir else default_out_dir(root)
    key = cache_key(ch, profile, params, out)
    if not force and is_cached(ch, key, out):
        return json.loads(_outputs(out, ch)["json"].read_text())
    return execute(ch, profile, dict(params), overrides, out, root, key, force=force)


def _worker_init(threads: int) -> None:
    for var in ("NEARID_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)


def _run_in_worker(args) -> tuple[str, str]:
    """Run in a worker process; failures come back as text (custom exceptions pickle badly)."""
    chapter, profile, out_dir, force, root = args
    try:
        run_chapter(chapter, profile, {}, out_dir, force, root)
    except ChapterFailed as exc:
        return "failed", str(exc)
    return "ok", ""


def run_book(profile: str = "quick", jobs: int = 1, only: list[str] | None = None,
             force: bool = False, root: str | os.PathLike | None = None,
             out_dir: str | os.PathLike | None = None, progress: bool = True) -> dict[str, str]:
    """Execute every chapter (or ``only`` some), ``jobs`` at a time; returns chapter -> status.

    Raises :class:`ChapterFailed`-style RuntimeError listing every failed chapter after the
    others have finished; outputs of chapters that succeeded are kept.
    """
    from tqdm.auto import tqdm

    root = Path(root) if root else find_root()
    out = Path(out_dir) if out_dir else default_out_dir(root)
    if profile not in profiles.PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid: {', '.join(profiles.PROFILES)}")
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    chapters = list_chapters(root)
    if only:
        chapters = [get_chapter(name, root) for name in only]
    # chapters that read other chapters' results (the summary) run after those, one by one
    later = [ch for ch in chapters if reads(ch)]
    chapters = [ch for ch in chapters if not reads(ch)]
    todo, status = [], {}
    for ch in chapters:
        params = profiles.resolve(ch.key, profile)
        if not force and is_cached(ch, cache_key(ch, profile, params), out):
            status[ch.key] = "cached"
        else:
            todo.append(ch)
    failures: list[str] = []
    bar = tqdm(total=len(chapters) + len(later), desc=f"chapters ({profile})", unit="ch",
               disable=not progress, file=sys.stderr, initial=len(chapters) - len(todo))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    if jobs == 1:
        for ch in todo:
            bar.set_postfix_str(ch.key)
            try:
                run_chapter(ch.key, profile, {}, out, force, root)
                status[ch.key] = "ran"
            except ChapterFailed as exc:
                status[ch.key] = "failed"
                failures.append(str(exc))
            bar.update()
    elif todo:
        with ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init, initargs=(threads,)) as pool:
            futures = {pool.submit(_run_in_worker, (ch.key, profile, out, force, root)): ch for ch in todo}
            for fut in as_completed(futures):
                ch = futures[fut]
                try:
                    outcome, message = fut.result()
                except Exception as exc:  # the worker itself died
                    outcome, message = "failed", f"chapter {ch.key} failed: {exc!r}"
                status[ch.key] = "ran" if outcome == "ok" else "failed"
                if message:
                    failures.append(message)
                bar.update()
    for ch in later:
        bar.set_postfix_str(ch.key)
        if not force and is_cached(ch, cache_key(ch, profile, profiles.resolve(ch.key, profile), out), out):
            status[ch.key] = "cached"
        else:
            try:
                run_chapter(ch.key, profile, {}, out, force, root)
                status[ch.key] = "ran"
            except ChapterFailed as exc:
                status[ch.key] = "failed"
                failures.append(str(exc))
        bar.update()
    bar.close()
    write_run_report(out)
    if failures:
        raise RuntimeError("; ".join(failures))
    return status


# ----------------------------------------------------------------------------- report page
REPORT_NAME = "how_this_book_was_run.md"
KEY_PACKAGES = ("torch", "torchvision", "numpy", "scipy", "scikit-learn", "timm", "transformers",
                "lightgbm", "papermill", "jupyter-book", "nearid")


def write_run_report(out_dir: Path) -> Path:
    """The "How this book was run" page, generated from timings.json and the installed versions."""
    records = []
    path = out_dir / "timings.json"
    if path.is_file():
        with contextlib.suppress(json.JSONDecodeError):
            records = json.loads(path.read_text())
    latest: dict[str, dict] = {}
    for rec in records:
        if rec.get("status") == "ok":
            latest[rec["chapter"]] = rec
    lines = ["# How this book was run", "",
             "Every number in this book was computed by executing the chapter sources in "
             "`notebooks/` with papermill (`nearid book`); the book itself runs no code. This page "
             "is written by the runner from `book/executed/timings.json` at the end of each run.", "",
             "## Chapters", "",
             "| chapter | profile | overrides | wall time (s) | device | finished (UTC) |",
             "| --- | --- | --- | ---: | --- | --- |"]
    for key in sorted(latest):
        r = latest[key]
        ov = ", ".join(f"{k}={v}" for k, v in (r.get("overrides") or {}).items()) or "none"
        lines.append(f"| {key} | {r['profile']} | {ov} | {r['wall_s']:.1f} | {r['device']} | "
                     f"{r['finished']} |")
    total = sum(r["wall_s"] for r in latest.values())
    lines += ["", f"Total execution time of the chapters shown: {total:.0f} s.", "",
              "## Software", "", "| package | version |", "| --- | --- |"]
    for name in KEY_PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            lines.append(f"| {name} | {importlib.metadata.version(name)} |")
    lines += [f"| python | {platform.python_version()} |", ""]
    lines += ["## When a chapter runs again", "",
              "`nearid book` skips a chapter whose outputs were made under the same *cache key*: "
              "a sha256 of the chapter's source (`notebooks/NN_slug.py`), its profile and resolved "
              "parameters, the source of every `nearid` module the chapter imports (found by "
              "walking its imports statically, lazy imports inside functions included, plus the "
              "chapter's own parameter module), the versions of every installed package and the "
              "Python version. Editing the command line, the runner or another chapter's "
              "experiment re-executes nothing here; a file that is not Python code never counts.",
              "", "| chapter | `nearid` modules its key covers |", "| --- | --- |"]
    for key_file in sorted(out_dir.glob("*.key")):
        with contextlib.suppress(json.JSONDecodeError, KeyError, OSError):
            modules = json.loads(key_file.read_text())["code"]
            shown = ", ".join(f"`{m.removeprefix('nearid.') if m != 'nearid' else m}`" for m in modules)
            lines.append(f"| {key_file.stem} | {shown} |")
    lines += ["", "To rerun one chapter: `nearid run 02 --profile full -p seeds=10`; see the README "
              "for profiles and options.", ""]
    report = out_dir / REPORT_NAME
    atomic_write_text(report, "\n".join(lines))
    return report
