# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Disentanglement benchmarks: AE + ICA against methods built for it
#
# ## Overview
#
# The paper's practical recipe is short: train a *vanilla* autoencoder, whiten its codes and
# run ICA. {prf:ref}`thm-structural` says that when the data come from independent
# non-Gaussian factors through a nearly isometric map, this recovers the factors up to
# signed permutations. Its Table 2 tests the recipe on four standard disentanglement
# datasets and scores it with InfoMEC {cite}`hsu2023infomec` against β-VAE
# {cite}`higgins2017betavae`, β-TCVAE {cite}`chen2018tcvae` and BioAE
# {cite}`whittington2023bioae`. The question of this chapter:
#
# > Under one protocol, with every row trained by us, does AE + ICA disentangle better than
# > the plain AE it starts from, and as well as the methods designed to disentangle?
#
# Two caveats shape what we can claim. The paper's three baseline rows were *quoted* from
# Hsu et al. (2023), not rerun; we train every row ourselves, with one architecture. And the
# datasets (Shapes3D, MPI3D, Falcor3D, Isaac3D) ship with no package, so we render
# procedural **analogues** with exactly their factor grids: the numbers below measure the
# recipe on look-alike data, not on the originals (a loader for the real files is in
# `nearid.data.shapes3d_mpi3d`).

# %% tags=["parameters", "remove-cell"]
profile = "quick"
overrides = {}
results_path = None

# %% tags=["remove-cell"]
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

import nearid
from nearid import paper
from nearid.book import plotting, results
from nearid.data import procedural
from nearid.data.procedural import FACTOR_GRIDS, grid_size, traversal
from nearid.experiments.ch05_disentanglement import (DEFAULT_HYPER, MODEL_LABELS, MODELS, run_benchmark, summarise,
                                table2_payload)
from nearid.book.profiles import resolve
from nearid.book.results import glue

P = resolve("05_disentanglement", profile, overrides)
nearid.setup(P.seed)
device = nearid.pick_device(P.device)
plotting.use_style()
DATASET_LABELS = {**procedural.DATASET_LABELS, "aggregated": "aggregated"}

# %% [markdown]
# ## The score: InfoMEC
#
# ```{prf:definition} InfoMEC
# :label: def-infomec
#
# Let $s_1, \dots, s_K$ be the (discrete) factors and $z_1, \dots, z_L$ the code. With
# $\mathrm{NMI}_{ij} = I(s_i; z_j) / H(s_i)$ and $A$ the set of *active* latents (range larger
# than a twentieth of the largest range), $|A| = L_A$:
#
# - **InfoM** (modularity) $= \dfrac{\frac{1}{L_A}\sum_{j \in A} \frac{\max_i \mathrm{NMI}_{ij}}{\sum_i \mathrm{NMI}_{ij}} - \frac1K}{1 - \frac1K}$: each latent informs about one factor;
# - **InfoC** (compactness) $= \dfrac{\frac1K\sum_i \frac{\max_{j\in A} \mathrm{NMI}_{ij}}{\sum_{j\in A} \mathrm{NMI}_{ij}} - \frac1{L_A}}{1 - \frac1{L_A}}$: each factor lives in one latent;
# - **InfoE** (explicitness) $= \frac1K \sum_i \frac{H_{\text{null}}(s_i) - \mathrm{CE}_i}{H_{\text{null}}(s_i)}$, $\mathrm{CE}_i$
#   the cross-entropy of an unpenalised, class-balanced multinomial logistic regression
#   from $z$ to $s_i$: the factors can be read out linearly.
# ```
#
# We follow Hsu et al.'s reference protocol: $I$ by the kNN estimator (10 neighbours) of
# scikit-learn's `mutual_info_classif` on standardised latents (our implementation gives the
# same numbers faster, which a unit test checks), plug-in source entropies, InfoE
# in-sample. All three lie in $[0, 1]$, higher is better; the paper stresses InfoM and InfoE.
# A rotation of a perfect code keeps InfoE at 1 but lowers InfoM and InfoC: that is exactly
# the ambiguity ICA is meant to remove. DCI disentanglement {cite}`eastwood2018dci` and MIG
# {cite}`chen2018tcvae` are reported as secondary scores.

