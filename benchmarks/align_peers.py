"""Check nearid's eleven alignment measures against the paper formulas and peer libraries.

For each measure of :mod:`nearid.align.measures` on one planted pair (2,000 rows, float64,
seed 0: X = 64 Laplace factors mixed by a random matrix; Y = 3 X Q + small noise for a random
rotation Q, and Y an independent draw) it prints a markdown table: nearid's value, an
independent float64 formula written here from the measure's paper (plain numpy/scipy, mostly
the n x n form where nearid uses d x d products; it never calls nearid), and a peer
library's value where one has the measure, with the absolute differences and, where the
peer's definition is not nearid's, how it differs. The n x n measures run on every row
(``max_rows=None``), so all sides see the same rows; the fitted ones are scored in-sample
(as the peers do) and once fitted on the first 1,000 rows and scored on the other 1,000.

The peers are repsim 0.1.5, cka-pytorch 1.1.3 (module ``cka_pytorch``) and rsatoolbox 0.3.2,
plus scipy's ``spatial.procrustes``. They are not dependencies of nearid: nothing in the
library or the book imports them, and they are installed only for this check, in a separate
environment::

    pip install repsim==0.1.5 cka-pytorch==1.1.3 rsatoolbox==0.3.2 scikit-image
    python benchmarks/align_peers.py   # with that environment active

A peer that does not import (or has no such measure) is reported as "none". The script
measures this checkout's ``lib/`` (put first on ``sys.path``). Record: ``align_peers.md``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NEARID_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread: sums in one order, and a fair share of a busy machine
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

import numpy as np
from scipy.spatial.distance import pdist, squareform
from scipy.stats import kendalltau, spearmanr

from nearid.align import measures as M
from nearid.kernels import cpu_model

N, P, SEED, BATCH, K = 2_000, 64, 0, 256, 10


def planted(n: int = N, p: int = P, seed: int = SEED) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    X = rng.laplace(size=(n, p)) @ rng.normal(size=(p, p)) / np.sqrt(p)
    Q, R = np.linalg.qr(rng.normal(size=(p, p)))
    Y = 3.0 * X @ (Q * np.sign(np.diag(R))) + 0.1 * X.std() * rng.normal(size=(n, p))
    Y_ind = rng.laplace(size=(n, p)) @ rng.normal(size=(p, p)) / np.sqrt(p)
    return {"rotation": (X, Y), "independent": (X, Y_ind)}


# --------------------------------------------------------------------------- own formulas (float64, from the papers)
def _dc(K):  # H K H
    return K - K.mean(0) - K.mean(1)[:, None] + K.mean()


def _align(K, L):  # <HKH, HLH> / (||HKH|| ||HLH||): CKA from n x n kernels (Kornblith et al. 2019, eq. 4)
    K, L = _dc(K), _dc(L)
    return float(np.sum(K * L) / np.sqrt(np.sum(K * K) * np.sum(L * L)))


def hsic_u(K, L):  # Song et al. 2012, eq. 5, written from the paper on uncentred linear kernels
    n = K.shape[0]
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    one = np.ones(n)
    return (np.trace(Kt @ Lt) + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * (one @ Kt @ Lt @ one)) / (n * (n - 3))


def u_cka(X, Y):
    K, L = X @ X.T, Y @ Y.T
    return float(hsic_u(K, L) / np.sqrt(hsic_u(K, K) * hsic_u(L, L)))


def batches(n, b=BATCH, seed=0):  # nearid's minibatches: a seeded permutation cut into full batches
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(order[i * b:(i + 1) * b]) for i in range(n // b)]


def own_minibatch(X, Y):
    s = np.zeros(3)
    for idx in batches(len(X)):
        K, L = X[idx] @ X[idx].T, Y[idx] @ Y[idx].T
        s += (hsic_u(K, L), hsic_u(K, K), hsic_u(L, L))
    return float(s[0] / np.sqrt(s[1] * s[2]))


def own_rbf(X, Y, bw=1.0):  # sigma = bw x the median distance between distinct rows
    def gram(Z):
        d = pdist(Z)
        return np.exp(-squareform(d) ** 2 / (2 * (bw * np.median(d)) ** 2))
    return _align(gram(X), gram(Y))


def _cca_dirs(X, Y, keep=None):  # QR of each centred side, SVD of Qx'Qy; keep: SVCCA's PCs holding 99%
    mx, my = X.mean(0), Y.mean(0)
    T = []
    for Z in (X - mx, Y - my):
        _, s, Vt = np.linalg.svd(Z, full_matrices=False)
        k = len(s) if keep is None else int(np.argmax(np.cumsum(s ** 2) / np.sum(s ** 2) >= keep - 1e-12)) + 1
        T.append(Vt[:k].T)
    (Qx, Rx), (Qy, Ry) = np.linalg.qr((X - mx) @ T[0]), np.linalg.qr((Y - my) @ T[1])
    U, rho, Vt = np.linalg.svd(Qx.T @ Qy, full_matrices=False)
    return T[0] @ np.linalg.solve(Rx, U), T[1] @ np.linalg.solve(Ry, Vt.T), rho


def _corr(A, B):  # Pearson correlation of matching columns
    A, B = A - A.mean(0), B - B.mean(0)
    return np.sum(A * B, 0) / np.sqrt(np.sum(A * A, 0) * np.sum(B * B, 0))


def own_cca(X, Y, Xe, Ye, keep=None, weighted=False):
    a, b, _ = _cca_dirs(X, Y, keep)
    H = Xe @ a
    rho = _corr(H, Ye @ b)
    if not weighted:
        return float(rho.mean())
    H = (H - H.mean(0)) / np.linalg.norm(H - H.mean(0), axis=0)  # Morcos et al. 2018, eq. 2: alpha_i
    alpha = np.abs(H.T @ (Xe - Xe.mean(0))).sum(1)  # = sum_j |<h_i, x_j>|
    return float(alpha @ rho / alpha.sum())


def own_rsa(X, Y, rdm="euclidean", comparison="spearman"):
    u, v = pdist(X, rdm), pdist(Y, rdm)
    if comparison == "spearman":
        return float(spearmanr(u, v).statistic)
    if comparison == "kendall":
        return float(kendalltau(u, v).statistic)
    return float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))


def own_knn(X, Y, k=K):  # Huh et al. 2024 (cosine of the rows, here centred as nearid states)
    def nn(Z):
        S = 1 - squareform(pdist(Z - Z.mean(0), "cosine"))
        np.fill_diagonal(S, -np.inf)
        return np.argsort(-S, axis=1)[:, :k]
    a, b = nn(X), nn(Y)
    return float(np.mean([len(np.intersect1d(a[i], b[i])) for i in range(len(a))]) / k)


def own_procrustes(X, Y):  # Williams et al. 2021, eq. 7: arccos(||X'Y||_* / (||X|| ||Y||))
    X, Y = X - X.mean(0), Y - Y.mean(0)
    f = np.linalg.svd(X.T @ Y, compute_uv=False).sum() / np.linalg.norm(X) / np.linalg.norm(Y)
    return float(np.arccos(min(f, 1.0)))


def _psd_sqrt(A):  # A^(1/2) on A's numerical range (eigenvalues below n eps max set to 0)
    w, V = np.linalg.eigh(A)
    w = np.where(w > w[-1] * len(w) * np.finfo(float).eps, w, 0.0)
    return (V * np.sqrt(w)) @ V.T


def own_bures(X, Y):  # Bures (1969) between the unit-trace n x n Grams, from its definition
    A, B = (Z - Z.mean(0) for Z in (X, Y))
    A, B = A @ A.T, B @ B.T
    A, B = A / np.trace(A), B / np.trace(B)
    R = _psd_sqrt(A)
    fid = np.trace(_psd_sqrt(R @ B @ R))
    return float(np.sqrt(max(2.0 - 2.0 * fid, 0.0)))


# --------------------------------------------------------------------------- peers (called, never copied)
def peer(name):
    try:
        return __import__(name)
    except Exception:
        return None


def repsim_value(X, Y, fn, *args):
    rs = peer("repsim")
    return None if rs is None else float(getattr(rs, fn)([X, Y], *args)[0, 1])


def ckapt(X, Y, idx_batches):  # cka-pytorch's CKACalculator on "models" that look up the rows of X and Y
    if peer("cka_pytorch") is None:
        return None
    import torch
    from cka_pytorch import CKACalculator
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)  # its HSIC accumulators are created in the default dtype
    nets = [torch.nn.Sequential(torch.nn.Embedding.from_pretrained(torch.from_numpy(np.ascontiguousarray(Z))))
            for Z in (X, Y)]
    rows = torch.arange(len(X))
    loader = DataLoader(TensorDataset(rows, rows), batch_sampler=[b.tolist() for b in idx_batches])
    calc = CKACalculator(nets[0], nets[1], [torch.nn.Embedding], verbose=False)
    return float(calc.calculate_cka_matrix(loader, num_epochs=1)[0, 0])


def rsatb(X, Y, rdm="euclidean", comparison="spearman"):
    if peer("rsatoolbox") is None:
        return None
    from rsatoolbox.data import Dataset
    from rsatoolbox.rdm import calc_rdm, compare

    r = [calc_rdm(Dataset(Z), method=rdm) for Z in (X, Y)]
    return float(compare(r[0], r[1], method=comparison)[0, 0])


def scipy_fidelity(X, Y):  # scipy.spatial.procrustes: disparity = 1 - F^2 on unit-norm centred sides
    from scipy.spatial import procrustes

    return float(np.sqrt(1.0 - procrustes(X, Y)[2]))


# --------------------------------------------------------------------------- the table
NOTES = {
    "repsim song": "repsim's 'song': unbiased HSIC(K,L) over biased sqrt(HSIC(K,K) HSIC(L,L)): a mixed ratio, "
                   "not 1 on a rotation",
    "ckapt mb": "same batches fed to CKACalculator; it adds eps=1e-4 under the sqrt; as usually run "
                "(DataLoader, last partial batch kept, 10 epochs) it would average other batches",
    "rbf": "median of distances between distinct rows (Kornblith et al.'s code takes it over all n^2 "
           "entries, zeros included)",
    "repsim cca": "repsim 'pillai' returned the mean canonical correlation here ('yanai' gives mean rho^2)",
    "repsim svcca": "repsim's svcca kept every direction (its value equals its own cca), no 99% truncation",
    "repsim pwcca": "repsim symmetrises: the mean of PWCCA(X,Y) and PWCCA(Y,X); see the next row",
    "rsa cos": "rsatoolbox's 'euclidean' RDM is squared distance / p; ranks agree, cosine does not",
    "knn": "Huh et al.'s code uses uncentred normalised rows; nearid centres first",
    "bures rsatb": "rsatoolbox 'bures' similarity F of -HDH/2 Grams; n x n eigh, sqrt of null-space round-off",
}


def rows_for(case, X, Y):
    h = N // 2
    Xf, Yf, Xe, Ye = X[:h], Y[:h], X[h:], Y[h:]
    pw = [(M.pwcca(X, Y) + M.pwcca(Y, X)) / 2, (own_cca(X, Y, X, Y, weighted=True) + own_cca(Y, X, Y, X, weighted=True)) / 2]
    F_rsatb = rsatb(X, Y, "euclidean", "bures")
    F_scipy = scipy_fidelity(X, Y)
    return [
        ("linear_cka", M.linear_cka(X, Y), _align(X @ X.T, Y @ Y.T), "repsim linear gretton",
         repsim_value(X, Y, "cka", "linear", "gretton"), ""),
        ("debiased_cka", M.debiased_cka(X, Y), u_cka(X, Y), "cka-pytorch, one batch", ckapt(X, Y, [np.arange(N)]), ""),
        ("debiased_cka", M.debiased_cka(X, Y), u_cka(X, Y), "repsim linear song",
         repsim_value(X, Y, "cka", "linear", "song"), NOTES["repsim song"]),
        ("minibatch_cka", M.minibatch_cka(X, Y, BATCH), own_minibatch(X, Y), "cka-pytorch, same batches",
         ckapt(X, Y, batches(N)), NOTES["ckapt mb"]),
        ("rbf_cka", M.rbf_cka(X, Y, max_rows=None), own_rbf(X, Y), "repsim rbf gretton",
         repsim_value(X, Y, "cka", "rbf", "gretton"), NOTES["rbf"]),
        ("cca", M.cca(X, Y), own_cca(X, Y, X, Y), "repsim cca pillai", repsim_value(X, Y, "cca", "pillai"),
         NOTES["repsim cca"]),
        ("cca held-out", M.cca(Xf, Yf, Xe, Ye), own_cca(Xf, Yf, Xe, Ye), "none", None, "fit 1,000 rows, score 1,000"),
        ("svcca", M.svcca(X, Y), own_cca(X, Y, X, Y, keep=0.99), "repsim svcca pillai",
         repsim_value(X, Y, "svcca", "pillai"), NOTES["repsim svcca"]),
        ("svcca held-out", M.svcca(Xf, Yf, Xe, Ye), own_cca(Xf, Yf, Xe, Ye, keep=0.99), "none", None, ""),
        ("pwcca", M.pwcca(X, Y), own_cca(X, Y, X, Y, weighted=True), "repsim pwcca", repsim_value(X, Y, "pwcca"),
         NOTES["repsim pwcca"]),
        ("pwcca both ways", pw[0], pw[1], "repsim pwcca", repsim_value(X, Y, "pwcca"), "mean of the two directions"),
        ("pwcca held-out", M.pwcca(Xf, Yf, Xe, Ye), own_cca(Xf, Yf, Xe, Ye, weighted=True), "none", None, ""),
        ("rsa euclid spearman", M.rsa(X, Y, max_rows=None), own_rsa(X, Y), "rsatoolbox", rsatb(X, Y), ""),
        ("rsa euclid kendall", M.rsa(X, Y, comparison="kendall", max_rows=None), own_rsa(X, Y, comparison="kendall"),
         "rsatoolbox tau-b", rsatb(X, Y, comparison="kendall"), ""),
        ("rsa euclid cosine", M.rsa(X, Y, comparison="cosine", max_rows=None), own_rsa(X, Y, comparison="cosine"),
         "rsatoolbox", rsatb(X, Y, comparison="cosine"), NOTES["rsa cos"]),
        ("rsa correlation cosine", M.rsa(X, Y, "correlation", "cosine", max_rows=None),
         own_rsa(X, Y, "correlation", "cosine"), "rsatoolbox", rsatb(X, Y, "correlation", "cosine"), ""),
        ("mutual_knn", M.mutual_knn(X, Y, K, max_rows=None), own_knn(X, Y), "none", None, NOTES["knn"]),
        ("procrustes_angle", M.procrustes_angle(X, Y), own_procrustes(X, Y), "scipy.spatial.procrustes",
         float(np.arccos(min(F_scipy, 1.0))), "arccos of sqrt(1 - disparity)"),
        ("bures_distance", M.bures_distance(X, Y), own_bures(X, Y), "rsatoolbox bures",
         None if F_rsatb is None else float(np.sqrt(max(2 - 2 * F_rsatb, 0.0))), NOTES["bures rsatb"]),
    ]


def _f(v, fmt=".10f"):
    return "none" if v is None else format(v, fmt)


def main() -> None:
    import importlib.metadata as md

    t0 = time.perf_counter()
    vers = []
    for pkg in ("numpy", "scipy", "repsim", "cka-pytorch", "torch", "rsatoolbox"):
        try:
            vers.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            vers.append(f"{pkg} none")
    print(f"{time.strftime('%Y-%m-%d')}, {cpu_model()}, one thread; Python {sys.version.split()[0]}, {', '.join(vers)}; "
          f"nearid from {Path(M.__file__).parents[2]}\n")
    print("| measure | case | nearid | own formula | peer (name) | max abs diff nearid vs own | vs peer | note |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: | --- |")
    for case, (X, Y) in planted().items():
        for name, ours, own, pname, pval, note in rows_for(case, X, Y):
            pv = None if pval is None else abs(ours - pval)
            shown = "none" if pval is None else f"{pname}: {_f(pval)}"
            note = note if case == "rotation" or not note else "as above"
            print(f"| {name} | {case} | {_f(ours)} | {_f(own)} | {shown} | {abs(ours - own):.1e} | "
                  f"{_f(pv, '.1e')} | {note} |")
    print(f"\nrun time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
