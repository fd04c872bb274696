"""What a chapter run will cost, priced before it starts: a typo such as ``-p epochs=1e12``
must be refused in a second, not discovered hours later.

``nearid plan`` measures tasks (minutes). This module only counts: a chapter's experiment
module lists its tasks with ``plan(P)``, each with its optimisation ``steps``; the cost of a
run is taken to grow with its total steps from a run of the same chapter whose time is known:

* the chapter's last successful run on this machine (``timings.json``: its profile and
  overrides give its steps, its wall time the seconds per step), else
* the reference machine's ``quick`` time (:data:`REFERENCE_SECONDS`,
  a 2-core AMD EPYC VM) over ``quick``'s steps.

A chapter without tasks (07), or whose tasks declare no steps (01's ICA fits), is
priced at its known time. The estimate says which basis
it used. It ignores what steps do not capture (wider models cost more per step, evaluation
grows with the data), so it is a guard against runs ten or a thousand times too long, not a
forecast; ``nearid plan`` measures.

Memory is priced the same way: a chapter whose data grows with its parameters (02, 05, 06)
says how much its largest data takes (``data_mb(P)`` in its experiment module), and a run
whose data alone exceeds this machine's physical memory is refused before it starts.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nearid.book.preflight import PreflightError
from nearid.env import machine_memory_mb

DEFAULT_MAX_HOURS = 2.0  # above this, `nearid run` / `nearid book` ask for --yes
ENV_MAX_HOURS = "NEARID_MAX_HOURS"
SAY_ABOVE_SECONDS = 60.0  # runs estimated shorter than this start without an estimate line


# Wall seconds of each chapter in one fresh default quick build (two chapters side by side,
# one torch thread each, portable kernels) of 89b7983 on an idle 2-core AMD EPYC (family 25
# model 17, Zen 4) VM, 2026-12-07: the whole build took 19:47 (benchmarks/README.md, "Thirteenth
# round"). Used only to start the longest chapters first when an output folder has no timings
# of its own yet (a fresh clone), and to price a chapter that has never run here: chapter 04
# takes longer than all chapters but 05 together, so starting it late would leave a core idle
# for many minutes. Never a result.
REFERENCE_SECONDS = {
    "quick": {"01_definitions": 18, "02_isometric_dgp": 42, "03_bilipschitz": 225,
              "04_alignment": 949, "05_disentanglement": 837, "06_cell_microscopy": 212},
}


class CostRefused(PreflightError):
    """A run priced above the threshold, started without ``--yes`` (exit code 2)."""


@dataclass(frozen=True)
class Price:
    chapter: str
    profile: str
    tasks: int
    steps: int | None  # optimisation steps of all its tasks (None: the chapter lists none)
    seconds: float | None  # None: nothing to scale from
    basis: str  # where the seconds per step came from
    data_mb: float | None = None  # the data one task holds in memory (None: the chapter does not say)

    @property
    def worth_saying(self) -> bool:
        """A minute or more: worth a line before the run starts (short runs stay quiet)."""
        return self.seconds is not None and self.seconds >= SAY_ABOVE_SECONDS

    def describe(self) -> str:
        from nearid.planning import human_seconds

        if self.seconds is None:
            return f"{self.chapter} ({self.profile}): cost unknown ({self.basis})"
        work = f"{self.tasks:,} tasks, {self.steps:,} steps; " if self.steps else ""
        if self.data_mb and self.data_mb >= 1:
            from nearid.planning import human_mb

            work += f"data {human_mb(self.data_mb)} per task; "
        return f"{self.chapter} ({self.profile}): about {human_seconds(self.seconds)} ({work}{self.basis})"


def _steps(chapter: str, params: dict[str, Any]) -> tuple[int, int | None]:
    """(tasks, total steps) of the chapter's plan for resolved ``params``; (0, None) without one,
    (tasks, None) when none of its tasks declares steps."""
    from nearid.planning import experiment_module

    module = experiment_module(chapter.split("_", 1)[0])
    if module is None or not hasattr(module, "plan"):
        return 0, None
    tasks = module.plan(params)
    if tasks and all(t.steps is None for t in tasks):  # no steps to scale by (01's ICA fits)
        return len(tasks), None
    return len(tasks), sum(int(t.steps or 0) for t in tasks)


def _data_mb(chapter: str, params: dict[str, Any]) -> float | None:
    """The chapter's ``data_mb(P)``: memory its largest data takes; None where it defines none."""
    from nearid.planning import experiment_module

    module = experiment_module(chapter.split("_", 1)[0])
    fn = getattr(module, "data_mb", None) if module is not None else None
    return float(fn(params)) if fn is not None else None


