"""Chapter 02's experiment: autoencoders on an isometric DGP, with delta as the knob.

For each delta, the same g (only delta changes) generates training and held-out data; one
autoencoder per seed learns codes; we score statistical identifiability across seeds and
structural identifiability against the true factors u.

Every model is one task (:mod:`nearid.tasks`): :func:`train_isometric` and
:func:`train_blob` are pure functions of their keyword arguments (the seed among them) that
return held-out codes and scores, so the sweep runs in-process, in local processes or on a
Dask cluster with the same numbers, and a killed run resumes. :func:`plan` lists the tasks
for resolved chapter parameters, :func:`run` runs exactly those and assembles the tables,
and the ``*_verdict`` functions decide the chapter's claims with 95% intervals
(:mod:`nearid.verdicts`).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import stats
from sklearn.exceptions import ConvergenceWarning

from nearid.align import AlignmentResult
from nearid.data.toy import IsometricDGP, blob_images
from nearid.identifiability import pairs_table, row_difference, statistical_comparisons, structural_scores
from nearid.models import MLPAutoencoder
from nearid.tasks import Task, run_tasks, runner_log
from nearid.train import Recipe, fit, predict, resolve_device
from nearid.verdicts import Verdict, bootstrap_statistic, paired_difference

MODEL_KIND, BLOB_KIND = "isometric-autoencoder", "blob-autoencoder"
DRY_RUN_STEPS = 2  # a dry run stops every training task after this many optimiser steps
DRY_RUN_EVAL_ROWS = 500  # ... and evaluates on at most this many held-out points
DRY_RUN_ICA_ITER = 50  # ... with at most this many FastICA iterations (untrained codes are near-Gaussian)
ICA_MAX_ITER = 1000


# ----------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Sample:
    """The data every model of a sweep sees: g_delta's latent and observed sizes, its factor
    distribution (``sources``) and its training and held-out samples, all drawn from
    ``dgp_seed``, so that the models' codes can be compared row for row."""

    latent_dim: int
    observed_dim: int
    n_train: int
    n_test: int
    sources: str = "uniform"
    dgp_seed: int = 0


@dataclass(frozen=True)
class Training:
    """An MLP autoencoder's hidden width and its AdamW training, on ``device``."""

    hidden: int
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float = 0.0
    device: str = "cpu"


@dataclass(frozen=True)
class ICAScoring:
    """How the codes are whitened (``components``: the rule of :func:`nearid.ica.choose_components`)
    and how long FastICA may run when they are scored."""

    components: float | int | str | None = "all"
    max_iter: int = ICA_MAX_ITER


# ----------------------------------------------------------------------------- tasks
def train_isometric(*, delta: float, seed: int, sample: Sample, training: Training, ica: ICAScoring = ICAScoring(),
                    max_steps: int | None = None) -> dict[str, Any]:
    """One task: train one seeded MLP autoencoder on g_delta's data and score its codes.

    The DGP, its training and held-out samples and the fit/evaluation split of the scores
    depend on ``sample.dgp_seed`` only, so every model of a sweep sees the same held-out
    inputs and their codes can be compared row for row. Returns the held-out ``codes`` and
    ``factors``, the measured bi-Lipschitz constant of g, the held-out reconstruction error
    and :func:`nearid.identifiability.structural_scores`.
    """
    d = sample
    dgp = IsometricDGP(d.latent_dim, d.observed_dim, delta, sources=d.sources, random_state=d.dgp_seed)
    X, _ = dgp.sample(d.n_train, seed=d.dgp_seed + 1)
    Xt, Ut = dgp.sample(d.n_test, seed=d.dgp_seed + 2)
    dev = resolve_device(training.device)
    torch.manual_seed(seed)
    model = MLPAutoencoder(d.observed_dim, d.latent_dim, hidden=(training.hidden, training.hidden))
    res = fit(model, X, Recipe(training.epochs, training.batch_size, training.lr, training.weight_decay), seed=seed,
              device=dev, max_steps=max_steps)
    Z = predict(model.encode, Xt, device=dev)
    recon = float(np.mean((predict(model, Xt, device=dev) - Xt) ** 2))
    return {"delta": delta, "seed": seed, "codes": Z, "factors": Ut,
            "bilipschitz": dgp.bilipschitz_constant(Ut), "train_loss": res.losses[-1],
            "test_mse": recon, "steps": res.steps, "seconds": res.seconds,
            **structural_scores(Z, Ut, seed=d.dgp_seed, ica_components=ica.components, ica_max_iter=ica.max_iter)}


