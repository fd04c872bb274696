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
    ("evaluation: encode (predict, embed)", r"\bpredict \(.*nearid/train\.py|embed_windows|mean_hidden_state|\bembed \("),
    ("evaluation: pretrained sentence encoders", r"sentence_encoders\.py"),
    ("evaluation: InfoMEC kNN mutual information", r"mutual_info|_compute_mi"),
    ("evaluation: logistic probes (InfoE, DCI)", r"LogisticRegression|_logistic|lbfgs|dci"),
    ("evaluation: LightGBM", r"lightgbm"),
    ("alignment and ICA", r"nearid/ica\.py|fastica|nearid/align/"),
    ("decoder Jacobians (B(z))", r"jacobian|lipschitz\.py"),
    ("bootstraps and verdicts", r"nearid/verdicts\.py|bootstrap"),
    ("data: generate or load", r"nearid/data/|images_to_tensor|load_images|_rendered"),
    ("figures", r"matplotlib|seaborn|nearid/book/plotting|summary_figures"),
    ("results and notebook I/O", r"safeformat|nearid/fileio|nearid/book/results|nbformat|json/encoder|pickle"),
]
# a stack that matched none of the above and ends in the kernel's own loop: messages, waiting
MACHINERY = re.compile(r"zmq|jupyter_client|tornado|asyncio|ipykernel|traitlets|selectors|threading")
OTHER = "other Python (chapter code, pandas, numpy)"
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
            procs = [f for f in frames if f.startswith("process ")]  # nested: the innermost is the sampled one
            process = procs[-1].split(":", 1)[0] if procs else "?"
            yield process, stack, int(count)


def classify(stack: str) -> str:
    for name, pattern in CATEGORIES:
        if re.search(pattern, stack):
            return name
    if MACHINERY.search(stack.rsplit(";", 1)[-1]):
        return "kernel machinery (messages, waiting)"
    return OTHER


def experiment_function(stack: str) -> str | None:
    """The innermost function of a chapter's experiment module on the stack (e.g. ``gpt_neox_pair``)."""
    found = re.findall(r";([A-Za-z_][A-Za-z_0-9]*) \(nearid/experiments/ch0\d_[a-z_]+\.py", stack)
    return found[-1] if found else None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw", help="py-spy --format raw output")
    ap.add_argument("--rate", type=float, default=20.0, help="py-spy's sampling rate (per second)")
    ap.add_argument("--by-function", metavar="CH", help="also split chapter CH (e.g. ch04) by the experiment "
                    "function on the stack (which pair or sweep the time went to)")
    args = ap.parse_args(argv)
    per_process: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    chapter_votes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    by_function: collections.Counter = collections.Counter()
    for process, stack, count in parse(args.raw):
        per_process[process][classify(stack)] += count
        if args.by_function and f"experiments/{args.by_function}_" in stack:
            by_function[experiment_function(stack) or "(outside the experiment module)"] += count
        m = CHAPTER.search(stack)
        if m:
            chapter_votes[process]["ch" + (m.group(1) or "ch" + m.group(2))[2:]] += count
    per_chapter: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for process, counts in per_process.items():
        votes = chapter_votes.get(process)
        chapter = votes.most_common(1)[0][0] if votes else "runner and others"
        per_chapter[chapter].update(counts)
    cats = [c for c, _ in CATEGORIES] + ["kernel machinery (messages, waiting)", OTHER]
    for chapter in sorted(per_chapter):
        counts = per_chapter[chapter]
        total = sum(counts.values())
        print(f"\n{chapter}: {total / args.rate:.0f} CPU-seconds sampled")
        for c in cats:
            if counts[c]:
                print(f"  {c:45s} {counts[c] / args.rate:8.0f} s  {100 * counts[c] / total:5.1f}%")
    if by_function:
        total = sum(by_function.values())
        print(f"\n{args.by_function} by experiment function:")
        for name, n in by_function.most_common():
            print(f"  {name:45s} {n / args.rate:8.0f} s  {100 * n / total:5.1f}%")


if __name__ == "__main__":
    main()
