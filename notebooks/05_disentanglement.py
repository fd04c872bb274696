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
# The paper's practical recipe is short: train a *vanilla* autoencoder, {term}`whiten
# <Whitening>` its codes and run {term}`ICA`. {prf:ref}`thm-structural` says that when the
# data come from independent non-Gaussian factors through a nearly {term}`isometric
# <Isometry>` map, this recovers the factors up to {term}`signed permutations <Signed
# permutation>`. Its Table 2 tests the recipe on four
# standard disentanglement datasets and scores it with InfoMEC {cite}`hsu2023infomec`
# against β-VAE {cite}`higgins2017betavae`, β-TCVAE {cite}`chen2018tcvae` and BioAE
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
#
# :::{admonition} Key takeaways
# :class: tip
#
# * The recipe: a vanilla autoencoder, whitened and rotated by ICA, scored with InfoMEC (InfoM modularity, InfoE explicitness, InfoC compactness) against β-VAE, β-TCVAE and BioAE.
# * Every row is trained here under one protocol, on procedural analogues of Shapes3D, MPI3D, Falcor3D and Isaac3D with their factor grids, not on the datasets themselves.
# * In this build, {glue:text}`takeaway_tally` ({ref}`the verdicts <ch05-verdict>`; each claim in
#   words: {ref}`summary-claim-by-claim`).
# :::

# %% tags=["parameters", "remove-cell"]
profile = "quick"
overrides = {}
results_path = None

# %% tags=["remove-cell"]
import nearid  # first: it pins the CPU kernels before numpy and torch load (nearid.kernels)
from dataclasses import replace
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display
from scipy.stats import ortho_group

import nearid
from nearid import paper
from nearid.book import claim_text, plotting, results, tables
from nearid.book.profiles import resolve
from nearid.book.results import glue, glue_tally, glue_verdict
from nearid.claims import registry as claims_registry
from nearid.data import procedural
from nearid.data.procedural import FACTOR_GRIDS, grid_size, traversal
from nearid.experiments.ch05_disentanglement import (BASELINES, CONVERGED_INFOE_CHECK, DEFAULT_HYPER, EQUAL_LATENTS,
                                                     INFOMEC, MODEL_LABELS, MODELS, SCORE_LABELS, VARIANT_ROW, claims,
                                                     collect, converged_infoe_check, eval_factors,
                                                     paired_differences, paper_comparison, plan, Setup,
                                                     summarise, table2_payload, train_and_score, trend_change,
                                                     trend_summary)
from nearid.metrics.infomec import infomec
from nearid.tasks import run_tasks
from nearid.verdicts import paired_difference

P = resolve("05_disentanglement", profile, overrides)
nearid.setup(P.seed)
device = nearid.pick_device(P.device)
plotting.use_style()
DATASET_LABELS = {**procedural.DATASET_LABELS, "aggregated": "aggregated"}

# %% tags=["remove-input"]
if P.dry_run:
    display(Markdown("**Dry run**: every model stops after two optimisation steps and only a few "
                     "hundred images are rendered, to exercise the full profile's shapes and code "
                     "paths. The numbers on this page are meaningless."))

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
# {term}`InfoM` and {term}`InfoC` are two readings of one NMI matrix, by columns and by rows;
# this is the library's code for both:
#
# ```{literalinclude} ../../lib/nearid/metrics/infomec.py
# :pyobject: _normalised_concentration
# ```
#
# ```{literalinclude} ../../lib/nearid/metrics/infomec.py
# :pyobject: infom_infoc
# ```
#
# We follow Hsu et al.'s reference protocol for the NMI: $I$ by the kNN estimator (10
# neighbours) of scikit-learn's `mutual_info_classif` on standardised latents (our
# implementation gives the same numbers faster, which a unit test checks), plug-in source
# entropies. All three scores lie in $[0, 1]$, higher is better; the paper stresses InfoM
# and InfoE. A rotation of a perfect code keeps InfoE at 1 but lowers InfoM and InfoC: that
# is exactly the ambiguity ICA is meant to remove. {term}`DCI` disentanglement
# {cite}`eastwood2018dci` and {term}`MIG` {cite}`chen2018tcvae` are reported as secondary
# scores.
#
# **{term}`InfoE` two ways, declared here.** The reference code fits the logistic regression
# on standardised latents and stops L-BFGS after 100 iterations; that is the InfoE of the
# paper's Table 2, and the one our verdicts test against it. On an autoencoder's correlated
# latents that fit stops short of its optimum, and further short for a correlated code than
# for a decorrelated one. So we also fit the same probe to convergence, on latents whitened
# onto every direction with non-zero variance ("InfoE at convergence"): the unpenalised
# optimum does not change under an invertible linear map of the inputs, so this is the
# quantity the reference probe is heading for (a unit test checks it against Newton's
# method on the standardised latents). The gap between the two is a finding, shown below.
#
# ```{literalinclude} ../../lib/nearid/metrics/infomec.py
# :pyobject: infoe
# ```
#
# ```{literalinclude} ../../lib/nearid/metrics/infomec.py
# :pyobject: probe_inputs
# ```

# %% [markdown]
# ## Four procedural datasets
#
# Each analogue renders a scene whose every factor changes the picture on its own, with
# the original's number of values per factor:
# a lit object in a room corner under an orbiting camera (Shapes3D), an object held by a
# two-joint robot arm seen by one of three cameras (MPI3D-real-complex), a furnished room
# under a moving point light and a moving camera (Falcor3D), and a robot holding an object
# in a room under a directional light (Isaac3D). {numref}`tbl-05-datasets` lists the
# factor grids and {numref}`fig-05-traversals` shows one traversal per factor, the other
# factors held at the middle of their grids.

# %% tags=["remove-input"]
tables.table(pd.DataFrame({"images": {DATASET_LABELS[ds]: grid_size(ds) for ds in P.datasets},
                           "factors (values per factor)": {
                               DATASET_LABELS[ds]: ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in FACTOR_GRIDS[ds].items())
                               for ds in P.datasets}}).rename_axis("dataset"),
             "The four procedural datasets: the number of distinct images (the full factor grid) and each "
             "factor with its number of values, as in the originals.", "tbl-05-datasets")

# %% tags=["remove-input"] mystnb={"figure": {"caption": "One traversal per factor and dataset (rows), from the first to the last value of the factor (at most eight evenly spaced values shown), all other factors at the middle of their grids.", "name": "fig-05-traversals"}, "image": {"alt": "Grid of small rendered images: one row per factor of each procedural dataset, labelled with the dataset and factor, showing the image change as that factor moves from its first to its last value."}}
steps = 8
n_rows = sum(len(FACTOR_GRIDS[ds]) for ds in P.datasets)
fig, axes = plt.subplots(n_rows, steps, figsize=(plotting.WIDTH, 0.68 * n_rows), squeeze=False)
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
                                va="center", fontsize=9)
        row += 1
fig.subplots_adjust(left=0.24, wspace=0.04, hspace=0.06)
plt.show()