def train_blob(*, size: int, n_train: int, n_test: int, seed: int, training: Training,
               max_steps: int | None = None) -> dict[str, Any]:
    """One task: an image DGP (a translated Gaussian blob, 2 independent factors), one
    autoencoder with a 2-d code (hidden widths 4 x and 1 x ``training.hidden``); its held-out
    codes, their whitened ICA components and scores.
    """
    from nearid.ica import WhitenedICA

    X, _ = blob_images(n_train, size=size, seed=seed + 1)
    Xt, Ut = blob_images(n_test, size=size, seed=seed + 2)
    X, Xt = X.reshape(len(X), -1), Xt.reshape(len(Xt), -1)
    dev = resolve_device(training.device)
    torch.manual_seed(seed)
    model = MLPAutoencoder(X.shape[1], 2, hidden=(4 * training.hidden, training.hidden))
    res = fit(model, X, Recipe(training.epochs, training.batch_size, training.lr, training.weight_decay), seed=seed,
              device=dev, max_steps=max_steps)
    Z = predict(model.encode, Xt, device=dev)
    S = WhitenedICA(n_components="all", random_state=seed).fit(Z).transform(Z)  # 2 axes, 2 factors
    return {"scores": structural_scores(Z, Ut, seed=seed), "codes": Z, "ica_codes": S, "factors": Ut,
            "train_loss": res.losses[-1], "seconds": res.seconds, "steps": res.steps,
            "test_mse": float(np.mean((predict(model, Xt, device=dev) - Xt) ** 2))}


# ----------------------------------------------------------------------------- plan
def _steps(n: int, batch_size: int, epochs: int, dry_run: bool) -> int:
    full = epochs * math.ceil(n / batch_size)
    return min(full, DRY_RUN_STEPS) if dry_run else full


def model_tasks(P, *, deltas=None, weight_decay: float | None = None, sources: str | None = None,
                seeds: int | None = None, first_seed: int = 0) -> list[Task]:
    """One :func:`train_isometric` task per (delta, seed) for chapter parameters ``P``; the
    keyword arguments replace P's deltas, weight decay, factor distribution or seed count.
    Seeds run from ``P.seed + first_seed`` to ``P.seed + seeds - 1``."""
    deltas = P["deltas"] if deltas is None else deltas
    weight_decay = P["weight_decay"] if weight_decay is None else weight_decay
    sources = P["sources"] if sources is None else sources
    seeds = P["seeds"] if seeds is None else seeds
    dry = bool(P.get("dry_run", False))
    n_test = min(P["n_test"], DRY_RUN_EVAL_ROWS) if dry else P["n_test"]
    sample = Sample(latent_dim=P["latent_dim"], observed_dim=P["observed_dim"], n_train=P["n_train"], n_test=n_test,
                    sources=sources, dgp_seed=P["seed"])
    training = Training(hidden=P["hidden"], epochs=P["epochs"], batch_size=P["batch_size"], lr=P["lr"],
                        weight_decay=float(weight_decay), device=P["device"])
    ica = ICAScoring(components=P["ica_components"], max_iter=DRY_RUN_ICA_ITER if dry else ICA_MAX_ITER)
    tasks = []
    for delta in deltas:
        for s in range(P["seed"] + first_seed, P["seed"] + seeds):
            kwargs = dict(delta=float(delta), seed=s, sample=sample, training=training, ica=ica,
                          max_steps=DRY_RUN_STEPS if dry else None)
            tasks.append(Task(train_isometric, kwargs, kind=MODEL_KIND, gpu=P["device"] != "cpu",
                              label=f"delta={delta:.2f} seed={s} weight_decay={weight_decay:g} {sources}",
                              steps=_steps(P["n_train"], P["batch_size"], P["epochs"], dry)))
    return tasks


