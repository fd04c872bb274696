"""Chapter 04's model pairs: what each pair trains (or loads), on which data, for how long,
and the task that builds one pair and embeds its held-out inputs.

Each builder trains (or loads) two models and embeds the same held-out inputs with both,
returning a :class:`Pair`. :data:`PAIRS` is the registry: for each pair how its settings are
read from the chapter's parameters, its optimiser steps, its builder and whether it trains.
:func:`plan` turns resolved parameters into one task per pair and replicate
(:func:`embed_pair`), run through :func:`nearid.tasks.run_tasks`. The alignment of a pair and
the chapter's verdicts are :mod:`nearid.experiments.ch04_alignment`, which re-exports this
module's public names (the chapter's notebook reads them from there).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from nearid.constraints import ListOf, Options
from nearid.models.sentence_encoders import ENCODER_LABELS
from nearid.tasks import Task
from nearid.train import Recipe, fit, predict, resolve_device

# What we train or load for each pair (the paper's own row names: nearid.paper.TABLE1_LABELS).
PAIR_LABELS = {
    "gpt_neox_seeds": "tiny GPT-NeoX seed 0 -> seed 1",
    "mae_timm_vs_ours": "MAE timm -> MAE original",
    "cnn_widths": "CNN small -> CNN base",
    "resnet18_seeds": "ResNet-18 seed 0 -> seed 1",
    "sentence_encoders": " -> ".join(ENCODER_LABELS.values()),
}
DRY_RUN_STEPS = 2  # optimiser steps per model in a dry run
LM_BATCH_SIZE = 32  # the language pair's batch (its settings do not set one)
DRY_RUN_EVAL = 1200  # held-out rows per pair in a dry run (enough fit rows for 512-d codes)


@dataclass
class Pair:
    """Two representations of the same held-out inputs, and how they were made."""

    name: str
    A: np.ndarray
    B: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    # every layer of both models, for the layer-by-layer map (language pair only)
    layers_A: dict[str, np.ndarray] | None = None
    layers_B: dict[str, np.ndarray] | None = None

    def __post_init__(self):
        if self.A.shape[0] != self.B.shape[0]:
            raise ValueError(f"pair {self.name}: A and B cover different inputs "
                             f"({self.A.shape[0]} vs {self.B.shape[0]} rows)")


def _log(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, flush=True)


class Digits(NamedTuple):
    """MNIST's first training images (with labels) and first test images, as (N, 1, 28, 28)
    arrays: what the image pairs train on and embed."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_eval: np.ndarray
    y_eval: np.ndarray


@dataclass(frozen=True)
class Training:
    """How both models of a pair are trained (the same for both): ``epochs`` over the
    training inputs, AdamW's learning rate ``lr``, the batch size, the device, and whether
    to print each model's result (``verbose``)."""

    epochs: int = 2
    lr: float = 1e-3
    batch_size: int = 128
    device: Any = "cpu"
    verbose: bool = False

    def recipe(self, *, weight_decay: float = 0.0, grad_clip: float | None = None) -> Recipe:
        """:func:`nearid.train.fit`'s recipe for one model of the pair."""
        return Recipe(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, weight_decay=weight_decay,
                      grad_clip=grad_clip)


@dataclass(frozen=True)
class LMShape:
    """The tiny GPT-NeoX models of the language pair: ``hidden`` width, ``layers`` blocks of
    ``heads`` attention heads, windows of ``context`` bytes."""

    hidden: int = 64
    layers: int = 4
    heads: int = 4
    context: int = 64


def mnist_data(*, n_train: int, n_eval: int, root: str | None = None) -> Digits:
    """First ``n_train`` training images (with labels) and first ``n_eval`` test images."""
    from nearid.data.mnist import load_mnist

    Xtr, ytr = load_mnist(root, train=True, n=n_train)
    Xev, yev = load_mnist(root, train=False, n=n_eval)
    return Digits(Xtr[:, None], ytr, Xev[:, None], yev)


