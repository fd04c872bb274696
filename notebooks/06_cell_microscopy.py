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
# # Cell microscopy: whitening and ICA of an MAE's embeddings
#
# ## Overview
#
# The paper's large-scale test of "ICA post-processing as disentanglement" is a foundation
# masked autoencoder for cell microscopy (OpenPhenom, {cite}`kraus2024masked`) applied to the
# RxRx3-core screen {cite}`kraus2025rxrx3core`. Its embeddings are whitened on control wells
# and rotated by ICA, and three claims are tested against a random rotation of the same
# whitened space:
#
# 1. genetic perturbations are **classified better across batches** (Table 3, AUROC);
# 2. a perturbation's effect is **sparser** in the ICA basis (Table 3, Hoyer sparsity);
# 3. biological variation is **concentrated** in fewer features (Table 4).
#
# RxRx3-core is not shipped with this book, so we simulate the experiment with known ground
# truth: a cell-painting screen whose biological factors, gene effects and batch effects we
# planted, an MAE trained on its single-cell crops, and the paper's protocol run unchanged
# on the MAE's well embeddings. A reader with the real files passes their paths as
# parameters (`rxrx_embeddings`, `rxrx_metadata`) and the same code produces Tables 3 and 4
# on OpenPhenom's embeddings.
#
# Why should ICA help at all? {prf:ref}`thm-structural` (chapter 2) says that an encoder
# that reconstructs data generated from independent non-Gaussian factors recovers them up
# to a rigid map, and whitening + ICA removes the remaining rotation. If the biology of a
# cell is a set of such factors and a gene moves only a few of them, its effect should be
# a sparse vector in the ICA basis and a dense one in any other rotation.

# %% tags=["parameters", "remove-cell"]
profile = "quick"
overrides = {}
results_path = None

# %% tags=["remove-cell"]
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

import nearid
from nearid import paper
from nearid.book import plotting, results
from nearid.experiments import ch06_cellpaint
from nearid.data.cell_simulator import FACTORS, GENES, CellPaintingSimulator, moved_factors, to_rgb
from nearid.data.rxrx import load_rxrx3_core
from nearid.metrics.sparsity import concentration
from nearid.book.profiles import resolve
from nearid.book.results import glue

P = resolve("06_cell_microscopy", profile, overrides)
nearid.setup(P.seed)
device = nearid.pick_device(P.device)
plotting.use_style()
SETS = ch06_cellpaint.FEATURE_SETS
LABELS = ch06_cellpaint.FEATURE_LABELS
real = bool(P.rxrx_embeddings)
t_start = time.perf_counter()

# %% [markdown]
# ## The scores
#
# ```{prf:definition} Hoyer sparsity
# :label: def-hoyer
#
# For $x \in \mathbb{R}^n$, $x \neq 0$, the Hoyer sparsity {cite}`hoyer2004sparseness` is
# $\displaystyle \operatorname{H}(x) = \frac{\sqrt{n} - \|x\|_1 / \|x\|_2}{\sqrt{n} - 1} \in [0, 1]$:
# $1$ when one entry is non-zero, $0$ when all entries have equal magnitude. It is invariant
# to scaling, signs and permutations of the entries, but not to rotations.
# ```
#
# We apply it to a guide's **effect vector**: in each batch, the mean of the guide's wells
# minus the mean of that batch's control wells, averaged over batches and divided feature by
# feature by the control wells' standard deviation (which is 1 in the whitened bases).
#
# ```{prf:definition} Concentration of biological variation
# :label: def-concentration
#
# For feature $j$ let $\eta^2_j$ be the share of its variance explained by the wells'
# condition (control or one guide): between-condition over total sum of squares. The
# concentration is the mean of $\eta^2_j$ over the 25% of features with the largest
# $\eta^2_j$: how much of the best quarter of the features is biology rather than batch
# effects and well-to-well noise.
# ```
#
# The paper does not state its estimator for Table 4; this is ours. It is invariant to
# feature scale, so raw and whitened features compare.

