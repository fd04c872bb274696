"""Benchmark ``nearid align`` on 100k x 768 float32 embeddings against its floor and the plain way.

One run writes one planted pair (two noisy linear images of the same 64 Laplace factors,
float32 .npy files in a temporary folder) and measures, each in a fresh Python process so
that its peak memory is its own (``os.wait4`` returns the child's ``ru_maxrss``):

* ``cli``    the real command, ``python -m nearid.cli.align A.npy B.npy --json``;
* ``api``    ``nearid.align.compare`` on the memory-mapped files, timed inside the process;
* ``floor``  the arithmetic no implementation can skip: numpy, float32, on the same fit rows,
  ``A'A`` and ``A'B`` (two 768 x 768 cross-products over 50k rows) and one solve;
* ``plain``  what a user would write instead: float64 arrays, scipy ``orthogonal_procrustes``,
  scikit-learn ``LinearRegression``, ``scipy.optimize.linear_sum_assignment``, scikit-learn
  ``FastICA``, CKA in numpy (Kornblith et al. 2019) and with ``cka-pytorch``.

It prints wall times, peak memory, the ratios and whether each target holds (within 3x of the
floor, under 1.5 GB, faster than the plain pipeline), then how far the plain pipeline's
numbers are from ours (and why, where the definitions differ). ``--json OUT`` saves it all.

``--case wide`` measures embeddings as wide as today's language models instead: 20,000 x
4,096 float32 (``--dim 8192`` for wider), 256 planted Laplace sources mixed into every
column plus noise at 0.3 of the signal's standard deviation, on which the 95% variance
rule asks for about 880 components. It runs only the command, once, under
``/usr/bin/time -v`` (its "Maximum resident set size" is the peak memory; ``ru_maxrss``
where that program is missing), and prints the README's table row for it together with
what the command reported: components kept and asked for, whether the cap
(``nearid.align.ICA_MAX_COMPONENTS``) bound, fallbacks, precision and the time per stage.

    python benchmarks/align_benchmark.py [--rows 100000] [--dim 768] [--factors 64]
        [--threads 1] [--repeat 3] [--skip-plain] [--json out.json]
    python benchmarks/align_benchmark.py --case wide [--dim 8192] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
TARGET_FLOOR_RATIO = 3.0
TARGET_PEAK_GB = 1.5
SEED = 0
FIT_FRACTION = 0.5
# the two cases: (rows, width, planted factors, noise relative to the signal's std)
CASES = {"standard": (100_000, 768, 64, 0.1), "wide": (20_000, 4_096, 256, 0.3)}


def related_embeddings(rows: int, dim: int, factors: int, noise: float = 0.1, seed: int = 0):
    """Two float32 (rows, dim) matrices sharing ``factors`` Laplace factors, plus noise."""
    rng = np.random.default_rng(seed)
    Z = rng.laplace(size=(rows, factors)).astype(np.float32)
    A = Z @ rng.normal(size=(factors, dim)).astype(np.float32)
    A += noise * A.std() * rng.standard_normal((rows, dim), dtype=np.float32)
    B = Z @ rng.normal(size=(factors, dim)).astype(np.float32)
    B += noise * B.std() * rng.standard_normal((rows, dim), dtype=np.float32)
    return A, B


def split(n: int, fit_fraction: float = FIT_FRACTION, seed: int = SEED):
    """The fit and held-out rows nearid.align.compare uses (the same seeded permutation)."""
    order = np.random.default_rng(seed).permutation(n)
    n_fit = int(round(fit_fraction * n))
    return order[:n_fit], order[n_fit:]


# --------------------------------------------------------------------------- the plain way
def plain_pipeline(A, B, *, fit_fraction: float = FIT_FRACTION, seed: int = SEED, ica_share: float = 0.95,
                   ica_max_rows: int | None = 20_000, ica_max_iter: int = 200) -> dict:
    """The four Table 1 errors and linear CKA as a user would compute them with scipy/sklearn.

    Same protocol as ``nearid.align.compare`` (same split, same families, the error
    normalised by the 0.99 quantile of pairwise distances of 2000 evenly spaced held-out B
    rows, FastICA on the same seeded subsample of fit rows, components holding ``ica_share``
    of the variance, B's other directions predicted by the permutation map), but the textbook way:
    float64 copies, one library call per step, and
    scikit-learn's own whitening inside FastICA (on the subsample it is fitted on).
    """
    from scipy.linalg import orthogonal_procrustes
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial.distance import pdist
    from sklearn.decomposition import PCA, FastICA
    from sklearn.linear_model import LinearRegression

    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    fit, ev = split(A.shape[0], fit_fraction, seed)
    Af, Bf, Ae, Be = A[fit], B[fit], A[ev], B[ev]
    keep = np.linspace(0, len(ev) - 1, min(2000, len(ev))).astype(int)
    diameter = np.quantile(pdist(Be[keep]), 0.99)
    ma, mb = Af.mean(0), Bf.mean(0)
    Afc, Bfc = Af - ma, Bf - mb

    def err(pred):
        return float(np.linalg.norm(pred - Be, axis=1).mean() / diameter)

    def signed_matching(X, Y):
        """Hungarian on |corr| of centred columns, then a least-squares scale per pair."""
        nx, ny = np.linalg.norm(X, axis=0), np.linalg.norm(Y, axis=0)
        corr = np.abs((X / np.where(nx > 0, nx, 1)).T @ (Y / np.where(ny > 0, ny, 1)))
        r, c = linear_sum_assignment(-corr)
        coef = np.einsum("ij,ij->j", X[:, r], Y[:, c]) / np.maximum(nx[r] ** 2, 1e-300)
        return r, c, coef

    out = {}
    r, c, coef = signed_matching(Afc, Bfc)
    pred = np.tile(mb, (len(ev), 1))
    pred[:, c] += (Ae[:, r] - ma[r]) * coef
    out["permutation"] = err(pred)
    perm_pred = pred

    R, s = orthogonal_procrustes(Afc, Bfc)  # s = sum of singular values of Afc' Bfc
    out["rigid"] = err((s / (Afc ** 2).sum()) * (Ae - ma) @ R + mb)

    out["linear"] = err(LinearRegression().fit(Af, Bf).predict(Ae))

    sub = np.arange(len(fit))
    if ica_max_rows is not None and len(fit) > ica_max_rows:
        sub = np.sort(np.random.default_rng(seed).choice(len(fit), ica_max_rows, replace=False))
    icas = []
    for X in (Af, Bf):
        k = PCA(n_components=ica_share, svd_solver="covariance_eigh").fit(X).n_components_
        k = max(1, min(k, len(sub) // 10))
        icas.append(FastICA(n_components=k, whiten="unit-variance", whiten_solver="eigh", max_iter=ica_max_iter,
                            random_state=seed).fit(X[sub]))
    SA, SB = icas[0].transform(Af), icas[1].transform(Bf)
    sa, sb = SA.mean(0), SB.mean(0)
    r, c, coef = signed_matching(SA - sa, SB - sb)
    SP = np.tile(sb, (len(ev), 1))
    SP[:, c] += (icas[0].transform(Ae)[:, r] - sa[r]) * coef
    # B's directions outside its kept components: the permutation prediction, projected onto them
    rest = perm_pred - icas[1].inverse_transform(icas[1].transform(perm_pred))
    out["ica"] = err(icas[1].inverse_transform(SP) + rest)
    out["ica_efficiency"] = (out["permutation"] - out["ica"]) / (out["permutation"] - out["rigid"])
    out["ica_components"] = [int(ica.n_components) for ica in icas]
    # linear CKA (Kornblith et al. 2019) on the fit rows, as nearid reports it
    num = np.linalg.norm(Afc.T @ Bfc) ** 2
    out["cka"] = float(num / (np.linalg.norm(Afc.T @ Afc) * np.linalg.norm(Bfc.T @ Bfc)))
    return out


def cka_pytorch(A, B, *, fit_fraction: float = FIT_FRACTION, seed: int = SEED, batch_size: int = 1000) -> float:
    """Linear CKA of the fit rows with the ``cka-pytorch`` package (minibatch, unbiased HSIC).

    cka-pytorch hooks layers of two models; here "model A" and "model B" return the two
    halves of a batch of concatenated [A | B] rows, so its hooks see A's and B's rows.
    """
    import torch
    from cka_pytorch import CKACalculator

    class Half(torch.nn.Module):
        def __init__(self, lo: int, hi: int):
            super().__init__()
            self.lo, self.hi = lo, hi
            self.dummy = torch.nn.Parameter(torch.zeros(1), requires_grad=False)  # CKACalculator reads a device

        def forward(self, x):
            return x[:, self.lo:self.hi]

    fit, _ = split(A.shape[0], fit_fraction, seed)
    fit = np.sort(fit)
    X = torch.from_numpy(np.hstack([np.asarray(A[fit], dtype=np.float32), np.asarray(B[fit], dtype=np.float32)]))
    da = A.shape[1]
    m1, m2 = torch.nn.Sequential(Half(0, da)), torch.nn.Sequential(Half(da, X.shape[1]))
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, torch.zeros(len(X))),
                                       batch_size=batch_size, shuffle=False)
    calc = CKACalculator(m1, m2, model1_layers=[Half], model2_layers=[Half], verbose=False,
                         device=torch.device("cpu"))
    return float(calc.calculate_cka_matrix(data, num_epochs=1)[0, 0])


# --------------------------------------------------------------------------- children
def _child(kind: str, a: str, b: str, out: str) -> None:
    """One measurement inside a fresh process; writes a JSON result to ``out``."""
    res: dict = {}
    if kind == "floor":
        A = np.load(a, mmap_mode="r")
        B = np.load(b, mmap_mode="r")
        fit = np.sort(split(A.shape[0])[0])
        t0 = time.perf_counter()
        Af, Bf = A[fit], B[fit]  # the fit rows, as float32 arrays
        t1 = time.perf_counter()
        G = Af.T @ Af
        C = Af.T @ Bf
        np.linalg.solve(G, C)  # the normal equations of the linear family
        t2 = time.perf_counter()
        res = {"gather_seconds": t1 - t0, "arithmetic_seconds": t2 - t1}
    elif kind == "api":
        from nearid.align import ICA_MAX_ITER, ICA_MAX_ROWS, compare

        A = np.load(a, mmap_mode="r")
        B = np.load(b, mmap_mode="r")
        t0 = time.perf_counter()
        r = compare(A, B, ica_max_rows=ICA_MAX_ROWS, ica_max_iter=ICA_MAX_ITER)  # as `nearid align`
        res = {"compute_seconds": time.perf_counter() - t0, "result": r.to_dict(), "dtype": r.dtype,
               "stages": r.timings}
    elif kind == "plain":
        A = np.load(a)
        B = np.load(b)
        t0 = time.perf_counter()
        res = {"result": plain_pipeline(A, B)}
        res["compute_seconds"] = time.perf_counter() - t0
    elif kind == "cka_pytorch":
        torch_threads = os.environ.get("BENCH_TORCH_THREADS")
        if torch_threads:
            import torch

            torch.set_num_threads(int(torch_threads))
        A = np.load(a, mmap_mode="r")
        B = np.load(b, mmap_mode="r")
        t0 = time.perf_counter()
        res = {"cka": cka_pytorch(A, B), "compute_seconds": time.perf_counter() - t0}
    else:
        raise SystemExit(f"unknown child kind {kind!r}")
    Path(out).write_text(json.dumps(res))


def _isolated(cmd: list[str], env: dict | None = None) -> dict:
    """Measure ``cmd`` from a tiny helper process whose only child it is, so ru_maxrss is its own."""
    helper = ("import json, resource, subprocess, sys, time\n"
              "cmd = json.loads(sys.argv[1])\n"
              "t = time.perf_counter()\n"
              "p = subprocess.run(cmd, capture_output=True, text=True)\n"
              "wall = time.perf_counter() - t\n"
              "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
              "print(json.dumps({'rc': p.returncode, 'wall': wall, 'peak_kib': peak, 'out': p.stdout, "
              "'err': p.stderr[-4000:]}))\n")
    done = subprocess.run([sys.executable, "-c", helper, json.dumps(cmd)], capture_output=True, text=True, check=True,
                          env=env)
    rec = json.loads(done.stdout)
    if rec["rc"] != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({rec['rc']}):\n{rec['err']}")
    return {"wall_seconds": rec["wall"], "peak_gb": rec["peak_kib"] * 1024 / 1e9, "stdout": rec["out"]}


def _run_child(kind: str, a: Path, b: Path, tmp: Path, env: dict | None) -> dict:
    out = tmp / f"{kind}.json"
    m = _isolated([sys.executable, str(HERE), "--child", kind, str(a), str(b), str(out)], env)
    m.update(json.loads(out.read_text()))
    return m


def _best(runs: list[dict], key: str) -> dict:
    """The run with the smallest ``key``, with every repeat's value kept beside it."""
    best = dict(min(runs, key=lambda r: r[key]))
    best["repeats"] = {k: [r[k] for r in runs] for k in ("wall_seconds", "peak_gb", key)}
    return best


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "n/a"


def _time_v(cmd: list[str], env: dict | None) -> dict:
    """Run ``cmd`` under ``/usr/bin/time -v``: wall seconds, peak resident memory (GB), stdout.
    Without that program, the same from a helper process (``ru_maxrss``)."""
    time_v = shutil.which("time", path="/usr/bin:/bin")
    if time_v is None:  # pragma: no cover - no GNU time
        rec = _isolated(cmd, env)
        rec["peak_from"] = "ru_maxrss"
        return rec
    t0 = time.perf_counter()
    p = subprocess.run([time_v, "-v", *cmd], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    peak_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", p.stderr).group(1)) for kind in ("User", "System"))
    return {"wall_seconds": wall, "peak_gb": peak_kib * 1024 / 1e9, "cpu_seconds": cpu, "stdout": p.stdout,
            "peak_from": "/usr/bin/time -v"}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover
        pass
    import platform

    return platform.processor() or "unknown CPU"


def run_wide(rows: int, dim: int, factors: int, noise: float, env: dict | None = None) -> dict:
    """The wide case: write the planted pair, run ``nearid align --json`` on it once under
    ``/usr/bin/time -v``, and return the measurement and what the command reported."""
    report: dict = {"case": "wide", "rows": rows, "dim": dim, "factors": factors, "noise": noise,
                    "dtype": "float32", "cpus": os.cpu_count(), "cpu": _cpu_name(), "load_before": _load()}
    A, B = related_embeddings(rows, dim, factors, noise=noise)
    with tempfile.TemporaryDirectory() as tmpdir:
        pa, pb = Path(tmpdir) / "a.npy", Path(tmpdir) / "b.npy"
        np.save(pa, A)
        np.save(pb, B)
        del A, B
        print(f"wide pair: 2 x {rows} x {dim} float32 ({factors} sources, noise {noise}); "
              f"load {report['load_before']}", file=sys.stderr)
        cmd = [sys.executable, "-m", "nearid.cli.align", str(pa), str(pb), "--json"]
        report["command"] = "nearid align A.npy B.npy --json"
        m = _time_v(cmd, env)
    m["result"] = json.loads(m.pop("stdout"))
    report["load_after"] = _load()
    report["cli"] = m
    return report


def format_wide(report: dict) -> str:
    """The wide case in words, and its row for the README's table."""
    r, m = report["cli"]["result"], report["cli"]
    comps, asked, bound = r["ica_components"], r["ica_components_by_rule"], r["ica_cap_bound"]
    stages = ", ".join(f"{k} {v:.0f}" for k, v in (r.get("timings") or {}).items() if k != "done")
    eff = r["ica_efficiency"]
    lines = [f"nearid align, wide case: 2 x {report['rows']:,} x {report['dim']:,} float32, {report['factors']} "
             f"planted sources + noise {report['noise']}; {report['cpus']} CPUs ({report['cpu']}), load average "
             f"{report['load_before']} -> {report['load_after']}",
             f"wall {m['wall_seconds']:.0f} s, CPU (user + system) {m.get('cpu_seconds', float('nan')):.0f} s, "
             f"peak memory {m['peak_gb']:.2f} GB ({m['peak_from']})",
             f"ICA components A {comps[0]}, B {comps[1]}; the 95% rule asked for A {asked[0]}, B {asked[1]}; "
             f"cap {r['ica_max_components']} " + ("bound" if any(bound or ()) else "not reached"),
             "errors: " + ", ".join(f"{f} {r[f]:.3f}" for f in ("permutation", "rigid", "linear", "ica"))
             + (f"; ICA efficiency {100 * eff:.0f}%" if eff is not None else "; ICA efficiency n/a"),
             f"cross-products in {r['dtype']}; FastICA converged: {r['ica_converged']}; "
             f"fallbacks: {r['fallbacks'] or 'none'}",
             f"stages, seconds: {stages}",
             "",
             "README row:",
             f"| `nearid align`, {report['rows']:,} x {report['dim']:,} ({report['factors']} sources + noise; "
             f"ICA capped at {r['ica_max_components']} of {max(asked)} components) | "
             f"{m['wall_seconds'] / 60:.1f} min (CPU {m.get('cpu_seconds', float('nan')) / 60:.1f} min) | "
             f"{m['peak_gb']:.2f} GB |"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES), default="standard",
                    help="standard: 100,000 x 768 against the floor and the plain pipeline; wide: 20,000 x "
                         "4,096 with 256 sources, the command alone under /usr/bin/time -v")
    ap.add_argument("--rows", type=int, default=None, help="rows (default: the case's)")
    ap.add_argument("--dim", type=int, default=None, help="width (default: the case's)")
    ap.add_argument("--factors", type=int, default=None, help="planted factors (default: the case's)")
    ap.add_argument("--noise", type=float, default=None, help="noise / signal std (default: the case's)")
    ap.add_argument("--skip-plain", action="store_true", help="skip the (slow) plain pipeline")
    ap.add_argument("--threads", type=int, default=None,
                    help="BLAS (and torch) threads for every run alike (default: the libraries' defaults)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the CLI, compare() and the floor this many times, interleaved, and keep "
                         "each one's fastest run (a shared machine's load varies)")
    ap.add_argument("--json", metavar="OUT", help="also write every measurement to this JSON file")
    ap.add_argument("--child", nargs=4, metavar=("KIND", "A", "B", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    rows, dim, factors, noise = (given if given is not None else default for given, default in
                                 zip((args.rows, args.dim, args.factors, args.noise), CASES[args.case]))
    args.rows, args.dim, args.factors, args.noise = rows, dim, factors, noise
    env = dict(os.environ)
    if args.threads:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BENCH_TORCH_THREADS"):
            env[var] = str(args.threads)
    if args.case == "wide":
        report = run_wide(rows, dim, factors, noise, env)
        report["blas_threads_env"] = {"all": args.threads} if args.threads else {}
        print(format_wide(report))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2, default=float))
        return 0

    report: dict = {"rows": args.rows, "dim": args.dim, "factors": args.factors, "dtype": "float32",
                    "repeat": args.repeat,
                    "cpus": os.cpu_count(), "load_before": _load(),
                    "blas_threads_env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
                                         if k in os.environ}}
    A, B = related_embeddings(args.rows, args.dim, args.factors, noise=args.noise)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        pa, pb = tmp / "a.npy", tmp / "b.npy"
        np.save(pa, A)
        np.save(pb, B)
        del A, B
        print(f"planted pair: 2 x {args.rows} x {args.dim} float32 in {tmp}; load {report['load_before']}",
              file=sys.stderr)
        env = dict(os.environ)
        if args.threads:
            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BENCH_TORCH_THREADS"):
                env[var] = str(args.threads)
            report["blas_threads_env"] = {"all": args.threads}
        repeats: dict[str, list] = {"cli": [], "floor": [], "api": []}
        for rep in range(args.repeat):
            print(f"cli ({rep + 1}/{args.repeat}) ...", file=sys.stderr)
            m = _isolated([sys.executable, "-m", "nearid.cli.align", str(pa), str(pb), "--json"], env)
            m["result"] = json.loads(m.pop("stdout"))
            repeats["cli"].append(m)
            for kind in ("floor", "api"):
                print(f"{kind} ({rep + 1}/{args.repeat}) ...", file=sys.stderr)
                m = _run_child(kind, pa, pb, tmp, env)
                m.pop("stdout", None)
                repeats[kind].append(m)
        runs = {"cli": _best(repeats["cli"], "wall_seconds"), "floor": _best(repeats["floor"], "arithmetic_seconds"),
                "api": _best(repeats["api"], "compute_seconds")}
        for kind in () if args.skip_plain else ("plain", "cka_pytorch"):
            print(f"{kind} ...", file=sys.stderr)
            runs[kind] = _run_child(kind, pa, pb, tmp, env)
            runs[kind].pop("stdout", None)
    report["load_after"] = _load()
    report["runs"] = runs
    report["summary"] = _summarise(runs)
    print(_format(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=float))
    return 0