def blob_task(P) -> Task:
    """The :func:`train_blob` task for chapter parameters ``P``."""
    dry = bool(P.get("dry_run", False))
    training = Training(hidden=P["hidden"], epochs=P["image_epochs"], batch_size=P["batch_size"], lr=P["lr"],
                        weight_decay=P["weight_decay"], device=P["device"])
    kwargs = dict(size=P["image_size"], n_train=P["n_train"],
                  n_test=min(P["n_test"], DRY_RUN_EVAL_ROWS) if dry else P["n_test"], seed=P["seed"],
                  training=training, max_steps=DRY_RUN_STEPS if dry else None)
    return Task(train_blob, kwargs, kind=BLOB_KIND, gpu=P["device"] != "cpu",
                label=f"blob {P['image_size']}px", steps=_steps(P["n_train"], P["batch_size"], P["image_epochs"], dry))


def plan(P) -> list[Task]:
    """The chapter's tasks, in this order: the delta x seed sweep; the sweep's smallest delta
    again without weight decay (the ablation); the blob autoencoder; and, when
    ``trend_seeds`` exceeds ``seeds``, the extra seeds at every delta that show how the
    verdicts move with the number of seeds (:func:`seed_trend`)."""
    return [*model_tasks(P), *model_tasks(P, deltas=[min(P["deltas"])], weight_decay=0.0), blob_task(P),
            *model_tasks(P, seeds=trend_seeds(P), first_seed=P["seeds"])]


def trend_seeds(P) -> int:
    """Seeds per delta of the seed trend: ``trend_seeds``, and never fewer than ``seeds``."""
    return max(P["seeds"], P.get("trend_seeds", P["seeds"]))


# ----------------------------------------------------------------------------- results
@dataclass
class SweepResult:
    """Models of one sweep and their comparisons."""

    models: pd.DataFrame  # one row per (delta, seed): structural scores, recon error, bi-Lipschitz
    pairs: pd.DataFrame  # one row per (delta, seed pair, family): statistical error
    comparisons: dict[float, dict[tuple[int, int], AlignmentResult]] = field(default_factory=dict)
    codes: dict[float, list[np.ndarray]] = field(default_factory=dict)  # held-out codes per delta
    factors: dict[float, np.ndarray] = field(default_factory=dict)  # held-out true u per delta


@dataclass
class ChapterResult:
    sweep: SweepResult
    ablation: SweepResult  # the sweep's smallest delta without weight decay
    blob: dict[str, Any]
    trend_models: pd.DataFrame  # the sweep's models and the extra seeds: one row per (delta, seed)


MODEL_COLUMNS = ("delta", "seed", "bilipschitz", "train_loss", "test_mse", "rigid_error", "linear_error",
                 "ica_perm_error", "mcc", "mcc_ica", "ica_components", "ica_converged")


def assemble(results: list[dict[str, Any]], *, seed: int = 0,
             ica_components: float | int | str | None = "all", ica_max_iter: int = ICA_MAX_ITER) -> SweepResult:
    """Tables of a sweep from its :func:`train_isometric` results (in task order), with the
    statistical comparisons between every pair of seeds at each delta."""
    models = pd.DataFrame([{k: r[k] for k in MODEL_COLUMNS} for r in results])
    comparisons, codes, factors, frames = {}, {}, {}, []
    for delta in dict.fromkeys(r["delta"] for r in results):
        mine = [r for r in results if r["delta"] == delta]
        codes[delta], factors[delta] = [r["codes"] for r in mine], mine[0]["factors"]
        comparisons[delta] = statistical_comparisons(codes[delta], seed=seed, ica_components=ica_components,
                                                     ica_max_iter=ica_max_iter)
        frames.append(pairs_table(comparisons[delta]).assign(delta=delta))
    pairs = pd.concat(frames, ignore_index=True)[["delta", "pair", "family", "error"]]
    return SweepResult(models, pairs, comparisons, codes, factors)


def run_sweep(P, *, log=runner_log, **changes) -> SweepResult:
    """Run :func:`model_tasks` (with ``changes``) through :func:`nearid.tasks.run_tasks` and
    assemble them; what the chapter's exercises use to retrain a variant."""
    with _dry_run_quiet(P):
        results = run_tasks(model_tasks(P, **changes), executor=P.get("executor"), scheduler=P.get("scheduler"),
                            log=log)
        return assemble(results, seed=P["seed"], **_evaluation(P))


