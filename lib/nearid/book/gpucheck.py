"""``make check-gpu``: the first minutes on a machine with a GPU, prepared in advance.

GPU time is lent in minutes, so everything a GPU machine must answer is asked by one command,
in this order, each step with a time budget so that the whole fits in about ten minutes on
one GPU:

1. **smoke on CUDA**: every chapter in ``smoke`` with ``-p device=cuda`` (the chapters that
   take a device), into a scratch folder, compared with the committed CPU reference by
   :func:`nearid.book.reference.verify` with the declared GPU tolerances
   (:data:`GPU_RTOL`, :data:`GPU_ATOL`). Floating-point sums run in another order on a GPU,
   so numbers may move; **a verdict must not**: the step passes when every verdict matches.
2. **the full-shape dry run on CUDA**: every chapter in ``full`` with ``dry_run=true``
   (two optimiser steps per task, the full shapes), which finds out-of-memory and shape errors.
3. **``nearid plan --profile full -p device=cuda``**: what ``full`` would cost on this GPU.
4. **peak GPU memory per chapter**, sampled with ``nvidia-smi`` while steps 1 and 2 run.

Everything lands in one report, ``report.json`` and ``report.md`` in the output folder. On a
machine without CUDA it says so, writes a report that says so, and exits 0: the command is
safe to run anywhere (a test runs that path).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nearid.fileio import atomic_write_text

# Declared before any GPU run: a number may move by this much between CPU and GPU kernels
# (training on a GPU sums in another order, and a few hundred steps amplify it); a verdict
# may not move at all.
GPU_RTOL = 0.10
GPU_ATOL = 0.02
DEFAULT_OUT = Path("_build") / "check-gpu"
# Seconds per step (the sum is the whole budget, about ten minutes on one GPU).
BUDGET_S = {"smoke": 300, "full_dry_run": 210, "plan": 90}


@dataclass
class StepResult:
    """One step of the check: what ran, how long, whether it passed, what it found."""

    name: str
    ok: bool
    seconds: float
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def cuda_devices() -> list[str]:
    """The names of the CUDA devices torch sees (empty without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


class GpuMemorySampler:
    """Peak GPU memory in use (MB, all processes) while a block runs, sampled from
    ``nvidia-smi`` twice a second: the chapter runs in its own kernel process, so torch's
    counters in this process cannot see it. ``peak_mb`` is None where nvidia-smi is absent."""

    def __init__(self, interval_s: float = 0.5, query: Callable[[], float | None] | None = None):
        self.interval_s = interval_s
        self.query = query or _nvidia_smi_used_mb
        self.peak_mb: float | None = None
        self.baseline_mb: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        used = self.query()
        if used is not None:
            self.peak_mb = used if self.peak_mb is None else max(self.peak_mb, used)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> GpuMemorySampler:
        self.baseline_mb = self.query()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()


def _nvidia_smi_used_mb() -> float | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5, check=True).stdout
        return float(sum(float(x) for x in out.split()))
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _device_overrides(chapter: str) -> dict[str, Any]:
    """``device=cuda`` for the chapters that take a device (the others have nothing to move)."""
    from nearid.book import profiles

    return {"device": "cuda"} if "device" in profiles.CONSTRAINTS[chapter] else {}


def run_chapters(profile: str, extra: dict[str, Any], out_dir: Path, root: Path, budget_s: float,
                 run: Callable[..., Any] | None = None) -> StepResult:
    """Every chapter in ``profile`` on CUDA into ``out_dir``, each under a GPU memory sampler;
    chapters left when the budget is spent are listed as skipped, not run."""
    from nearid.book import profiles, runner

    run = run or runner.run_chapter
    per_chapter, failed, skipped = {}, {}, []
    start = time.perf_counter()
    for chapter in sorted(profiles.CHAPTERS):
        if time.perf_counter() - start > budget_s:
            skipped.append(chapter)
            continue
        t0 = time.perf_counter()
        with GpuMemorySampler() as mem:
            try:
                run(chapter, profile, {**extra, **_device_overrides(chapter)}, out_dir=out_dir, force=True, root=root)
            except Exception as exc:  # one failing chapter must not hide the others' results
                failed[chapter] = f"{type(exc).__name__}: {str(exc)[:500]}"
        peak = None if mem.peak_mb is None else mem.peak_mb - (mem.baseline_mb or 0.0)
        per_chapter[chapter] = {"seconds": round(time.perf_counter() - t0, 1), "peak_gpu_mb": peak,
                                "status": "failed" if chapter in failed else "ok"}
    return StepResult(f"{profile}{' dry run' if extra.get('dry_run') else ''} on CUDA", not failed and not skipped,
                      time.perf_counter() - start, {"chapters": per_chapter, "failed": failed, "skipped": skipped})


def compare_with_reference(executed: Path, root: Path, rtol: float = GPU_RTOL, atol: float = GPU_ATOL) -> StepResult:
    """The smoke build on CUDA against the committed CPU reference: passes when every verdict
    matches; numbers outside the tolerances are counted and the largest listed."""
    from nearid.book import reference

    t0 = time.perf_counter()
    rep = reference.verify(executed, reference.reference_dir(root, "smoke"), "smoke", rtol=rtol, atol=atol)
    verdicts = [str(d) for d in rep.differences if d.kind == "verdict"]
    others = [str(d) for d in rep.differences if d.kind != "verdict"]
    return StepResult("smoke on CUDA vs the CPU reference", not verdicts and not rep.problems,
                      time.perf_counter() - t0,
                      {"compared": rep.compared, "rtol": rtol, "atol": atol, "verdicts_differ": verdicts,
                       "numbers_outside_tolerance": len(others), "first_numbers": others[:20],
                       "problems": rep.problems})