# %% [markdown]
# ## Four procedural datasets
#
# Each analogue renders a scene whose every factor changes the picture on its own, with
# the original's number of values per factor:
# a lit object in a room corner under an orbiting camera (Shapes3D), an object held by a
# two-joint robot arm seen by one of three cameras (MPI3D-real-complex), a furnished room
# under a moving point light and a moving camera (Falcor3D), and a robot holding an object
# in a room under a directional light (Isaac3D). The figure shows one traversal per factor,
# the other factors held at the middle of their grids.

# %%
sizes = {ds: ", ".join(f"{k} {v}" for k, v in FACTOR_GRIDS[ds].items()) for ds in P.datasets}
print("\n".join(f"{DATASET_LABELS[ds]} ({grid_size(ds):,} images): {sizes[ds]}" for ds in P.datasets))
steps = 8
fig, axes = plt.subplots(sum(len(FACTOR_GRIDS[ds]) for ds in P.datasets), steps,
                         figsize=(steps * 0.95, 0.95 * sum(len(FACTOR_GRIDS[ds]) for ds in P.datasets)))
row = 0
for ds in P.datasets:
    for factor in FACTOR_GRIDS[ds]:
        imgs = traversal(ds, factor, image_size=P.traversal_size, steps=steps)
        for j in range(steps):
            ax = axes[row, j]
            ax.set_xticks([]), ax.set_yticks([])
            ax.grid(False)
            if j < len(imgs):
                ax.imshow(imgs[j])
            else:
                ax.axis("off")
        axes[row, 0].set_ylabel(f"{DATASET_LABELS[ds]}\n{factor}", rotation=0, ha="right",
                                va="center", fontsize=7)
        row += 1
fig.subplots_adjust(left=0.22, wspace=0.04, hspace=0.06)
plt.show()

# %% [markdown]
# *One traversal per factor and dataset* (rows), from the first to the last value of the
# factor (at most eight evenly spaced values shown), all other factors at the middle of
# their grids.

# %% [markdown]
# ## The protocol
#
# For each dataset we draw {glue:text}`n_train` training and {glue:text}`n_eval` held-out
# distinct grid points (the same for every model and seed) and render them at
# {glue:text}`image_size` x {glue:text}`image_size` pixels. Every trained model shares one
# convolutional encoder and decoder (stride-2 4x4 convolutions down to 4x4, then a hidden
# layer; widths below) and a Bernoulli reconstruction loss; the latent size is twice the
# number of factors, as in Hsu et al. They differ only in their regulariser:
#
# | model | objective (besides reconstruction) | knobs |
# | --- | --- | --- |
# | AE | none; AdamW weight decay | weight decay |
# | β-VAE | β KL(q(z\|x) ‖ N(0, I)) | β |
# | β-TCVAE | KL + (β − 1) TC, TC by minibatch-weighted sampling | β |
# | BioAE | mean relu(−z) + λ mean z² (non-negative, low activity) | λ, weight decay |
# | AE + ICA | the AE above; whitening onto its top-$K$ principal components, then FastICA, fitted on its training codes | none |
#
# We score the codes of the held-out images (the posterior mean for the VAEs). AE + ICA is
# the same trained AE in each seed, so the AE and AE + ICA rows differ only by the
# post-processing. The hyperparameters were set once from the literature, not tuned per
# dataset:

# %%
hyper = {m: {**DEFAULT_HYPER[m], **P.hyper.get(m, {})} for m in DEFAULT_HYPER}
print(pd.DataFrame({MODEL_LABELS[m]: pd.Series(h, dtype=object) for m, h in hyper.items()}).T
      .astype(object).fillna("").to_string())
print(f"shared: image {P.image_size}px, conv width {P.width}, hidden {P.hidden}, "
      f"{P.epochs} epochs, batch {P.batch_size}, AdamW lr {P.lr}, seeds {P.seeds}, device {device}")
glue("n_train", P.n_train)
glue("n_eval", P.n_eval)
glue("image_size", P.image_size)
glue("n_seeds", P.seeds)

# %%
bench = run_benchmark(datasets=P.datasets, seeds=[P.seed + i for i in range(P.seeds)], models=MODELS,
                      image_size=P.image_size, n_train=P.n_train, n_eval=P.n_eval,
                      epochs=P.epochs, batch_size=P.batch_size, lr=P.lr, width=P.width,
                      hidden=P.hidden, hyper=P.hyper, data_seed=P.seed,
                      supersample=P.supersample, ica_components=P.ica_components, device=device)
summary = summarise(bench.scores)