def _evaluation(P) -> dict:
    return {"ica_components": P["ica_components"],
            "ica_max_iter": DRY_RUN_ICA_ITER if P.get("dry_run", False) else ICA_MAX_ITER}


@contextlib.contextmanager
def _dry_run_quiet(P):
    """Under dry_run, silence FastICA's convergence warnings: codes after 2 optimiser steps are
    near-Gaussian, so FastICA cannot converge on them, and the warning says nothing about the
    code paths a dry run checks. Otherwise a no-op: a real run shows every warning."""
    with warnings.catch_warnings():
        if P.get("dry_run", False):
            warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def run(P, *, log=runner_log) -> ChapterResult:
    """Run every task of :func:`plan` (one call to run_tasks) and assemble the chapter's tables."""
    tasks = plan(P)
    with _dry_run_quiet(P):
        results = run_tasks(tasks, executor=P.get("executor"), scheduler=P.get("scheduler"), log=log)
        n_sweep, n_ablation = len(P["deltas"]) * P["seeds"], P["seeds"]
        sweep = assemble(results[:n_sweep], seed=P["seed"], **_evaluation(P))
        ablation = assemble(results[n_sweep:n_sweep + n_ablation], seed=P["seed"], **_evaluation(P))
    log = log or (lambda _: None)
    blob = results[n_sweep + n_ablation]
    extra = pd.DataFrame([{k: r[k] for k in MODEL_COLUMNS} for r in results[n_sweep + n_ablation + 1:]],
                         columns=list(MODEL_COLUMNS))
    trend_models = pd.concat([sweep.models, extra], ignore_index=True).sort_values(["delta", "seed"])
    for name, part in (("", sweep), (" without weight decay", ablation)):
        for delta, m in part.models.groupby("delta"):
            log(f"delta={delta:.2f}{name}: {len(m)} models, held-out MSE {m.test_mse.mean():.1e}, rigid "
                f"error to u {m.rigid_error.mean():.3f}, MCC {m.mcc.mean():.3f} -> {m.mcc_ica.mean():.3f} "
                "after ICA (means over seeds)")
    if len(extra):
        log(f"{len(extra)} extra models ({trend_seeds(P)} seeds per delta) for the seed trend")
    return ChapterResult(sweep, ablation, blob, trend_models.reset_index(drop=True))


# ----------------------------------------------------------------------------- verdicts
def _spearman(x, y) -> float:
    """Spearman's correlation; NaN (not a warning) for a bootstrap sample with one delta."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.spearmanr(x, y).statistic)


def trend_verdict(models: pd.DataFrame, column: str = "rigid_error", seed: int = 0) -> Verdict:
    """Does ``column`` rise with delta? Spearman's correlation between delta and ``column``
    over all models, with a bootstrap interval over models (holds: the interval lies above 0)."""
    return bootstrap_statistic(_spearman, models["delta"].to_numpy(), models[column].to_numpy(), seed=seed)


def ica_gain_verdict(models: pd.DataFrame, delta: float) -> Verdict:
    """Does whitening + ICA raise the MCC to the true factors? MCC after ICA minus the raw
    MCC, paired over the seeds at ``delta``, Student's t interval."""
    at = models[models["delta"] == delta]
    return paired_difference(at["mcc_ica"], at["mcc"], method="t")


def seed_order_verdict(comparisons: dict[tuple[int, int], AlignmentResult], worse: str, better: str,
                       seed: int = 0) -> Verdict:
    """Is family ``better``'s error between seeds below ``worse``'s? Per held-out input, the
    difference averaged over seed pairs; bootstrap interval over inputs."""
    return paired_difference(row_difference(comparisons, worse, better), method="bootstrap", seed=seed)