# %% [markdown]
# ## The protocol
#
# Every choice below is fixed before any result is computed.
#
# **Data.** For each dataset we draw {glue:text}`n_train` training and {glue:text}`n_eval`
# held-out distinct grid points (the same for every model and seed) and render them at
# {glue:text}`image_size` x {glue:text}`image_size` pixels.
#
# **Models.** Every trained model shares one convolutional encoder and decoder (stride-2
# 4x4 convolutions down to 4x4, then a hidden layer; widths below) and a Bernoulli
# reconstruction loss; the latent size is {glue:text}`latent_multiplier` times the number
# of factors $K$ (twice, as in Hsu et al., unless the parameter `latent_multiplier` says
# otherwise). They differ only in their regulariser:
#
# ```{table} The trained models: one architecture and loss, different regularisers.
# :name: tbl-05-models
# :class: nearid-table
#
# | model | objective (besides reconstruction) | knobs |
# | --- | --- | --- |
# | AE | none; AdamW weight decay | weight decay |
# | β-VAE | β KL(q(z\|x) ‖ N(0, I)) | β |
# | β-TCVAE | KL + (β − 1) TC, TC by minibatch-weighted sampling | β |
# | BioAE | mean relu(−z) + λ mean z² (non-negative, low activity) | λ, weight decay |
# | AE + ICA | the AE above; whitening onto every direction its code holds, then FastICA, fitted on its training codes | none |
# ```
#
# We score the codes of the held-out images (the posterior mean for the VAEs). AE + ICA is
# the same trained AE in each seed, so the AE and AE + ICA rows differ only by the
# post-processing, which is this function of the library:
#
# ```{literalinclude} ../../lib/nearid/experiments/ch05_disentanglement.py
# :pyobject: fit_ica
# ```
#
# **How many components ICA sees.** The paper's recipe is "ICA post-processing of latent
# representations", and its {prf:ref}`thm-structural` whitens and rotates the whole
# representation; it never says that components are dropped. Our AE + ICA therefore whitens
# onto *every* direction the $2K$-dimensional training code holds (its numerical rank:
# directions at float32 rounding level carry no signal) and rotates them with FastICA, an
# invertible linear map of the code (`ica_keep="all"`). Beside it, from the same codes, we
# score the common alternative of whitening onto the top $K$ principal components only
# ("AE + ICA (top K)", `ica_keep="k"`).
#
# **What the two can do to InfoE, before any result.** InfoE is the accuracy of a linear
# probe from the whole code to each factor. An invertible linear map gives the probe the same
# set of functions, so at convergence InfoE(AE + ICA) = InfoE(AE); keeping $K$ of the $2K$
# directions gives it a subset of them, so InfoE(AE + ICA (top K)) ≤ InfoE(AE). Neither can
# raise InfoE at convergence. The paper's Table 2 prints AE + ICA's InfoE at or above the
# AE's on every dataset, with a probe stopped after 100 iterations, which can gain from ICA
# only because ICA's decorrelated, unit-variance code is easier for it to fit in that many
# steps. Our verdicts test the paper's cells with the paper's probe; beside them, a declared
# check of the method tests that at convergence the difference is zero.
#
# **InfoM and InfoC on equal latent sets, before any result.** InfoM and InfoC average over
# the latents Hsu et al.'s rule counts *active* (range above a twentieth of the largest).
# Whitening gives every direction of the code unit variance, so the rule counts all $2K$
# directions of AE + ICA, while an AE may leave some latents nearly constant: the two rows
# would be averaged over different numbers of latents. Our verdicts on InfoM and InfoC
# therefore score every code on the same number of latents, its $K$ most informative ones
# (the $K$ largest column sums of its NMI matrix; `nearid.metrics.infomec.informative_latents`),
# declared on 2026-12-05 (until then the verdicts used the rule too). Table 2 keeps the rule,
# as the paper computes it, and the verdicts under the rule are shown beside as a
# sensitivity ({numref}`tbl-05-latent-sets`).
#
# **Verdicts.** Each claim is a paired comparison over seeds: for every seed, the score of
# AE + ICA minus the score of the AE trained with that seed (or of a baseline trained with
# that seed), per dataset, and "aggregated" = the mean of that difference over the four
# datasets within the seed, with a 95% Student-t interval over {glue:text}`n_seeds` seeds.
# How an interval is read is declared per claim in the registry of claims
# (`lib/nearid/claims.yaml`) before the result:
#
# - *higher* (superiority), where the paper prints a gain: holds when the interval lies above
#   0, fails when it lies below;
# - *the same* (equivalence), where the paper prints the same number for both rows: holds
#   when the interval lies inside ± the metric's margin, fails when it lies outside;
# - *comparable* (non-inferiority) for the baselines, as Table 2's caption puts it: holds when
#   the interval lies above − the metric's margin, fails when it lies below.
#
# A metric's margin is the largest standard deviation over seeds that the paper reports for
# that metric in its Table 5: {glue:text}`ch05_margin_infom` for InfoM,
# {glue:text}`ch05_margin_infoe` for InfoE, {glue:text}`ch05_margin_infoc` for InfoC.
# Differences smaller than the paper's own seed-to-seed spread are not differences it could
# print. Anything else is *inconclusive*.
#
# **Training budget and the scale trend.** Every Table 2 row trains for {glue:text}`epochs`
# epochs. The paper trains far longer, so we also record how the AE-versus-AE + ICA
# comparison moves with training: the AE of each seed trains on to {glue:text}`trend_max`
# epochs and is scored after each of {glue:text}`trend_list` epochs (the same run; with a
# constant learning rate, the snapshot after $e$ epochs is exactly the model an $e$-epoch
# run gives). Its Table 2 rows are the snapshot after {glue:text}`epochs` epochs.
#
# The hyperparameters were set once from the literature, not tuned per dataset
# ({numref}`tbl-05-hyper`):

# %%
hyper = {m: {**DEFAULT_HYPER[m], **P.hyper.get(m, {})} for m in DEFAULT_HYPER}
print(f"shared: image {P.image_size}px, conv width {P.width}, hidden {P.hidden}, latents "
      f"{P.latent_multiplier} x K, {P.epochs} epochs, batch {P.batch_size}, AdamW lr {P.lr}, "
      f"{P.seeds} seeds, device {device}")

# %% tags=["remove-input"]
knobs = pd.DataFrame({MODEL_LABELS[m]: pd.Series(h, dtype=object) for m, h in hyper.items()}).T
tables.table(knobs.rename(columns=lambda k: k.replace("_", " ")).rename_axis("model"),
             "Each model's own hyperparameters (– where a model has no such knob); everything else is shared.",
             "tbl-05-hyper", formats={k.replace("_", " "): "{:g}" for k in knobs.columns})

