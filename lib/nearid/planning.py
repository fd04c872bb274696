"""How long a sweep will take and how much memory it needs, measured before it runs
(``nearid plan``).

A chapter's experiment module lists its tasks with ``plan(P) -> list[Task]``. Tasks of one
``kind`` have the same shape: they cost the same per optimisation step and differ only in
seeds and settings. For one task of each kind (the one with the most steps) we run, in a fresh
process with one torch/BLAS thread (as a worker would), the task cut to ``k1`` optimisation
steps, again to ``k1`` and then to ``k2`` (its function's ``max_steps``; when the ``k2 - k1``
steps take less than ``MIN_SPAN`` seconds, ``k2`` grows fourfold, up to the task's own
steps, so that cheap steps are not lost in timer noise). Three runs separate three costs:

* ``once``: paid the first time a process runs such a task (lazy imports, data loaded and
  kept), the cold ``k1`` run minus the warm one;
* ``setup``: paid by every task (building the model and data, evaluation after training);
* ``per step``: ``(t(k2) - t(k1)) / (k2 - k1)``, from the two warm runs.

A task that evaluates its model inside (chapter 05 probes every trained model; chapter 04
embeds the held-out inputs) takes ``evaluate``, a share of its evaluation rows: the three
runs above leave the evaluation out (``evaluate=0``), and one more warm run at ``k1`` steps
scores a hundredth of the rows, then, if that says it would take at most
:data:`EVALUATE_SECONDS`, a tenth (``evaluate_share``), else a share sized to take about that
long; the difference, divided by the share, is the kind's ``evaluation`` per task (``eval
s``). Encoding and the probes cost in proportion to the rows they see, so a share scaled up
prices the whole without running it three times (at ``full`` chapter 05's AE encodes 110,000
images at each of its four budgets, about 20 minutes on one CPU core; chapter 06 embeds
153,600 cells, about 40). A task's share has a floor (a few hundred rows), so at small shapes
the scaled-up figure overstates the evaluation.

A kind's estimate is ``once + sum over its tasks of (setup + evaluation + steps * per_step)``,
one process running them one after another: divide by the number of workers for a pool or a
cluster (the tasks are independent). ``steps`` count what ``max_steps`` caps: a task that
trains two models, each cut by ``max_steps``, counts the steps of one.

``jobs`` kinds are timed side by side (``nearid plan --jobs``, default one per core), each
in its own one-thread process as a worker would run it, so on an idle machine the timings
are those of one worker; kinds on a GPU are timed one at a time (they would share it), and so
are the tasks of a chapter whose data would not fit ``jobs`` times in memory
(:func:`memory_heavy`: chapters 05 and 06 at ``full`` on a 23 GB machine).

A task without ``steps`` (or whose function takes no ``max_steps``) is run whole and counted
at that time for each task of its kind; when that run took less than ``WARM_RERUN`` seconds
it is run a second time, and the difference is its ``once`` (a first FastICA fit in a
process pays for scikit-learn's lazy imports: counted per task, that cost would dominate a
kind of many small fits). Peak memory is the peak resident set size of that process
(``VmHWM``), and on a GPU ``torch.cuda.max_memory_allocated``: what each worker needs, not
the sum.

A chapter's own cells do work outside its tasks: they align, probe, classify and bootstrap
the trained models' outputs in the kernel, one process, while a pool's workers (or a GPU)
wait. An experiment module may list that work too, with ``evaluation_plan(P) ->
list[Task]``: tasks that run the chapter's evaluation at its full shape (the same functions
on data of the same size; where the outputs of trained models are needed, stand-ins of
their shape). They are timed like the chapter's tasks and reported apart (``stage``
"evaluation"), because they do not spread over workers. An expensive evaluation declares
its units of work as ``steps`` (fits, folds, grid points) and takes ``max_steps`` (run only
the first k units): ``nearid plan`` then times k1 and k2 units and scales up to all of
them, as it does with training steps. A kind whose tasks have fewer steps than ``k2`` is cut
to its own steps at most, and run whole when it has no more than ``k1``.

What each chapter does outside its tasks at ``full`` (read from the notebooks and the
experiment modules), as its ``evaluation_plan`` prices it on this 2-core CPU while other jobs
shared it (load 3 to 7: an idle machine is up to twice as fast), on stand-in data of the
full shape; the counts come from the ``full`` profile:

======= ============================================================== ===========================
chapter work in the chapter's own cells at ``full``                    cost on this CPU
======= ============================================================== ===========================
01      the ICA sweep is tasks now (``plan``); the cells keep the      ``evaluation_plan``: 17 s
        rotated-copy noise sweep (8 alignment tables of 10,000 x 3)
        and the exercise's 18 FastICA fits (dimension 8)
02      ``assemble``: ``compare`` (4 families, FastICA up to 1000      ``evaluation_plan``: 540 x
        iterations) of every pair of the 10 seeds at each of the 11    75 ms = 41 s where FastICA
        deltas and in the ablation: 540 pairs of 10,000 x 5 codes;     converges (bent codes that
        bootstraps (cheap); the exercises retrain smoke-size sweeps    hit the limit cost more)
03      rigid + linear ``compare`` of every seed pair per setting:     ``evaluation_plan``: 270 x
        27 x 10 pairs of 10,000 x 16 codes, and 3 x 10 x 5 x 10 pairs  64 ms + 1,500 x 14 ms +
        of the digit models (about 1,000 rows each); 2,000-resample    bootstraps 7 s + 15
        bootstraps; the exercises train 15 small autoencoders          exercise AEs 28 s: 72 s
04      ``compare_pair`` (4 families, ICA on 95% of the variance, 200  ``evaluation_plan``: 54
        iterations): pair replicates, 5 grid settings, 4 fit-row       calls at five embedding
        fractions, on 3,000-10,000 rows x 192-512 dims; the            shapes + the invariance
        invariance exercise (``compare`` uncapped, 1,000 iterations,   exercise (287 s, the
        every component); the LM's layer x layer matrix (7 x 7, rigid  largest) + layer maps:
        and CKA)                                                       about 7 min
05      InfoMEC's probes and DCI/MIG run inside the tasks (priced      ``evaluation_plan``: 3 x
        there, ``evaluate``); the cells score 3 code sets (10,000 x    0.94 s + exercise AEs +
        12) for the rotation exercise, render the traversals and       traversals: about 6 s
        train two small AEs (exercise)
06      ``evaluate``: LightGBM (300 trees, one thread) per guide x     ``evaluation_plan``: 795
        fold x feature set, 15 x 4 x 4 = 240 fits on about 2,500 x     scorings x 3.4 s (4 fits
        192 wells, for each of 5 MAE replicates and again for each of  each) = 45 min at load
        the 3 training budgets of the scale trend; ``component_sweep`` 1.5, the largest of the
        7 k x 3 whitened sets x 60 fits: 3,180 fits in all            book
======= ============================================================== ===========================

Estimates come from the machine it runs on, under its current load. A chapter without
``evaluation_plan`` is estimated for its tasks only, and says so.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import multiprocessing
import pkgutil
import resource
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any

from nearid.tasks import Task, WorkerSetup, prepare_worker

DEFAULT_STEPS = (2, 10)
DEFAULT_TIMEOUT = 900.0  # seconds per kind of task
TASKS, EVALUATION = "tasks", "evaluation"  # a kind's stage: the chapter's tasks, or its own evaluation
MIN_SPAN = 1.0  # seconds the k2 - k1 steps must take at least (else k2 grows, up to the task's steps)
WARM_RERUN = 10.0  # a task run whole that took less than this (seconds) is run again, warm
EVALUATE_SHARE = 0.1  # share of its evaluation rows a task that takes `evaluate` scores when timed, at most
EVALUATE_SECONDS = 60.0  # about how long that timed evaluation may take (a smaller share when it would take longer)


@dataclass
class Measurement:
    """What timing one task of a kind found; seconds and MiB, None where not measured."""

    label: str
    steps: tuple[int, int] | None  # (k1, k2) it was cut to, or None: run whole
    seconds: list[float] = field(default_factory=list)  # [cold k1, warm k1, warm k2] or [whole(, warm whole)]
    once_s: float | None = None
    setup_s: float | None = None
    step_s: float | None = None
    task_s: float | None = None  # a task run whole
    base_rss_mb: float | None = None  # the process before the task ran (imports done)
    peak_rss_mb: float | None = None
    peak_gpu_mb: float | None = None
    device: str = ""
    error: str | None = None
    evaluate_share: float | None = None  # share of its evaluation rows the evaluation was timed on
    evaluate_s: float | None = None  # its evaluation inside the task, per task, scaled up to every row

    @property
    def per_task_s(self) -> float:
        """What every task of the kind pays besides its steps: set-up (or the whole task) and evaluation."""
        base = self.setup_s if self.steps is not None else self.task_s
        return (base or 0.0) + (self.evaluate_s or 0.0)


@dataclass
class KindPlan:
    """The tasks of one kind and what they are estimated to cost."""

    kind: str
    tasks: int
    steps: int | None  # optimisation steps of all its tasks together (None: unknown)
    gpu: bool
    measurement: Measurement | None = None
    estimate_s: float | None = None
    longest_s: float | None = None  # its longest task (bounds a cluster's wall time from below)
    stage: str = TASKS  # TASKS (plan: spread over workers) or EVALUATION (evaluation_plan: the kernel's)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def kind_of(task: Task) -> str:
    return task.kind or task.fn.__name__


def group(tasks: Sequence[Task]) -> dict[str, list[Task]]:
    """Tasks by kind, kinds in the order they first appear."""
    groups: dict[str, list[Task]] = {}
    for t in tasks:
        groups.setdefault(kind_of(t), []).append(t)
    return groups


def takes_max_steps(task: Task) -> bool:
    try:
        return "max_steps" in inspect.signature(task.fn).parameters
    except (TypeError, ValueError):
        return False


def takes_evaluate(task: Task) -> bool:
    """Whether the task's function can leave out (``evaluate=0``) or thin out its own evaluation."""
    try:
        return "evaluate" in inspect.signature(task.fn).parameters
    except (TypeError, ValueError):
        return False


