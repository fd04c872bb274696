"""The model pairs of Table 1, built offline: train (or load) two models, embed held-out inputs.

Each builder returns a :class:`Pair`: the two representation matrices A and B (rows = the
same held-out inputs in the same order, never seen in training) and a dict of facts about
how they were made. :func:`nearid.align.alignment_table` then turns a pair into one row of
Table 1. Rows mirror the paper's:

=================  =====================================================================
``pythia``         two tiny GPT-NeoX LMs, seeds s and s+1, on Shakespeare bytes (or two
                   real checkpoints from local folders); mean middle-layer state
``mae``            MAE on timm blocks vs our own MAE, same hyperparameters, MNIST;
                   mean encoder patch token on the unmasked image
``chexpert``       CNN classifiers of width "small" and "base", MNIST; penultimate layer
``resnet18``       torchvision ResNet-18 (1x28x28 stem), seeds s and s+1; features into fc
``sentence_encoders`` two packaged MiniLM-L6 sentence encoders; mean last hidden state
=================  =====================================================================
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nearid.models.sentence_encoders import ENCODER_LABELS
from nearid.train import fit, predict

PAIRS = ("pythia", "mae", "chexpert", "resnet18", "sentence_encoders")
# What we train or load for each row; the paper's own row names are nearid.paper.TABLE1_LABELS.
PAIR_LABELS = {
    "pythia": "tiny GPT-NeoX seed 0 -> seed 1",
    "mae": "MAE timm -> MAE original",
    "chexpert": "CNN small -> CNN base",
    "resnet18": "ResNet-18 seed 0 -> seed 1",
    "sentence_encoders": " -> ".join(ENCODER_LABELS.values()),
}


@dataclass
class Pair:
    """Two representations of the same held-out inputs, and how they were made."""

    name: str
    A: np.ndarray
    B: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.A.shape[0] != self.B.shape[0]:
            raise ValueError(f"pair {self.name}: A and B cover different inputs "
                             f"({self.A.shape[0]} vs {self.B.shape[0]} rows)")


def _log(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, flush=True)


def mnist_data(*, n_train: int, n_eval: int, root: str = "data"):
    """First ``n_train`` training images (with labels) and first ``n_eval`` test images."""
    from nearid.data.mnist import load_mnist

    Xtr, ytr = load_mnist(root, train=True, n=n_train)
    Xev, yev = load_mnist(root, train=False, n=n_eval)
    return Xtr[:, None], ytr, Xev[:, None], yev


# --------------------------------------------------------------------------- image pairs
def mae_pair(Xtr, Xev, *, seed: int = 0, embed_dim: int = 64, depth: int = 4,
             num_heads: int = 4, epochs: int = 5, lr: float = 1e-3, batch_size: int = 128,
             device="cpu", verbose: bool = False) -> Pair:
    """MAE-timm (seed s) -> MAE-original (seed s+1): same hyperparameters, different code.

    Two independent runs (different seeds) as in the paper, where the two MAEs were trained
    separately; with one seed for both the two codes would start from identical weights.
    """
    from nearid.models.mae import MaskedAutoencoder

    reps, info = [], {}
    for k, backend in enumerate(("timm", "original")):
        torch.manual_seed(seed + k)
        m = MaskedAutoencoder(img_size=Xtr.shape[-1], in_chans=Xtr.shape[1], embed_dim=embed_dim,
                              depth=depth, num_heads=num_heads,
                              decoder_embed_dim=max(embed_dim // 2, 8), decoder_depth=2,
                              decoder_num_heads=num_heads, backend=backend)
        res = fit(m, Xtr, epochs=epochs, batch_size=batch_size, lr=lr, weight_decay=0.05,
                  seed=seed + k, device=device)
        reps.append(predict(m.embed, Xev, device=device))
        info[backend] = {"final_loss": res.losses[-1], "seconds": res.seconds, "seed": seed + k}
        _log(verbose, f"MAE {backend}: masked MSE {res.losses[-1]:.4f} in {res.seconds:.0f}s")
    return Pair("mae", reps[0], reps[1], info)


def _accuracy(model, X, y, device) -> float:
    logits = predict(model, X, device=device)
    return float((logits.argmax(1) == np.asarray(y)).mean())


def chexpert_pair(Xtr, ytr, Xev, yev, *, seed: int = 0, feature_dim: int = 64,
                  arch: str = "cnn", epochs: int = 3, lr: float = 1e-3, batch_size: int = 128,
                  device="cpu", verbose: bool = False) -> Pair:
    """Classifier "small" -> "base" (twice the channels), same recipe and seed."""
    from nearid.models.classifiers import ImageClassifier

    reps, info = [], {}
    for width in ("small", "base"):
        torch.manual_seed(seed)
        m = ImageClassifier(width, arch=arch, img_size=Xtr.shape[-1], in_chans=Xtr.shape[1],
                            feature_dim=feature_dim)
        res = fit(m, Xtr, y=ytr, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
                  device=device)
        reps.append(predict(m.features, Xev, device=device))
        acc = _accuracy(m, Xev, yev, device)
        info[width] = {"test_accuracy": acc, "seconds": res.seconds,
                       "parameters": sum(p.numel() for p in m.parameters())}
        _log(verbose, f"classifier {width}: test accuracy {acc:.3f} in {res.seconds:.0f}s")
    return Pair("chexpert", reps[0], reps[1], info)


def resnet18_pair(Xtr, ytr, Xev, yev, *, seed: int = 0, epochs: int = 2, lr: float = 1e-3,
                  batch_size: int = 128, stem_stride: int = 2, device="cpu",
                  verbose: bool = False) -> Pair:
    """ResNet-18 seed s -> seed s+1 (initial weights and batch order both change)."""
    from nearid.models.classifiers import ResNet18Classifier

    reps, info = [], {}
    for k in range(2):
        torch.manual_seed(seed + k)
        m = ResNet18Classifier(in_chans=Xtr.shape[1], stem_stride=stem_stride)
        res = fit(m, Xtr, y=ytr, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed + k,
                  device=device)
        reps.append(predict(m.features, Xev, device=device))
        acc = _accuracy(m, Xev, yev, device)
        info[f"seed{seed + k}"] = {"test_accuracy": acc, "seconds": res.seconds}
        _log(verbose, f"ResNet-18 seed {seed + k}: test accuracy {acc:.3f} in {res.seconds:.0f}s")
    return Pair("resnet18", reps[0], reps[1], info)


# --------------------------------------------------------------------------- language
def pythia_pair(text: str | None = None, *, seed: int = 0, hidden: int = 64, layers: int = 4,
                heads: int = 4, context: int = 64, train_windows: int = 2000, epochs: int = 2,
                lr: float = 1e-3, batch_size: int = 32, eval_windows: int = 1000,
                pretrained: list[str] | tuple[str, ...] = (), device="cpu",
                verbose: bool = False) -> Pair:
    """Two GPT-NeoX LMs, seeds s and s+1; mean middle-layer state of held-out text windows.

    With two folders in ``pretrained`` (e.g. Pythia-160M seed 0 and seed 1 saved with
    ``save_pretrained``), those are loaded instead of training, and the held-out windows are
    tokenised with their tokenizer.
    """
    from nearid.models import language as lm

    if text is None:
        from nearid.data.text import load_shakespeare

        text = load_shakespeare()
    train_text, eval_text = lm.split_text(text, 0.1)
    info: dict[str, Any] = {}
    if pretrained:
        if len(pretrained) != 2:
            raise ValueError(f"pretrained needs exactly two checkpoint folders, got {list(pretrained)}")
        reps = []
        for path in pretrained:
            model, tok = lm.load_pretrained(path, device=device)
            if tok is None:
                raise ValueError(f"{path} has no tokenizer files; a real checkpoint needs its "
                                 "tokenizer to read the held-out text")
            ids = np.asarray(tok(eval_text)["input_ids"])
            windows = lm.eval_windows(ids, context, eval_windows)
            reps.append(lm.embed_windows(model, windows, device=device))
            info[Path(path).name] = {"source": str(path), "layer": lm.middle_layer(model)}
            _log(verbose, f"loaded {path}")
        return Pair("pythia", reps[0], reps[1], info | {"source": "pretrained"})
    tok = lm.ByteTokenizer()
    train_ids, eval_ids = tok.encode(train_text), tok.encode(eval_text)
    ev = lm.eval_windows(eval_ids, context, eval_windows)
    reps = []
    for k in range(2):
        X = lm.train_windows(train_ids, context, train_windows, seed=seed + k)
        m = lm.TinyLM(seed=seed + k, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, max_position_embeddings=max(2 * context, 64))
        res = fit(m, X, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed + k,
                  device=device, grad_clip=1.0)
        reps.append(lm.embed_windows(m, ev, device=device))
        info[f"seed{seed + k}"] = {"final_nll": res.losses[-1], "seconds": res.seconds,
                                   "layer": lm.middle_layer(m.model)}
        _log(verbose, f"tiny GPT-NeoX seed {seed + k}: train NLL {res.losses[-1]:.3f} nats/byte "
                      f"in {res.seconds:.0f}s")
    return Pair("pythia", reps[0], reps[1], info | {"source": "trained"})


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


# --------------------------------------------------------------------------- dispatcher
def build_pairs(P, *, device="cpu", verbose: bool = True, data_root: str = "data") -> dict[str, Pair]:
    """Every pair in ``P.pairs``, from a chapter's resolved parameters (profile 04_alignment)."""
    unknown = [p for p in P["pairs"] if p not in PAIRS]
    if unknown:
        raise ValueError(f"unknown pairs {unknown}; valid: {', '.join(PAIRS)}")
    out: dict[str, Pair] = {}
    mnist = None
    if {"mae", "chexpert", "resnet18"} & set(P["pairs"]):
        mnist = mnist_data(n_train=P["mnist_train"], n_eval=P["mnist_eval"], root=data_root)
    common = dict(seed=P["seed"], device=device, verbose=verbose)
    for name in P["pairs"]:
        if name == "mae":
            Xtr, _, Xev, _ = mnist
            out[name] = mae_pair(Xtr, Xev, embed_dim=P["mae_embed_dim"], depth=P["mae_depth"],
                                 epochs=P["mae_epochs"], lr=P["lr"], batch_size=P["batch_size"],
                                 **common)
        elif name == "chexpert":
            out[name] = chexpert_pair(*mnist, feature_dim=P["clf_feature_dim"],
                                      epochs=P["clf_epochs"], lr=P["lr"],
                                      batch_size=P["batch_size"], **common)
        elif name == "resnet18":
            Xtr, ytr, Xev, yev = mnist
            n = P["resnet_train"]
            out[name] = resnet18_pair(Xtr[:n], ytr[:n], Xev, yev, epochs=P["resnet_epochs"],
                                      lr=P["lr"], batch_size=P["batch_size"],
                                      stem_stride=P["resnet_stem_stride"], **common)
        elif name == "pythia":
            paths = list(P["pythia_paths"])
            if paths and not all((Path(q) / "config.json").is_file() for q in paths):
                _log(verbose, f"Pythia checkpoints not found at {paths}: training tiny GPT-NeoX "
                              "models instead")
                paths = []
            out[name] = pythia_pair(hidden=P["lm_hidden"], layers=P["lm_layers"],
                                    context=P["lm_context"], train_windows=P["lm_train_windows"],
                                    epochs=P["lm_epochs"], lr=P["lr"],
                                    eval_windows=P["lm_eval_windows"],
                                    pretrained=paths, **common)
            out[name].info["requested_checkpoints"] = list(P["pythia_paths"])
        else:
            out[name] = sentence_encoder_pair(n_sentences=P["sentences"], **common)
    return out


