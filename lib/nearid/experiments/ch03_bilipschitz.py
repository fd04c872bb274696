"""Chapter 03's experiment: does a more nearly isometric decoder give more identical codes?

Theorem 1 bounds the rigid misalignment between two minimisers by c sqrt(2L + L^2) when the
decoder is (1+L)-bi-Lipschitz. :class:`BiLipschitzSweep` trains MNIST MLP autoencoders whose
decoder uses leaky ReLUs with negative slope ``alpha`` (PyTorch's convention: alpha = 1 is a
linear decoder, alpha = 0 a ReLU decoder), over a grid of alphas, seeds and weight decays,
and measures per model the bi-Lipschitz estimate L (:mod:`nearid.lipschitz`) at the codes of
held-out images and the reconstruction error, and per pair of seeds the rigid and linear
alignment errors (:func:`nearid.align.compare`) on those held-out images.

Each autoencoder is one :class:`nearid.tasks.Task` (:func:`train_and_measure`, a pure function
of its parameters and seed that loads its own images); :func:`plan` lists the chapter's tasks
and :func:`fit_sweeps` runs them through :func:`nearid.tasks.run_tasks` in one go. Results are
tidy pandas DataFrames, one row per model, per pair, per (model, image) for B(z).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
from scipy.stats import rankdata

from nearid.align import LINEAR, RIGID, compare
from nearid.constraints import (NON_NEGATIVE, InstanceOf, Interval, ListOf, Options, OrNone, check_args,
                                validate_params)
from nearid.lipschitz import NORMALISATION, bilipschitz_from_singular_values, jacobian_singular_values
from nearid.models import MLPAutoencoder
from nearid.tasks import Task, run_tasks, runner_log
from nearid.train import Recipe, TrainResult, fit, predict, resolve_device
from nearid.verdicts import Verdict, bootstrap_statistic, paired_difference

SETTING = ["group", "alpha", "weight_decay"]
DATASETS = ("mnist", "sklearn_digits")
DATASET = Options(DATASETS, noun="dataset")
ALPHA = Interval(float, 0, 1)  # the decoder's leaky-ReLU negative slope (1 = linear)
DRY_RUN_STEPS = 2  # optimiser steps per task in a dry run
DRY_RUN_EVAL_ROWS = 100  # held-out images per model a dry run evaluates on (at most)
MIN_MEASURED = 20  # held-out images a run measuring a share of them (evaluate < 1, nearid plan) measures at least
# The chapter's claims as its table names them, and the paper's figure each one reads.
CLAIM_LABELS = {"leak_moves_L": "L is smaller for the linear decoder",
                "rigid_rises_with_L": "the rigid error rises with L",
                "rigid_rises_with_Lmax": "L_max and L_mean give the same trend",
                "rigid_rises_with_L_nonlinear": "the rigid error rises with L (α < 1 only)",
                "recon_improves_with_L": "reconstruction improves as L grows",
                "digits_rigid_rises_with_L": "the rigid error rises with L in digit models"}
CLAIM_FIGURES = {"leak_moves_L": "A.3", "rigid_rises_with_L": "2", "rigid_rises_with_Lmax": "A.4",
                 "rigid_rises_with_L_nonlinear": "2", "recon_improves_with_L": "A.5",
                 "digits_rigid_rises_with_L": "A.6"}
# The columns of BiLipschitzSweep.summary() as the book's tables name them.
SUMMARY_LABELS = {"alpha": "α", "weight_decay": "weight decay", "L_mean": "L mean", "L_max": "L max",
                  "L_mean_local": "L mean (local scale)", "rigid_error": "rigid error",
                  "linear_error": "linear error", "recon_error": "reconstruction MSE"}


# --------------------------------------------------------------------------- data
@functools.lru_cache(maxsize=4)
@validate_params(dataset=DATASET)
def _image_set(dataset: str, train: bool) -> tuple[np.ndarray, np.ndarray]:
    """All images of one split, flattened float32 in [0, 1], read once per process."""
    if dataset == "mnist":
        from nearid.data.mnist import load_mnist

        X, y = load_mnist(train=train)
    else:  # "sklearn_digits": 8x8 digits bundled with scikit-learn, for fast tests
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        X = X / 16.0
        X, y = (X[:1297], y[:1297]) if train else (X[1297:], y[1297:])
    X = np.asarray(X, dtype=np.float32).reshape(len(X), -1)
    X.setflags(write=False)
    return X, np.asarray(y, dtype=np.int64)


@functools.lru_cache(maxsize=4)
def _labels(dataset: str, train: bool) -> np.ndarray:
    """The labels of one split without its images: enough to count a sweep's steps
    (``plan``, the cost check before a run) in milliseconds rather than seconds."""
    if dataset == "mnist":
        from nearid.data.mnist import load_labels

        return load_labels(train=train)
    return _image_set(dataset, train)[1]


def load_images(dataset: str = "mnist", *, train: bool, n: int | None = None,
                digit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` images of a split (then only class ``digit``, if given), as copies."""
    X, y = _image_set(dataset, bool(train))
    X, y = X[:n], y[:n]
    if digit is not None:
        keep = y == digit
        X, y = X[keep], y[keep]
    return np.array(X), np.array(y)


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Images:
    """Which images a model trains and is measured on: the first ``n_train`` training and
    ``n_test`` test images of ``dataset``, and of those only the first ``eval_rows`` held-out
    images when given (a dry run)."""

    dataset: str = "mnist"
    n_train: int = 5000
    n_test: int = 2000
    eval_rows: int | None = None

    def __post_init__(self):
        check_args(dict(dataset=DATASET, n_train=Interval(int, 1), n_test=Interval(int, 1),
                        eval_rows=OrNone(Interval(int, 1))), vars(self))


