"""What ``torch.compile`` would save on chapter 05's convolutional autoencoder step.

Chapter 05 trains 32-px convolutional autoencoders (width 16, hidden 128, batch 64). The
fourteenth round named compiled small-convolution kernels as a lever that moves numbers; this
script measures what it would buy before anyone declares such a change: the step in torch's
eager kernels against the same model with its loss compiled by ``torch.compile`` (inductor,
C++ on the CPU; needs a C++ compiler), one thread, the same fused AdamW, timed alternately
in one process after the compile. It prints the compile time (paid in every process that
trains such a model), the per-step times and how far the first compiled loss is from the
eager one.

Run: ``.venv/bin/python benchmarks/compiled_conv_step.py`` (about a minute on one core).
"""

from __future__ import annotations

import statistics
import time

import torch

from fused_mlp_step import ms_per_step  # benchmarks/ is on the path when a script runs
from nearid.models.conv import bernoulli_recon, make_conv_model

BATCH, LATENT, IMAGE, WIDTH, HIDDEN = 64, 10, 32, 16, 128  # chapter 05 at quick


def model_and_optimiser():
    torch.manual_seed(0)
    model = make_conv_model("ae", LATENT, image_size=IMAGE, width=WIDTH, hidden=HIDDEN)
    return model, torch.optim.AdamW(model.parameters(), lr=2e-3, fused=True)


def main(steps: int = 60, rounds: int = 4) -> None:
    torch.set_num_threads(1)
    X = torch.rand(2000, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(0))
    eager_model, eager_opt = model_and_optimiser()
    compiled_model, compiled_opt = model_and_optimiser()

    def eager_loss(x):
        return bernoulli_recon(eager_model.decode(eager_model.encode(x)), x)

    compiled_loss = torch.compile(lambda x: bernoulli_recon(compiled_model.decode(compiled_model.encode(x)), x))

    def stepper(loss_fn, opt):
        def step(x):
            opt.zero_grad(set_to_none=True)
            loss_fn(x).backward()
            opt.step()
        return step

    x0 = X[:BATCH]
    start = time.perf_counter()
    first = float(compiled_loss(x0).detach())
    print(f"compile: {time.perf_counter() - start:.1f} s; first loss compiled {first!r}, "
          f"eager {float(eager_loss(x0).detach())!r}")

    rows = torch.Generator().manual_seed(1)

    def ms(step, k):
        return ms_per_step(step, X, BATCH, rows, k)

    eager, compiled = stepper(eager_loss, eager_opt), stepper(compiled_loss, compiled_opt)
    for step in (eager, compiled):
        ms(step, 10)  # warm-up (the compiled backward compiles here)
    e, c = [], []
    for _ in range(rounds):
        e.append(ms(eager, steps))
        c.append(ms(compiled, steps))
    em, cm = statistics.median(e), statistics.median(c)
    print(f"eager {em:.2f} ms a step, compiled {cm:.2f} ms ({cm / em:.2f}); rounds: eager "
          f"{[round(v, 2) for v in e]}, compiled {[round(v, 2) for v in c]}")


if __name__ == "__main__":
    main()