# --------------------------------------------------------------------------- Table 1
ORDER = ("permutation", "ica", "rigid", "linear")  # the paper's ordering, worst to best


def table1(pairs: dict[str, Pair], *, fit_fraction: float = 0.5, seed: int = 0,
           ica_components: float | int | str | None = 0.95, ica_max_rows: int | None = None,
           ica_max_iter: int = 1000):
    """One row of Table 1 per pair (a pandas DataFrame indexed by pair name)."""
    import pandas as pd

    from nearid.align import alignment_table

    from threadpoolctl import threadpool_limits

    rows = {}
    for name, pair in pairs.items():
        with threadpool_limits(limits=1):  # see nearid.cli.align.compute: faster, same numbers
            rows[name] = alignment_table(pair.A, pair.B, fit_fraction=fit_fraction, seed=seed,
                                         ica_components=ica_components,
                                         ica_max_rows=ica_max_rows, ica_max_iter=ica_max_iter)
        rows[name]["dim_a"], rows[name]["dim_b"] = pair.A.shape[1], pair.B.shape[1]
    return pd.DataFrame.from_dict(rows, orient="index")


def ordering_holds(row) -> bool:
    """perm >= ica >= rigid >= linear, the ordering every row of the paper's Table 1 shows."""
    vals = [float(row[k]) for k in ORDER]
    return all(a >= b for a, b in zip(vals, vals[1:]))


def beside_paper(ours):
    """Long table (pair, family, source, error) with the paper's Table 1 rows beside ours."""
    import pandas as pd

    from nearid.align import FAMILIES
    from nearid.paper import TABLE1

    records = []
    for pair, row in ours.iterrows():
        for fam in FAMILIES:
            records.append({"pair": pair, "family": fam, "source": "ours", "error": row[fam]})
            if pair in TABLE1:
                records.append({"pair": pair, "family": fam, "source": "paper",
                                "error": TABLE1[pair][fam]})
    return pd.DataFrame(records)