@dataclass(frozen=True)
class Training:
    """An autoencoder's shape (``latent_dim``, ``hidden`` widths, the encoder's leaky-ReLU
    ``encoder_slope``) and how it trains (AdamW: ``epochs``, ``batch_size``, ``lr``), on
    ``device``. One frozen record shared by every model of a sweep, so a task's key names
    every setting while its arguments stay few."""

    latent_dim: int = 8
    hidden: tuple[int, ...] = (128, 64)
    epochs: int = 20
    batch_size: int = 64
    lr: float = 2e-3
    encoder_slope: float = 0.0
    device: str = "cpu"

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        check_args(dict(latent_dim=Interval(int, 1), epochs=Interval(int, 1), batch_size=Interval(int, 1),
                        encoder_slope=ALPHA), vars(self))


@dataclass(frozen=True)
class Grid:
    """The settings a sweep trains: ``alphas`` (decoder leaky-ReLU negative slopes in [0, 1];
    1 = linear) x ``weight_decays`` (AdamW's decoupled weight decay) x ``seeds`` models each
    (seeds ``seed, seed+1, ...``; pairs of them are aligned), per class of ``digits`` (None:
    every image, group "all"). ``tie_encoder``: the encoder takes the decoder's slope alpha
    (alpha = 1 is then a linear autoencoder) instead of the training's ``encoder_slope``."""

    alphas: tuple[float, ...]
    seeds: int = 3
    weight_decays: tuple[float, ...] = (0.0,)
    digits: tuple[int, ...] | None = None
    seed: int = 0
    tie_encoder: bool = False

    def __post_init__(self):
        object.__setattr__(self, "alphas", tuple(self.alphas))
        object.__setattr__(self, "weight_decays", tuple(self.weight_decays))
        if self.digits is not None:
            object.__setattr__(self, "digits", tuple(self.digits))
        # seeds >= 2: alignment needs pairs of models; digits: None (all images) or some classes
        check_args(dict(alphas=ListOf(ALPHA), seeds=Interval(int, 2), weight_decays=ListOf(NON_NEGATIVE),
                        digits=OrNone(ListOf(Interval(int, 0, 9)))), vars(self))


# --------------------------------------------------------------------------- one model
@validate_params(alpha=ALPHA)
def train_autoencoder(X, *, alpha: float, seed: int, training: Training = Training(), weight_decay: float = 0.0,
                      max_steps: int | None = None) -> tuple[MLPAutoencoder, TrainResult]:
    """One MLP autoencoder on flattened images ``X`` with decoder slope ``alpha``, shaped and
    trained as ``training`` says; ``seed`` fixes both init and shuffling."""
    X = np.asarray(X, dtype=np.float32).reshape(len(X), -1)
    torch.manual_seed(seed)
    model = MLPAutoencoder(X.shape[1], training.latent_dim, hidden=training.hidden,
                           encoder_slope=training.encoder_slope, decoder_slope=alpha)
    result = fit(model, X, Recipe(training.epochs, training.batch_size, training.lr, weight_decay), seed=seed,
                 device=resolve_device(training.device), max_steps=max_steps)
    return model, result


def evaluate_autoencoder(model: MLPAutoencoder, X, *, device: str | torch.device = "cpu") -> dict:
    """Codes, reconstruction MSE (per pixel) and the decoder Jacobian's singular values on ``X``."""
    device = resolve_device(device)
    X = np.asarray(X, dtype=np.float32).reshape(len(X), -1)
    model = model.to(device).eval()
    Z = predict(model.encode, X, device=device)
    recon = predict(model, X, device=device)
    S = jacobian_singular_values(model.decoder, Z, device=device)
    return {"codes": Z, "recon_error": float(np.mean((recon - X) ** 2)), "singular_values": S}