# %% tags=["remove-cell"]
glue("n_train", P.n_train)
glue("n_eval", P.n_eval)
glue("image_size", P.image_size)
glue("n_seeds", P.seeds)
glue("epochs", P.epochs)
glue("latent_multiplier", P.latent_multiplier)
for metric, claim_id in (("infom", "ica_vs_beta_vae_infom_aggregated"), ("infoe", "ica_vs_beta_vae_infoe_aggregated"),
                         ("infoc", "ica_vs_ae_infoc_mpi3d")):
    glue(f"ch05_margin_{metric}", claims_registry()[claim_id].margin)
trend_budgets = sorted(P.trend_epochs)
glue("trend_max", max(trend_budgets))
glue("trend_list", ", ".join(map(str, trend_budgets[:-1])) + " and " + str(trend_budgets[-1]))

# %% [markdown]
# ## Running the sweep
#
# Each (dataset, seed, model) training run is one task: a pure function of its parameters
# that renders its images, trains, encodes and scores (the AE's task also fits the ICA step
# and scores the trend snapshots). The tasks run in this process by default, or on local
# processes or a Dask cluster with `-p executor=...`; finished tasks are cached, so a
# killed run resumes.

# %%
tasks = plan(P)
bench = collect(run_tasks(tasks, executor=P.executor, scheduler=P.scheduler))
summary = summarise(bench.scores)
n_train_run, n_eval_run = tasks[0].kwargs["setup"].n_train, tasks[0].kwargs["setup"].n_eval

# %% [markdown]
# ## Table 2, ours beside the paper's
#
# {numref}`tbl-05-table2` gives, for each dataset and model, InfoM, InfoE and InfoC as the
# mean ± standard deviation over our seeds, with the paper's number beneath each.
# "aggregated" is the mean over the four datasets (within each seed, then over seeds). The
# paper's β-VAE, β-TCVAE and BioAE rows (marked \*) were quoted from Hsu et al. (2023) on
# the real datasets; ours are all trained here, on the analogues.

# %% tags=["remove-input"]
full_grid = set(P.datasets) == set(paper.TABLE2_DATASETS)
cols = [*P.datasets, "aggregated"] if full_grid else list(P.datasets)
by_cell = summary.set_index(["dataset", "model"])
table2 = pd.DataFrame([
    {"dataset": DATASET_LABELS[ds], "model": MODEL_LABELS[m] + ("*" if m in paper.TABLE2_QUOTED_FROM_HSU else ""),
     **{SCORE_LABELS[s]: tables.beside_paper(tables.mean_sd(by_cell.loc[(ds, m), f"{s}_mean"],
                                                           by_cell.loc[(ds, m), f"{s}_std"]), paper.TABLE2[m][ds][i])
        for i, s in enumerate(INFOMEC)}}
    for ds in cols for m in MODELS]).set_index(["dataset", "model"])
tables.table(table2, "Table 2, ours beside the paper's: InfoM, InfoE and InfoC per dataset and model, ours as mean "
             "± sd over seeds, the paper's beneath (\\* quoted by the paper from Hsu et al. on the real "
             "datasets).", "tbl-05-table2")

# %% [markdown]
# {numref}`fig-05-table2` shows the same numbers as bars.

# %% tags=["remove-input"] mystnb={"figure": {"caption": "Table 2 as bars: ours (mean ± sd over seeds, one colour per model) and the paper's value for the same cell (grey dash; its β-VAE, β-TCVAE and BioAE rows were quoted from Hsu et al. on the real datasets).", "name": "fig-05-table2"}, "image": {"alt": "Grid of bar charts, one row per score (InfoM, InfoE, InfoC) and one column per dataset: our mean score of each model as a coloured bar with its sd over seeds, the paper's value for the same cell as a grey dash; the models are named under the bottom row and by colour in the legend above the grid."}}
long = bench.scores.melt(id_vars=["dataset", "model", "seed"], value_vars=list(INFOMEC),
                         var_name="score", value_name="value")
long = long[long["model"].isin(MODELS)]
long["model"] = long["model"].map(MODEL_LABELS)
long["dataset"] = long["dataset"].map(DATASET_LABELS)
long["score"] = long["score"].map(SCORE_LABELS)
g = sns.catplot(data=long, x="model", y="value", hue="model", col="dataset", row="score",
                kind="bar", errorbar="sd", height=plotting.WIDE / (1.15 * len(P.datasets)), aspect=1.15,
                legend=False, order=[MODEL_LABELS[m] for m in MODELS], hue_order=[MODEL_LABELS[m] for m in MODELS])
label_to_ds = {v: k for k, v in DATASET_LABELS.items()}
for (score, ds_label), ax in g.axes_dict.items():
    idx = [SCORE_LABELS[s] for s in INFOMEC].index(score)
    ax.scatter(range(len(MODELS)), [paper.TABLE2[m][label_to_ds[ds_label]][idx] for m in MODELS],
               marker="_", s=300, color=plotting.PAPER_COLOR, zorder=5, label="paper")
g.set_titles("{row_name} | {col_name}")
g.set(ylim=(0, 1), xlabel="")
for ax in g.axes[-1]:  # the bottom row names the models (the legend gives their colours)
    ax.tick_params(axis="x", labelrotation=45)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
handles = [plt.Rectangle((0, 0), 1, 1, color=c, label=MODEL_LABELS[m])
           for m, c in zip(MODELS, sns.color_palette(n_colors=len(MODELS)))]
handles.append(plt.Line2D([], [], marker="_", ms=14, mew=2, ls="none", color=plotting.PAPER_COLOR, label="paper"))
g.figure.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(handles), frameon=False,
                handlelength=1.2, columnspacing=1.0)
plt.show()

# %% tags=["remove-cell"]
verdicts = claims(bench.scores, datasets=list(P.datasets), section="ch05-verdict",
                  ica_converged=bench.ica_converged)
vt = pd.DataFrame.from_dict(verdicts, orient="index")
agg_ours = summary.set_index(["dataset", "model"])


for s in INFOMEC:
    glue_verdict(f"agg_{s}", verdicts[f"ica_vs_ae_{s}_aggregated"], signed=True)
    glue(f"agg_{s}_ae", agg_ours.loc[("aggregated", "ae"), f"{s}_mean"])
    glue(f"agg_{s}_ica", agg_ours.loc[("aggregated", "ae_ica"), f"{s}_mean"])
    col = EQUAL_LATENTS.get(s, s)  # what the verdict compares
    glue(f"agg_{s}_ae_decided", agg_ours.loc[("aggregated", "ae"), f"{col}_mean"])
    glue(f"agg_{s}_ica_decided", agg_ours.loc[("aggregated", "ae_ica"), f"{col}_mean"])
    glue(f"paper_agg_{s}_ae", paper.TABLE2["ae"]["aggregated"][INFOMEC.index(s)])
    glue(f"paper_agg_{s}_ica", paper.TABLE2["ae_ica"]["aggregated"][INFOMEC.index(s)])
    glue_tally(s, {ds: verdicts[f"ica_vs_ae_{s}_{ds}"] for ds in P.datasets}, label=DATASET_LABELS.get)