def _known_runs(out_dir: Path | None, chapter: str) -> list[dict[str, Any]]:
    if out_dir is None:
        return []
    with contextlib.suppress(OSError, UnicodeDecodeError, ValueError, TypeError):  # damaged: never fatal here
        records = json.loads((Path(out_dir) / "timings.json").read_text())
        return [r for r in records if isinstance(r, dict) and r.get("chapter") == chapter
                and r.get("status") == "ok" and float(r.get("wall_s") or 0) > 0]
    return []


def device_kind(params: dict[str, Any]) -> str:
    """"cuda" when the chapter will compute on a GPU (``device`` cuda, or auto with one present)."""
    device = str(params.get("device", "cpu"))
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if device.startswith("cuda") else "cpu"


def price(chapter: str, profile: str, params: dict[str, Any], out_dir: Path | None = None,
          device: str = "cpu") -> Price:
    """The estimated wall time of running ``chapter`` with resolved ``params`` (see the module)."""
    from nearid.book.profiles import resolve

    tasks, steps = _steps(chapter, params)
    memory = _data_mb(chapter, params)
    bases = []
    for rec in reversed(_known_runs(out_dir, chapter)):  # the newest first
        kind = "cuda" if str(rec.get("device", "")).startswith("cuda") else "cpu"
        if kind != ("cuda" if str(device).startswith("cuda") else "cpu"):
            continue
        with contextlib.suppress(Exception):
            bases.append((float(rec["wall_s"]), rec.get("profile"), rec.get("overrides") or {},
                          f"scaled from its last run here: {rec.get('profile')}"
                          f"{' with overrides' if rec.get('overrides') else ''}, {float(rec['wall_s']):.0f} s"))
            break
    reference = REFERENCE_SECONDS["quick"].get(chapter)
    if reference and not str(device).startswith("cuda"):
        bases.append((float(reference), "quick", {}, f"scaled from quick on the reference 2-core CPU, {reference} s"))
    # A run of the same profile scales best; smoke runs are mostly fixed costs (imports, data,
    # evaluation), so scaling smoke's seconds by steps overprices quick tenfold: the reference
    # machine's quick time comes before a last run of another profile.
    bases.sort(key=lambda b: b[1] != profile and b[3].startswith("scaled from its last run"))
    for seconds, base_profile, base_overrides, basis in bases:
        try:
            if base_profile == profile and not base_overrides and steps is None:
                return Price(chapter, profile, tasks, steps, seconds, basis, memory)
            base_tasks, base_steps = _steps(chapter, resolve(chapter, base_profile, base_overrides))
        except Exception:  # a record from older code whose overrides no longer resolve
            continue
        if steps is None or not base_steps:
            return Price(chapter, profile, tasks, steps, seconds, basis + "; no steps to scale by", memory)
        return Price(chapter, profile, tasks, steps, seconds * steps / base_steps, basis, memory)
    return Price(chapter, profile, tasks, steps, None,
                 "no earlier run on this kind of device to scale from; `nearid plan` measures", memory)


def max_seconds() -> float:
    """The threshold above which a run needs ``--yes``: ``$NEARID_MAX_HOURS`` or 2 hours."""
    text = os.environ.get(ENV_MAX_HOURS, "")
    try:
        hours = float(text) if text else DEFAULT_MAX_HOURS
    except ValueError:
        raise ValueError(f"${ENV_MAX_HOURS} must be a number of hours, got {text!r}") from None
    if not hours > 0:
        raise ValueError(f"${ENV_MAX_HOURS} must be positive, got {text!r}")
    return hours * 3600


def check(prices: list[Price], *, yes: bool) -> None:
    """Refuse (:class:`CostRefused`) when the priced runs together exceed :func:`max_seconds`
    and ``yes`` was not given."""
    from nearid.planning import human_mb, human_seconds

    limit = max_seconds()
    total = sum(p.seconds or 0.0 for p in prices)
    if yes:
        return
    ram = machine_memory_mb()
    too_big = [p for p in prices if ram and p.data_mb and p.data_mb > ram]
    if too_big:
        p = max(too_big, key=lambda p: p.data_mb)
        raise CostRefused(f"{p.chapter} ({p.profile}): its data alone takes about {human_mb(p.data_mb)}, more "
                          f"than this machine's {human_mb(ram)} of memory. Check the sizes (a typo?), or pass "
                          f"--yes to start it anyway")
    if total <= limit:
        return
    worst = max(prices, key=lambda p: p.seconds or 0.0)
    raise CostRefused(f"this run is estimated at {human_seconds(total)}, over the {human_seconds(limit)} limit "
                      f"(${ENV_MAX_HOURS}); largest: {worst.describe()}. Check the parameters (a typo?), run "
                      f"`nearid plan` to measure, or pass --yes to start it anyway")