def train_and_measure(*, alpha: float, seed: int, weight_decay: float = 0.0, digit: int | None = None,
                      images: Images = Images(), training: Training = Training(device="auto"),
                      max_steps: int | None = None,
                      evaluate: float = 1.0) -> dict:
    """The chapter's task: train one autoencoder and measure it on held-out images.

    Trains on ``images``' training images (of class ``digit`` only, if given) and evaluates
    on its held-out images (same class). Returns the held-out codes,
    the decoder Jacobian's singular values at them (B(z) is computed from these by the
    sweep, so the estimator can change without retraining), the reconstruction error and
    the training record; no torch module, so the result is small and cacheable.
    ``evaluate`` is for ``nearid plan``, which prices training and measuring apart: a share
    below 1 measures only that share of the held-out images (at least :data:`MIN_MEASURED`; 0:
    that minimum).
    """
    if not 0 <= evaluate <= 1:
        raise ValueError(f"evaluate must be a share in [0, 1], got {evaluate}")
    X_tr, _ = load_images(images.dataset, train=True, n=images.n_train, digit=digit)
    X_te, _ = load_images(images.dataset, train=False, n=images.n_test, digit=digit)
    X_te = X_te[:images.eval_rows]
    if evaluate < 1:
        X_te = X_te[:max(MIN_MEASURED, math.ceil(evaluate * len(X_te)))]
    if len(X_tr) == 0 or len(X_te) < 3:
        raise ValueError(f"{images.dataset} digit={digit}: {len(X_tr)} training and {len(X_te)} held-out images")
    model, res = train_autoencoder(X_tr, alpha=alpha, seed=seed, training=training, weight_decay=weight_decay,
                                   max_steps=max_steps)
    ev = evaluate_autoencoder(model, X_te, device=training.device)
    return {**ev, "train_loss": res.losses[-1] if res.losses else float("nan"), "seconds": res.seconds,
            "steps": res.steps, "n_train": len(X_tr), "n_test": len(X_te)}


