"""Reference results: the numbers of a clean build, committed, and a build checked against them.

``book/reference/<profile>/NN_slug.json`` holds each chapter's results JSON from a clean build
in that profile (the notebooks are not kept: their numbers are all in the JSON). :func:`verify`
walks an executed chapter's JSON and its reference side by side and reports every number
(and every string, verdicts among them) that differs, with its JSON path and both values;
wall-clock fields and the description of the machine are left out, since they differ
between machines that agree on every result. :func:`update` rewrites the reference, so that
a change that moves numbers on purpose shows them in its diff.

Numbers are compared exactly by default: with the portable CPU kernels
(:mod:`nearid.kernels`) the same seed and profile give the same bits on any x86-64 CPU with
AVX2. ``rtol``/``atol`` are for the runs that cannot be bit-identical (a GPU), and then a
verdict must still match.

**Alternates.** Where the portable kernels are known not to be enough (chapter 04's
ResNet-18 trains to other weights on an AMD Zen 5 than on a Zen 3, for a reason not yet
found), a chapter may also have *alternate* references, each recorded whole on one kind of
CPU: ``alternates/NN_slug.LABEL.json`` beside the reference, with ``alternates/index.json``
saying, for each file, the CPU it was recorded on and why it exists. A build matches when
it equals the reference or one alternate in every value; the report says which one it
matched. Nothing is compared with a tolerance: each alternate is exact, and a build that
matches neither lists its differences from the reference.

**Provenance.** A results JSON is only worth comparing (or recording) if the current code
made it: `nearid verify` passes a ``check`` (:func:`nearid.book.runner.result_problem`) that
says why a chapter's results are not, from its ``.key`` file and the current cache key (its
last run failed, the JSON or notebook was edited since its run, or its source, parameters,
code or packages changed since). :func:`verify` reports such a chapter instead of comparing
it, and :func:`update` refuses to write it into the reference.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nearid.book import profiles
from nearid.fileio import atomic_write_text

# Keys whose values measure the run, not the result: wall-clock times, finish stamps, the
# machine's description (nearid.kernels.record()["cpu"]) and the executor parameters. Skipped
# wherever they appear.
VOLATILE_KEYS = frozenset({"seconds", "wall_s", "timings", "finished", "elapsed_s", "cpu",
                           # where the tasks ran, which never changes a number (tests/book)
                           "executor", "scheduler"})
VERDICT_FIELDS = frozenset({"verdict", "ordering"})  # reported first: a changed verdict
# check(chapter key) -> why its executed results are not the current code's, or None
Check = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Difference:
    """One place where a build and the reference disagree."""

    chapter: str
    path: str  # JSON path, e.g. verdicts.order_mae_permutation_ica.estimate
    ours: Any
    reference: Any
    kind: str = "value"  # "value", "verdict", "missing", "extra", "type"

    def __str__(self) -> str:
        def show(v):
            return "(absent)" if v is _ABSENT else json.dumps(v)

        return f"{self.chapter}: {self.path or '(whole file)'}: build {show(self.ours)} vs reference {show(self.reference)}"


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


@dataclass
class Report:
    """What :func:`verify` found: the chapters compared, the numbers compared, the differences."""

    profile: str
    chapters: list[str] = field(default_factory=list)
    compared: int = 0
    differences: list[Difference] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # files missing, wrong profile, ...
    alternates: dict[str, str] = field(default_factory=dict)  # chapter -> the alternate it matched

    @property
    def ok(self) -> bool:
        return not self.differences and not self.problems

    def text(self, limit: int = 200) -> str:
        lines = [*(f"error: {p}" for p in self.problems)]
        verdicts = [d for d in self.differences if d.kind == "verdict"]
        for d in (verdicts + [d for d in self.differences if d.kind != "verdict"])[:limit]:
            lines.append(("VERDICT " if d.kind == "verdict" else "") + str(d))
        if len(self.differences) > limit:
            lines.append(f"... and {len(self.differences) - limit} more differences")
        head = (f"nearid verify ({self.profile}): {len(self.chapters)} chapters, {self.compared} values "
                f"compared, {len(self.differences)} differ ({len(verdicts)} verdicts)")
        if self.ok:
            head += ": the build matches the reference"
        for key, note in self.alternates.items():
            lines.append(f"note: {key} matches its alternate reference {note}, not the primary one")
        return "\n".join([head, *lines])


def reference_dir(root: Path, profile: str) -> Path:
    """``<root>/book/reference/<profile>``; an unknown profile is an error."""
    if profile not in profiles.PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid: {', '.join(profiles.PROFILES)}")
    return Path(root) / "book" / "reference" / profile


def _close(a: float, b: float, rtol: float, atol: float) -> bool:
    if a == b or (math.isnan(a) and math.isnan(b)):
        return True
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= atol + rtol * abs(b)


def compare_json(ours: Any, ref: Any, *, chapter: str = "", path: str = "", rtol: float = 0.0,
                 atol: float = 0.0) -> tuple[int, list[Difference]]:
    """(values compared, differences) between two JSON documents, walked side by side.

    Numbers (bools and ints included) compare within ``atol + rtol * |reference|`` (exactly by
    default); strings and None compare equal or not; a value under a key named ``verdict``
    that differs is reported as a verdict; :data:`VOLATILE_KEYS` are skipped.
    """
    diffs: list[Difference] = []
    count = 0

    def walk(a: Any, b: Any, where: str) -> None:
        nonlocal count
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                if key in VOLATILE_KEYS:
                    continue
                sub = f"{where}.{key}" if where else str(key)
                if key not in a:
                    diffs.append(Difference(chapter, sub, _ABSENT, b[key], "missing"))
                elif key not in b:
                    diffs.append(Difference(chapter, sub, a[key], _ABSENT, "extra"))
                else:
                    walk(a[key], b[key], sub)
            return
        if isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                diffs.append(Difference(chapter, f"{where} (length)", len(a), len(b), "value"))
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{where}[{i}]")
            return
        count += 1
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
        if numbers:
            same = _close(float(a), float(b), rtol, atol)
        else:
            same = type(a) is type(b) and a == b
        if not same:
            verdict = isinstance(a, str) and bool(VERDICT_FIELDS & set(re.split(r"[.\[\]]", where)))
            kind = "verdict" if verdict else (
                "value" if numbers or type(a) is type(b) else "type")
            diffs.append(Difference(chapter, where, a, b, kind))

    walk(ours, ref, path)
    return count, diffs


MAX_RESULTS_BYTES = 256 << 20  # a chapter's results JSON is kilobytes; far larger is not one


def read_results(path: Path) -> dict[str, Any]:
    """A chapter's results JSON (executed or reference); ValueError naming ``path`` and what
    is wrong in one line where it is not one: not a regular file (a named pipe would block the
    reader for good, so it is never opened), too large, not JSON (truncated), not an object."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ValueError(f"{path} cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path} is not a regular file (a named pipe or a device?); remove it and rerun the chapter")
    if st.st_size > MAX_RESULTS_BYTES:
        raise ValueError(f"{path} holds {st.st_size / 1e6:.0f} MB, far more than a chapter's results")
    try:
        doc = json.loads(path.read_text())
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not text (not UTF-8): not a chapter's results") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}; "
                         "truncated?)") from None
    except OSError as exc:
        raise ValueError(f"{path} cannot be read ({exc.strerror or exc})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path} holds a JSON {type(doc).__name__}, not a chapter's results (an object)")
    return doc


