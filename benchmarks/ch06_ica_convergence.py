"""Why FastICA does not converge on chapter 06's control wells at quick (issue 35).

For replicates of the chapter's MAE (trained as the chapter trains them), whiten the control
wells onto k leading components for several k and fit FastICA (cap 20,000 iterations) with
each of scikit-learn's contrasts. Prints, per k, the median and smallest |excess kurtosis| of
the whitened components (its standard error for Gaussian data is sqrt(24 / n)) and whether
each contrast converged. Record: ``benchmarks/ch06_ica_convergence.md``.

    python benchmarks/ch06_ica_convergence.py [--profile quick] [--replicates 1 2]
"""

from __future__ import annotations

import argparse
import os
import warnings

# One thread, as the book runs a chapter (see benchmarks/ch06_calibration.py).
for _var in ("NEARID_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from scipy.stats import kurtosis  # noqa: E402

import nearid  # noqa: E402
from nearid.book.profiles import resolve  # noqa: E402
from nearid.experiments import ch06_cell_microscopy as ch06  # noqa: E402
from nearid.ica import Whitener, WhitenedICA  # noqa: E402
from nearid.tasks import run_tasks  # noqa: E402

GRID = (8, 12, 16, 20, 24, 32)
CONTRASTS = ("logcosh", "exp", "cube")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--replicates", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    P = resolve("06_cell_microscopy", args.profile, {})
    nearid.setup(P.seed)
    tasks = [t for t in ch06.plan(P) if t.kwargs["mae"]["epochs"] == P.epochs]
    print("| replicate | k | median abs. excess kurtosis | smallest | " + " | ".join(CONTRASTS) + " |")
    print("| ---: | ---: | ---: | ---: | " + " | ".join("---" for _ in CONTRASTS) + " |")
    for r in args.replicates:
        res = run_tasks([tasks[r]], executor="inprocess", log=None)[0]
        X = np.asarray(res["embeddings"], dtype=np.float64)
        ctrl = res["wells"]["is_control"].astype(bool).to_numpy()
        for k in GRID:
            Z = Whitener(k, P.rows_per_component).fit(X[ctrl]).transform(X[ctrl])
            ku = np.abs(kurtosis(Z, axis=0))
            cells = []
            for fun in CONTRASTS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ica = WhitenedICA("all", None, max_iter=20_000, fun=fun, random_state=P.seed).fit(Z)
                cells.append(f"{ica.n_iter_}" if ica.converged_ else "not (20,000)")
            print(f"| {r} | {Z.shape[1]} | {np.median(ku):.2f} | {ku.min():.3f} | " + " | ".join(cells) + " |",
                  flush=True)
    print(f"\n{int(ctrl.sum())} control wells: the standard error of a Gaussian's excess kurtosis is "
          f"{np.sqrt(24 / ctrl.sum()):.2f}.")


if __name__ == "__main__":
    main()
