"""When a chapter must run again: its cache key (source, parameters, the code it imports,
packages, threads, CPU kernels, the results it reads), the outputs a key serves, and why a
result on disk is stale, failed or edited (``nearid verify`` asks)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import stat
from pathlib import Path
from typing import Any

from nearid import codehash, kernels
from nearid.book import profiles
from nearid.book.chapters import LIB_DIR, Chapter, find_root, get_chapter, list_chapters
from nearid.book.locks import chapter_lock
from nearid.fileio import UnsafePath

# ----------------------------------------------------------------------------- cache key
REPORT_NAME = "how_this_book_was_run.md"  # beside the outputs (nearid.book.report writes it)

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


# ----------------------------------------------------------------------------- execution
