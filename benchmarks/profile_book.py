"""Where a book build's time goes, from py-spy's samples of every process it started.

Run the build under py-spy (what the issue-34 measurements did)::

    py-spy record --subprocesses --nonblocking --rate 20 --format raw -o spy.txt -- \
        .venv/bin/nearid book --profile quick
    python benchmarks/profile_book.py spy.txt

py-spy samples each process's Python stack 20 times a second (busy threads only; idle ones
are not sampled), so a category's share is its share of the CPU time the build's Python
threads spent, native code included (a product in MKL counts under the Python line that
called it). A process is one chapter's kernel (or a task worker, or the runner); its chapter
is the one whose experiment module (``nearid/experiments/chNN_*``) most of its samples pass
through. Each stack is put in the first category, in the order below, whose pattern it holds.
"""

from __future__ import annotations

import argparse
import collections
import re

# (category, regex over the whole stack), first match wins: most specific first
CATEGORIES = [
    ("start-up: imports", r"_find_and_load|_call_with_frames_removed"),
    ("training: optimiser step", r"train\.py\)?;.*(?:Optimizer\.step|adamw?\.py|optimizer\.py)|\bstep \(torch/optim"),
    ("training: backward", r"run_backward|_engine_run_backward|autograd/__init__\.py.*backward"),
    ("training: forward", r"\bfit \(.*nearid/train\.py"),
    ("evaluation: encode (predict)", r"\bpredict \(.*nearid/train\.py"),
    ("evaluation: InfoMEC kNN mutual information", r"mutual_info|_compute_mi"),
    ("evaluation: logistic probes (InfoE, DCI)", r"LogisticRegression|_logistic|lbfgs|dci"),
    ("evaluation: LightGBM", r"lightgbm"),
    ("alignment and ICA", r"nearid/ica\.py|fastica|nearid/align/"),
    ("decoder Jacobians (B(z))", r"jacobian|lipschitz\.py"),
    ("bootstraps and verdicts", r"nearid/verdicts\.py|bootstrap"),
    ("data: generate or load", r"nearid/data/|images_to_tensor|load_images|_rendered"),
    ("figures", r"matplotlib|seaborn|nearid/book/plotting|summary_figures"),
    ("notebook I/O, papermill, kernel", r"papermill|nbformat|nbclient|jupyter_client|zmq|ipykernel|safeformat|fileio|json"),
]
CHAPTER = re.compile(r"experiments/(ch0\d)_|notebooks/(0\d)_")


def parse(path: str):
    """Yield (process, stack, count) from py-spy's raw (collapsed) output."""
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            process = frames[0] if frames[0].startswith("process ") else "?"
            yield process, stack, int(count)


def classify(stack: str) -> str:
    for name, pattern in CATEGORIES:
        if re.search(pattern, stack):
            return name
    return "other Python (chapter code, pandas, numpy)"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw", help="py-spy --format raw output")
    ap.add_argument("--rate", type=float, default=20.0, help="py-spy's sampling rate (per second)")
    args = ap.parse_args(argv)
    per_process: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    chapter_votes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for process, stack, count in parse(args.raw):
        per_process[process][classify(stack)] += count
        m = CHAPTER.search(stack)
        if m:
            chapter_votes[process]["ch" + (m.group(1) or "ch" + m.group(2))[2:]] += count
    per_chapter: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for process, counts in per_process.items():
        votes = chapter_votes.get(process)
        chapter = votes.most_common(1)[0][0] if votes else "runner and others"
        per_chapter[chapter].update(counts)
    cats = [c for c, _ in CATEGORIES] + ["other Python (chapter code, pandas, numpy)"]
    for chapter in sorted(per_chapter):
        counts = per_chapter[chapter]
        total = sum(counts.values())
        print(f"\n{chapter}: {total / args.rate:.0f} CPU-seconds sampled")
        for c in cats:
            if counts[c]:
                print(f"  {c:45s} {counts[c] / args.rate:8.0f} s  {100 * counts[c] / total:5.1f}%")


if __name__ == "__main__":
    main()