def _chapter_files(folder: Path) -> dict[str, Path]:
    """The chapter results in ``folder`` (``NN_slug.json``; not timings.json or others)."""
    return {p.stem: p for p in sorted(folder.glob("[0-9][0-9]_*.json")) if p.stem in profiles.CHAPTERS}


ALTERNATES = "alternates"


def _alternates(ref_dir: Path, key: str) -> list[tuple[str, str, Any]]:
    """The alternate references of chapter ``key``: (file name, what the index says, JSON).
    An alternate without an entry in ``alternates/index.json`` is an error: each one must say
    the CPU it was recorded on and why it exists."""
    folder = ref_dir / ALTERNATES
    files = sorted(folder.glob(f"{key}.*.json"))
    if not files:
        return []
    index = json.loads((folder / "index.json").read_text()) if (folder / "index.json").exists() else {}
    out = []
    for path in files:
        entry = index.get(path.name)
        if not entry or not entry.get("cpu") or not entry.get("why"):
            raise ValueError(f"{path}: an alternate reference needs an entry in {folder / 'index.json'} "
                             "with its 'cpu' and 'why'")
        out.append((path.name, f"recorded on {entry['cpu']}: {entry['why']}", read_results(path)))
    return out


def verify(executed: Path, ref_dir: Path, profile: str, *, rtol: float = 0.0, atol: float = 0.0,
           chapters: list[str] | None = None, check: Check | None = None) -> Report:
    """Compare every chapter of the reference (or ``chapters``) with ``executed``'s JSON; a
    chapter that ``check`` finds not made by the current code is a problem, not compared."""
    report = Report(profile)
    refs = _chapter_files(ref_dir)
    if not refs:
        report.problems.append(f"no reference results in {ref_dir} (make them with "
                               f"`nearid verify --profile {profile} --update` after a clean build)")
        return report
    ours = _chapter_files(executed)
    wanted = chapters or sorted(refs)
    for key in wanted:
        if key not in refs:
            report.problems.append(f"{key}: no reference file in {ref_dir}")
            continue
        if key not in ours:
            report.problems.append(f"{key}: not executed (no {executed / (key + '.json')}); "
                                   f"run `nearid book --profile {profile}`")
            continue
        ref = read_results(refs[key])  # the committed reference: a damaged one stops verify (exit 2)
        try:
            doc = read_results(ours[key])
        except ValueError as exc:
            report.problems.append(f"{key}: {exc}")
            continue
        if doc.get("profile") != profile:
            report.problems.append(f"{key}: executed in profile {doc.get('profile')!r}, not {profile!r}")
            continue
        why = check(key) if check else None
        if why:
            report.problems.append(f"{key}: {why}")
            continue
        report.chapters.append(key)
        n, diffs = compare_json(doc, ref, chapter=key, rtol=rtol, atol=atol)
        if diffs:
            for name, why, alt in _alternates(ref_dir, key):
                n_alt, alt_diffs = compare_json(doc, alt, chapter=key, rtol=rtol, atol=atol)
                if not alt_diffs:
                    n, diffs = n_alt, []
                    report.alternates[key] = f"{name} ({why})"
                    break
        report.compared += n
        report.differences += diffs
    extra = sorted(set(ours) - set(refs)) if chapters is None else []
    for key in extra:
        report.problems.append(f"{key}: executed but has no reference (add it with --update)")
    return report


