"""Time and peak memory of each ``nearid align`` measure at one size, beside peer libraries.

One run writes one planted float32 pair (``align_benchmark.related_embeddings``: two noisy
linear images of the same Laplace factors) as .npy files, then for each measure runs
``python -m nearid.cli.align A.npy B.npy --families none --measures M --json --no-progress
--threads T`` in a fresh process and records the whole process: wall seconds and peak
resident memory (``os.wait4``'s ``ru_maxrss``; file pages of the memory-mapped inputs that
a process touches count too), the value, the rows it used and the command's own "seconds".

With ``--peers``, each measure a peer library has is computed again in a fresh process
under the peer interpreter, on the same rows nearid uses: the fit rows of the seeded split
(``align_benchmark.split``), and for the n x n measures (rbf_cka, rsa) the same seeded
subsample of at most 4,000 fit rows; the inputs are loaded memory-mapped. cka gets two:
cka-pytorch (minibatch, as ``align_benchmark.cka_pytorch`` runs it) and a five-line numpy
float32 linear CKA, the baseline. Where the peer's definition differs from nearid's the
notes say how (then the values need not agree); where it agrees, agreement to rounding
shows that both saw the same rows. A peer that runs past ``--peer-timeout`` is killed and
reported as "did not finish in N s"; one that raises MemoryError or is killed is reported
as such. Children get ``--threads`` BLAS threads (OMP, MKL, OpenBLAS, NEARID, torch).

The peers (repsim, cka-pytorch, rsatoolbox, scipy's ``spatial.procrustes``) are not
dependencies of nearid: they live in a separate environment (see ``align_peers.py``)::

    python benchmarks/align_scale.py --rows 100000 --dim 4096 --peers   # in that environment

nearid's command runs under this checkout's ``.venv/bin/python`` (else this interpreter),
with ``lib/`` first on its path. ``--json OUT`` saves the table and every measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BASE_ENV = dict(os.environ)  # before nearid (imported for cpu_model) pins its kernels in os.environ
HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import align_benchmark as ab  # noqa: E402  (its related_embeddings, split and cka_pytorch)

MEASURES = ("cka", "debiased_cka", "minibatch_cka", "rbf_cka", "cca", "svcca", "pwcca", "rsa", "mutual_knn",
            "procrustes", "bures")
PAIRWISE = ("rbf_cka", "rsa", "mutual_knn")  # n x n: a seeded subsample of the fit rows
MAX_ROWS, SEED, BATCH = 4_000, 0, 256  # nearid's defaults: measures.MAX_ROWS, --seed, batch_size
PEERS = {  # measure -> [(peer kind, note on its definition; "" = nearid's definition)]
    "cka": [("cka-pytorch", "minibatches of 1,000 rows, unbiased HSIC (Nguyen et al. 2021): not full-data CKA"),
            ("numpy float32", "")],
    "debiased_cka": [("repsim linear song", "unbiased HSIC(K,L) over biased self-HSICs: a mixed ratio, n x n")],
    "minibatch_cka": [("cka-pytorch", "")],  # fed nearid's own batches (float64): same definition
    "rbf_cka": [("repsim rbf gretton", "")],
    "cca": [("repsim cca pillai", "in-sample on the fit rows; nearid scores on the held-out rows")],
    "svcca": [("repsim svcca pillai", "in-sample, and no 99% truncation; nearid scores on held-out rows")],
    "pwcca": [("repsim pwcca", "in-sample, mean of both directions; nearid: A's weights, held-out rows")],
    "rsa": [("rsatoolbox", "")],  # euclidean RDM (squared / p: same ranks), Spearman
    "procrustes": [("scipy.spatial.procrustes", "")],  # arccos(sqrt(1 - disparity))
    "bures": [("scipy.spatial.procrustes", "")],  # sqrt(2 - 2 sqrt(1 - disparity)): the same fidelity
}
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NEARID_NUM_THREADS")


def peer_rows(n: int, pairwise: bool) -> np.ndarray:
    """The rows nearid gives a measure (intervals.evaluate_measures): the sorted fit rows, and
    for an n x n one the seeded choice of at most MAX_ROWS of them, sorted."""
    fit = np.sort(ab.split(n)[0])
    if pairwise and fit.size > MAX_ROWS:
        fit = np.sort(np.random.default_rng(SEED).choice(fit, MAX_ROWS, replace=False))
    return fit


def _peer_value(measure: str, kind: str, A, B, threads: int) -> float:
    """One peer's value, computed in this (child) process."""
    if kind == "cka-pytorch":
        import torch

        torch.set_num_threads(threads)
    if measure == "cka" and kind == "cka-pytorch":
        return ab.cka_pytorch(A, B)
    idx = peer_rows(A.shape[0], measure in PAIRWISE)
    if kind == "numpy float32":  # linear CKA (Kornblith et al. 2019), the way anyone would write it
        X, Y = np.asarray(A[idx], np.float32), np.asarray(B[idx], np.float32)
        X, Y = X - X.mean(0), Y - Y.mean(0)
        return float(np.linalg.norm(X.T @ Y) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y)))
    X, Y = np.asarray(A[idx], np.float64), np.asarray(B[idx], np.float64)
    if kind == "cka-pytorch":  # minibatch_cka: nearid's batches, one epoch, float64
        from cka_pytorch import CKACalculator
        from torch.utils.data import DataLoader, TensorDataset

        torch.set_default_dtype(torch.float64)
        order = np.random.default_rng(SEED).permutation(len(X))
        batches = [np.sort(order[i * BATCH:(i + 1) * BATCH]).tolist() for i in range(len(X) // BATCH)]
        nets = [torch.nn.Sequential(torch.nn.Embedding.from_pretrained(torch.from_numpy(Z))) for Z in (X, Y)]
        r = torch.arange(len(X))
        loader = DataLoader(TensorDataset(r, r), batch_sampler=batches)
        calc = CKACalculator(nets[0], nets[1], [torch.nn.Embedding], verbose=False, device=torch.device("cpu"))
        return float(calc.calculate_cka_matrix(loader, num_epochs=1)[0, 0])
    if kind.startswith("repsim"):
        import repsim

        fn, *opts = kind.split()[1:]
        return float(getattr(repsim, "cka" if fn in ("linear", "rbf") else fn)(
            [X, Y], *([fn, *opts] if fn in ("linear", "rbf") else opts))[0, 1])
    if kind == "rsatoolbox":
        from rsatoolbox.data import Dataset
        from rsatoolbox.rdm import calc_rdm, compare

        rdms = [calc_rdm(Dataset(Z), method="euclidean") for Z in (X, Y)]
        return float(compare(rdms[0], rdms[1], method="spearman")[0, 0])
    from scipy.spatial import procrustes

    fidelity = float(np.sqrt(max(1.0 - procrustes(X, Y)[2], 0.0)))
    return float(np.arccos(min(fidelity, 1.0))) if measure == "procrustes" else float(np.sqrt(2 - 2 * fidelity))


def _child(measure: str, kind: str, a: str, b: str, out: str, threads: str) -> None:
    A, B = np.load(a, mmap_mode="r"), np.load(b, mmap_mode="r")
    t0 = time.perf_counter()
    try:
        res = {"value": _peer_value(measure, kind, A, B, int(threads))}
    except MemoryError as exc:
        res = {"error": f"MemoryError {exc}".strip()}
    except Exception as exc:  # noqa: BLE001  (a peer that cannot run is reported, not fatal)
        res = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    res["seconds"] = time.perf_counter() - t0
    Path(out).write_text(json.dumps(res))


def run_child(cmd: list[str], env: dict, log: Path, timeout: float | None = None) -> dict:
    """Run ``cmd`` in a fresh process: wall seconds, peak GB (ru_maxrss), exit status, output."""
    with open(log, "w") as out, open(log.with_suffix(".err"), "w") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        timed_out = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG if timeout else 0)
            if pid:
                break
            if time.perf_counter() - t0 > timeout:
                p.kill()  # our own child, by its pid
                timed_out = True
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.01)
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return {"wall_seconds": wall, "peak_gb": ru.ru_maxrss * 1024 / 1e9, "rc": p.returncode, "timed_out": timed_out,
            "stdout": log.read_text(), "stderr": log.with_suffix(".err").read_text()[-2000:]}


