"""Benchmark ``nearid align`` on 100k x 768 float32 embeddings: wall time and peak memory.

The two files are random but related the way two models' embeddings are: both are noisy
linear images of the same non-Gaussian latent factors, B through a different mixing than A.
The script writes them to a temporary folder, runs the real command in a fresh process
(``python -m nearid.cli.align A B --json``) and reads the child's peak resident memory from
the operating system (``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``).

    python benchmarks/align_benchmark.py [--rows 100000] [--dim 768] [--factors 64]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def related_embeddings(rows: int, dim: int, factors: int, noise: float = 0.1, seed: int = 0):
    """Two float32 (rows, dim) matrices sharing ``factors`` Laplace factors, plus noise."""
    rng = np.random.default_rng(seed)
    Z = rng.laplace(size=(rows, factors)).astype(np.float32)
    A = Z @ rng.normal(size=(factors, dim)).astype(np.float32)
    A += noise * A.std() * rng.standard_normal((rows, dim), dtype=np.float32)
    B = Z @ rng.normal(size=(factors, dim)).astype(np.float32)
    B += noise * B.std() * rng.standard_normal((rows, dim), dtype=np.float32)
    return A, B


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--factors", type=int, default=64)
    ap.add_argument("--limit-seconds", type=float, default=60.0)
    ap.add_argument("--limit-gb", type=float, default=4.0)
    args = ap.parse_args(argv)
    A, B = related_embeddings(args.rows, args.dim, args.factors)
    with tempfile.TemporaryDirectory() as tmp:
        pa, pb = Path(tmp) / "a.npy", Path(tmp) / "b.npy"
        np.save(pa, A)
        np.save(pb, B)
        del A, B
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "nearid.cli.align", str(pa), str(pb), "--json"],
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e9  # KiB on Linux
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return proc.returncode
    report = {"rows": args.rows, "dim": args.dim, "dtype": "float32", "wall_seconds": round(wall, 1),
              "peak_memory_gb": round(peak_gb, 2), "result": json.loads(proc.stdout),
              "within_limits": wall < args.limit_seconds and peak_gb < args.limit_gb}
    print(json.dumps(report, indent=2))
    return 0 if report["within_limits"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