# --------------------------------------------------------------------------- the sweep
class BiLipschitzSweep:
    """Train autoencoders over alphas x weight decays x seeds (x digits); measure L, errors, alignment.

    Parameters
    ----------
    grid : the settings and seeds to train (:class:`Grid`).
    images : the images each model trains and is measured on (:class:`Images`).
    training : every model's shape and training (:class:`Training`; with ``grid.tie_encoder``
        its ``encoder_slope`` is replaced by each model's alpha).
    normalisation : how B(z) fixes the decoder's scale (:mod:`nearid.lipschitz`): "model"
        (one scale per model; the chapter's definition) or "local". Both are stored.
    fit_fraction : share of held-out images used to fit each alignment map (the rest score it).
    max_steps : stop every model after this many optimiser steps (a dry run uses 2).

    Where the tasks run (``executor``, ``scheduler``) and the log are :meth:`fit`'s arguments.

    Attributes (after ``fit``)
    --------------------------
    models_ : one row per model: group, alpha, weight_decay, seed, L_mean, L_max, L_median,
        L_mean_local, L_max_local, scale, recon_error, train_loss, train_seconds, steps, n_train.
    pairs_ : one row per pair of seeds: the setting, seed_a, seed_b, rigid_error, linear_error,
        cka, and the pair's L (mean of the two models' L_mean, larger of their L_max).
    B_ : one row per (model, held-out image): the setting, seed, B, B_local.
    """

    def __init__(self, grid: Grid, *, images: Images = Images(), training: Training = Training(device="auto"),
                 normalisation: str = "model", fit_fraction: float = 0.5, max_steps: int | None = None):
        self.grid = grid
        self.images = images
        self.training = training
        self.normalisation = normalisation
        self.fit_fraction = fit_fraction
        self.max_steps = max_steps
        self.log = runner_log

    _constraints = dict(grid=InstanceOf(Grid), images=InstanceOf(Images), training=InstanceOf(Training),
                        normalisation=NORMALISATION)

    def _validate(self):
        check_args(self._constraints, {k: getattr(self, k) for k in self._constraints})

    def _groups(self) -> list[tuple[str, int | None, int]]:
        """(group name, digit, training images) per group; checks each digit has enough images."""
        im = self.images
        y_tr = _labels(im.dataset, True)[:im.n_train]
        if self.grid.digits is None:
            return [("all", None, len(y_tr))]
        y_te = _labels(im.dataset, False)[:im.n_test]
        need = math.ceil((self.training.latent_dim + 2) / self.fit_fraction) + 3
        groups = []
        for d in self.grid.digits:
            n_tr, n_te = int((y_tr == d).sum()), int((y_te == d).sum())
            n_te = n_te if im.eval_rows is None else min(n_te, im.eval_rows)
            if n_tr == 0 or n_te < need:
                raise ValueError(f"digit {d}: {n_tr} training and {n_te} held-out images; need some "
                                 f"training images and >= {need} held-out (raise n_train / n_test)")
            groups.append((str(d), int(d), n_tr))
        return groups

    def tasks(self) -> list[Task]:
        """One task per model: groups x weight decays x alphas x seeds, in that order."""
        self._validate()
        out = []
        g, tr = self.grid, self.training
        for (group, digit, n), wd, alpha, k in itertools.product(
                self._groups(), g.weight_decays, g.alphas, range(g.seeds)):
            steps = tr.epochs * math.ceil(n / tr.batch_size)
            if self.max_steps is not None:
                steps = min(steps, self.max_steps)
            own = replace(tr, encoder_slope=float(alpha)) if g.tie_encoder else tr
            kwargs = dict(alpha=float(alpha), seed=g.seed + k, weight_decay=float(wd), digit=digit,
                          images=self.images, training=own, max_steps=self.max_steps)
            where = "all digits" if digit is None else f"digit {digit}"
            kind = "ch03 autoencoder" + ("" if digit is None else " (one digit)")
            label = (f"ch03 {where}, n_train {self.images.n_train}, alpha {alpha:g}, weight decay {wd:g}, "
                     f"seed {g.seed + k}")
            out.append(Task(train_and_measure, kwargs, kind=kind, label=label, gpu=str(tr.device) != "cpu",
                            steps=steps))
        return out

    def fit(self, results: Sequence[dict] | None = None, *, executor: str | None = None, scheduler: str | None = None,
            log: Callable[[str], None] | None = runner_log) -> "BiLipschitzSweep":
        """Run the tasks (or take their ``results``, in :meth:`tasks` order) and assemble the
        frames. ``executor``, ``scheduler``: where the tasks run (:func:`nearid.tasks.run_tasks`);
        ``log``: called with one line per finished task and per setting; None is silent."""
        self.log = log
        tasks = self.tasks()
        if results is None:
            results = run_tasks(tasks, executor=executor, scheduler=scheduler, log=log)
        if len(results) != len(tasks):
            raise ValueError(f"got {len(results)} results for {len(tasks)} tasks")
        model_rows, pair_rows, b_frames = [], [], []
        per_setting: dict[tuple, list] = {}
        for task, res in zip(tasks, results):
            kw = task.kwargs
            group = "all" if kw["digit"] is None else str(kw["digit"])
            per_setting.setdefault((group, kw["alpha"], kw["weight_decay"]), []).append((kw["seed"], res))
        for (group, alpha, wd), runs in per_setting.items():
            self._assemble_setting(group, alpha, wd, runs, model_rows, pair_rows, b_frames)
        self.models_ = pd.DataFrame(model_rows)
        self.pairs_ = pd.DataFrame(pair_rows)
        self.B_ = pd.concat(b_frames, ignore_index=True)
        return self

    def _assemble_setting(self, group, alpha, wd, runs, model_rows, pair_rows, b_frames):
        rows = {}
        for s, res in runs:
            B, c = bilipschitz_from_singular_values(res["singular_values"], self.normalisation)
            B_local, _ = bilipschitz_from_singular_values(res["singular_values"], "local")
            L, L_local = B - 1, B_local - 1
            rows[s] = dict(group=group, alpha=alpha, weight_decay=wd, seed=s,
                           L_mean=float(np.mean(L)), L_max=float(np.max(L)), L_median=float(np.median(L)),
                           L_mean_local=float(np.mean(L_local)), L_max_local=float(np.max(L_local)),
                           scale=c, recon_error=res["recon_error"], train_loss=res["train_loss"],
                           train_seconds=res["seconds"], steps=res["steps"], n_train=res["n_train"])
            model_rows.append(rows[s])
            b_frames.append(pd.DataFrame(dict(group=group, alpha=alpha, weight_decay=wd, seed=s,
                                              B=B, B_local=B_local)))
        codes = {s: res["codes"] for s, res in runs}
        new_pairs = []
        for a, b in itertools.combinations(sorted(codes), 2):
            r = compare(codes[a], codes[b], fit_fraction=self.fit_fraction, seed=self.grid.seed,
                        families=(RIGID, LINEAR))
            pair = dict(group=group, alpha=alpha, weight_decay=wd, seed_a=a, seed_b=b,
                        rigid_error=r.errors[RIGID], linear_error=r.errors[LINEAR], cka=r.cka)
            for col in ("L_mean", "L_mean_local", "recon_error"):
                pair[col] = (rows[a][col] + rows[b][col]) / 2
            for col in ("L_max", "L_max_local"):
                pair[col] = max(rows[a][col], rows[b][col])
            new_pairs.append(pair)
        pair_rows += new_pairs
        if self.log is not None:
            self.log(f"group {group}, alpha {alpha:g}, weight decay {wd:g}: "
                     f"L_mean {np.mean([r['L_mean'] for r in rows.values()]):.2f}, "
                     f"rigid error {np.mean([p['rigid_error'] for p in new_pairs]):.3f}, "
                     f"reconstruction {np.mean([r['recon_error'] for r in rows.values()]):.4f} "
                     f"({len(rows)} models)")

    def summary(self) -> pd.DataFrame:
        """One row per setting (group, alpha, weight_decay): means over seeds and over pairs."""
        if not hasattr(self, "models_"):
            raise RuntimeError("call fit() before summary()")
        return summarise(self.models_, self.pairs_)