def _refuse_unchecked(keys: list[str], ref_dir: Path, check: Check | None) -> None:
    """ValueError naming every chapter of ``keys`` that ``check`` finds not made by the
    current code, and why: such results never go into the reference."""
    found = [f"{key}: {why}" for key in keys if (why := check(key) if check else None)]
    if found:
        raise ValueError(f"not written into {ref_dir}: {' | '.join(found)}")


def update(executed: Path, ref_dir: Path, profile: str, chapters: list[str] | None = None,
           alternate: tuple[str, str] | None = None, check: Check | None = None) -> list[str]:
    """Rewrite ``ref_dir`` from ``executed``: every chapter's JSON, or only ``chapters`` (the
    others are kept as committed). Each must be of ``profile`` and computed with portable
    kernels (a reference others are checked against must be reproducible). Returns the
    chapters written. ``alternate=(label, why)`` writes ``chapters`` as alternate references
    ``alternates/NN_slug.LABEL.json`` instead, indexed with this CPU and ``why``. Rewriting the
    whole reference drops the alternates: numbers that moved on purpose need them recorded
    again, on their CPUs. A chapter that ``check`` finds not made by the current code (see the
    module) is refused, and nothing is written."""
    if alternate is not None:
        return _update_alternate(executed, ref_dir, profile, chapters, *alternate, check=check)
    found = _chapter_files(executed)
    if not found:
        raise FileNotFoundError(f"no executed chapter results in {executed}: run `nearid book --profile {profile}` first")
    if chapters is not None:
        absent = sorted(set(chapters) - set(found))
        if absent:
            raise FileNotFoundError(f"no executed results for {', '.join(absent)} in {executed}: "
                                    f"run `nearid run {absent[0][:2]} --profile {profile}` first")
        found = {k: v for k, v in found.items() if k in chapters}
    docs = {}
    for key, path in found.items():
        doc = read_results(path)
        if doc.get("profile") != profile:
            raise ValueError(f"{path} was executed in profile {doc.get('profile')!r}, not {profile!r}")
        rec = doc.get("kernels") or {}
        if not rec.get("portable"):
            why = "; ".join(rec.get("problems") or ["it records no kernels"])
            raise ValueError(f"{path} was not computed with portable kernels ({why}): "
                             "a reference must be reproducible on other CPUs")
        docs[key] = doc
    if chapters is None:
        missing = sorted(set(profiles.CHAPTERS) - set(docs))
        if missing:
            raise ValueError(f"the executed results lack {', '.join(missing)}: a reference holds every chapter")
    _refuse_unchecked(sorted(docs), ref_dir, check)
    if chapters is None:
        if ref_dir.exists():
            shutil.rmtree(ref_dir)
    ref_dir.mkdir(parents=True, exist_ok=True)
    for key, doc in docs.items():
        atomic_write_text(ref_dir / f"{key}.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return sorted(docs)


def _update_alternate(executed: Path, ref_dir: Path, profile: str, chapters: list[str] | None,
                      label: str, why: str, check: Check | None = None) -> list[str]:
    """Record ``chapters`` of ``executed`` as alternates labelled ``label`` (see the module)."""
    from nearid import kernels

    if not chapters:
        raise ValueError("an alternate reference is recorded per chapter: name them (--only)")
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", label) or not why.strip():
        raise ValueError("an alternate needs a label of lower-case letters, digits and dashes, and a reason")
    found = _chapter_files(executed)
    _refuse_unchecked([key for key in chapters if key in found], ref_dir, check)
    folder = ref_dir / ALTERNATES
    folder.mkdir(parents=True, exist_ok=True)
    index_path = folder / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    for key in chapters:
        if key not in found:
            raise FileNotFoundError(f"no executed results for {key} in {executed}")
        doc = read_results(found[key])
        if doc.get("profile") != profile or not (doc.get("kernels") or {}).get("portable"):
            raise ValueError(f"{found[key]}: not a portable {profile} build")
        name = f"{key}.{label}.json"
        atomic_write_text(folder / name, json.dumps(doc, indent=2, sort_keys=True) + "\n")
        index[name] = {"cpu": cpu_signature(kernels.record().get("cpu") or "unknown CPU"), "why": why.strip()}
    atomic_write_text(index_path, json.dumps(index, indent=2, sort_keys=True) + "\n")
    return sorted(chapters)


def cpu_signature(name: str, cpuinfo: str | None = None) -> str:
    """The CPU's name with its family and model numbers and whether it has AVX-512 (from
    /proc/cpuinfo): what tells an AMD Zen 3 (family 25) from a Zen 5 (family 26) that both
    call themselves "AMD EPYC"."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return name
    fields = dict(re.findall(r"^(cpu family|model|flags)\s*:\s*(.*)$", cpuinfo, flags=re.M))
    if "cpu family" not in fields:
        return name
    wide = "AVX-512" if "avx512f" in fields.get("flags", "").split() else "no AVX-512"
    return f"{name} (family {fields['cpu family']}, model {fields.get('model', '?')}; {wide})"