def _rss_mb(field: str) -> float:
    """This process's resident set: ``VmHWM`` (peak) or ``VmRSS`` (now) from /proc on Linux.

    Not ``getrusage``'s ``ru_maxrss`` there: Linux carries it over ``execve`` from the
    process that forked us, so a child of a 700 MB parent would start at 700 MB. Elsewhere
    (macOS) ``ru_maxrss`` it is, for both (a fresh process is small at the start anyway)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def _measure_child(conn, task: Task, steps: tuple[int, int] | None, max_steps: int,
                   evaluate_share: float | None = None, evaluate_seconds: float = EVALUATE_SECONDS) -> None:
    """In a fresh process: time the task cut to steps[0], steps[0] and steps[1] (or whole);
    with ``evaluate_share``, those runs leave the task's own evaluation out and one more run
    (warm, at steps[0]) scores that share of its evaluation rows."""
    try:
        prepare_worker(WorkerSetup())
        torch = sys.modules.get("torch")  # loaded with the task's module, if it uses torch
        if torch is not None:
            torch.use_deterministic_algorithms(True, warn_only=True)  # as in a chapter
        base = _rss_mb("VmRSS")
        split = {} if evaluate_share is None else {"evaluate": 0.0}

        def run(k: int | None, **extra) -> float:
            kwargs = {**task.kwargs, **split, **extra} | ({} if k is None else {"max_steps": k})
            start = time.perf_counter()
            task.fn(**kwargs)
            cuda = sys.modules.get("torch")
            if cuda is not None and cuda.cuda.is_initialized():
                cuda.cuda.synchronize()
            return time.perf_counter() - start

        if steps is None:
            seconds = [run(None)]
            if seconds[0] < WARM_RERUN:  # cheap to repeat: separate first-call costs from the task's own
                seconds.append(run(None))
        else:
            k1, k2 = steps
            seconds = [run(k1), run(k1), run(k2)]
            # Cheap steps: lengthen the second run until the steps' own time stands out of
            # the noise (MIN_SPAN seconds), up to the task's full length.
            for _ in range(4):
                if seconds[2] - seconds[1] >= MIN_SPAN or k2 >= max_steps:
                    break
                k2 = min(max_steps, k2 * 4)
                seconds[2] = run(k2)
            steps = (k1, k2)
        evaluated, share = None, evaluate_share
        if evaluate_share is not None:  # the same run as seconds[-1] (whole) or seconds[1] (cut), evaluating
            same, k = (seconds[-1], None) if steps is None else (seconds[1], steps[0])
            # first a tenth of the share; the share itself only where that would take at most
            # EVALUATE_SECONDS (else a share sized to about that): a whole evaluation of hours
            # (chapter 06 embeds 153,600 cells) is priced in a minute
            share = evaluate_share / 10
            evaluated = run(k, evaluate=share)
            whole = max(evaluated - same, 0.0) / share
            better = min(evaluate_share, evaluate_seconds / whole) if whole > 0 else evaluate_share
            if better >= 2 * share:
                share, evaluated = better, run(k, evaluate=better)
        torch = sys.modules.get("torch")
        gpu = torch is not None and torch.cuda.is_initialized()
        conn.send({"seconds": seconds, "steps": steps, "evaluated": evaluated, "share": share, "base_rss_mb": base,
                   "peak_rss_mb": _rss_mb("VmHWM"),
                   "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if gpu else None,
                   "device": f"cuda ({torch.cuda.get_device_name()})" if gpu else "cpu"})
    except BaseException as exc:  # report, do not hang the parent
        conn.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        conn.close()


def measure(task: Task, steps: tuple[int, int] | None = DEFAULT_STEPS,
            timeout: float = DEFAULT_TIMEOUT, evaluate_share: float | None = EVALUATE_SHARE,
            evaluate_seconds: float = EVALUATE_SECONDS) -> Measurement:
    """Time ``task`` in a fresh process (see the module): cut to ``steps`` (k1 < k2)
    optimisation steps, or whole when ``steps`` is None. A task whose function takes
    ``evaluate`` is timed without its own evaluation, and again scoring a share of its
    evaluation rows, scaled up: ``evaluate_share`` at most, less where that would take more than
    ``evaluate_seconds`` (None: timed as it is, evaluation and all). Errors, a
    timeout or a killed process (out of memory) come back in ``.error``."""
    if steps is not None and not 1 <= steps[0] < steps[1]:
        raise ValueError(f"steps must be two counts 1 <= k1 < k2, got {steps}")
    if evaluate_share is not None and not 0 < evaluate_share <= 1:
        raise ValueError(f"evaluate_share must be in (0, 1], got {evaluate_share}")
    share = evaluate_share if takes_evaluate(task) else None
    m = Measurement(label=task.label or kind_of(task), steps=steps, evaluate_share=share)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_measure_child,
                       args=(child, task, steps, max(task.steps or 0, steps[1] if steps else 0), share,
                             evaluate_seconds),
                       daemon=True)
    proc.start()
    child.close()
    got, timed_out = None, False
    try:
        if parent.poll(timeout):
            got = parent.recv()
        else:
            timed_out = True
    except EOFError:  # the child died before it could answer
        got = None
    finally:
        if got is not None:
            proc.join(60)  # it answered and is exiting
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()
    if got is None:
        m.error = (f"timed out after {timeout:.0f} s" if timed_out else
                   f"the measuring process died (exit code {proc.exitcode}"
                   + (", out of memory?)" if proc.exitcode == -9 else ")"))
        return m
    if "error" in got:
        m.error = got["error"]
        return m
    for name in ("seconds", "steps", "base_rss_mb", "peak_rss_mb", "peak_gpu_mb", "device"):
        setattr(m, name, got[name])
    steps = m.steps
    if steps is None:
        m.task_s = m.seconds[-1]
        if len(m.seconds) > 1:
            m.once_s = max(0.0, m.seconds[0] - m.seconds[-1])
    else:
        cold, warm1, warm2 = m.seconds
        m.step_s = max(0.0, (warm2 - warm1) / (steps[1] - steps[0]))
        m.setup_s = max(0.0, warm1 - steps[0] * m.step_s)
        m.once_s = max(0.0, cold - warm1)
    if got.get("evaluated") is not None:  # the same run again, evaluating a share of its rows
        same = m.seconds[-1] if steps is None else m.seconds[1]
        m.evaluate_share = got["share"]
        m.evaluate_s = max(0.0, got["evaluated"] - same) / m.evaluate_share
    return m


def cut_for(task: Task, steps: tuple[int, int]) -> tuple[int, int] | None:
    """The (k1, k2) steps ``task`` is timed at: ``steps``, with k2 no larger than the task's own
    steps; None (run whole) when it takes no ``max_steps``, has no steps, or no more than k1."""
    if task.steps is None or not takes_max_steps(task) or task.steps <= steps[0]:
        return None
    return steps[0], min(steps[1], task.steps)


@dataclass
class _Timing:
    """One kind's measurement to make: its plan, its tasks, the task timed and its cut."""

    plan: KindPlan
    members: list[Task]
    sample: Task
    cut: tuple[int, int] | None