def fit_sweeps(sweeps: Mapping[str, BiLipschitzSweep], *, executor: str | None = None,
               scheduler: str | None = None, log: Callable[[str], None] | None = runner_log) -> dict[str, BiLipschitzSweep]:
    """Run the tasks of several sweeps in one :func:`run_tasks` call (so an executor sees them
    all at once), then fit each sweep from its share of the results."""
    tasks = {name: sw.tasks() for name, sw in sweeps.items()}
    results = run_tasks([t for ts in tasks.values() for t in ts], executor=executor, scheduler=scheduler,
                        log=log)
    start = 0
    for name, sw in sweeps.items():
        sw.fit(results[start:start + len(tasks[name])], log=log)
        start += len(tasks[name])
    return dict(sweeps)


def chapter_sweeps(P: Mapping) -> dict[str, BiLipschitzSweep]:
    """The chapter's sweeps for resolved parameters ``P``: "all" (every digit, alphas x weight
    decays x seeds) and one digit-specific sweep per training budget in ``digit_n_trains``
    ("digits_<n>"). A dry run cuts every model to 2 steps and evaluates it on 100 images."""
    dry = bool(P.get("dry_run", False))
    training = Training(latent_dim=P["latent_dim"], hidden=tuple(P["hidden"]), epochs=P["epochs"],
                        batch_size=P["batch_size"], lr=P["lr"], device=P["device"])
    images = Images(dataset="mnist", n_train=P["n_train"], n_test=P["n_test"],
                    eval_rows=DRY_RUN_EVAL_ROWS if dry else None)
    common = dict(training=training, max_steps=DRY_RUN_STEPS if dry else None)
    out = {"all": BiLipschitzSweep(Grid(alphas=P["alphas"], seeds=P["seeds"], weight_decays=P["weight_decays"],
                                        seed=P["seed"], tie_encoder=P["tie_encoder"]), images=images, **common)}
    if P["digits"]:
        for n in sorted(P["digit_n_trains"]):
            grid = Grid(alphas=P["digit_alphas"], seeds=P["digit_seeds"], weight_decays=[P["digit_weight_decay"]],
                        digits=P["digits"], seed=P["seed"], tie_encoder=P["tie_encoder"])
            out[f"digits_{n}"] = BiLipschitzSweep(grid, images=replace(images, n_train=n), **common)
    return out


def plan(P: Mapping) -> list[Task]:
    """Every task chapter 03 runs for resolved parameters ``P`` (what ``nearid plan`` lists)."""
    return [t for sw in chapter_sweeps(P).values() for t in sw.tasks()]