# %% [markdown]
# ## A simulated screen
#
# Each cell is rendered in four channels (DNA, RNA/cytoplasm, membrane/actin,
# mitochondria) from two dozen biological factors, plus nuisances such as orientation and
# texture noise. Control cells draw each factor independently and uniformly (unit variance);
# every well adds its own Laplace-distributed offset (well-to-well biology); a gene shifts a
# few factors, scaled per guide by a knockout efficiency. Technical effects are shared by
# all wells of a batch: channel gains, background, an illumination gradient and focus blur.

# %%
if real:
    X_wells, wells = load_rxrx3_core(P.rxrx_embeddings, P.rxrx_metadata,
                                     batch_column=P.rxrx_batch_column)
    screen = None
    print(f"RxRx3-core: {len(wells)} wells, {int(wells.is_control.sum())} controls, "
          f"{X_wells.shape[1]}-d OpenPhenom embeddings")
else:
    sim = CellPaintingSimulator(image_size=P.image_size, n_batches=P.n_batches,
                                controls_per_batch=P.controls_per_batch,
                                wells_per_guide=P.wells_per_guide, cells_per_well=P.cells_per_well,
                                well_sd=P.well_sd, effect_scale=P.effect_scale,
                                batch_strength=P.batch_strength, seed=P.seed)
    screen = sim.simulate()
    wells = screen.wells
    print(f"{len(FACTORS)} factors, {len(wells)} wells in {P.n_batches} batches "
          f"({int(wells.is_control.sum())} controls), {len(screen.images)} cells of "
          f"{P.image_size}x{P.image_size} pixels")
gene_factors = pd.DataFrame({g: [", ".join(FACTORS[i] for i in moved_factors(g))]
                             for g in GENES}, index=["factors moved"]).T
gene_factors.insert(0, "guides", [GENES[g][0] for g in GENES])
gene_factors

# %%
if screen is not None:
    kinds = ["control", *GENES]
    n_cols = min(P.n_batches, 6)
    fig, axes = plt.subplots(len(kinds), n_cols, figsize=(1.35 * n_cols + 1.2, 1.35 * len(kinds)),
                             squeeze=False)
    vmax = float(np.quantile(screen.images, 0.995))
    for r, kind in enumerate(kinds):
        for b in range(n_cols):
            w = np.flatnonzero((wells.gene == kind).to_numpy() & (wells.batch == b).to_numpy())[0]
            cell = np.flatnonzero(screen.cell_well == w)[0]
            ax = axes[r, b]
            ax.imshow(to_rgb(screen.images[cell:cell + 1], vmax=vmax)[0])
            ax.set_xticks([]), ax.set_yticks([])
            if r == 0:
                ax.set_title(f"batch {b}", fontsize=9)
            if b == 0:
                ax.set_ylabel(kind, fontsize=9)
    fig.suptitle("Example crops: rows = well type, columns = batch", fontsize=11)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# One cell per well type (rows: controls, then one well of each gene's first guide) and per
# batch (columns). Colours: DNA blue, RNA/cytoplasm green, membrane/actin red, mitochondria
# magenta, on one intensity scale. Reading along a row shows the batch effects (brightness,
# background, blur) acting on the same kind of well; reading down a column shows the genes'
# effects, which are small next to cell-to-cell variation, as in real screens.
#
# ## The MAE and its well embeddings
#
# The MAE of chapter 4 (timm's ViT blocks, MAE's masking and loss) is trained on all crops
# without labels; a cell's embedding is the mean of its patch tokens on the unmasked image,
# and a well's embedding is the mean over its cells.

