"""The page "How this book was run" (``book/executed/how_this_book_was_run.md``): which
chapters ran where, with which packages, kernels and profile, and from which commit; and
the book's pages cut from the executed chapters."""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

from nearid import kernels
from nearid.book import profiles
from nearid.book.cachekey import REPORT_NAME
from nearid.book.chapters import default_out_dir, find_root
from nearid.book.locks import _read_timings, _timings_lock
from nearid.fileio import atomic_write_text

# ----------------------------------------------------------------------------- report page


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
