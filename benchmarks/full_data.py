"""Time and peak memory of making the ``full`` profile's generated data sets, and of reusing them.

Chapter 05's four procedural disentanglement data sets (``n_train + n_eval`` images of
``image_size`` pixels, ``supersample``-fold) and chapter 06's simulated cell-painting screen
take their sizes from the profiles (``nearid.book.profiles``). Each is made into a fresh
cache folder (a temporary one unless ``--cache-dir``) by a fresh Python process, so that
its numbers are its own:

* ``make``  the first call (``make_dataset(..., cache=True)`` / ``simulate(cache=True)``):
  it renders the file, with ``--workers`` processes (default: the library's choice);
* ``reuse`` a second process making the same call: it finds the file and memory-maps it,
  then reads every byte once (``--touch``, the default) as a training epoch would.

Peak memory is measured three ways: the process's own ``ru_maxrss`` (from ``os.wait4``),
the largest worker's ``ru_maxrss`` (``RUSAGE_CHILDREN`` inside it), and the largest sum of
the resident sets of the process and its workers, sampled every 0.1 s (psutil). Resident
pages of the memory-mapped file count in the reuse row: they are the page cache, which the
kernel takes back when memory is short.

    python benchmarks/full_data.py [--profile full] [--only shapes3d mpi3d falcor3d isaac3d cells]
        [--fraction 1.0] [--workers N] [--cache-dir DIR] [--keep] [--no-touch] [--json out.json]

``--fraction 0.1`` makes a tenth of each data set (fewer images; for the screen, fewer
cells per well) to try the script quickly.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from nearid.kernels import cpu_model

DATASETS = ("shapes3d", "mpi3d", "falcor3d", "isaac3d")


def _spec(name: str, profile: str, fraction: float) -> dict:
    """The call to measure: the chapter's parameters in ``profile``, scaled by ``fraction``."""
    from nearid.book.profiles import ch05_disentanglement as p05
    from nearid.book.profiles import ch06_cell_microscopy as p06

    if name in DATASETS:
        P = p05.PROFILES[profile]
        n = max(1, round((P["n_train"] + P["n_eval"]) * fraction))
        return {"kind": "procedural", "name": name, "n": n, "image_size": P["image_size"],
                "supersample": P["supersample"], "seed": P["seed"]}
    if name == "cells":
        from nearid.experiments.ch06_cell_microscopy import SIMULATOR_PARAMS

        P = p06.PROFILES[profile]
        sim = {k: P[k] for k in SIMULATOR_PARAMS}
        sim["cells_per_well"] = max(1, round(sim["cells_per_well"] * fraction))
        return {"kind": "cells", "name": name, "simulator": sim}
    raise SystemExit(f"unknown data set {name!r}; valid: {', '.join((*DATASETS, 'cells'))}")


def _child(spec: dict, workers: int | None, touch: bool) -> None:
    """In a fresh process: make (or reuse) one data set and print one JSON line."""
    import numpy as np

    import nearid  # noqa: F401  (the kernel settings, before torch)

    start, cpu0 = time.perf_counter(), os.times()
    if spec["kind"] == "procedural":
        from nearid.data.procedural import make_dataset

        X = make_dataset(spec["name"], spec["n"], spec["image_size"], spec["seed"], spec["supersample"],
                         cache=True, workers=workers)[0]
    else:
        from nearid.data.cell_simulator import CellPaintingSimulator

        X = CellPaintingSimulator(**spec["simulator"]).simulate(cache=True, workers=workers).images
    made = time.perf_counter() - start
    checksum = 0.0
    if touch:  # read every byte once, as an epoch of training would
        step = max(1, (8 << 20) // max(1, X[0].nbytes))
        for i in range(0, len(X), step):
            checksum += float(X[i:i + step].sum(dtype=np.float64))
    cpu1 = os.times()
    print(json.dumps({
        "seconds": made, "seconds_with_touch": time.perf_counter() - start,
        "cpu_seconds": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
        + (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system),
        "shape": list(X.shape), "dtype": str(X.dtype), "gigabytes": X.nbytes / 1e9,
        "memmap": isinstance(X, np.memmap), "writeable": bool(X.flags.writeable),
        "workers_max_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "checksum": checksum}))


def _measure(spec: dict, cache_dir: Path, workers: int | None, touch: bool) -> dict:
    """Run :func:`_child` in a fresh process; add its peak memory measured from outside."""
    import psutil

    env = dict(os.environ, NEARID_DATA_CACHE=str(cache_dir))
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    if not touch:
        cmd.append("--no-touch")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    peak, done = [0], threading.Event()

    def sample():
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            return
        while not done.is_set():
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            peak[0] = max(peak[0], total)
            done.wait(0.1)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    thread.join()
    out, err = proc.stdout.read(), proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{spec['name']} failed:\n{err[-4000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    result["main_max_rss_mb"] = usage.ru_maxrss / 1024
    result["tree_peak_rss_mb"] = peak[0] / 2**20
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="full", choices=("smoke", "quick", "full"))
    ap.add_argument("--only", nargs="+", default=[*DATASETS, "cells"])
    ap.add_argument("--fraction", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--cache-dir", default=None, help="default: a temporary folder, removed at the end")
    ap.add_argument("--keep", action="store_true", help="keep the temporary cache folder")
    ap.add_argument("--no-touch", dest="touch", action="store_false")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(json.loads(args.child), args.workers, args.touch)
        return 0
    cache_dir = Path(args.cache_dir) if args.cache_dir else Path(tempfile.mkdtemp(prefix="nearid-full-data-"))
    rows = []
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; profile {args.profile}, fraction {args.fraction}; "
          f"cache {cache_dir}", flush=True)
    header = (f"{'data set':10s} {'shape':>22s} {'GB':>6s} {'step':>5s} {'wall s':>7s} {'cpu s':>7s} "
              f"{'RSS main MB':>11s} {'RSS worker MB':>13s} {'RSS total MB':>12s}")
    print(header)
    try:
        for name in args.only:
            spec = _spec(name, args.profile, args.fraction)
            for step in ("make", "reuse"):
                r = _measure(spec, cache_dir, args.workers, args.touch if step == "reuse" else False)
                r.update(name=name, step=step, spec=spec)
                rows.append(r)
                print(f"{name:10s} {str(tuple(r['shape'])):>22s} {r['gigabytes']:6.2f} {step:>5s} "
                      f"{r['seconds_with_touch']:7.1f} {r['cpu_seconds']:7.1f} {r['main_max_rss_mb']:11.0f} "
                      f"{r['workers_max_rss_mb']:13.0f} {r['tree_peak_rss_mb']:12.0f}", flush=True)
    finally:
        if not args.cache_dir and not args.keep:
            shutil.rmtree(cache_dir, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_model(), "cores": os.cpu_count(),
                                               "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