# %%
if not real:
    mae, fit_result = ch06_cellpaint.train_cell_mae(
        screen.images, patch_size=P.patch_size, embed_dim=P.embed_dim, depth=P.depth,
        num_heads=P.num_heads, decoder_embed_dim=P.decoder_embed_dim,
        decoder_depth=P.decoder_depth, mask_ratio=P.mask_ratio, epochs=P.epochs,
        batch_size=P.batch_size, lr=P.lr, weight_decay=P.weight_decay, seed=P.seed, device=device)
    X_wells = ch06_cellpaint.well_embeddings(mae, screen.images, screen.cell_well,
                                              n_wells=len(wells), device=device)
    print(f"MAE: {P.epochs} epochs in {fit_result.seconds:.0f} s, masked MSE "
          f"{fit_result.losses[0]:.4f} -> {fit_result.losses[-1]:.4f}; well embeddings {X_wells.shape}")

# %% [markdown]
# (ch06-verdict)=
# ## Table 3: classifying perturbations across batches
#
# Each guide is its own experiment: its wells against all control wells. LightGBM with the
# paper's Table 6 hyperparameters is trained on some batches and scores wells of batches it
# never saw (GroupKFold over batches; the out-of-fold scores of all folds give one AUROC). A
# gene's AUROC and sparsity are means over its guides. The four feature sets are fitted once,
# on all wells, without perturbation labels: whitening on the control wells, FastICA on the
# whitened control wells.

# %%
n_comp = P.n_components or None
out = ch06_cellpaint.evaluate(X_wells, wells, n_components=n_comp, ica_fit_on=P.ica_fit_on,
                         n_splits=P.n_splits, n_estimators=P.n_estimators, seed=P.seed)
table3, table4 = out["table3"], out["table4"]
rows = []
for gene, r in table3.items():
    ref = paper.TABLE3[gene]
    for metric in ("auroc", "sparsity"):
        for i, k in enumerate(SETS):
            rows.append(dict(gene=f"{gene} ({r['guides']})", metric=metric, set=LABELS[k],
                             ours=r[metric][k], paper=ref[metric][i]))
t3 = pd.DataFrame(rows).pivot_table(index="gene", columns=["metric", "set"], values=["ours", "paper"],
                                    sort=False)
t3 = t3.reorder_levels([1, 2, 0], axis=1).sort_index(axis=1, level=[0], sort_remaining=False)
t3 = t3[[(m, LABELS[k], src) for m in ("auroc", "sparsity") for k in SETS for src in ("ours", "paper")]]
t3.round(3)

# %% [markdown]
# Every cell of Table 3, ours beside the paper's (gene, number of guides in brackets). The
# paper's numbers are OpenPhenom on RxRx3-core; ours are a small MAE on a simulated screen,
# so only the *orderings* are comparable, not the values.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for ax, metric in zip(axes, ("auroc", "sparsity")):
    d = pd.DataFrame(rows)
    d = d[d.metric == metric].melt(id_vars=["gene", "set"], value_vars=["ours", "paper"],
                                   var_name="source", value_name=metric)
    sns.barplot(data=d[d.source == "ours"], x="gene", y=metric, hue="set", ax=ax)
    ref = d[d.source == "paper"]
    for j, k in enumerate(SETS):
        vals = ref[ref.set == LABELS[k]][metric].to_numpy()
        ax.scatter(np.arange(len(vals)) + (j - 1.5) * 0.2, vals, marker="_", s=120,
                   color=plotting.PAPER_COLOR, zorder=5, label="paper" if j == 0 else None)
    ax.set(xlabel="", ylabel="AUROC" if metric == "auroc" else "Hoyer sparsity",
           ylim=(0.4 if metric == "auroc" else 0, None))
    ax.tick_params(axis="x", labelsize=8)
    handles, names = ax.get_legend_handles_labels()
    ax.get_legend().remove()
fig.legend(handles, names, loc="upper center", ncol=5, fontsize=9, frameon=False)
fig.tight_layout(rect=(0, 0, 1, 0.92))
plt.show()

# %% [markdown]
# Table 3 as bars (ours) with the paper's values as grey ticks at the same positions.