glue_tally("vs_baselines", {f"{MODEL_LABELS[b]} in {SCORE_LABELS[s]}": verdicts[f"ica_vs_{b}_{s}_aggregated"]
                            for b in BASELINES for s in ("infom", "infoe")})
glue("n_vs_baselines", 2 * len(BASELINES))
glue("n_datasets", len(P.datasets))


# %% tags=["remove-cell"]
glue("takeaway_tally", claim_text.tally_text("05_disentanglement", verdicts, profile))  # the box at the top

# %% [markdown]
# (ch05-verdict)=
# ## Does AE + ICA beat the AE it starts from?
#
# {numref}`fig-05-verdicts` shows every paired difference with its interval. Aggregated over
# the datasets, Table 2's InfoM (the active-latent rule, as the paper computes it) goes from
# {glue:text}`agg_infom_ae:.2f` (AE) to {glue:text}`agg_infom_ica:.2f` (AE + ICA); the
# paper's numbers are {glue:text}`paper_agg_infom_ae:.2f` and
# {glue:text}`paper_agg_infom_ica:.2f`. On equal terms, each code's $K$ most informative
# latents, InfoM goes from {glue:text}`agg_infom_ae_decided:.2f` to
# {glue:text}`agg_infom_ica_decided:.2f`, a paired difference of
# {glue:text}`agg_infom_estimate` (95% interval {glue:text}`agg_infom_low` to
# {glue:text}`agg_infom_high`): the claim that ICA raises InfoM
# {glue:text}`agg_infom_reads`. Of the {glue:text}`n_datasets` datasets, it holds on
# {glue:text}`infom_holds_text`, fails on {glue:text}`infom_fails_text` and is inconclusive
# on {glue:text}`infom_inconclusive_text` (the paper: higher on all four).
#
# InfoE moves from {glue:text}`agg_infoe_ae:.2f` to {glue:text}`agg_infoe_ica:.2f` (paper
# {glue:text}`paper_agg_infoe_ae:.2f` → {glue:text}`paper_agg_infoe_ica:.2f`), a paired
# difference of {glue:text}`agg_infoe_estimate` ({glue:text}`agg_infoe_low` to
# {glue:text}`agg_infoe_high`), so the claim that ICA raises InfoE
# {glue:text}`agg_infoe_reads`. Table 2's InfoC moves from {glue:text}`agg_infoc_ae:.2f` to
# {glue:text}`agg_infoc_ica:.2f` (paper {glue:text}`paper_agg_infoc_ae:.2f` →
# {glue:text}`paper_agg_infoc_ica:.2f`); on $K$ latents each, from
# {glue:text}`agg_infoc_ae_decided:.2f` to {glue:text}`agg_infoc_ica_decided:.2f`
# (difference {glue:text}`agg_infoc_estimate`,
# {glue:text}`agg_infoc_low` to {glue:text}`agg_infoc_high`): the claim
# {glue:text}`agg_infoc_reads`.
#
# **Against the methods built to disentangle** (aggregated, paired by seed), the
# {glue:text}`n_vs_baselines` claims "AE + ICA is comparable to the baseline or better":
#
# - hold: {glue:text}`vs_baselines_holds_text`;
# - fail: {glue:text}`vs_baselines_fails_text`;
# - inconclusive: {glue:text}`vs_baselines_inconclusive_text`.
#
# {numref}`tbl-05-verdicts` has every interval. The paper's baseline numbers are quoted from Hsu et al., trained with
# other architectures and budgets; ours share AE + ICA's architecture and budget.

# %% tags=["remove-input"]
tests = {"superiority": "higher", "equivalence": "the same, ±{:g}", "non_inferiority": "comparable, > -{:g}"}
rows = []
for rec in verdicts.values():
    about = rec["about"]  # what the claim compares, as the experiment module recorded it
    rows.append({"AE + ICA against": MODEL_LABELS[about["against"]], "score": SCORE_LABELS[about["score"]],
                 "on": DATASET_LABELS[about["dataset"]],
                 "claim": tests[rec["test"]].format(rec["margin"]),
                 "ours: mean difference [95% interval]": tables.interval(rec["estimate"], rec["low"], rec["high"]),
                 "verdict": rec["verdict"], "paper's difference": rec["paper"]})
tables.table(pd.DataFrame(rows).set_index(["AE + ICA against", "score", "on"]),
             "Every paired comparison of AE + ICA: the claim as the registry declares it, the mean over seeds of "
             "the paired difference with its 95% t interval, the verdict, and the paper's difference for the "
             "same cells of Table 2.", "tbl-05-verdicts",
             formats={"paper's difference": lambda v: tables.format_number(v, 2, signed=True)})

# %% tags=["remove-input"] mystnb={"figure": {"caption": "AE + ICA minus AE, per dataset and aggregated: the mean over seeds of the paired difference with its 95% t interval (bars; green: holds, red: fails, grey: inconclusive). Grey crosses: the paper's difference for the same cell of Table 2.", "name": "fig-05-verdicts"}, "image": {"alt": "Three interval plots side by side, one per score (InfoM, InfoE, InfoC), one row per dataset and one for the aggregate: the mean over seeds of AE + ICA minus AE with its 95% interval, coloured by verdict, the paper's difference as a grey cross, and a dashed line at 0."}}
places = [*P.datasets, "aggregated"]
fig, axes = plt.subplots(1, 3, figsize=(plotting.WIDE, 3.0), sharey=True)
for ax, s in zip(axes, INFOMEC):
    vs = pd.DataFrame([verdicts[f"ica_vs_ae_{s}_{ds}"] for ds in places])
    plotting.plot_intervals(ax, range(len(places)), (vs.estimate, vs.low, vs.high), horizontal=True,
                            paper=vs.paper, verdicts=vs.verdict)
    ax.set(title=f"{SCORE_LABELS[s]}: AE + ICA − AE", yticks=range(len(places)))
    ax.set_yticklabels([DATASET_LABELS[d] for d in places])
axes[0].invert_yaxis()
plt.show()

# %% tags=["remove-input"]
by_rule = claims(bench.scores, datasets=list(P.datasets), ica_converged=bench.ica_converged, latents="active")
sens = pd.DataFrame([{"score": SCORE_LABELS[s], "on": DATASET_LABELS.get(ds, ds),
                      "K most informative latents (the verdict)": f"{verdicts[cid]['verdict']} "
                      + tables.interval(verdicts[cid]["estimate"], verdicts[cid]["low"], verdicts[cid]["high"]),
                      "active-latent rule (Hsu et al.)": f"{by_rule[cid]['verdict']} "
                      + tables.interval(by_rule[cid]["estimate"], by_rule[cid]["low"], by_rule[cid]["high"])}
                     for s in EQUAL_LATENTS for ds in [*P.datasets, "aggregated"]
                     for cid in [f"ica_vs_ae_{s}_{ds}"]]).set_index(["score", "on"])
