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
"""

from __future__ import annotations

import json
import math
import re
import shutil
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


def _chapter_files(folder: Path) -> dict[str, Path]:
    """The chapter results in ``folder`` (``NN_slug.json``; not timings.json or others)."""
    return {p.stem: p for p in sorted(folder.glob("[0-9][0-9]_*.json")) if p.stem in profiles.CHAPTERS}


def verify(executed: Path, ref_dir: Path, profile: str, *, rtol: float = 0.0, atol: float = 0.0,
           chapters: list[str] | None = None) -> Report:
    """Compare every chapter of the reference (or ``chapters``) with ``executed``'s JSON."""
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
        doc, ref = json.loads(ours[key].read_text()), json.loads(refs[key].read_text())
        if doc.get("profile") != profile:
            report.problems.append(f"{key}: executed in profile {doc.get('profile')!r}, not {profile!r}")
            continue
        report.chapters.append(key)
        n, diffs = compare_json(doc, ref, chapter=key, rtol=rtol, atol=atol)
        report.compared += n
        report.differences += diffs
    extra = sorted(set(ours) - set(refs)) if chapters is None else []
    for key in extra:
        report.problems.append(f"{key}: executed but has no reference (add it with --update)")
    return report


def update(executed: Path, ref_dir: Path, profile: str, chapters: list[str] | None = None) -> list[str]:
    """Rewrite ``ref_dir`` from ``executed``: every chapter's JSON, or only ``chapters`` (the
    others are kept as committed). Each must be of ``profile`` and computed with portable
    kernels (a reference others are checked against must be reproducible). Returns the
    chapters written."""
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
        doc = json.loads(path.read_text())
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
        if ref_dir.exists():
            shutil.rmtree(ref_dir)
    ref_dir.mkdir(parents=True, exist_ok=True)
    for key, doc in docs.items():
        atomic_write_text(ref_dir / f"{key}.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return sorted(docs)
