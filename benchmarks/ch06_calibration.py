"""Calibrate chapter 06's simulated screen on Base AUROC alone (issue 35, item 3).

For each effect scale of :data:`nearid.experiments.ch06_cell_microscopy.CALIBRATION_GRID` and
each pilot seed of ``CALIBRATION_SEEDS`` (which no replicate of the chapter uses), a pilot
screen and a pilot MAE at the chosen profile's shapes; only the Base feature set (the raw well
embeddings) is scored, with the chapter's cross-batch LightGBM. The chosen scale is the one
whose Base AUROC (mean over genes and pilots) lies nearest the paper's mean Base AUROC; the
profile's ``effect_scale`` is then set by hand to it, and this script's table is kept in
``benchmarks/ch06_calibration.md``.

    python benchmarks/ch06_calibration.py [--profile quick] [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import os
import time

# One thread, as the book runs a chapter (nearid.kernels.THREAD_VARS): a sum split over
# threads comes out in another order, and two OpenBLAS threads spin when the cores are busy.
for _var in ("NEARID_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import nearid  # noqa: E402  (after the thread counts; it pins the CPU kernels, nearid.kernels)
from nearid.book.profiles import resolve  # noqa: E402
from nearid.experiments import ch06_cell_microscopy as ch06  # noqa: E402
from nearid.kernels import cpu_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--markdown", help="write the table as Markdown here")
    args = ap.parse_args()
    P = resolve("06_cell_microscopy", args.profile, {})
    nearid.setup(P.seed)
    start = time.perf_counter()
    chosen, table = ch06.calibrate_effect_scale(P, executor=P.executor)
    seconds = time.perf_counter() - start
    low, mean, high = ch06.paper_base_auroc()
    seeds = ", ".join(map(str, ch06.CALIBRATION_SEEDS))
    lines = [f"Profile {args.profile}; pilot seeds {seeds}; {cpu_model()}, one thread on {os.cpu_count()} cores; "
             f"{seconds:.0f} s.", "",
             f"Paper's Base AUROC (Table 3): {low:.3f} to {high:.3f} over genes, mean {mean:.3f}.", "",
             table.to_markdown(index=False, floatfmt=".3f"), "",
             f"Chosen effect scale: **{chosen:g}** (mean pilot Base AUROC nearest {mean:.3f})."]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