tables.table(sens, "AE + ICA minus AE in InfoM and InfoC, scored on each code's K most informative latents (the "
             "declared protocol of the verdicts) and on the latents the active-latent rule counts (Table 2's way): "
             "verdict and mean difference over seeds with its 95% t interval.", "tbl-05-latent-sets")

# %% tags=["remove-cell"]
moved = [f"{SCORE_LABELS[s]} on {DATASET_LABELS.get(ds, ds)}" for s in EQUAL_LATENTS for ds in [*P.datasets, "aggregated"]
         if verdicts[f"ica_vs_ae_{s}_{ds}"]["verdict"] != by_rule[f"ica_vs_ae_{s}_{ds}"]["verdict"]]
glue("latent_sets_moved", ", ".join(moved) if moved else "none")
glue("latent_sets_n_moved", f"{len(moved)} of {2 * (len(P.datasets) + 1)}")

# %% [markdown]
# **Does the latent count decide the InfoM and InfoC verdicts?** Scored under the
# active-latent rule instead of on $K$ latents per code ({numref}`tbl-05-latent-sets`),
# {glue:text}`latent_sets_n_moved` of the AE + ICA vs AE verdicts change: {glue:text}`latent_sets_moved`.

# %% tags=["remove-cell"]
whole = "ae_ica" if P.ica_keep == "all" else VARIANT_ROW["k"]  # ICA on every direction of the code
top_k = "ae_ica" if P.ica_keep == "k" else VARIANT_ROW["all"]  # ICA on the top K of the 2K
variants_infoe = bench.scores.pivot_table(index=["dataset", "seed"], columns="model", values="infoe")
glue("infoe_whole_gap", float((variants_infoe[whole] - variants_infoe["ae"]).abs().max()))
for tag, row in (("whole", whole), ("topk", top_k)):
    for s in ("infom", "infoe"):
        glue(f"agg_{s}_{tag}", agg_ours.loc[("aggregated", row), f"{s}_mean"])
        d = paired_differences(bench.scores, row, "ae", s, list(P.datasets))["aggregated"]
        glue_verdict(f"{tag}_{s}", paired_difference(d.to_numpy(), method="t"), signed=True)
ds_heat = P.heatmap_dataset if P.heatmap_dataset in P.datasets else P.datasets[0]
for tag, row in (("headline", "ae_ica"), ("variant", VARIANT_ROW[P.ica_keep])):
    fits = [ok for (_, key, _), ok in bench.ica_converged.items() if key == row]
    glue(f"ica_{tag}_not_converged", sum(not ok for ok in fits))
    glue(f"ica_{tag}_runs", len(fits))
glue("topk_variance_min", min(v["variance_kept"] for (_, key, _), v in bench.ica_components.items() if key == top_k))
glue("infoe_unconverged", bench.infoe_unconverged)
glue("infoe_capped", bench.infoe_capped)
glue("infoe_fits", bench.infoe_fits)
variants_converged = bench.scores.pivot_table(index=["dataset", "seed"], columns="model", values="infoe_converged")
glue("infoe_converged_whole_gap", float((variants_converged[whole] - variants_converged["ae"]).abs().max()))
probe_check = converged_infoe_check(bench.scores, datasets=list(P.datasets), whole=whole)
glue_verdict("converged_check", probe_check[CONVERGED_INFOE_CHECK], digits=5, signed=True)
glue("converged_check_margin", probe_check[CONVERGED_INFOE_CHECK]["margin"])

# %% [markdown] tags=["new-page:ica-step"]
# (ch05-ica-step)=
# ## What the ICA step changes
#
# The NMI matrices of {numref}`fig-05-nmi` show where each factor's information sits, in
# the AE's code and after the ICA step.
#
# **Where the paper's InfoE gain comes from.** With the probe run to convergence, InfoE of
# AE + ICA on the whole code differs from the AE's by at most
# {glue:text}`infoe_converged_whole_gap:.1e` across all datasets and seeds; averaged over the
# datasets the paired difference is {glue:text}`converged_check_estimate`
# ({glue:text}`converged_check_low` to {glue:text}`converged_check_high`), so the declared
# check that it is zero within ±{glue:text}`converged_check_margin` {glue:text}`converged_check_reads`.
# That is fixed by construction (a check of our method, not a result about the paper). With
# the paper's probe, stopped after 100 iterations, the same codes differ by up to
# {glue:text}`infoe_whole_gap:.3f`: whatever InfoE gain ICA shows in Table 2's way of scoring
# comes from where that probe stops, not from what the code holds. The top-$K$ variant keeps at least
# {glue:text}`topk_variance_min:.1%` of the training codes' variance in every run and drops
# the rest, with whatever information about the factors it held (an unpenalised linear probe
# is blind to scale, so little variance is not little information). Aggregated
# ({numref}`tbl-05-variants` gives every dataset), InfoE is
# {glue:text}`agg_infoe_ae:.3f` for the AE, {glue:text}`agg_infoe_whole:.3f` on the whole code
# and {glue:text}`agg_infoe_topk:.3f` for the top $K$ (paired difference to the AE
# {glue:text}`topk_infoe_estimate`, {glue:text}`topk_infoe_low` to {glue:text}`topk_infoe_high`).
#
# InfoM, which rewards one factor per latent, is where the rotation can help. Aggregated it is
# {glue:text}`agg_infom_whole:.3f` on the whole code (paired difference to the AE
# {glue:text}`whole_infom_estimate`, {glue:text}`whole_infom_low` to
# {glue:text}`whole_infom_high`) and {glue:text}`agg_infom_topk:.3f` for the top $K$
# ({glue:text}`topk_infom_estimate`, {glue:text}`topk_infom_low` to
# {glue:text}`topk_infom_high`). Our hypothesis for a gap between the two, not tested
# here: whitening the whole code scales directions that carry almost no variance up to unit
# variance, and FastICA can return them as extra, noisy components.
#
# FastICA stopped before converging in {glue:text}`ica_headline_not_converged` of
# {glue:text}`ica_headline_runs` fits behind the verdicts (and in
# {glue:text}`ica_variant_not_converged` of {glue:text}`ica_variant_runs` fits of the variant
# beside them); a verdict that rests on one is flagged on the summary page.
# Of the probe run to convergence, {glue:text}`infoe_unconverged` of its logistic fits
# stopped before converging; the paper's probe stopped at its cap of 100 iterations in
# {glue:text}`infoe_capped` of its {glue:text}`infoe_fits` fits, by design.

# %% tags=["remove-input"]
variants = summary.pivot(index="dataset", columns="model", values="infom_mean")
cols_v = ["ae", "ae_ica", VARIANT_ROW[P.ica_keep]]
var_infoe = summary.pivot(index="dataset", columns="model", values="infoe_mean")
both = pd.concat({"InfoM": variants.loc[[*P.datasets, "aggregated"], cols_v],
                  "InfoE": var_infoe.loc[[*P.datasets, "aggregated"], cols_v]}, axis=1)
