"""Two quick builds side by side: each chapter's wall time from the builds' own
``book/executed/timings.json``, the sum, and the whole build's wall time and peak memory from
``/usr/bin/time -v`` (optional), as the markdown table benchmarks/README.md quotes.

    python benchmarks/back_to_back.py --before /work/old --after /work/new \
        [--before-time old_time.txt --after-time new_time.txt] [--native /work/native]

``--native`` is a third build of the after code with NEARID_NATIVE_KERNELS=1: its column and
the portable/native ratio per chapter are added. Nothing is run here; it only reads.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path


def chapter_seconds(clone: Path) -> dict[str, float]:
    """{chapter: wall seconds} of the last run of each chapter in ``clone``'s timings.json."""
    rows = json.loads((clone / "book" / "executed" / "timings.json").read_text())
    out = {}
    for r in rows:
        if r.get("status") == "ok":
            out[r["chapter"]] = float(r["wall_s"])
    return out


def time_v(path: Path | None) -> dict[str, str]:
    """Wall clock, user CPU and peak RSS from a ``/usr/bin/time -v`` report."""
    if path is None:
        return {}
    text = path.read_text()
    found = {}
    for key, pattern in (("wall", r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)"),
                         ("user", r"User time \(seconds\): (\S+)"),
                         ("rss_kb", r"Maximum resident set size \(kbytes\): (\d+)"),
                         ("status", r"Exit status: (\d+)")):
        m = re.search(pattern, text)
        if m:
            found[key] = m.group(1)
    return found


def _seconds(clock: str) -> float:
    parts = [float(p) for p in clock.split(":")]
    return sum(p * 60 ** i for i, p in enumerate(reversed(parts)))


def table(before: dict, after: dict, native: dict | None = None) -> list[str]:
    head = "| chapter | before (s) | after (s) | after / before |"
    align = "| --- | ---: | ---: | ---: |"
    if native:
        head += " after, native (s) | portable / native |"
        align += " ---: | ---: |"
    lines = [head, align]
    for ch in sorted(set(before) | set(after)):
        b, a = before.get(ch), after.get(ch)
        row = f"| {ch} | {b:.0f} | {a:.0f} | {a / b:.2f} |" if b and a else f"| {ch} | {b} | {a} | – |"
        if native:
            n = native.get(ch)
            row += f" {n:.0f} | {a / n:.2f} |" if n and a else " – | – |"
        lines.append(row)
    sb, sa = sum(before.values()), sum(after.values())
    row = f"| **sum of chapters** | **{sb:.0f}** | **{sa:.0f}** | **{sa / sb:.2f}** |"
    if native:
        sn = sum(native.values())
        row += f" **{sn:.0f}** | **{sa / sn:.2f}** |"
    lines.append(row)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--native", type=Path)
    ap.add_argument("--before-time", type=Path)
    ap.add_argument("--after-time", type=Path)
    args = ap.parse_args(argv)
    before, after = chapter_seconds(args.before), chapter_seconds(args.after)
    native = chapter_seconds(args.native) if args.native else None
    print("\n".join(table(before, after, native)))
    tb, ta = time_v(args.before_time), time_v(args.after_time)
    if tb and ta:
        wb, wa = _seconds(tb["wall"]), _seconds(ta["wall"])
        print(f"| **whole build, wall** | **{tb['wall']}** | **{ta['wall']}** | **{wa / wb:.2f}** |")
        print(f"| user CPU (s) | {float(tb['user']):.0f} | {float(ta['user']):.0f} | "
              f"{float(ta['user']) / float(tb['user']):.2f} |")
        print(f"| peak RSS | {int(tb['rss_kb']) / 2**20:.2f} GB | {int(ta['rss_kb']) / 2**20:.2f} GB | |")
        print(f"| exit status | {tb.get('status')} | {ta.get('status')} | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