# --------------------------------------------------------------------------- image pairs
def mae_pair(digits: Digits, *, seed: int = 0, embed_dim: int = 64, depth: int = 4, num_heads: int = 4,
             training: Training = Training(epochs=5), max_steps: int | None = None) -> Pair:
    """MAE-timm (seed s) -> MAE-original (seed s+1): same hyperparameters, different code.

    Two independent runs (different seeds) as in the paper, where the two MAEs were trained
    separately; with one seed for both the two codes would start from identical weights.
    The labels of ``digits`` are not used.
    """
    from nearid.models.mae import MaskedAutoencoder

    Xtr, Xev, device = digits.X_train, digits.X_eval, training.device
    reps, info = [], {}
    for k, backend in enumerate(("timm", "original")):
        torch.manual_seed(seed + k)
        m = MaskedAutoencoder(img_size=Xtr.shape[-1], in_chans=Xtr.shape[1], embed_dim=embed_dim,
                              depth=depth, num_heads=num_heads,
                              decoder_embed_dim=max(embed_dim // 2, 8), decoder_depth=2,
                              decoder_num_heads=num_heads, backend=backend)
        res = fit(m, Xtr, training.recipe(weight_decay=0.05), seed=seed + k, device=device, max_steps=max_steps)
        reps.append(predict(m.embed, Xev, device=device))
        info[backend] = {"final_loss": res.losses[-1], "seconds": res.seconds, "seed": seed + k,
                         "steps": res.steps}
        _log(training.verbose, f"MAE {backend}: masked MSE {res.losses[-1]:.4f} in {res.seconds:.0f}s")
    return Pair("mae_timm_vs_ours", reps[0], reps[1], info)


def _features_and_accuracy(model, X, y, device) -> tuple[np.ndarray, float]:
    """The penultimate features of ``X`` and the test accuracy, from one forward pass."""
    feats = predict(model.features, X, device=device)
    with torch.no_grad():
        logits = model.head.to("cpu")(torch.as_tensor(feats, dtype=torch.float32)).numpy()
    model.head.to(device)
    return feats, float((logits.argmax(1) == np.asarray(y)).mean())


def cnn_width_pair(digits: Digits, *, seed: int = 0, feature_dim: int = 64, base_feature_dim: int | None = None,
                   arch: str = "cnn", training: Training = Training(epochs=3), max_steps: int | None = None) -> Pair:
    """Classifier "small" -> "base" (twice the channels), same recipe and seed.

    ``feature_dim`` is the width of the small model's feature (penultimate) layer and
    ``base_feature_dim`` the base model's (None = the same), so A and B may differ in width.
    """
    from nearid.models.classifiers import ImageClassifier

    Xtr, ytr, Xev, yev = digits
    widths = {"small": feature_dim, "base": feature_dim if base_feature_dim is None else base_feature_dim}
    reps, info = [], {}
    for width, dim in widths.items():
        torch.manual_seed(seed)
        m = ImageClassifier(width, arch=arch, img_size=Xtr.shape[-1], in_chans=Xtr.shape[1],
                            feature_dim=dim)
        res = fit(m, Xtr, training.recipe(), y=ytr, seed=seed, device=training.device, max_steps=max_steps)
        feats, acc = _features_and_accuracy(m, Xev, yev, training.device)
        reps.append(feats)
        info[width] = {"test_accuracy": acc, "seconds": res.seconds, "feature_dim": dim,
                       "parameters": sum(p.numel() for p in m.parameters()), "steps": res.steps}
        _log(training.verbose, f"classifier {width}: test accuracy {acc:.3f} in {res.seconds:.0f}s")
    return Pair("cnn_widths", reps[0], reps[1], info)


def resnet18_pair(digits: Digits, *, seed: int = 0, stem_stride: int = 2, training: Training = Training(),
                  max_steps: int | None = None) -> Pair:
    """ResNet-18 seed s -> seed s+1 (initial weights and batch order both change)."""
    from nearid.models.classifiers import ResNet18Classifier

    Xtr, ytr, Xev, yev = digits
    reps, info = [], {}
    for k in range(2):
        torch.manual_seed(seed + k)
        m = ResNet18Classifier(in_chans=Xtr.shape[1], stem_stride=stem_stride)
        res = fit(m, Xtr, training.recipe(), y=ytr, seed=seed + k, device=training.device, max_steps=max_steps)
        feats, acc = _features_and_accuracy(m, Xev, yev, training.device)
        reps.append(feats)
        info[f"seed{seed + k}"] = {"test_accuracy": acc, "seconds": res.seconds, "steps": res.steps}
        _log(training.verbose, f"ResNet-18 seed {seed + k}: test accuracy {acc:.3f} in {res.seconds:.0f}s")
    return Pair("resnet18_seeds", reps[0], reps[1], info)


# --------------------------------------------------------------------------- language
def gpt_neox_pair(text: str | None = None, *, seed: int = 0, shape: LMShape = LMShape(), train_windows: int = 2000,
                  eval_windows: int = 1000, pretrained: list[str] | tuple[str, ...] = (),
                  training: Training = Training(batch_size=32), max_steps: int | None = None) -> Pair:
    """Two GPT-NeoX LMs, seeds s and s+1; mean middle-layer state of held-out text windows.

    With two folders in ``pretrained`` (e.g. Pythia-160M seed 0 and seed 1 saved with
    ``save_pretrained``), those are loaded instead of training, and the held-out windows are
    tokenised with their tokenizer; when the held-out text has fewer than ``eval_windows``
    windows of their tokens, all it has are used and ``info["eval_windows"]`` says how many.
    """
    from nearid.models import language as lm

    if text is None:
        from nearid.data.text import load_shakespeare

        text = load_shakespeare()
    train_text, eval_text = lm.split_text(text, 0.1)
    info: dict[str, Any] = {}
    device, context = training.device, shape.context
    if pretrained:
        if len(pretrained) != 2:
            raise ValueError(f"pretrained needs exactly two checkpoint folders, got {list(pretrained)}")
        reps, by_layer = [], []
        for path in pretrained:
            model, tok = lm.load_pretrained(path, device=device)
            if tok is None:
                raise ValueError(f"{path} has no tokenizer files; a real checkpoint needs its "
                                 "tokenizer to read the held-out text")
            ids = np.asarray(tok(eval_text)["input_ids"])
            n = min(eval_windows, len(ids) // context)
            windows = lm.eval_windows(ids, context, n)
            states = lm.embed_windows_by_layer(model, windows, device=device)  # one pass gives every layer
            reps.append(states[f"layer {lm.middle_layer(model)}"])  # = embed_windows(model, windows)
            by_layer.append(states)
            info[Path(path).name] = {"source": str(path), "layer": lm.middle_layer(model)}
            info["eval_windows"] = n
            _log(training.verbose, f"loaded {path}; {n} held-out windows")
        return Pair("gpt_neox_seeds", reps[0], reps[1], info | {"source": "pretrained"}, *by_layer)
    tok = lm.ByteTokenizer()
    train_ids, eval_ids = tok.encode(train_text), tok.encode(eval_text)
    ev = lm.eval_windows(eval_ids, context, eval_windows)
    reps, by_layer = [], []
    for k in range(2):
        X = lm.train_windows(train_ids, context, train_windows, seed=seed + k)
        m = lm.TinyLM(seed=seed + k, hidden_size=shape.hidden, num_hidden_layers=shape.layers,
                      num_attention_heads=shape.heads, max_position_embeddings=max(2 * context, 64))
        res = fit(m, X, training.recipe(grad_clip=1.0), seed=seed + k, device=device, max_steps=max_steps)
        states = lm.embed_windows_by_layer(m, ev, device=device)  # one pass gives every layer
        reps.append(states[f"layer {lm.middle_layer(m.model)}"])  # = embed_windows(m, ev), bit for bit
        by_layer.append(states)
        info[f"seed{seed + k}"] = {"final_nll": res.losses[-1], "seconds": res.seconds,
                                   "layer": lm.middle_layer(m.model), "steps": res.steps}
        _log(training.verbose, f"tiny GPT-NeoX seed {seed + k}: train NLL {res.losses[-1]:.3f} nats/byte "
                             f"in {res.seconds:.0f}s")
    return Pair("gpt_neox_seeds", reps[0], reps[1], info | {"source": "trained"}, *by_layer)


def sentence_encoder_pair(text: str | None = None, *, n_sentences: int = 1000, seed: int = 0,
                          device="cpu", verbose: bool = False) -> Pair:
    """The two packaged MiniLM-L6 encoders on a fixed sample of Shakespeare lines."""
    from nearid.data.text import shakespeare_sentences
    from nearid.models.sentence_encoders import ENCODERS, encode_sentences

    if text is None:
        from nearid.data.text import load_shakespeare

        text = load_shakespeare()
    sentences = shakespeare_sentences(text, n_sentences, seed=seed)
    reps, info = [], {}
    for name in ENCODERS:
        t = time.perf_counter()
        reps.append(encode_sentences(name, sentences, device=str(device)))
        info[name] = {"seconds": time.perf_counter() - t}
        _log(verbose, f"encoder {name}: {len(sentences)} sentences in {info[name]['seconds']:.0f}s")
    return Pair("sentence_encoders", reps[0], reps[1], info)


# --------------------------------------------------------------------------- tasks
def _model_steps(P, n: int, epochs: int, batch: int) -> int:
    """Optimiser steps of one model as :func:`nearid.train.fit` takes them (a dry run cuts them)."""
    full = epochs * math.ceil(n / batch)
    return min(full, DRY_RUN_STEPS) if P.get("dry_run", False) else full


def _embed_mnist(build):
    """A pair builder on MNIST: the first training and test images and how to train,
    read from the pair's settings, then ``build(digits, seed=..., training=..., **the rest)``."""
    def embed(settings, *, seed, device, max_steps, data_root):
        s = dict(settings)
        digits = mnist_data(n_train=s.pop("n_train"), n_eval=s.pop("n_eval"), root=data_root)
        training = Training(epochs=s.pop("epochs"), lr=s.pop("lr"), batch_size=s.pop("batch_size"), device=device)
        return build(digits, seed=seed, training=training, max_steps=max_steps, **s)
    return embed


def usable_checkpoints(paths: Sequence[str]) -> list[str]:
    """The checkpoint folders the language pair loads: all of ``paths`` when every one holds a
    ``config.json``, else none (it then trains two tiny models)."""
    found = [q for q in paths if (Path(q) / "config.json").is_file()]
    return list(paths) if paths and len(found) == len(paths) else []


def _embed_lm(settings, *, seed, device, max_steps, data_root):
    """The language pair: two real checkpoints when every requested folder holds one, else two
    tiny GPT-NeoX models trained here (and the pair's info says so)."""
    s = dict(settings)
    paths = list(s.pop("pretrained", []))
    use = usable_checkpoints(paths)
    shape = LMShape(hidden=s.pop("hidden"), layers=s.pop("layers"), context=s.pop("context"))
    training = Training(epochs=s.pop("epochs"), lr=s.pop("lr"), batch_size=LM_BATCH_SIZE, device=device)
    p = gpt_neox_pair(seed=seed, shape=shape, training=training, max_steps=max_steps, pretrained=use, **s)
    p.info["requested_checkpoints"] = paths
    if paths and not use:
        p.info["note"] = f"checkpoints not found at {paths}: trained tiny GPT-NeoX models instead"
    return p


@dataclass(frozen=True)
class PairSpec:
    """One pair of the chapter: how to read its settings from the chapter's parameters, how
    many optimiser steps it takes, how it is built, and what it trains or loads."""

    settings: Any  # (P, rows) -> the builder's settings (plain values: a task's arguments)
    steps: Any  # P -> optimiser steps of each model (what max_steps caps; both models take as many)
    embed: Any  # (settings, *, seed, device, max_steps, data_root) -> Pair
    trains: bool = True  # False: packaged models only (no GPU asked for)


def _mae_settings(P, rows):
    return dict(n_train=P["mnist_train"], n_eval=rows(P["mnist_eval"]), embed_dim=P["mae_embed_dim"],
                depth=P["mae_depth"], epochs=P["mae_epochs"], lr=P["lr"], batch_size=P["batch_size"])


def _cnn_settings(P, rows):
    return dict(n_train=P["mnist_train"], n_eval=rows(P["mnist_eval"]), feature_dim=P["clf_feature_dim"],
                base_feature_dim=P["clf_base_feature_dim"], epochs=P["clf_epochs"], lr=P["lr"],
                batch_size=P["batch_size"])


def _resnet_settings(P, rows):
    return dict(n_train=P["resnet_train"], n_eval=rows(P["mnist_eval"]), epochs=P["resnet_epochs"],
                lr=P["lr"], batch_size=P["batch_size"], stem_stride=P["resnet_stem_stride"])


def _lm_settings(P, rows):
    return dict(hidden=P["lm_hidden"], layers=P["lm_layers"], context=P["lm_context"],
                train_windows=P["lm_train_windows"], epochs=P["lm_epochs"], lr=P["lr"],
                eval_windows=rows(P["lm_eval_windows"]), pretrained=list(P["pythia_paths"]))


PAIRS: dict[str, PairSpec] = {
    "gpt_neox_seeds": PairSpec(
        _lm_settings, lambda P: _model_steps(P, P["lm_train_windows"], P["lm_epochs"], LM_BATCH_SIZE), _embed_lm),
    "mae_timm_vs_ours": PairSpec(
        _mae_settings, lambda P: _model_steps(P, P["mnist_train"], P["mae_epochs"], P["batch_size"]),
        _embed_mnist(mae_pair)),
    "cnn_widths": PairSpec(
        _cnn_settings, lambda P: _model_steps(P, P["mnist_train"], P["clf_epochs"], P["batch_size"]),
        _embed_mnist(cnn_width_pair)),
    "resnet18_seeds": PairSpec(
        _resnet_settings, lambda P: _model_steps(P, P["resnet_train"], P["resnet_epochs"], P["batch_size"]),
        _embed_mnist(resnet18_pair)),
    "sentence_encoders": PairSpec(
        lambda P, rows: dict(n_sentences=rows(P["sentences"])), lambda P: 0,
        lambda settings, *, seed, device, max_steps, data_root: sentence_encoder_pair(
            seed=seed, device=device, **settings), trains=False),
}


def paper_row(name: str) -> str | None:
    """The row of the paper's Table 1 that pair ``name`` stands for; None beyond the paper."""
    from nearid.paper import TABLE1_STAND_INS

    return TABLE1_STAND_INS.get(name)


PAIR = Options(lambda: tuple(PAIRS), noun="pair")  # a pair's name, checked against the registry


def _spec(name: str) -> PairSpec:
    return PAIRS[PAIR.check("pair", name)]


def pair_settings(P, name: str) -> dict[str, Any]:
    """The builder settings of pair ``name`` from a chapter's resolved parameters (plain
    values, so that they can be a task's arguments); a dry run cuts the held-out rows."""
    spec = _spec(name)
    dry = bool(P.get("dry_run", False))
    return spec.settings(P, lambda n: min(n, DRY_RUN_EVAL) if dry else n)


EVAL_ROWS = ("n_eval", "eval_windows", "n_sentences")  # the settings that count a pair's held-out inputs
MIN_EVAL_ROWS = 20  # the fewest held-out inputs a pair is embedded on (the profiles' own lower bound)


def embed_pair(*, pair: str, seed: int = 0, device: str = "auto", max_steps: int | None = None,
               data_root: str | None = None, evaluate: float = 1.0, **settings) -> dict[str, Any]:
    """Task: train (or load) both models of one pair and embed the held-out inputs.

    ``settings`` are those of :func:`pair_settings`. Returns ``{"A", "B", "info"}`` (numpy
    arrays and plain values, no torch modules), so the result can be cached and shipped.
    ``evaluate`` is for ``nearid plan``, which prices training and embedding apart: a share
    below 1 embeds only that share of the held-out inputs (at least :data:`MIN_EVAL_ROWS`; 0:
    that minimum).
    """
    if not 0 <= evaluate <= 1:
        raise ValueError(f"evaluate must be a share in [0, 1], got {evaluate}")
    if evaluate < 1:
        settings = {k: max(MIN_EVAL_ROWS, math.ceil(evaluate * v)) if k in EVAL_ROWS else v
                    for k, v in settings.items()}
    spec = _spec(pair)
    torch.manual_seed(seed)
    np.random.seed(seed)
    p = spec.embed(settings, seed=seed, device=resolve_device(device), max_steps=max_steps, data_root=data_root)
    return {"A": p.A, "B": p.B, "info": p.info, "layers_A": p.layers_A, "layers_B": p.layers_B}


REPLICATE_SEED_STRIDE = 2  # replicate r trains its pair with seeds seed + 2r and seed + 2r + 1


def replicate_seed(seed: int, replicate: int) -> int:
    """The seed of a pair's replicate ``replicate``: each replicate's two models get seeds no
    other replicate uses, so replicates are independent trainings."""
    return int(seed) + REPLICATE_SEED_STRIDE * int(replicate)


def plan(P) -> list[Task]:
    """The chapter's tasks for resolved parameters ``P``: one per pair and replicate, pairs in
    ``P.pairs`` order. A pair that trains gets ``P.replicates`` independently trained
    replicates (:func:`replicate_seed`); a pair of packaged models has one."""
    ListOf(PAIR, unique=True).check("pairs", P["pairs"])
    tasks = []
    for name in P["pairs"]:
        spec, settings = PAIRS[name], pair_settings(P, name)
        n_rows = settings.get("n_eval") or settings.get("eval_windows") or settings.get("n_sentences")
        n_reps = int(P.get("replicates", 1)) if spec.trains else 1
        for r in range(n_reps):
            kw = dict(pair=name, seed=replicate_seed(P["seed"], r), device=P["device"],
                      max_steps=DRY_RUN_STEPS if P.get("dry_run", False) else None, **settings)
            tasks.append(Task(embed_pair, kw, kind=f"ch04:{name}", gpu=spec.trains and P["device"] != "cpu",
                              label=f"{name}: {PAIR_LABELS[name]}, {n_rows} held-out inputs embedded"
                                    + (f", replicate {r + 1} of {n_reps}" if n_reps > 1 else ""),
                              steps=spec.steps(P)))
    return tasks


def collect_replicates(tasks: list[Task], results: list[dict]) -> dict[str, list[Pair]]:
    """Every replicate's :class:`Pair`, keyed by pair name, replicates in task order."""
    out: dict[str, list[Pair]] = {}
    for t, r in zip(tasks, results):
        name = t.kwargs["pair"]
        out.setdefault(name, []).append(Pair(name, r["A"], r["B"], r["info"], r.get("layers_A"), r.get("layers_B")))
    return out


def collect_pairs(tasks: list[Task], results: list[dict]) -> dict[str, Pair]:
    """The first replicate's :class:`Pair` of every pair, keyed by pair name, in task order:
    what the chapter's secondary analyses (sensitivity, scale trend, layers) read."""
    return {name: reps[0] for name, reps in collect_replicates(tasks, results).items()}


def describe(pair: Pair) -> str:
    """One line on how a pair's models turned out (accuracy, loss, time), ending with the
    pair's note where it has one (a substitution: "checkpoints not found ... instead")."""
    parts = []
    for key, rec in pair.info.items():
        if not isinstance(rec, dict):
            continue
        facts = [f"{k.replace('_', ' ')} {v:.3f}" for k, v in rec.items()
                 if k in ("test_accuracy", "final_loss", "final_nll")]
        if "seconds" in rec:
            facts.append(f"{rec['seconds']:.0f} s")
        parts.append(f"{key} ({', '.join(facts)})")
    note = pair.info.get("note")
    return (f"{pair.name}: A {pair.A.shape[1]}-d, B {pair.B.shape[1]}-d, {pair.A.shape[0]} rows; " + "; ".join(parts)
            + (f". NOTE: {note}" if note else ""))