tables.table(both.rename(columns=MODEL_LABELS, index=DATASET_LABELS).rename_axis("dataset"),
             "InfoM and InfoE of the AE, of AE + ICA on the whole code and of the variant beside it (means over "
             "seeds).", "tbl-05-variants")

# %% tags=["remove-input"] mystnb={"figure": {"caption": "NMI between each factor (rows) and each latent (columns) on the held-out images, for the AE and for the same AE after whitening + ICA, on the dataset the heatmap_dataset parameter names, first seed. Latents are sorted by their largest NMI. A modular code has one bright cell per column; a compact code one per row.", "name": "fig-05-nmi"}, "image": {"alt": "Two heatmaps of normalised mutual information, factors as rows and latents as columns sorted by their largest value, for the AE (left) and the same AE after whitening and ICA (right), with one colour bar from 0 to 1."}}
fig, axes = plt.subplots(1, 2, figsize=(plotting.WIDE, 3.4), sharey=True)
for ax, m in zip(axes, ["ae", "ae_ica"]):
    nmi = bench.nmi[(ds_heat, m, P.seed)]
    sc = bench.scores.query("dataset == @ds_heat and model == @m and seed == @P.seed").iloc[0]
    order = np.argsort(-nmi.max(0))
    sns.heatmap(nmi[:, order], ax=ax, vmin=0, vmax=1, cmap="viridis", cbar=m == "ae_ica",
                yticklabels=bench.factor_names[ds_heat], xticklabels=[f"z{j}" for j in order])
    ax.set(title=f"{MODEL_LABELS[m]}: InfoM {sc.infom:.2f}, InfoC {sc.infoc:.2f}",
           xlabel="latent (sorted by max NMI)")
    ax.tick_params(axis="x", rotation=90)
fig.suptitle(f"{DATASET_LABELS[ds_heat]}, seed {P.seed}: NMI(factor; latent)", y=1.02)
plt.show()

# %% tags=["remove-cell"]
trend = trend_summary(bench.trend, list(P.datasets))
tr = trend.set_index(["score", "epochs"])
lo_e, hi_e = min(trend_budgets), max(trend_budgets)
for s in ("infom", "infoe"):
    for tag, e in (("first", lo_e), ("last", hi_e), ("head", P.epochs)):
        row = tr.loc[(s, e)]
        glue_verdict(f"trend_{s}_{tag}", dict(row, estimate=row["difference"]), signed=True)
        glue(f"trend_{s}_{tag}_ae", tr.loc[(s, e), "ae"])
        glue(f"trend_{s}_{tag}_ica", tr.loc[(s, e), "ae_ica"])
    ch = trend_change(bench.trend, list(P.datasets), s)
    glue_verdict(f"trend_{s}_change", ch, signed=True)
    way = "up" if ch.estimate > 0 else "down"
    glue(f"trend_{s}_direction", {
        "holds": "grows", "fails": "shrinks",
        "inconclusive": f"has no direction our budgets establish (the change points {way}, but its "
                        "interval contains 0)"}[ch.verdict])
    glue(f"trend_{s}_if_continues", {
        "holds": f"a larger {SCORE_LABELS[s]} gain of AE + ICA over the AE than at our largest budget",
        "fails": f"a smaller {SCORE_LABELS[s]} gain of AE + ICA over the AE (or a larger loss) than at "
                 "our largest budget",
        "inconclusive": f"a {'larger' if way == 'up' else 'smaller'} {SCORE_LABELS[s]} gain than at our "
                        "largest budget (the direction of the point estimates, which our intervals do "
                        "not establish)",
    }[ch.verdict])
glue("trend_first", lo_e)
glue("trend_last", hi_e)
glue("trend_first_steps", int(tr.loc[("infom", lo_e), "steps"]))
glue("trend_last_steps", int(tr.loc[("infom", hi_e), "steps"]))
full_P = resolve("05_disentanglement", "full", {})
glue("full_steps", f"{int(full_P.epochs * np.ceil(full_P.n_train / full_P.batch_size)):,}")
glue("full_epochs", full_P.epochs)
glue("full_n_train", f"{full_P.n_train:,}")

# %% [markdown]
# ## Does it move with training?
#
# Our models train for a few hundred optimiser steps; the paper's for far more. Under-trained
# AEs sit further from an isometry, which is what the structural theorem needs, so the
# ICA step may help more as the AE trains longer. {numref}`fig-05-trend` follows the same
# AEs from {glue:text}`trend_first` epochs ({glue:text}`trend_first_steps` steps) to
# {glue:text}`trend_last` epochs ({glue:text}`trend_last_steps` steps).
#
# After {glue:text}`trend_first` epochs AE + ICA minus AE in aggregated InfoM is
# {glue:text}`trend_infom_first_estimate` ({glue:text}`trend_infom_first_low` to
# {glue:text}`trend_infom_first_high`); after {glue:text}`trend_last` epochs it is
# {glue:text}`trend_infom_last_estimate` ({glue:text}`trend_infom_last_low` to
# {glue:text}`trend_infom_last_high`), where the claim that ICA raises InfoM
# {glue:text}`trend_infom_last_reads`. Paired by seed, the gain changes by
# {glue:text}`trend_infom_change_estimate` ({glue:text}`trend_infom_change_low` to
# {glue:text}`trend_infom_change_high`) between the two budgets: with training, the InfoM
# gain {glue:text}`trend_infom_direction`. For InfoE the difference goes from
# {glue:text}`trend_infoe_first_estimate` to {glue:text}`trend_infoe_last_estimate`
# ({glue:text}`trend_infoe_last_low` to {glue:text}`trend_infoe_last_high` at the
# largest budget; change {glue:text}`trend_infoe_change_estimate`,
# {glue:text}`trend_infoe_change_low` to {glue:text}`trend_infoe_change_high`), so
# the InfoE gain {glue:text}`trend_infoe_direction`; the AE's own InfoE goes from
# {glue:text}`trend_infoe_first_ae:.3f` to {glue:text}`trend_infoe_last_ae:.3f`.
#
# The `full` profile trains every model for {glue:text}`full_epochs` epochs on
# {glue:text}`full_n_train` images ({glue:text}`full_steps` steps, 64-pixel images, wider
# networks). If the InfoM trend above continued that far, `full` would show
# {glue:text}`trend_infom_if_continues`; for InfoE, {glue:text}`trend_infoe_if_continues`.
# Nothing here shows that the trend continues: a trend over one order of magnitude of steps
# is no measurement at two more, and only running `full` on a GPU can say.