def weight_decay_verdict(with_wd: pd.DataFrame, without_wd: pd.DataFrame, delta: float) -> Verdict:
    """Does removing weight decay widen the gap between the rigid and the linear error to u?
    Per seed, (rigid - linear) without minus with weight decay; Student's t over seeds."""
    a = with_wd[with_wd["delta"] == delta].set_index("seed")
    b = without_wd[without_wd["delta"] == delta].set_index("seed").loc[a.index]
    return paired_difference(b["rigid_error"] - b["linear_error"], a["rigid_error"] - a["linear_error"],
                             method="t")


def seed_trend(models: pd.DataFrame, *, delta: float, budgets, seed: int = 0) -> pd.DataFrame:
    """How the verdicts of :func:`trend_verdict` and :func:`ica_gain_verdict` move with the
    number of seeds: each decided again on the models of the first k seeds, for every k in
    ``budgets``. One row per (claim, k): estimate, low, high, verdict, n."""
    first = models["seed"].min()
    rows = []
    for k in budgets:
        mine = models[models["seed"] < first + k]
        for claim, v in (("error_falls_with_delta", trend_verdict(mine, "rigid_error", seed=seed)),
                         ("ae_ica_recovers_axes", ica_gain_verdict(mine, delta))):
            rows.append({"claim": claim, "seeds": int(k), "estimate": v.estimate, "low": v.low, "high": v.high,
                         "verdict": v.verdict, "n": v.n})
    return pd.DataFrame(rows)


def data_mb(P) -> float:
    """Memory (MB) of the largest data a task builds: the blob images (float32) or the
    observations of the isometric DGP (priced before a run: ``nearid.book.pricing``)."""
    rows = P["n_train"] + P.get("n_test", 0)
    return max(rows * P["image_size"] ** 2, rows * P["observed_dim"]) * 4 / 2 ** 20


# ----------------------------------------------------------------------------- evaluation, priced
def seed_pair_comparisons(*, n_rows: int, latent_dim: int, seeds: int, pairs: int, sources: str = "uniform",
                          ica: ICAScoring = ICAScoring(), seed: int = 0, max_steps: int | None = None) -> int:
    """:func:`assemble`'s work at a chapter's shape, on stand-in codes, for ``nearid plan``:
    ``pairs`` seed-pair comparisons (only the first ``max_steps`` of them when given) of
    ``n_rows`` x ``latent_dim`` codes of ``seeds`` models. The codes are seeded linear
    mixtures of the chapter's factor distribution (what an autoencoder near an isometry
    gives), on which FastICA converges: pairs of bent codes that hit the iteration limit cost
    more, so this prices the evaluation from below. Returns the comparisons made."""
    from itertools import combinations

    from nearid.align import compare
    from nearid.data.toy import sample_sources

    rng = np.random.default_rng(seed)
    codes = [sample_sources(sources, n_rows, latent_dim, rng) @ rng.standard_normal((latent_dim, latent_dim))
             for _ in range(seeds)]
    order = list(combinations(range(seeds), 2))
    done = 0 if not order else min(pairs, max_steps) if max_steps is not None else pairs
    for k in range(done):
        i, j = order[k % len(order)]
        compare(codes[i], codes[j], seed=seed, ica_components=ica.components, ica_max_iter=ica.max_iter)
    return done


def evaluation_plan(P) -> list[Task]:
    """What the chapter computes outside :func:`plan`'s tasks that grows with ``full``, for
    ``nearid plan``: :func:`assemble`'s comparisons of every seed pair at every delta and in
    the ablation, one unit (``steps``) per pair, so that a few pairs are timed and scaled up."""
    n_pairs = math.comb(P["seeds"], 2) * (len(P["deltas"]) + 1)
    n_rows = min(P["n_test"], DRY_RUN_EVAL_ROWS) if P.get("dry_run", False) else P["n_test"]
    evaluation = _evaluation(P)
    kwargs = dict(n_rows=n_rows, latent_dim=P["latent_dim"], seeds=P["seeds"], pairs=n_pairs, sources=P["sources"],
                  seed=P["seed"], ica=ICAScoring(evaluation["ica_components"], evaluation["ica_max_iter"]))
    return [Task(seed_pair_comparisons, kwargs, kind="seed_pair_comparisons", steps=n_pairs,
                 label=f"{n_pairs} seed-pair comparisons of {n_rows} x {P['latent_dim']} codes")]