def _failure(m: dict, timeout: float | None = None) -> str | None:
    if m["timed_out"]:
        return f"did not finish in {timeout:g} s (killed)"
    if m["rc"] < 0:
        return f"killed by signal {-m['rc']}" + (" (out of memory?)" if m["rc"] == -9 else "")
    if m["rc"]:
        return f"exit {m['rc']}: {(m['stderr'].strip().splitlines() or [''])[-1][:200]}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--factors", type=int, default=64)
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--measures", default="all", help="all or a comma-separated list of " + ",".join(MEASURES))
    ap.add_argument("--threads", type=int, default=2, help="BLAS threads of every child (default 2)")
    ap.add_argument("--peers", action="store_true", help="also run the peer libraries where they have the measure")
    ap.add_argument("--peer-measures", default="all",
                    help="the measures whose peers run (all, or a list: skip a peer known to need n x n memory)")
    ap.add_argument("--peer-python", default=sys.executable, help="the interpreter holding the peers (default: this one)")
    ap.add_argument("--peer-timeout", type=float, default=600, help="kill a peer after this many seconds")
    ap.add_argument("--json", metavar="OUT", help="also save the table and every measurement here")
    ap.add_argument("--keep", metavar="DIR", help="write the .npy pair and the children's output here, and keep them")
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    ap.add_argument("--write", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    if args.write:
        rows, dim, factors, noise, folder = args.write
        A, B = ab.related_embeddings(int(rows), int(dim), int(factors), noise=float(noise))
        np.save(Path(folder) / "a.npy", A)
        np.save(Path(folder) / "b.npy", B)
        return 0
    measures = MEASURES if args.measures == "all" else tuple(m.strip() for m in args.measures.split(","))
    bad = [m for m in measures if m not in MEASURES]
    if bad:
        ap.error(f"unknown measure {', '.join(bad)}; valid: {', '.join(MEASURES)}")
    peer_measures = set(args.peer_measures.split(","))
    env = dict(BASE_ENV, **{v: str(args.threads) for v in THREAD_VARS})
    nearid_env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "lib"), env.get("PYTHONPATH")])))
    venv = ROOT / ".venv" / "bin" / "python"
    nearid_python = str(venv) if venv.exists() else sys.executable
    peers = args.peers and Path(args.peer_python).exists()
    if args.peers and not peers:
        print(f"peer interpreter {args.peer_python} not found: no peers run", file=sys.stderr)
    sys.path.insert(0, str(ROOT / "lib"))
    from nearid.kernels import cpu_model

    report = {"date": time.strftime("%Y-%m-%d %H:%M"), "cpu": cpu_model(), "cpus": os.cpu_count(),
              "threads": args.threads, "rows": args.rows, "dim": args.dim, "factors": args.factors,
              "noise": args.noise, "load_before": os.getloadavg()[0], "nearid_python": nearid_python,
              "peer_python": args.peer_python if peers else None, "results": []}
    tmp = None if args.keep else tempfile.TemporaryDirectory()
    folder = Path(args.keep or tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        pa, pb = folder / "a.npy", folder / "b.npy"
        # written by a child: on Linux a child's peak RSS (ru_maxrss) starts from its parent's
        # high-water mark, so a parent that had held the pair would set a floor under every peak
        subprocess.run([sys.executable, str(HERE), "--write", str(args.rows), str(args.dim), str(args.factors),
                        str(args.noise), str(folder)], check=True, env=BASE_ENV)
        print(f"planted pair 2 x {args.rows} x {args.dim} float32 in {folder}", file=sys.stderr)
        for m in measures:
            cmd = [nearid_python, "-m", "nearid.cli.align", str(pa), str(pb), "--families", "none", "--measures", m,
                   "--json", "--no-progress", "--threads", str(args.threads)]
            r = run_child(cmd, nearid_env, folder / f"nearid_{m}.out")
            rec = {"measure": m, "nearid": {k: r[k] for k in ("wall_seconds", "peak_gb", "rc")}, "peers": []}
            if _failure(r):
                rec["nearid"]["error"] = _failure(r)
            else:
                out = json.loads(r["stdout"])
                rec["nearid"].update(value=out.get(m), rows=out["measure_rows"].get(m), seconds=out["seconds"],
                                     threads=out["threads"], dtype=out["dtype"])
            took = rec["nearid"].get("error") or f"{r['wall_seconds']:.1f} s"
            print(f"nearid {m}: {took}", file=sys.stderr)
            for kind, note in PEERS.get(m, []) if peers and (args.peer_measures == "all" or m in peer_measures) else []:
                res = folder / f"peer_{m}_{kind.replace(' ', '_')}.json"
                res.unlink(missing_ok=True)
                cmd = [args.peer_python, str(HERE), "--child", m, kind, str(pa), str(pb), str(res), str(args.threads)]
                p = run_child(cmd, env, res.with_suffix(".out"), timeout=args.peer_timeout)
                got = json.loads(res.read_text()) if res.exists() else {}
                prec = {"peer": kind, "note": note, "wall_seconds": p["wall_seconds"], "peak_gb": p["peak_gb"],
                        "value": got.get("value"), "seconds": got.get("seconds"),
                        "error": _failure(p, args.peer_timeout) or got.get("error")}
                rec["peers"].append(prec)
                took = prec["error"] or f"{p['wall_seconds']:.1f} s"
                print(f"  peer {kind}: {took}", file=sys.stderr)
            report["results"].append(rec)
    finally:
        if tmp is not None:
            tmp.cleanup()
    report["load_after"] = os.getloadavg()[0]
    report["table"] = format_report(report)
    print(report["table"])
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


def _v(x) -> str:
    return "n/a" if x is None else f"{x:.6f}"


def format_report(rep: dict) -> str:
    lines = [f"nearid align, one measure per process: 2 x {rep['rows']:,} x {rep['dim']:,} float32 "
             f"({rep['factors']} factors, noise {rep['noise']}); {rep['date']}; {rep['cpu']}, {rep['cpus']} CPUs, "
             f"{rep['threads']} BLAS threads; load average {rep['load_before']:.2f} -> {rep['load_after']:.2f}", "",
             "| measure | rows used | nearid wall s | nearid peak GB | value | peer | peer wall s | peer peak GB "
             "| peer value |", "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    notes = []
    for rec in rep["results"]:
        n = rec["nearid"]
        head = (f"| {rec['measure']} | {n.get('rows', '-')} | {n['wall_seconds']:.1f} | {n['peak_gb']:.2f} | "
                + (_v(n.get("value")) if "error" not in n else f"failed: {n['error']}") + " |")
        for p in rec["peers"] or [None]:
            if p is None:
                lines.append(head + " none | | | |")
                continue
            pv = f"{p['error']}" if p["error"] else _v(p["value"])
            lines.append(head + f" {p['peer']} | {p['wall_seconds']:.1f} | {p['peak_gb']:.2f} | {pv} |")
            if p["value"] is not None and n.get("value") is not None:
                diff = abs(p["value"] - n["value"])
                notes.append(f"* {rec['measure']} vs {p['peer']}: |diff| {diff:.1e}; "
                             + (f"definitions differ: {p['note']}" if p["note"] else "same definition, same rows"))
    return "\n".join(lines + ([""] + notes if notes else []))


if __name__ == "__main__":
    raise SystemExit(main())