# %% tags=["remove-input"] mystnb={"figure": {"caption": "The scale trend. Top: aggregated InfoM and InfoE (mean over datasets, then over seeds) of the AE and of AE + ICA against optimiser steps of the same AE runs. Bottom: the paired difference AE + ICA minus AE with its 95% t interval over seeds; the dotted line marks the Table 2 budget.", "name": "fig-05-trend"}, "image": {"alt": "Four panels against optimiser steps on a log axis. Top: aggregated InfoM and InfoE of the AE and of AE + ICA. Bottom: the paired difference AE + ICA minus AE with its 95% interval; a dotted line marks the Table 2 budget."}}
fig, axes = plt.subplots(2, 2, figsize=(plotting.WIDE, 5.0), sharex=True, layout="constrained")
for j, s in enumerate(("infom", "infoe")):
    t = trend[trend["score"] == s]
    ax = axes[0, j]
    ax.plot(t["steps"], t["ae"], "o-", label=MODEL_LABELS["ae"])
    ax.plot(t["steps"], t["ae_ica"], "s-", label=MODEL_LABELS["ae_ica"])
    ax.set(ylabel=SCORE_LABELS[s], title=f"{SCORE_LABELS[s]}, aggregated")
    ax.legend()
    ax = axes[1, j]
    plotting.plot_intervals(ax, t["steps"], (t["difference"], t["low"], t["high"]), fmt="o-", capsize=4, color="k")
    ax.set(xscale="log", xlabel="optimiser steps (epochs)", ylabel=f"Δ{SCORE_LABELS[s]}, AE + ICA − AE")
    ax.set_xticks(t["steps"], [f"{st} ({e})" for st, e in zip(t["steps"], t["epochs"])])
    ax.minorticks_off()
    head_steps = int(t.loc[t["epochs"] == P.epochs, "steps"].iloc[0])
    for a in axes[:, j]:
        a.axvline(head_steps, color="0.6", ls=":")
plt.show()

# %% [markdown]
# How to read all this honestly:
#
# - **Where the recipe should win.** ICA needs factors that are independent and
#   non-Gaussian, and an encoder that is close to a linear function of them. Our factors are
#   independent and uniform on their grids (maximally non-Gaussian for ICA's purposes), so
#   the remaining question is the encoder: when the AE's code is a near-linear mix of the
#   factors, whitening + ICA unmixes it and InfoM rises.
# - **Where it cannot.** ICA rotates; it cannot undo a *nonlinear* entanglement, nor
#   split one factor that the AE spread over a curved manifold (our guesses, untested here:
#   MPI3D's two arm angles, and hues, which are circular).
# - **Budget.** In the quick profile every model sees a few thousand small images for a few
#   epochs, so absolute numbers here are not comparable with the paper's. Our hypothesis,
#   which this page tests only for the AE (the training-budget figure above): under-trained
#   VAEs sit closer to their prior and under-trained AEs further from an isometry, so the
#   ranking of the regularised baselines may change with training time.
# - **Data.** The analogues share the original factor grids but not their images; the
#   paper's Shapes3D gain (0.34 → 0.79) need not transfer to a renderer where, for example,
#   hue factors move large areas of pixels.
#
# The part of the paper's claim our setup tests most directly is the *within-seed*
# comparison AE vs AE + ICA: it involves no retuning and no change of architecture, only the
# post-processing of {prf:ref}`thm-structural`.

# %% tags=["remove-cell"]
payload = {
    "table2": table2_payload(summary, datasets=list(P.datasets)),
    "table2_std": table2_payload(summary, datasets=list(P.datasets), stat="std"),
    "aggregated": table2_payload(summary, datasets=["aggregated"]).get("aggregated", {}),
    "verdicts": {**verdicts, **probe_check},
    "verdicts_active_rule": {cid: {k: rec[k] for k in ("verdict", "estimate", "low", "high", "n")}
                             for cid, rec in by_rule.items() if any(f"_{s}_" in cid for s in EQUAL_LATENTS)},
    "paper_comparison": paper_comparison(summary, list(P.datasets)),
    "scale_trend": trend.to_dict(orient="records"),
    "ica_keep": P.ica_keep,
    "latent_multiplier": P.latent_multiplier,
    "n_datasets": len(P.datasets),
    "seeds": [P.seed + i for i in range(P.seeds)],
    "ica_converged": {f"{d}/{k}/{s}": bool(v) for (d, k, s), v in bench.ica_converged.items()},
    "infoe_unconverged": bench.infoe_unconverged,
    "infoe_capped": bench.infoe_capped,
    "infoe_fits": bench.infoe_fits,
    "seconds": {f"{d}/{m}/{s}": float(v) for (d, m, s), v in bench.seconds.items()},
    "paper_table2": paper.TABLE2,
    "dry_run": P.dry_run,
}
results.save(results_path, payload, params=P, profile=profile)

# %% [markdown] tags=["new-page:exercises"]
# ## Exercises: disentanglement
#
# ```{exercise} Where the factors sit on another dataset
# :label: ex-05-heatmap
#
# The heatmaps above show one dataset. Before looking at another, predict: on MPI3D, which
# factors will AE + ICA give a latent of their own, which will it spread over several, and
# which will the code hardly carry at all?
# (Rerun with `nearid run 05 -p heatmap_dataset=mpi3d`, or draw it from `bench.nmi`.)
# ```
#
# ```{solution-start} ex-05-heatmap
# :class: dropdown
# ```

# %% mystnb={"figure": {"caption": "Exercise solution: NMI of AE + ICA on a second dataset (MPI3D unless it is the chapter's heatmap dataset), first seed, latents sorted by their largest NMI.", "name": "fig-05-ex-heatmap"}, "image": {"alt": "Heatmap of normalised mutual information for AE + ICA on a second dataset, factors as rows and latents as columns sorted by their largest value, with a colour bar from 0 to 1."}}
other = next(d for d in ["mpi3d", *P.datasets] if d in P.datasets and d != ds_heat)
nmi = bench.nmi[(other, "ae_ica", P.seed)]
order = np.argsort(-nmi.max(0))
fig, ax = plt.subplots(figsize=(6, 3.2))
sns.heatmap(nmi[:, order], ax=ax, vmin=0, vmax=1, cmap="viridis",
            yticklabels=bench.factor_names[other], xticklabels=[f"z{j}" for j in order])
ax.set(title=f"AE + ICA on {DATASET_LABELS[other]}", xlabel="latent")
plt.show()

# %%
best = pd.DataFrame({"best latent's NMI": nmi.max(1),  # how much of the factor one latent carries
                     "its share of the factor's NMI": nmi.max(1) / np.maximum(nmi.sum(1), 1e-12)},
                    index=bench.factor_names[other]).sort_values("best latent's NMI", ascending=False)

# %% tags=["remove-input"]
tables.table(best.rename(index=lambda f: f.replace("_", " ")).rename_axis("factor"),
             "Exercise solution: for each factor, the NMI of the latent that carries it best and that latent's "
             "share of the factor's NMI summed over latents (AE + ICA, first seed).", "tbl-05-ex-heatmap",
             digits=2)

# %% tags=["remove-cell"]
glue("ex_heat_dataset", DATASET_LABELS[other])
glue("ex_heat_best", best.index[0])
glue("ex_heat_best_nmi", float(best.iloc[0, 0]))
glue("ex_heat_best_share", float(best.iloc[0, 1]))
glue("ex_heat_worst", best.index[-1])
glue("ex_heat_worst_nmi", float(best.iloc[-1, 0]))