# %% [markdown]
# ## Table 2, ours beside the paper's
#
# Each cell is (InfoM, InfoE, InfoC), mean ± standard deviation over our seeds, and the
# paper's triple beneath it. "aggregated" is the mean over the four datasets (within each
# seed, then over seeds). The paper's β-VAE, β-TCVAE and BioAE rows (marked \*) were quoted
# from Hsu et al. (2023) on the real datasets; ours are all trained here, on the analogues.

# %%
def cell(row) -> str:
    return " ".join(f"{row[f'{s}_mean']:.2f}±{row[f'{s}_std']:.2f}" for s in ("infom", "infoe", "infoc"))


cols = [*P.datasets, "aggregated"] if len(P.datasets) == 4 else list(P.datasets)
rows = []
for m in MODELS:
    ours = {DATASET_LABELS[ds]: cell(summary.set_index(["dataset", "model"]).loc[(ds, m)]) for ds in cols}
    star = "*" if m in paper.TABLE2_QUOTED_FROM_HSU else ""
    theirs = {DATASET_LABELS[ds]: " ".join(f"{v:.2f}" for v in paper.TABLE2[m][ds]) for ds in cols}
    rows.append({"model": MODEL_LABELS[m], "source": "ours (trained)", **ours})
    rows.append({"model": MODEL_LABELS[m] + star, "source": "paper", **theirs})
table2 = pd.DataFrame(rows).set_index(["model", "source"])
table2

# %%
long = bench.scores.melt(id_vars=["dataset", "model", "seed"], value_vars=["infom", "infoe", "infoc"],
                         var_name="score", value_name="value")
long["model"] = long["model"].map(MODEL_LABELS)
long["dataset"] = long["dataset"].map(DATASET_LABELS)
g = sns.catplot(data=long, x="model", y="value", hue="model", col="dataset", row="score",
                kind="bar", errorbar="sd", height=2.2, aspect=1.15, legend=False,
                order=[MODEL_LABELS[m] for m in MODELS], hue_order=[MODEL_LABELS[m] for m in MODELS])
for (score, ds_label), ax in g.axes_dict.items():
    ds = {v: k for k, v in DATASET_LABELS.items()}[ds_label]
    idx = {"infom": 0, "infoe": 1, "infoc": 2}[score]
    ax.scatter(range(len(MODELS)), [paper.TABLE2[m][ds][idx] for m in MODELS], marker="_", s=300,
               color=plotting.PAPER_COLOR, zorder=5, label="paper")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
g.set_titles("{row_name} | {col_name}")
g.set(ylim=(0, 1), xlabel="")
g.axes.flat[0].legend(loc="upper left", fontsize=7)
plt.show()

# %% [markdown]
# *Bars: ours (mean ± sd over seeds). Grey dashes: the paper's Table 2 (β-VAE, β-TCVAE and
# BioAE there quoted from Hsu et al. on the real datasets).*

# %%
pivot = summary.pivot(index="dataset", columns="model", values="infom_mean")
per_ds = pivot.loc[list(P.datasets)]
wins = int((per_ds["ae_ica"] > per_ds["ae"]).sum())
agg_ours = summary.set_index(["dataset", "model"])
agg_key = "aggregated"
glue("ica_wins", wins)
glue("n_datasets", len(P.datasets))
glue("ica_wins_word", "all" if wins == len(P.datasets) else ("none" if wins == 0 else "some"))
glue("agg_infom_ae", agg_ours.loc[(agg_key, "ae"), "infom_mean"])
glue("agg_infom_ica", agg_ours.loc[(agg_key, "ae_ica"), "infom_mean"])
glue("agg_infoe_ae", agg_ours.loc[(agg_key, "ae"), "infoe_mean"])
glue("agg_infoe_ica", agg_ours.loc[(agg_key, "ae_ica"), "infoe_mean"])
glue("agg_infoc_ae", agg_ours.loc[(agg_key, "ae"), "infoc_mean"])
glue("agg_infoc_ica", agg_ours.loc[(agg_key, "ae_ica"), "infoc_mean"])
glue("paper_agg_infom_ae", paper.TABLE2["ae"]["aggregated"][0])
glue("paper_agg_infom_ica", paper.TABLE2["ae_ica"]["aggregated"][0])
best = agg_ours.loc[agg_key, "infom_mean"].drop("ae_ica_all", errors="ignore").idxmax()
glue("best_infom_model", MODEL_LABELS[best])
glue("best_infom_value", agg_ours.loc[(agg_key, best), "infom_mean"])
gain = per_ds["ae_ica"] - per_ds["ae"]
glue("largest_gain_dataset", DATASET_LABELS[gain.idxmax()])
glue("largest_gain", gain.max())
glue("smallest_gain_dataset", DATASET_LABELS[gain.idxmin()])
glue("smallest_gain", gain.min())
glue("ica_beats_baselines", "above" if agg_ours.loc[(agg_key, "ae_ica"), "infom_mean"]
     >= agg_ours.loc[agg_key, "infom_mean"].drop(["ae_ica", "ae_ica_all"], errors="ignore").max()
     else "below")