def _summarise(runs: dict) -> dict:
    cli, floor, api = runs["cli"], runs["floor"], runs["api"]
    s = {
        "floor_arithmetic_seconds": floor["arithmetic_seconds"],
        "floor_process_seconds": floor["wall_seconds"],
        "api_compute_seconds": api["compute_seconds"],
        "cli_wall_seconds": cli["wall_seconds"],
        "cli_peak_gb": cli["peak_gb"],
        "ratio_api_to_floor_arithmetic": api["compute_seconds"] / floor["arithmetic_seconds"],
        "ratio_cli_to_floor_process": cli["wall_seconds"] / floor["wall_seconds"],
    }
    s["within_3x_of_floor"] = s["ratio_api_to_floor_arithmetic"] <= TARGET_FLOOR_RATIO
    s["under_1_5_gb"] = cli["peak_gb"] < TARGET_PEAK_GB
    if "plain" in runs:
        plain = runs["plain"]
        s["plain_wall_seconds"] = plain["wall_seconds"]
        s["plain_peak_gb"] = plain["peak_gb"]
        s["ratio_plain_to_cli"] = plain["wall_seconds"] / cli["wall_seconds"]
        s["faster_than_plain"] = cli["wall_seconds"] < plain["wall_seconds"]
        ours, theirs = cli["result"], plain["result"]
        s["agreement"] = {k: abs(ours[k] - theirs[k]) for k in ("permutation", "rigid", "linear", "ica", "cka",
                                                                "ica_efficiency")}
        s["ica_components"] = {"nearid": ours["ica_components"], "plain": theirs["ica_components"]}
        s["cka_pytorch"] = runs["cka_pytorch"]["cka"]
        s["cka_pytorch_seconds"] = runs["cka_pytorch"]["compute_seconds"]
        s["cka_pytorch_minus_ours"] = runs["cka_pytorch"]["cka"] - ours["cka"]
    return s