def _timings(tasks: Sequence[Task], steps: tuple[int, int], stage: str) -> list[_Timing]:
    """The kinds of ``tasks``, each with the task that stands for it (the one with most steps)."""
    out = []
    for kind, members in group(tasks).items():
        known = [t.steps for t in members if t.steps is not None]
        total_steps = sum(known) if len(known) == len(members) else None
        plan = KindPlan(kind=kind, tasks=len(members), steps=total_steps, gpu=any(t.gpu for t in members),
                        stage=stage)
        sample = max(members, key=lambda t: t.steps or 0)
        out.append(_Timing(plan, members, sample, cut_for(sample, steps) if total_steps is not None else None))
    return out


def _estimate(t: _Timing, m: Measurement) -> KindPlan:
    """The kind's estimate from its measurement: ``once`` plus, per task, set-up, evaluation and steps."""
    plan = t.plan
    plan.measurement = m
    if m.error is None:
        once, per_task = m.once_s or 0.0, m.per_task_s
        if t.cut is None:
            plan.estimate_s, plan.longest_s = once + per_task * len(t.members), once + per_task
        else:
            plan.estimate_s = once + sum(per_task + task.steps * m.step_s for task in t.members)
            plan.longest_s = once + per_task + max(task.steps for task in t.members) * m.step_s
    return plan