glue("ica_not_converged", sum(not v for v in bench.ica_converged.values()))
glue("ica_runs", len(bench.ica_converged))
print(f"AE + ICA beats AE on InfoM on {wins} of {len(P.datasets)} datasets (paper: all four)")

# %% [markdown]
# ## What the ICA step changes
#
# The NMI matrices show where each factor's information sits. The ICA step cannot add
# information (InfoE is nearly unchanged by an invertible linear map, up to the logistic
# fit), it can only move it between axes.

# %%
ds = P.heatmap_dataset if P.heatmap_dataset in P.datasets else P.datasets[0]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
for ax, m in zip(axes, ["ae", "ae_ica"]):
    nmi = bench.nmi[(ds, m, P.seed)]
    sc = bench.scores.query("dataset == @ds and model == @m and seed == @P.seed").iloc[0]
    order = np.argsort(-nmi.max(0))  # latents sorted by their best factor's NMI
    sns.heatmap(nmi[:, order], ax=ax, vmin=0, vmax=1, cmap="viridis", cbar=m == "ae_ica",
                yticklabels=bench.factor_names[ds], xticklabels=[f"z{j}" for j in order])
    ax.set(title=f"{MODEL_LABELS[m]}: InfoM {sc.infom:.2f}, InfoC {sc.infoc:.2f}",
           xlabel="latent (sorted by max NMI)")
    ax.tick_params(axis="x", labelsize=7)
fig.suptitle(f"{DATASET_LABELS[ds]}, seed {P.seed}: NMI(factor; latent)", y=1.02)
plt.show()

# %% [markdown]
# *NMI between each factor (rows) and each latent (columns) on the held-out images, for the
# AE and for the same AE after whitening + ICA. A modular code has one bright cell per
# column; a compact code one per row.*
#
# (ch05-verdict)=
# ## What we saw
#
# AE + ICA beats the AE on InfoM on {glue:text}`ica_wins` of {glue:text}`n_datasets`
# datasets (the paper: all four). Aggregated over datasets, InfoM goes from
# {glue:text}`agg_infom_ae:.2f` (AE) to {glue:text}`agg_infom_ica:.2f` (AE + ICA); the
# paper's numbers are {glue:text}`paper_agg_infom_ae:.2f` and
# {glue:text}`paper_agg_infom_ica:.2f`. InfoE moves from {glue:text}`agg_infoe_ae:.2f` to
# {glue:text}`agg_infoe_ica:.2f` and InfoC from {glue:text}`agg_infoc_ae:.2f` to
# {glue:text}`agg_infoc_ica:.2f`. The largest InfoM gain is on
# {glue:text}`largest_gain_dataset` ({glue:text}`largest_gain:+.2f`), the smallest on
# {glue:text}`smallest_gain_dataset` ({glue:text}`smallest_gain:+.2f`). Among all five rows
# the best aggregated InfoM is {glue:text}`best_infom_model`'s
# ({glue:text}`best_infom_value:.2f`); AE + ICA lies {glue:text}`ica_beats_baselines` the
# best of the trained baselines. FastICA stopped before converging in
# {glue:text}`ica_not_converged` of {glue:text}`ica_runs` fits.
#
# **How many components to whiten onto.** The paper does not say. Our AE + ICA whitens
# onto the top $K$ principal components of the $2K$-dimensional code (sklearn's
# `FastICA(n_components=K)`), standard practice when the number of sources is known; the
# table below also scores ICA on all $2K$ whitened latents, from the same AE codes.