def _format(report: dict) -> str:
    r, s = report["runs"], report["summary"]
    threads = report["blas_threads_env"].get("all", "library defaults")
    lines = [f"nearid align benchmark: 2 x {report['rows']} x {report['dim']} float32, {report['cpus']} CPUs, "
             f"BLAS threads: {threads}, load average {report['load_before']} -> {report['load_after']}",
             f"(CLI, compare() and floor: fastest of {report['repeat']} interleaved runs)" if report["repeat"] > 1
             else "(one run each)",
             "", f"{'run':34s} {'wall s':>8s} {'peak GB':>8s}",
             f"{'nearid align (CLI, whole process)':34s} {r['cli']['wall_seconds']:8.1f} {r['cli']['peak_gb']:8.2f}",
             f"{'  compare() alone (in process)':34s} {r['api']['compute_seconds']:8.1f} {r['api']['peak_gb']:8.2f}",
             f"{'floor (numpy, whole process)':34s} {r['floor']['wall_seconds']:8.1f} {r['floor']['peak_gb']:8.2f}",
             f"{'  A.T@A + A.T@B + solve alone':34s} {r['floor']['arithmetic_seconds']:8.1f}"]
    if "plain" in r:
        lines.append(f"{'plain scipy/sklearn (whole process)':34s} {r['plain']['wall_seconds']:8.1f} "
                     f"{r['plain']['peak_gb']:8.2f}")
        lines.append(f"{'  its four errors + CKA alone':34s} {r['plain']['compute_seconds']:8.1f}")
        lines.append(f"{'cka-pytorch (whole process)':34s} {r['cka_pytorch']['wall_seconds']:8.1f} "
                     f"{r['cka_pytorch']['peak_gb']:8.2f}")
        lines.append(f"{'  its CKA alone':34s} {r['cka_pytorch']['compute_seconds']:8.1f}")
    stages = ", ".join(f"{k} {v:.1f}" for k, v in r["api"]["stages"].items() if k != "done")
    lines.append(f"compare() stages, seconds: {stages}")
    yes = {True: "holds", False: "does NOT hold"}
    lines += ["",
              f"compare() / floor arithmetic   = {s['ratio_api_to_floor_arithmetic']:.2f}x  (target <= "
              f"{TARGET_FLOOR_RATIO:.0f}x: {yes[s['within_3x_of_floor']]})",
              f"CLI process / floor process    = {s['ratio_cli_to_floor_process']:.2f}x",
              f"CLI peak memory                = {s['cli_peak_gb']:.2f} GB  (target < {TARGET_PEAK_GB} GB: "
              f"{yes[s['under_1_5_gb']]})"]
    if "plain" in r:
        lines.append(f"plain pipeline / CLI           = {s['ratio_plain_to_cli']:.2f}x  (target > 1: "
                     f"{yes[s['faster_than_plain']]})")
        lines += ["", "agreement with the plain pipeline (|nearid - plain|):"]
        lines += [f"  {k:15s} {v:.2e}" for k, v in s["agreement"].items()]
        lines.append(f"  ICA components nearid {s['ica_components']['nearid']}, plain {s['ica_components']['plain']}")
        lines.append(f"  cka-pytorch {s['cka_pytorch']:.4f} vs ours {r['cli']['result']['cka']:.4f} "
                     f"(difference {s['cka_pytorch_minus_ours']:+.2e}): cka-pytorch averages unbiased HSIC "
                     "over mini-batches (Nguyen et al. 2021); ours is the full-data linear CKA of Kornblith "
                     "et al. 2019, which the plain numpy line reproduces")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