def _run_timings(timings: Sequence[_Timing], *, timeout: float, timer: Callable[..., Measurement],
                 progress: Callable[[str], None] | None, jobs: int,
                 slots: threading.Semaphore | None = None) -> list[KindPlan]:
    """Measure every kind, ``jobs`` at a time (each in its own process, one thread), in order;
    with ``slots``, each measurement (and its progress line) waits for one."""
    def one(t: _Timing) -> KindPlan:
        with slots if slots is not None else contextlib.nullcontext():
            if progress is not None:
                progress(f"timing {t.plan.kind}: {t.sample.label or kind_of(t.sample)}"
                         + (f" cut to {t.cut[0]} and {t.cut[1]} steps" if t.cut else " whole"))
            return _estimate(t, timer(t.sample, steps=t.cut, timeout=timeout))

    if jobs <= 1 or len(timings) <= 1:
        return [one(t) for t in timings]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs) as pool:  # threads that wait on measuring processes
        return list(pool.map(one, timings))


def plan_tasks(tasks: Sequence[Task], *, steps: tuple[int, int] = DEFAULT_STEPS, timeout: float = DEFAULT_TIMEOUT,
               timer: Callable[..., Measurement] = measure,
               progress: Callable[[str], None] | None = None, stage: str = TASKS, jobs: int = 1) -> list[KindPlan]:
    """Group ``tasks`` by kind, time one task of each kind (``jobs`` kinds at a time),
    estimate each kind's time; ``stage`` says whether they are a chapter's tasks or its own
    evaluation."""
    return _run_timings(_timings(tasks, steps, stage), timeout=timeout, timer=timer, progress=progress, jobs=jobs)