def summarise(models: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per setting: L_mean, L_max, recon_error (mean over seeds), rigid/linear errors (mean and
    std over pairs of seeds)."""
    m = models.groupby(SETTING, sort=True).agg(
        L_mean=("L_mean", "mean"), L_max=("L_max", "mean"), L_median=("L_median", "mean"),
        L_mean_local=("L_mean_local", "mean"), L_max_local=("L_max_local", "mean"),
        recon_error=("recon_error", "mean"), n_models=("seed", "size"))
    p = pairs.groupby(SETTING, sort=True).agg(
        rigid_error=("rigid_error", "mean"), rigid_error_std=("rigid_error", "std"),
        linear_error=("linear_error", "mean"), linear_error_std=("linear_error", "std"),
        n_pairs=("rigid_error", "size"))
    return m.join(p).reset_index()


# --------------------------------------------------------------------------- theory curve
def theory_curve(L) -> np.ndarray:
    """sqrt(2L + L^2), the shape of Theorem 1's bound (eps = c_D sqrt(2L + L^2) Delta)."""
    L = np.asarray(L, dtype=np.float64)
    if (L < 0).any():
        raise ValueError("L must be >= 0 (B = 1 + L >= 1)")
    return np.sqrt(2 * L + L ** 2)


@dataclass
class TheoryFit:
    """error ~ b + c sqrt(2L + L^2) (b = 0 when fitted through the origin), and its R^2."""

    c: float
    b: float
    r2: float
    n: int

    def predict(self, L) -> np.ndarray:
        return self.c * theory_curve(L) + self.b


def _finite_pairs(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"need two equally long arrays, got {x.size} and {y.size}")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def fit_theory_curve(L, error, *, intercept: bool = True) -> TheoryFit:
    """Least-squares fit of ``error`` = b + c sqrt(2L + L^2); R^2 is on the same points.

    ``intercept=True`` (the chapter's declared fit) gives the floor b: the error that finite
    training leaves even for an isometric decoder. Without it (the theorem's form alone) R^2
    can be negative: the curve then explains the errors worse than their mean does.
    """
    L, error = _finite_pairs(L, error)
    if L.size < 2 + intercept:
        raise ValueError(f"need >= {2 + intercept} finite (L, error) points, got {L.size}")
    g = theory_curve(L)
    design = np.column_stack([g, np.ones_like(g)]) if intercept else g[:, None]
    coef, *_ = np.linalg.lstsq(design, error, rcond=None)
    resid = error - design @ coef
    total = float(((error - error.mean()) ** 2).sum())
    r2 = 1 - float((resid ** 2).sum()) / total if total > 0 else float("nan")
    return TheoryFit(c=float(coef[0]), b=float(coef[1]) if intercept else 0.0, r2=r2, n=int(L.size))


def theory_fit_intervals(L, error, *, groups=None, seed: int = 0, n_boot: int = 2000) -> dict[str, Verdict]:
    """The floor b and slope c of :func:`fit_theory_curve`, each with a 95% bootstrap interval
    over the (L, error) points (or over whole ``groups``, :func:`rank_correlation`); the
    verdict of "c" decides "the error rises with sqrt(2L + L^2) above the floor" (c > 0)."""
    (L, error), groups = _finite_rows(L, error, groups=groups)

    def coef(name):
        def stat(x, y):
            if np.ptp(x) == 0:
                return float("nan")  # a resample with one L value has no slope
            return getattr(fit_theory_curve(x, y), name)
        return stat

    return {name: bootstrap_statistic(coef(name), L, error, seed=seed, n_boot=n_boot, groups=groups)
            for name in ("b", "c")}


# --------------------------------------------------------------------------- verdicts
def spearman_rho(x, y) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN for < 3 points or a constant."""
    x, y = _finite_pairs(x, y)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(rankdata(x), rankdata(y))[0, 1])


def _finite_rows(*columns, groups=None):
    """The rows where every column is finite (and their groups' labels, when given)."""
    cols = [np.asarray(c, dtype=np.float64) for c in columns]
    ok = np.logical_and.reduce([np.isfinite(c) for c in cols])
    return [c[ok] for c in cols], (None if groups is None else np.asarray(groups)[ok])


def setting_labels(pairs: pd.DataFrame, columns: Sequence[str] = tuple(SETTING)) -> np.ndarray:
    """One label per row naming its setting (group, alpha, weight decay): the clusters of the
    pair-based verdicts' bootstrap, since the pairs of one setting share trained models."""
    return pairs[list(columns)].astype(str).agg("/".join, axis=1).to_numpy()


def rank_correlation(x, y, *, groups=None, seed: int = 0, n_boot: int = 2000) -> Verdict:
    """Decide "Spearman(x, y) > 0" with a 95% bootstrap interval, resampling the (x, y) rows
    jointly, or, with ``groups`` (e.g. the setting of each pair of seeds), whole groups: pairs
    of one setting share trained models, so they are not independent units."""
    (x, y), groups = _finite_rows(x, y, groups=groups)
    if x.size < 3:
        raise ValueError(f"need at least 3 finite points for a rank correlation, got {x.size}")
    return bootstrap_statistic(spearman_rho, x, y, seed=seed, n_boot=n_boot, groups=groups)


def same_proportionality(l_mean, l_max, error, *, margin: float, groups=None, seed: int = 0,
                         n_boot: int = 2000) -> Verdict:
    """Figure A.4's claim, "the proportionality does not differ whether the max or the mean
    bi-Lipschitz constant is estimated", as an equivalence test: Spearman(l_max, error) minus
    Spearman(l_mean, error), a 95% bootstrap interval resampling the rows (pairs of seeds)
    jointly, or whole ``groups`` (:func:`rank_correlation`), holds when it lies inside
    +-``margin`` (declared in the registry of claims)."""
    from nearid.verdicts import under_test

    (lm, lx, e), groups = _finite_rows(l_mean, l_max, error, groups=groups)
    if lm.size < 3:
        raise ValueError(f"need at least 3 rows with finite L_mean, L_max and error, got {lm.size}")
    v = bootstrap_statistic(lambda a, b, y: spearman_rho(b, y) - spearman_rho(a, y), lm, lx, e,
                            seed=seed, n_boot=n_boot, groups=groups)
    return under_test(v, "equivalence", margin)


def leak_effect(models: pd.DataFrame, *, alpha_a: float, alpha_b: float, column: str = "L_mean",
                log: bool = False) -> Verdict:
    """Decide "``column`` is larger at ``alpha_a`` than at ``alpha_b``" from differences paired by
    (group, weight decay, seed), with a t interval (few units). With ``log``, the differences
    of ``log(column)``: a ratio, so that one model with a large L does not set the verdict
    (B(z) = 1 + L(z) tightening around 1 is L shrinking by a factor)."""
    key = ["group", "weight_decay", "seed"]
    a = models[models.alpha == alpha_a].set_index(key)[column]
    b = models[models.alpha == alpha_b].set_index(key)[column]
    both = a.index.intersection(b.index)
    if len(both) < 2:
        raise ValueError(f"need >= 2 (group, weight decay, seed) units at both alphas, got {len(both)}")
    va, vb = a.loc[both].to_numpy(dtype=np.float64), b.loc[both].to_numpy(dtype=np.float64)
    if log:
        va, vb = np.log(va), np.log(vb)
    return paired_difference(va, vb, method="t")


# --------------------------------------------------------------------------- evaluation, priced
# The exercises' smoke-sized sweeps, as the chapter's exercise cells train them (1,000 training
# and 500 held-out images, 5 epochs, two seeds, at the chapter's code size and hidden layers).
EXERCISE_SWEEP = dict(n_train=1000, n_test=500, epochs=5, seeds=2)
EXERCISE_WEIGHT_DECAYS = (0.0, 0.5, 2.0)  # the weight-decay exercise's grid (linear decoders)
HAND_MODEL = dict(n_train=1000, n_test=200, epochs=2, batch_size=64)  # the "B(z) by hand" exercise's model


def exercise_sweeps(P: Mapping) -> list[BiLipschitzSweep]:
    """The sweeps the chapter's exercises train for resolved parameters ``P``: the linear
    decoders at three weight decays, then the ReLU and linear decoders at the chapter's code
    size and at half of it. Their size follows ``latent_dim`` and ``hidden`` (the profile),
    not ``dry_run``: the exercise cells train them whole in a dry run too."""
    images = Images(n_train=EXERCISE_SWEEP["n_train"], n_test=EXERCISE_SWEEP["n_test"])
    training = Training(latent_dim=P["latent_dim"], hidden=tuple(P["hidden"]), epochs=EXERCISE_SWEEP["epochs"],
                        device="auto")
    seeds = EXERCISE_SWEEP["seeds"]
    out = [BiLipschitzSweep(Grid(alphas=[1.0], seeds=seeds, weight_decays=EXERCISE_WEIGHT_DECAYS, tie_encoder=True),
                            images=images, training=training)]
    for d in sorted({max(2, P["latent_dim"] // 2), P["latent_dim"]}):
        out.append(BiLipschitzSweep(Grid(alphas=[0.0, 1.0], seeds=seeds, weight_decays=[P["digit_weight_decay"]],
                                         tie_encoder=True),
                                    images=images, training=replace(training, latent_dim=d)))
    return out


def seed_pair_alignments(*, rows: Sequence[int], latent_dim: int, pairs: int, fit_fraction: float = 0.5,
                         seed: int = 0, max_steps: int | None = None) -> int:
    """:meth:`BiLipschitzSweep.fit`'s alignments at a chapter's shape, on stand-in codes, for
    ``nearid plan``: ``pairs`` rigid + linear :func:`nearid.align.compare` calls (only the
    first ``max_steps`` when given), call k on two ``rows[k % len(rows)]`` x ``latent_dim``
    code matrices (the digit models' held-out sets differ in size from digit to digit, so
    the calls cycle through them and any first k are a fair sample). Procrustes and least
    squares cost the same whatever the codes hold: seeded Gaussian codes and a noisy linear
    image of them stand in for two seeds' codes. Returns the comparisons made."""
    rng = np.random.default_rng(seed)
    codes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    done = pairs if max_steps is None else min(pairs, max_steps)
    for k in range(done):
        n = int(rows[k % len(rows)])
        if n not in codes:
            A = rng.standard_normal((n, latent_dim))
            codes[n] = (A, A @ rng.standard_normal((latent_dim, latent_dim)) + 0.1 * rng.standard_normal((n, latent_dim)))
        compare(*codes[n], fit_fraction=fit_fraction, seed=seed, families=(RIGID, LINEAR))
    return done


def verdict_bootstraps(*, pairs: int, nonlinear_pairs: int, models: int, digit_pairs: Sequence[int] = (),
                       margin: float, seed: int = 0) -> int:
    """The chapter's bootstrap intervals (2,000 resamples each) at its shape, on stand-in
    numbers, for ``nearid plan``: the rank correlations over the ``pairs`` pairs of seeds
    (L_mean, L_max, the linear error, the local estimate of the exercise, and over the
    ``nonlinear_pairs`` with alpha < 1), the theory fit's floor and slope, Figure A.4's
    equivalence, reconstruction over ``models``, and one rank correlation per digit budget
    (``digit_pairs``: its pairs of seeds) plus the verdict at the largest. A resample's cost
    does not depend on the values. Returns the intervals computed."""
    rng = np.random.default_rng(seed)
    L, L_max, err = rng.random(pairs), rng.random(pairs), rng.random(pairs)
    n = 0
    for x in (L, L_max, rng.random(pairs)):  # rho all, rho max, rho lin
        rank_correlation(x, err)
        n += 1
    if nonlinear_pairs >= 3:
        rank_correlation(L[:nonlinear_pairs], err[:nonlinear_pairs])
        n += 1
    n += len(theory_fit_intervals(L, err))
    same_proportionality(L, L_max, err, margin=margin, seed=seed)
    rank_correlation(rng.random(models), rng.random(models))  # reconstruction against L
    rank_correlation(rng.random(pairs), err)  # the local estimate (an exercise)
    n += 3
    for m in digit_pairs:
        rank_correlation(rng.random(m), rng.random(m))
        n += 1
    if digit_pairs:  # the verdict at the largest budget
        rank_correlation(rng.random(digit_pairs[-1]), rng.random(digit_pairs[-1]))
        n += 1
    return n


def _held_out_rows(sweep: BiLipschitzSweep) -> list[int]:
    """Held-out images per group of ``sweep`` (what each model's codes have as rows): the first
    ``n_test`` test images, of the group's digit only, cut to ``eval_rows``."""
    im, digits = sweep.images, sweep.grid.digits
    y = _labels(im.dataset, False)[:im.n_test]
    counts = [len(y)] if digits is None else [int((y == d).sum()) for d in digits]
    return [n if im.eval_rows is None else min(n, im.eval_rows) for n in counts]


def evaluation_plan(P: Mapping) -> list[Task]:
    """What the chapter computes outside :func:`plan`'s tasks, for ``nearid plan``: the rigid +
    linear alignment of every pair of seeds in every setting (one kind for the all-digit
    sweep, one for the digit sweeps of every budget; one unit per pair), the bootstrap
    intervals of its verdicts, and the exercises' autoencoders (:func:`exercise_sweeps` and
    the "B(z) by hand" model: real tasks, cut to a few optimiser steps when timed)."""
    import dataclasses

    from nearid.claims import registry

    sweeps = chapter_sweeps(P)
    tasks, digit_rows, digit_pairs = [], [], []
    for name, sw in sweeps.items():
        rows = _held_out_rows(sw)
        g = sw.grid
        n_pairs = len(rows) * len(g.alphas) * len(g.weight_decays) * math.comb(g.seeds, 2)
        if name == "all":
            tasks.append(Task(seed_pair_alignments, dict(rows=rows, latent_dim=P["latent_dim"], pairs=n_pairs,
                                                         fit_fraction=sw.fit_fraction, seed=P["seed"]),
                              kind="ch03 seed-pair alignments", steps=n_pairs,
                              label=f"{n_pairs} rigid + linear alignments of {rows[0]} x {P['latent_dim']} codes"))
            all_pairs = n_pairs
            nonlinear = n_pairs // len(g.alphas) * sum(a < 1 for a in g.alphas)
            n_models = len(g.alphas) * len(g.weight_decays) * g.seeds
        else:
            digit_rows, fit_fraction = rows, sw.fit_fraction
            digit_pairs.append(n_pairs)
    if digit_pairs:
        total = sum(digit_pairs)
        tasks.append(Task(seed_pair_alignments, dict(rows=digit_rows, latent_dim=P["latent_dim"], pairs=total,
                                                     fit_fraction=fit_fraction, seed=P["seed"]),
                          kind="ch03 seed-pair alignments (digit models)", steps=total,
                          label=f"{total} rigid + linear alignments of "
                                + (f"{min(digit_rows)} to {max(digit_rows)}" if len(set(digit_rows)) > 1 else
                                   f"{digit_rows[0]}") + f" x {P['latent_dim']} codes (one digit each)"))
    tasks.append(Task(verdict_bootstraps, dict(pairs=all_pairs, nonlinear_pairs=nonlinear, models=n_models,
                                               digit_pairs=digit_pairs, seed=P["seed"],
                                               margin=registry()["rigid_rises_with_Lmax"].margin),
                      kind="ch03 verdict bootstraps",
                      label=f"bootstrap intervals over {all_pairs} pairs of seeds, {n_models} models"
                            + (f" and {len(digit_pairs)} digit budgets" if digit_pairs else "")))
    exercise = "ch03 exercise autoencoder"
    for sw in exercise_sweeps(P):
        tasks += [dataclasses.replace(t, kind=exercise, label="exercise: " + t.label) for t in sw.tasks()]
    hand = dict(alpha=0.0, seed=0, images=Images(n_train=HAND_MODEL["n_train"], n_test=HAND_MODEL["n_test"]),
                training=Training(latent_dim=P["latent_dim"], hidden=P["hidden"], epochs=HAND_MODEL["epochs"],
                                  batch_size=HAND_MODEL["batch_size"], device="cpu"))
    tasks.append(Task(train_and_measure, hand, kind=exercise, label="exercise: B(z) by hand, one ReLU autoencoder",
                      steps=HAND_MODEL["epochs"] * math.ceil(HAND_MODEL["n_train"] / HAND_MODEL["batch_size"])))
    return tasks