# %%
order = ch06_cellpaint.orderings(table3)
means = {m: {k: float(np.mean([table3[g][m][k] for g in table3])) for k in SETS}
         for m in ("auroc", "sparsity")}
verdict = lambda ok: "holds" if ok else "does not hold"  # noqa: E731
for _, r in order.iterrows():
    glue(f"chain_{r.metric}_{r.gene}", verdict(r.ica_ge_pca_ge_base))
    glue(f"rand_{r.metric}_{r.gene}", "beats" if r.ica_gt_rand else "does not beat")
for m in ("auroc", "sparsity"):
    for k in SETS:
        glue(f"mean_{m}_{k}", means[m][k])
    glue(f"n_chain_{m}", int(order[order.metric == m].ica_ge_pca_ge_base.sum()))
    glue(f"n_rand_{m}", int(order[order.metric == m].ica_gt_rand.sum()))
glue("n_genes", len(table3))
glue("paper_plk1_sp_pca", paper.TABLE3["PLK1"]["sparsity"][1])
glue("paper_plk1_sp_ica", paper.TABLE3["PLK1"]["sparsity"][2])
sparser = means["sparsity"]["pca_ica"] > means["sparsity"]["pca"]
glue("sparsity_reading",
     "as in the paper, PCA + ICA gives the sparsest effects on average" if sparser else
     "unlike the paper, PCA + ICA does not give sparser effects than PCA on average")
order.set_index(["gene", "metric"]).unstack("metric")

# %% [markdown]
# **What we saw.** Averaged over the genes, the AUROC is {glue:text}`mean_auroc_base:.3f`
# (Base), {glue:text}`mean_auroc_pca:.3f` (PCA), {glue:text}`mean_auroc_pca_ica:.3f`
# (PCA + ICA) and {glue:text}`mean_auroc_pca_rand:.3f` (PCA + Rand); the Hoyer sparsity is
# {glue:text}`mean_sparsity_base:.3f`, {glue:text}`mean_sparsity_pca:.3f`,
# {glue:text}`mean_sparsity_pca_ica:.3f` and {glue:text}`mean_sparsity_pca_rand:.3f`. The
# chain PCA + ICA $\ge$ PCA $\ge$ Base holds for {glue:text}`n_chain_auroc` of
# {glue:text}`n_genes` genes in AUROC and {glue:text}`n_chain_sparsity` in sparsity, and
# PCA + ICA beats PCA + Rand for {glue:text}`n_rand_auroc` genes in AUROC and
# {glue:text}`n_rand_sparsity` in sparsity. Gene by gene:
#
# | gene | AUROC: ICA $\ge$ PCA $\ge$ Base | AUROC: ICA vs Rand | sparsity: ICA $\ge$ PCA $\ge$ Base | sparsity: ICA vs Rand |
# | --- | --- | --- | --- | --- |
# | CYP11B1 | {glue:text}`chain_auroc_CYP11B1` | {glue:text}`rand_auroc_CYP11B1` | {glue:text}`chain_sparsity_CYP11B1` | {glue:text}`rand_sparsity_CYP11B1` |
# | EIF3H | {glue:text}`chain_auroc_EIF3H` | {glue:text}`rand_auroc_EIF3H` | {glue:text}`chain_sparsity_EIF3H` | {glue:text}`rand_sparsity_EIF3H` |
# | HCK | {glue:text}`chain_auroc_HCK` | {glue:text}`rand_auroc_HCK` | {glue:text}`chain_sparsity_HCK` | {glue:text}`rand_sparsity_HCK` |
# | MTOR | {glue:text}`chain_auroc_MTOR` | {glue:text}`rand_auroc_MTOR` | {glue:text}`chain_sparsity_MTOR` | {glue:text}`rand_sparsity_MTOR` |
# | PLK1 | {glue:text}`chain_auroc_PLK1` | {glue:text}`rand_auroc_PLK1` | {glue:text}`chain_sparsity_PLK1` | {glue:text}`rand_sparsity_PLK1` |
#
# In the paper the AUROC chain holds for every gene and ICA beats the random rotation for
# every gene; in sparsity the chain holds for four genes (PLK1: PCA
# {glue:text}`paper_plk1_sp_pca:.3f` vs ICA {glue:text}`paper_plk1_sp_ica:.3f`). In our run,
# {glue:text}`sparsity_reading`.
# Where ours differ, we think the reason is the embedding rather than the protocol: a small
# MAE trained for minutes encodes only the coarse factors of our cells (size, intensities)
# and little of the fine ones (textures, spot counts) that several genes move, so its well
# embeddings carry less biology, measured on fewer wells, than OpenPhenom's on RxRx3-core.
# The planted-factor checks below measure this directly.