def gpu_chapters() -> list[str]:
    """The chapters with a ``device`` parameter: the ones a GPU can change. Chapter 01 (FastICA
    fits on the CPU, 35 kinds of task to time in `full`) has none, and timing it alone would
    take the plan step's whole budget."""
    from nearid.book import profiles

    return [key[:2] for key in profiles.CHAPTERS if "device" in profiles.resolve(key, "full")]


def plan_full(out_dir: Path, budget_s: float) -> StepResult:
    """``nearid plan --profile full -p device=cuda`` for the GPU chapters, its JSON kept beside
    the report."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "nearid.cli.main", "plan", *gpu_chapters(), "--profile", "full", "-p",
           "device=cuda", "--timeout", str(int(budget_s / 2)), "--json", str(out_dir / "plan-full.json")]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_s)
    except subprocess.TimeoutExpired:
        return StepResult("nearid plan --profile full on CUDA", False, time.perf_counter() - t0,
                          error=f"did not finish within {budget_s:.0f} s")
    atomic_write_text(out_dir / "plan-full.txt", proc.stdout + proc.stderr)
    return StepResult("nearid plan --profile full on CUDA", proc.returncode == 0, time.perf_counter() - t0,
                      {"output": "plan-full.txt", "json": "plan-full.json"},
                      None if proc.returncode == 0 else proc.stderr[-1000:])


def write_report(out_dir: Path, report: dict[str, Any]) -> None:
    """``report.json`` (everything) and ``report.md`` (what a person reads first)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "report.json", json.dumps(report, indent=2, default=str) + "\n")
    lines = [f"# GPU check: {report['status']}", "", f"devices: {', '.join(report['devices']) or 'none'}", ""]
    if report.get("reason"):
        lines += [report["reason"], ""]
    for step in report.get("steps", []):
        lines.append(f"- **{step['name']}**: {'ok' if step['ok'] else 'NOT OK'} ({step['seconds']:.0f} s)"
                     + (f": {step['error']}" if step.get("error") else ""))
        chapters = step["detail"].get("chapters", {})
        for ch, rec in chapters.items():
            peak = "?" if rec["peak_gpu_mb"] is None else f"{rec['peak_gpu_mb']:.0f} MB"
            lines.append(f"  - {ch}: {rec['status']}, {rec['seconds']:.0f} s, peak GPU memory {peak}")
        for key in ("verdicts_differ", "failed", "skipped"):
            if step["detail"].get(key):
                lines.append(f"  - {key.replace('_', ' ')}: {step['detail'][key]}")
        if "numbers_outside_tolerance" in step["detail"]:
            d = step["detail"]
            lines.append(f"  - {d['compared']} values compared; {d['numbers_outside_tolerance']} outside "
                         f"rtol {d['rtol']} / atol {d['atol']}")
    atomic_write_text(out_dir / "report.md", "\n".join(lines) + "\n")


@contextlib.contextmanager
def _task_cache(folder: Path) -> Iterator[None]:
    """Point the chapters at the check's own task cache (unless the caller chose one) for the
    length of the check only: a cache left in ``os.environ`` would serve these results to
    every later task in the process."""
    chosen = os.environ.get("NEARID_TASK_CACHE")
    os.environ["NEARID_TASK_CACHE"] = chosen or str(folder)
    try:
        yield
    finally:
        if chosen is None:
            os.environ.pop("NEARID_TASK_CACHE", None)


def check(out_dir: Path = DEFAULT_OUT, root: Path | None = None, devices: list[str] | None = None,
          run: Callable[..., Any] | None = None, plan: Callable[[Path, float], StepResult] | None = None) -> dict:
    """Run the check (see the module) and return its report; ``devices``, ``run`` and ``plan``
    stand in for CUDA, the runner and ``nearid plan`` in tests."""
    from nearid.book import runner

    root = Path(root) if root is not None else runner.find_root()
    out_dir = Path(out_dir) if Path(out_dir).is_absolute() else root / out_dir
    devices = cuda_devices() if devices is None else devices
    report: dict[str, Any] = {"devices": devices, "steps": [], "gpu_rtol": GPU_RTOL, "gpu_atol": GPU_ATOL}
    if not devices:
        report.update(status="skipped: no CUDA device",
                      reason="torch sees no CUDA device on this machine, so there is nothing to check; "
                             "run `make check-gpu` where `nvidia-smi` lists a GPU.")
        write_report(out_dir, report)
        return report
    with _task_cache(out_dir / "tasks"):  # never the book's cache
        smoke = run_chapters("smoke", {}, out_dir / "smoke", root, BUDGET_S["smoke"], run=run)
        steps = [smoke]
        if not smoke.detail["failed"]:
            steps.append(compare_with_reference(out_dir / "smoke", root))
        steps.append(run_chapters("full", {"dry_run": True}, out_dir / "full-dry-run", root,
                                  BUDGET_S["full_dry_run"], run=run))
        steps.append((plan or plan_full)(out_dir, BUDGET_S["plan"]))
    report["steps"] = [asdict(s) for s in steps]
    report["status"] = "ok" if all(s.ok for s in steps) else "NOT OK"
    write_report(out_dir, report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nearid.book.gpucheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="the report folder (default _build/check-gpu)")
    args = parser.parse_args(argv)
    with contextlib.suppress(BrokenPipeError):
        report = check(Path(args.out))
        print(f"check-gpu: {report['status']}; report in {Path(args.out) / 'report.md'}")
    return 0 if report["status"].startswith(("ok", "skipped")) else 1


if __name__ == "__main__":
    sys.exit(main())