# %%
variants = pivot.loc[list(P.datasets), ["ae", "ae_ica", "ae_ica_all"]] if "ae_ica_all" in pivot else None
if variants is not None:
    variants = variants.rename(columns=MODEL_LABELS, index=DATASET_LABELS)
    all_wins = int((pivot.loc[list(P.datasets), "ae_ica_all"] > pivot.loc[list(P.datasets), "ae"]).sum())
    glue("all_wins", all_wins)
    display(variants.round(3))
else:
    glue("all_wins", wins)

# %% [markdown]
# InfoM, mean over seeds. With all $2K$ components ICA beats the AE on
# {glue:text}`all_wins` of {glue:text}`n_datasets` datasets: whitening scales the latent
# directions that carry almost nothing up to unit variance, and they come back as extra,
# noisy "components".
#
# How to read this honestly:
#
# - **Where the recipe should win.** ICA needs factors that are independent and
#   non-Gaussian, and an encoder that is close to a linear function of them. Our factors are
#   independent and uniform on their grids (maximally non-Gaussian for ICA's purposes), so
#   the remaining question is the encoder: when the AE's code is a near-linear mix of the
#   factors, whitening + ICA unmixes it and InfoM rises, as on the datasets with the
#   largest gain.
# - **Where it cannot.** ICA rotates; it cannot undo a *nonlinear* entanglement, nor
#   split one factor that the AE spread over a curved manifold (MPI3D's two arm angles, and
#   hues, which are circular, are the usual suspects).
# - **Budget.** In the quick profile every model sees a few thousand small images for a few
#   epochs; the paper's models train for hundreds of thousands of steps on 64x64 images.
#   Under-trained VAEs sit closer to their prior and under-trained AEs further from an
#   isometry, so absolute numbers here are not comparable with the paper's, and the ranking
#   of the regularised baselines can change with training time (the `full` profile runs
#   the paper's scale).
# - **Data.** The analogues share the original factor grids but not their images; the
#   paper's Shapes3D gain (0.34 → 0.79) need not transfer to a renderer where, for example,
#   hue factors move large areas of pixels.
#
# The part of the paper's claim our setup can test is the *within-seed* comparison AE vs
# AE + ICA: it involves no retuning and no change of architecture, only the post-processing
# of {prf:ref}`thm-structural`.

# %%
payload = {
    "table2": table2_payload(summary, datasets=list(P.datasets)),
    "table2_std": table2_payload(summary, datasets=list(P.datasets), stat="std"),
    "aggregated": table2_payload(summary, datasets=["aggregated"]).get("aggregated", {}),
    "ae_ica_beats_ae_infom": wins,
    "ica_components": P.ica_components,
    "n_datasets": len(P.datasets),
    "seeds": [P.seed + i for i in range(P.seeds)],
    "ica_converged": {f"{d}/{s}": bool(v) for (d, s), v in bench.ica_converged.items()},
    "seconds": {f"{d}/{k}": float(v) for (d, k), v in bench.seconds.items()},
    "paper_table2": paper.TABLE2,
}
results.save(results_path, payload, params=P, profile=profile)

# %% [markdown]
# ## Exercises
#
# ```{exercise}
# :label: ex-05-rotation
#
# Take the AE + ICA codes of one dataset and apply a random rotation after the whitening
# instead of ICA (a "PCA + Rand" row, as chapter 06 does for cell images). Predict InfoM,
# InfoE and InfoC relative to AE + ICA before you compute them.
# ```
#
# ```{solution} ex-05-rotation
# :class: dropdown
#
# InfoE is unchanged up to the logistic fit's tolerance: whitening and rotations are
# invertible linear maps, and the probe is linear. InfoM and InfoC fall, to about the AE's
# level or below: a random rotation spreads every factor over many axes, which is the
# ambiguity that ICA's non-Gaussianity criterion resolves and a random rotation does not.
# ```
#
# ```{exercise}
# :label: ex-05-latent
#
# Rerun with a latent size equal to the number of factors (edit `train_model`'s
# `2 * n_factors`). Which of InfoM and InfoC do you expect to change most for AE + ICA,
# and why?
# ```
#
# ```{solution} ex-05-latent
# :class: dropdown
#
# InfoC should rise most: with K latents for K factors there are no near-empty directions
# that whitening inflates into extra components sharing a factor's information, so each
# factor concentrates in fewer latents. InfoM can rise too, but it depends more on whether
# the AE's code is close to a linear mix of the factors, which the latent size does not fix.
# ```