# %% [markdown]
# ## Table 4: concentration of biological variation

# %%
t4 = pd.DataFrame({"ours": table4, "paper": paper.TABLE4}).rename(index=LABELS)
if screen is not None:
    labels = np.where(wells.is_control, "control", wells.guide.astype(str))
    truth_conc = concentration(screen.well_factors, labels)
    mcc = {k: ch06_cellpaint.factor_recovery(F, screen.well_factors)["mcc"] for k, F in out["features"].items()}
    t4["MCC with planted factors"] = pd.Series(mcc).rename(index=LABELS)
t4["batch share of control variance"] = pd.Series(
    {k: ch06_cellpaint.batch_share(F, wells) for k, F in out["features"].items()}).rename(index=LABELS)
for k in SETS:
    glue(f"batch_{k}", t4.loc[LABELS[k], "batch share of control variance"])
if screen is not None:
    glue("truth_conc", truth_conc)
    glue("mcc_ica", mcc["pca_ica"])
    glue("mcc_rand", mcc["pca_rand"])
    glue("mcc_base", mcc["base"])
for k in SETS:
    glue(f"t4_{k}", table4[k])
    glue(f"paper_t4_{k}", paper.TABLE4[k])
glue("t4_ica_vs_rand", "above" if table4["pca_ica"] > table4["pca_rand"] else "not above")
glue("t4_ica_vs_base", "above" if table4["pca_ica"] > table4["base"] else "not above")
t4.round(3)

# %% [markdown]
# Concentration (our estimator, {prf:ref}`def-concentration`) beside the paper's Table 4,
# and, for the simulation, the mean correlation of each basis with the planted well-level
# factors (MCC: Hungarian matching of factors to features, mean |correlation|).
#
# The concentration of PCA + ICA is {glue:text}`t4_ica_vs_rand` that of PCA + Rand and
# {glue:text}`t4_ica_vs_base` that of Base ({glue:text}`t4_pca_ica:.3f` vs
# {glue:text}`t4_pca_rand:.3f` and {glue:text}`t4_base:.3f`; the paper:
# {glue:text}`paper_t4_pca_ica:.3f`, {glue:text}`paper_t4_pca_rand:.3f`,
# {glue:text}`paper_t4_base:.3f`). Computed on the planted factors themselves, the same estimator gives
# {glue:text}`truth_conc:.3f`: the ceiling a perfect disentangling basis would reach in this
# screen. The MCC with the planted factors is {glue:text}`mcc_ica:.3f` for PCA + ICA,
# {glue:text}`mcc_rand:.3f` for PCA + Rand and {glue:text}`mcc_base:.3f` for Base: far below
# 1, i.e. our MAE's well embeddings recover the factors only weakly, which bounds how much
# any rotation can concentrate them. With real OpenPhenom embeddings there is no planted
# truth, and this column is absent.
#
# The last column is the median, over features, of the share of the control wells'
# variance that the batch explains: {glue:text}`batch_base:.2f` for Base,
# {glue:text}`batch_pca:.2f` for PCA, {glue:text}`batch_pca_ica:.2f` for PCA + ICA and
# {glue:text}`batch_pca_rand:.2f` for PCA + Rand. In the raw embeddings the batch dominates
# most features; whitening on controls gathers it into the few leading components, and the
# rotations spread what is left thinly over all axes. We read this as one reason the
# whitened sets classify held-out batches better than Base.
#
# ## Table 6: the classifier's configuration
#
# Printed from the code's own configuration (`nearid.experiments.ch06_cellpaint.LIGHTGBM_PARAMS`), beside
# what the paper's Table 6 lists; the rows below the line are settings Table 6 does not
# give, chosen here.