def experiment_module(chapter_number: str) -> ModuleType | None:
    """The experiment module of chapter "NN" (``nearid.experiments.chNN_*``), or None."""
    import nearid.experiments as pkg

    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith(f"ch{chapter_number}_"))
    return importlib.import_module(f"{pkg.__name__}.{names[0]}") if names else None


def human_seconds(s: float | None) -> str:
    if s is None:
        return "?"
    if s < 90:
        return f"{s:.0f} s" if s >= 1 else "< 1 s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    if s < 1000 * 86400:
        return f"{s / 86400:.1f} d"
    return f"{s / 86400 / 365.25:.3g} years"


def chapter_summary(plans: Sequence[KindPlan]) -> dict[str, Any]:
    """Total estimate and the largest peaks of a chapter; ``complete`` is False when some
    kind could not be timed (its time is then missing from the total). ``estimate_s`` is
    ``tasks_s`` (its tasks) plus ``evaluation_s`` (its own evaluation), in one process;
    ``tasks`` counts its tasks, ``evaluation_parts`` its evaluation's."""
    est = [p.estimate_s for p in plans]

    def seconds(stage: str) -> float:
        return sum(p.estimate_s for p in plans if p.stage == stage and p.estimate_s is not None)

    rss = [p.measurement.peak_rss_mb for p in plans if p.measurement and p.measurement.peak_rss_mb]
    gpu = [p.measurement.peak_gpu_mb for p in plans if p.measurement and p.measurement.peak_gpu_mb]
    return {"tasks": sum(p.tasks for p in plans if p.stage == TASKS),
            "evaluation_parts": sum(p.tasks for p in plans if p.stage == EVALUATION),
            "estimate_s": sum(e for e in est if e is not None), "tasks_s": seconds(TASKS),
            "evaluation_s": seconds(EVALUATION),
            "complete": all(e is not None for e in est), "peak_rss_mb": max(rss, default=None),
            "peak_gpu_mb": max(gpu, default=None),
            "longest_s": max((p.longest_s for p in plans if p.longest_s is not None and p.stage == TASKS),
                             default=None)}


