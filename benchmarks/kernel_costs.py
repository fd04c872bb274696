"""What each portable-kernel pin costs: one training step of each kind of model the quick book
trains, timed in a fresh process per setting (the libraries read their switches at load).

    python benchmarks/kernel_costs.py            # every model kind x every setting, a table
    python benchmarks/kernel_costs.py --only ch05-ae --settings portable native

Settings: ``portable`` (the book's choice: every pin, training's products in OpenBLAS),
``mkl-products`` (every pin, products in MKL's compatible branch: the book before issue 34),
``native`` (``NEARID_NATIVE_KERNELS=1``), and ``without PIN``: the book's choice less one pin
(that pin left at the library's own choice; for ``MKL_CBWR`` and the oneDNN switch the
products stay in MKL, since the OpenBLAS path would otherwise hide them). Times are the
median step of ``--steps`` after two warm-up steps, one thread, on whatever machine runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# the pins torch reads when it loads, which a child can still drop after ``import nearid`` (the
# numpy pins, OPENBLAS_CORETYPE and NPY_DISABLE_CPU_FEATURES, are read when nearid loads numpy:
# on a CPU without AVX-512 they choose what numpy would choose anyway)
PINS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")
SETTINGS = ("portable", "mkl-products", "native", *(f"without {p}" for p in PINS), "without onednn-off")
KINDS = {  # model kind: (chapter, what the quick profile trains)
    "ch02-mlp": "chapter 02: MLP autoencoder 20-64-64-3, batch 128",
    "ch03-mlp": "chapter 03: MLP autoencoder 784-128-64-8, batch 64",
    "ch04-cnn": "chapter 04: CNN classifier (base width), batch 128",
    "ch04-resnet": "chapter 04: ResNet-18 on 28 px, stem stride 2, batch 128",
    "ch04-gpt": "chapter 04: GPT-NeoX 64 wide, 4 layers, context 64, batch 128",
    "ch05-ae": "chapter 05: conv AE 32 px, width 16, batch 64",
    "ch06-mae": "chapter 06: MAE 32 px, 5 channels, embed 64, depth 4, batch 128",
}


def _model(kind: str):
    """(model, one batch) for a kind, built the way its chapter builds it."""
    import torch

    torch.manual_seed(0)
    if kind == "ch02-mlp":
        from nearid.models.autoencoder import MLPAutoencoder
        return MLPAutoencoder(20, 3, hidden=(64, 64)), torch.rand(128, 20)
    if kind == "ch03-mlp":
        from nearid.models.autoencoder import MLPAutoencoder
        return MLPAutoencoder(784, 8, hidden=(128, 64), decoder_slope=0.2), torch.rand(64, 784)
    if kind == "ch04-cnn":
        from nearid.models.classifiers import ImageClassifier
        return ImageClassifier(width="base"), (torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,)))
    if kind == "ch04-resnet":
        from nearid.models.classifiers import ResNet18Classifier
        return ResNet18Classifier(stem_stride=2), (torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,)))
    if kind == "ch04-gpt":
        from nearid.models.language import TinyLM
        return TinyLM(seed=0, hidden_size=64, num_hidden_layers=4), torch.randint(0, 256, (128, 64)).float()
    if kind == "ch05-ae":
        from nearid.models.conv import make_conv_model
        return make_conv_model("ae", 12, 32, 16, 128), torch.rand(64, 3, 32, 32)
    if kind == "ch06-mae":
        from nearid.models.mae import MaskedAutoencoder
        return (MaskedAutoencoder(img_size=32, patch_size=8, in_chans=5, embed_dim=64, depth=4, num_heads=4,
                                  decoder_embed_dim=32, decoder_depth=2, decoder_num_heads=4),
                torch.rand(128, 5, 32, 32))
    raise ValueError(kind)


def _child(kind: str, steps: int) -> None:
    """Runs in the fresh process: time ``steps`` optimiser steps of one kind."""
    import nearid  # noqa: F401  (applies the pins the environment asks for)
    import torch

    from nearid import gemm, kernels

    kernels.configure_torch()
    if os.environ.get("BENCH_ONEDNN_ON"):
        torch.backends.mkldnn.enabled = True
    torch.set_num_threads(1)
    model, batch = _model(kind)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for i in range(steps + 2):
        t = time.perf_counter()
        with gemm.portable_products("cpu"):
            loss, _ = model.loss(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - t)
    print(json.dumps({"step_ms": 1e3 * statistics.median(times), "kernels": kernels.record()["problems"]}))


def _env(setting: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NEARID_NATIVE_KERNELS"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", NEARID_NUM_THREADS="1")
    if setting == "native":
        env["NEARID_NATIVE_KERNELS"] = "1"
    if setting != "portable":
        env["NEARID_MKL_PRODUCTS"] = "1"
    if setting.startswith("without "):
        pin = setting.split(" ", 1)[1]
        if pin == "onednn-off":
            env["BENCH_ONEDNN_ON"] = "1"
        else:  # nearid.kernels.apply sets every pin: set this one to what the library would choose
            env["NEARID_BENCH_UNPIN"] = pin
    return env


def measure(kind: str, setting: str, steps: int) -> float:
    code = ("import os, sys; pin = os.environ.pop('NEARID_BENCH_UNPIN', None)\n"
            "import nearid\n"  # sets every pin; torch has not loaded yet, so one may still go
            "if pin: os.environ.pop(pin, None)\n"
            f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
            f"import kernel_costs; kernel_costs._child({kind!r}, {steps})")
    out = subprocess.run([sys.executable, "-c", code], env=_env(setting), capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{kind} / {setting}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["step_ms"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=list(KINDS), choices=list(KINDS))
    ap.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args(argv)
    print("| model | " + " | ".join(args.settings) + " |")
    print("| --- |" + " ---: |" * len(args.settings))
    for kind in args.only:
        steps = max(3, args.steps // 4) if kind == "ch04-resnet" else args.steps
        ms = [measure(kind, s, steps) for s in args.settings]
        print(f"| {kind} | " + " | ".join(f"{m:.1f}" for m in ms) + " |", flush=True)


if __name__ == "__main__":
    main()