# %%
clf_params = ch06_cellpaint.make_classifier(n_estimators=P.n_estimators, seed=P.seed).get_params()
t6 = pd.DataFrame({"ours": {k: clf_params[k] for k in ch06_cellpaint.LIGHTGBM_PARAMS},
                   "paper": paper.TABLE6_LIGHTGBM})
extra = pd.DataFrame({"ours": {k: clf_params[k] for k in ("n_estimators", "random_state", "n_jobs")},
                      "paper": {"n_estimators": "not stated", "random_state": "not stated",
                                "n_jobs": "not stated"}})
assert all(t6.ours == t6.paper)
pd.concat([t6, extra]).astype(str)

# %%
payload = {
    "table3": {g: {"auroc": r["auroc"], "sparsity": r["sparsity"]} for g, r in table3.items()},
    "table4": table4,
    "orderings": order.to_dict(orient="records"),
    "batch_share": {k: ch06_cellpaint.batch_share(F, wells) for k, F in out["features"].items()},
    "data": "rxrx3-core" if real else "simulated",
    "seconds": time.perf_counter() - t_start,
}
if screen is not None:
    payload["truth"] = {"concentration": truth_conc, "mcc": mcc}
    payload["mae_loss"] = fit_result.losses[-1]
results.save(results_path, payload, params=P, profile=profile)
print(f"chapter body ran in {payload['seconds']:.0f} s")

# %% [markdown]
# ## Exercises
#
# ```{exercise}
# :label: ex-cell-batch
#
# Set `batch_strength` to 0 (no technical batch effects) and rerun. Which gap shrinks more:
# Base vs PCA, or PCA + Rand vs PCA + ICA? What does that say about which part of the gain
# comes from handling batch effects and which from finding the biological axes?
# ```
#
# ```{solution} ex-cell-batch
# :class: dropdown
#
# Run `nearid run 06 -p batch_strength=0.0`. Without batch effects the held-out batches look
# like the training batches, so the cross-batch penalty that a mixed (Base) basis pays
# mostly disappears and Base moves towards PCA. The ICA-vs-random gap instead comes from
# the axes: trees split one feature at a time, so a basis in which a gene moves few features
# needs fewer, cleaner splits. That gap persists as long as the embedding encodes the moved
# factors, and grows with how well it does (the MCC column of Table 4).
# ```
#
# ```{exercise}
# :label: ex-cell-hoyer
#
# A guide moves $k$ of $n$ features by the same amount and leaves the rest at zero. What is
# the Hoyer sparsity of its effect vector? Check your formula with
# `nearid.metrics.sparsity.hoyer`, and compare it with the sparsity that the same vector has
# after a random rotation for $n = 64$.
# ```
#
# ```{solution} ex-cell-hoyer
# :class: dropdown
#
# $\|x\|_1 / \|x\|_2 = k / \sqrt{k} = \sqrt{k}$, so
# $\operatorname{H}(x) = (\sqrt{n} - \sqrt{k}) / (\sqrt{n} - 1)$; for $n = 64, k = 3$ that is
# $(8 - 1.732)/7 \approx 0.895$. After a random rotation the entries are roughly Gaussian, and
# $\|x\|_1/\|x\|_2 \approx \sqrt{2n/\pi}$, giving
# $(\sqrt{n} - \sqrt{2n/\pi})/(\sqrt{n} - 1) \approx 0.23$ for $n = 64$, whatever $k$ is. This is
# why random rotations sit near the bottom of Table 3's sparsity columns.
# ```