PLAN_COLUMNS = ("kind", "tasks", "steps/task", "once s", "setup s", "eval s", "ms/step", "estimate", "peak RSS",
                "GPU peak")


def format_chapter(name: str, plans: Sequence[KindPlan], *, evaluation_listed: bool = True) -> str:
    """The text ``nearid plan`` prints for one chapter: a table whose columns are as wide as
    their widest cell (kind names run long: ``train_vae_beta_tcvae (gpu)``), then a summary;
    the kinds of its own evaluation are marked ``(evaluation)``. ``evaluation_listed`` False:
    the chapter has no ``evaluation_plan``, and the summary says its evaluation is not in it."""
    def num(v, prec=2):
        return f"{v:.{prec}f}" if v is not None else "-"

    rows, notes = [], {}
    for p in plans:
        m = p.measurement
        per_task = f"{p.steps / p.tasks:.0f}" if p.steps is not None else "-"
        kind = p.kind + (" (gpu)" if p.gpu else "") + (" (evaluation)" if p.stage == EVALUATION else "")
        if m is None or m.error is not None:
            rows.append([kind, str(p.tasks), per_task])
            notes[len(rows) - 1] = f"not timed: {m.error if m else 'no measurement'}"
            continue
        step_ms = m.step_s * 1000 if m.step_s is not None else None
        setup = m.setup_s if m.setup_s is not None else m.task_s
        rows.append([kind, str(p.tasks), per_task, num(m.once_s), num(setup), num(m.evaluate_s), num(step_ms),
                     human_seconds(p.estimate_s), human_mb(m.peak_rss_mb), human_mb(m.peak_gpu_mb, "-")])
    widths = [max([len(h), *(len(r[i]) for r in rows if i < len(r))]) for i, h in enumerate(PLAN_COLUMNS)]

    def line(cells: Sequence[str]) -> str:  # the kind left-aligned, numbers right-aligned
        return "  " + "  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells))

    lines = [name, line(PLAN_COLUMNS)]
    for i, row in enumerate(rows):
        lines.append(line(row) + (f"   {notes[i]}" if i in notes else ""))
    s = chapter_summary(plans)
    devices = sorted({p.measurement.device for p in plans if p.measurement and p.measurement.device})
    work = f"{human_seconds(s['tasks_s'])} for {s['tasks']} tasks"
    if s["evaluation_parts"]:
        work += f" + {human_seconds(s['evaluation_s'])} for its own evaluation ({s['evaluation_parts']} parts)"
    lines.append(f"  estimate: {work}{'' if s['complete'] else ' + kinds not timed'} in one process on "
                 f"{', '.join(devices) or 'this machine'}; peak memory per worker {human_mb(s['peak_rss_mb'])} RSS"
                 + (f", {human_mb(s['peak_gpu_mb'])} GPU" if s["peak_gpu_mb"] else "")
                 + ("" if evaluation_listed else "; its own evaluation not estimated (no evaluation_plan)"))
    return "\n".join(lines)