# %% [markdown]
# On {glue:text}`ex_heat_dataset` the factor the code carries best is
# {glue:text}`ex_heat_best`: its best latent holds an NMI of {glue:text}`ex_heat_best_nmi:.2f`,
# {glue:text}`ex_heat_best_share:.0%` of the factor's NMI summed over latents. The factor it
# carries least is {glue:text}`ex_heat_worst` (best NMI {glue:text}`ex_heat_worst_nmi:.2f`):
# what the code does not hold, no rotation can isolate. Compare the table with your
# prediction and with the text's expectation: factors that change the image in one simple,
# monotone way should get a latent of their own, factors on a curved manifold (angles, hues)
# or with many fine values should be spread or lost at this image size and budget.
#
# ```{solution-end}
# ```
#
# ```{exercise} A latent per factor
# :label: ex-05-latent
#
# Rerun with a latent size equal to the number of factors (`nearid run 05 -p
# latent_multiplier=1`). Which of InfoM, InfoE and InfoC do you expect to change most for
# AE + ICA, and why?
# ```
#
# ```{solution-start} ex-05-latent
# :class: dropdown
# ```

# %%
# Retraining is needed: smoke-sized (one dataset, one seed, 16-pixel images, 3 epochs), so
# the numbers are rough; `nearid run 05 -p latent_multiplier=1` gives the full answer.
small = Setup(image_size=16, n_train=1000, n_eval=500, epochs=3, batch_size=64, lr=2e-3, width=8, hidden=64,
              supersample=1, data_seed=P.seed, secondary=False, ica_keep=P.ica_keep, device=P.device)
ex_rows = {}
for mult in (1, 2):
    r = train_and_score(dataset=P.heatmap_dataset, model="ae", seed=P.seed,
                        setup=replace(small, latent_multiplier=mult))
    for key in ("ae", "ae_ica"):
        ex_rows[(f"{mult} x K", MODEL_LABELS[key])] = {SCORE_LABELS[s]: r["rows"][key][s] for s in INFOMEC}
ex_latent = pd.DataFrame(ex_rows).T.round(3)

# %% tags=["remove-input"]
tables.table(ex_latent.rename_axis(["latents", "model"]),
             "Exercise solution: a smoke-sized AE and AE + ICA with K and with 2K latents (one dataset, one "
             "seed).", "tbl-05-ex-latent")

# %% tags=["remove-cell"]
d_ica = ex_latent.xs("AE + ICA", level=1)
change = (d_ica.loc["1 x K"] - d_ica.loc["2 x K"])
glue("ex_lat_most", change.abs().idxmax())
glue("ex_lat_most_change", float(change[change.abs().idxmax()]))
glue("ex_lat_infoc_1", float(d_ica.loc["1 x K", "InfoC"]))
glue("ex_lat_infoc_2", float(d_ica.loc["2 x K", "InfoC"]))

# %% [markdown]
# In this small run the score of AE + ICA that moves most is {glue:text}`ex_lat_most`
# ({glue:text}`ex_lat_most_change:+.3f` going from 2K to K latents); InfoC goes from
# {glue:text}`ex_lat_infoc_2:.3f` to {glue:text}`ex_lat_infoc_1:.3f`. The expectation: with
# K latents for K factors ICA keeps every direction, so no information is dropped (InfoE of
# AE + ICA equals the AE's), and there are no near-empty directions to share a factor's
# information, which favours InfoC; InfoM depends more on whether the AE's code is close to
# a linear mix of the factors, which the latent size does not fix.
#
# ```{solution-end}
# ```
#
# ```{exercise} A random rotation instead of ICA
# :label: ex-05-rotation
#
# Write the "PCA + Rand" row that chapter 06 uses for cell images: take the AE + ICA codes
# of one dataset (`bench.codes[(dataset, "ae_ica", seed)]`, already whitened) and apply a
# random rotation instead of the ICA rotation. Predict InfoM, InfoE and InfoC relative to
# AE + ICA before you compute them (about ten lines with `nearid.metrics.infomec.infomec`).
# ```
#
# ```{solution-start} ex-05-rotation
# :class: dropdown
# ```

# %%
ds_rot = ds_heat
F = eval_factors(ds_rot, n_train_run, n_eval_run, data_seed=P.seed)
Z_ica = bench.codes[(ds_rot, "ae_ica", P.seed)].astype(float)
Q = ortho_group.rvs(Z_ica.shape[1], random_state=P.seed)  # a uniformly random rotation
rot_rows = {"AE": bench.codes[(ds_rot, "ae", P.seed)].astype(float), "AE + ICA": Z_ica,
            "whitened + random rotation": Z_ica @ Q}
ex_rot = pd.DataFrame({name: {SCORE_LABELS[s]: v for s, v in infomec(F, Z, random_state=P.seed).items()
                              if s in INFOMEC} for name, Z in rot_rows.items()}).T.round(3)

# %% tags=["remove-input"]
tables.table(ex_rot.rename_axis("code"),
             "Exercise solution: InfoMEC of the AE, of AE + ICA and of the same whitened code under a random "
             "rotation (first seed).", "tbl-05-ex-rotation")

# %% tags=["remove-cell"]
glue("ex_rot_dataset", DATASET_LABELS[ds_rot])
for s in INFOMEC:
    glue(f"ex_rot_{s}_ica", float(ex_rot.loc["AE + ICA", SCORE_LABELS[s]]))
    glue(f"ex_rot_{s}_rand", float(ex_rot.loc["whitened + random rotation", SCORE_LABELS[s]]))
    fell = ex_rot.loc["whitened + random rotation", SCORE_LABELS[s]] < ex_rot.loc["AE + ICA", SCORE_LABELS[s]]
    glue(f"ex_rot_{s}_word", "falls" if fell else "does not fall")

# %% [markdown]
# On {glue:text}`ex_rot_dataset` (first seed), InfoE is {glue:text}`ex_rot_infoe_ica:.3f`
# with ICA and {glue:text}`ex_rot_infoe_rand:.3f` with the random rotation: a rotation is
# an invertible linear map and InfoE's probe is linear, so it cannot change. InfoM
# {glue:text}`ex_rot_infom_word` ({glue:text}`ex_rot_infom_ica:.3f` with ICA,
# {glue:text}`ex_rot_infom_rand:.3f` with the random rotation) and InfoC
# {glue:text}`ex_rot_infoc_word` ({glue:text}`ex_rot_infoc_ica:.3f`,
# {glue:text}`ex_rot_infoc_rand:.3f`). The expectation was that both fall: a random rotation
# spreads every factor over many axes, the ambiguity that ICA's non-Gaussianity criterion
# resolves. Where they do not fall, ICA found no axes better than a random draw, a sign that
# this code is not close to a linear mix of independent factors.
#
# ```{solution-end}
# ```