def human_mb(mb: float | None, missing: str = "?") -> str:
    if mb is None:
        return missing
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def parse_steps(text: str) -> tuple[int, int]:
    """ "2,10" -> (2, 10), checked."""
    try:
        k1, k2 = (int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--steps takes two step counts such as 2,10, got {text!r}") from None
    if not 1 <= k1 < k2:
        raise ValueError(f"--steps needs 1 <= k1 < k2, got {text!r}")
    return k1, k2


def memory_heavy(module: ModuleType | None, P, jobs: int) -> bool:
    """Whether ``jobs`` of the chapter's tasks at once would hold more than half this machine's
    memory (its ``data_mb(P)``, half again for what the task builds on it): such kinds are timed
    one at a time (beside lighter ones), or side by side they would be killed for memory."""
    from nearid import env

    fn = getattr(module, "data_mb", None) if module is not None else None
    total = env.machine_memory_mb()
    if fn is None or not total or jobs <= 1:
        return False
    return jobs * 1.5 * float(fn(P)) > 0.5 * total


def _cuda_present() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _listed(module: ModuleType | None, hook: str, P) -> list[Task] | None:
    """The tasks ``module.<hook>(P)`` lists, or None where the module has no such hook."""
    fn = getattr(module, hook, None) if module is not None else None
    return list(fn(P)) if callable(fn) else None


@dataclass(frozen=True)
class Stopwatch:
    """How each kind is timed: cut to ``steps`` (k1, k2) optimisation steps, for at most
    ``timeout`` seconds, scoring ``evaluate_share`` of its evaluation rows (see :func:`measure`)."""

    steps: tuple[int, int] = DEFAULT_STEPS
    timeout: float = DEFAULT_TIMEOUT
    evaluate_share: float | None = EVALUATE_SHARE


def plan_chapters(params: dict[str, Any], stopwatch: Stopwatch = Stopwatch(), *, workers: int = 1, jobs: int = 1,
                  timer: Callable[..., Measurement] | None = None, out: Callable[[str], None] = print,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Plan every chapter in ``params`` (chapter key -> its resolved parameters ``P``) whose
    experiment module has ``plan(P)`` or ``evaluation_plan(P)``, each kind timed as
    ``stopwatch`` says; print each chapter and the total through ``out``. Returns a JSON-able
    report: per chapter its kinds and summary (None: neither hook). With ``workers``, the
    tasks spread over them and the chapters' own evaluation does not (it runs in each
    chapter's kernel). ``jobs`` kinds are timed at a time, each in its own one-thread process
    (one per core: the timings stay those of one worker). ``timer`` stands in for
    :func:`measure` (tests)."""
    import functools
    from concurrent.futures import Future, ThreadPoolExecutor

    steps, timeout, evaluate_share = stopwatch.steps, stopwatch.timeout, stopwatch.evaluate_share
    if timer is None:
        timer = functools.partial(measure, evaluate_share=evaluate_share)
    slots = threading.Semaphore(max(1, jobs))  # measurements at once, whichever pool queued them
    report: dict[str, Any] = {"steps": list(steps), "workers": workers, "jobs": jobs,
                              "evaluate_share": evaluate_share, "chapters": {}}
    tasks_s, evaluation_s, longest, complete, peak, without, unlisted = 0.0, 0.0, 0.0, True, [], [], []
    chapters: dict[str, tuple[int, bool, list[Future]]] = {}
    cuda = _cuda_present()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))  # threads that wait on measuring processes
    alone = ThreadPoolExecutor(max_workers=1)  # GPU kinds and memory-heavy ones, one at a time (in a slot)
    try:
        for key, P in params.items():  # every kind of every chapter queued, in chapter order
            module = experiment_module(key.split("_", 1)[0])
            tasks, evaluation = _listed(module, "plan", P), _listed(module, "evaluation_plan", P)
            if tasks is None and evaluation is None:
                chapters[key] = None
                continue
            timings = _timings(tasks or [], steps, TASKS) + _timings(evaluation or [], steps, EVALUATION)
            heavy = memory_heavy(module, P, jobs)
            chapters[key] = (len(tasks or []), evaluation is not None,
                             [(alone if (t.plan.gpu and cuda) or (heavy and t.plan.stage == TASKS) else pool).submit(
                                 _run_timings, [t], timeout=timeout, timer=timer, progress=progress, jobs=1,
                                 slots=slots)
                              for t in timings])
        for key, entry in chapters.items():  # printed in order, each as soon as its kinds are timed
            if entry is None:
                without.append(key)
                report["chapters"][key] = None
                out(f"{key}: its experiment module has no plan(P) and no evaluation_plan(P); not estimated")
                continue
            n_tasks, listed, futures = entry
            if not listed:
                unlisted.append(key)
            plans = [p for f in futures for p in f.result()]
            summary = chapter_summary(plans)
            report["chapters"][key] = {"kinds": [p.to_dict() for p in plans], "evaluation_listed": listed, **summary}
            out(format_chapter(f"{key}: {n_tasks} tasks", plans, evaluation_listed=listed))
            tasks_s += summary["tasks_s"]
            evaluation_s += summary["evaluation_s"]
            longest = max(longest, summary["longest_s"] or 0.0)
            complete &= summary["complete"]
            peak += [summary["peak_rss_mb"]] if summary["peak_rss_mb"] else []
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        alone.shutdown(wait=True, cancel_futures=True)
    planned = [k for k, v in report["chapters"].items() if v is not None]
    total = tasks_s + evaluation_s
    report.update(estimate_s=total, tasks_s=tasks_s, evaluation_s=evaluation_s, complete=complete,
                  longest_s=longest, planned=planned, without_plan=without, evaluation_not_listed=unlisted,
                  peak_rss_mb=max(peak, default=None))
    if len(params) > 1 or workers > 1:
        line = (f"total: {human_seconds(total)}{'' if complete else ' + kinds not timed'} for "
                f"{len(planned)} chapter{'s' if len(planned) != 1 else ''} in one process "
                f"({human_seconds(tasks_s)} tasks, {human_seconds(evaluation_s)} their own evaluation)")
        if workers > 1:
            spread = max(tasks_s / workers, longest)
            line += (f"; with {workers} workers at least {human_seconds(spread + evaluation_s)} "
                     f"(the tasks {human_seconds(spread)}: the longest task alone takes {human_seconds(longest)}; "
                     f"the evaluation stays in the kernel)")
        if unlisted:
            line += f"; own evaluation not estimated: {', '.join(unlisted)}"
        if without:
            line += f"; not estimated: {', '.join(without)}"
        out(line)
    return report
