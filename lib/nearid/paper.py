"""The paper's published numbers, as data.

This is the only place where numbers from the paper live; chapters show them beside ours,
labelled "paper". Source: *Statistical and structural identifiability in representation
learning*, arXiv:2603.11970 (ICLR 2026): Table 1 (alignment between model pairs), Table 2
(disentanglement, InfoMEC), Table 3 (perturbation classification and sparsity), Table 4
(concentration of biological variation), Table 5 (appendix, Shapes3D mean and std), Table 6
(LightGBM hyperparameters), and the captions of Figures 2 and A.3-A.6. Each constant below
names the table or figure it copies.
"""

from __future__ import annotations

CITATION = (
    "Statistical and structural identifiability in representation learning, "
    "arXiv:2603.11970 (ICLR 2026)"
)

# What the paper ran for the evidence each chapter reproduces (its tables and captions; the
# appendix is not available to us), shown beside our profiles on "How this book was run".
SETUPS = {
    "01_definitions": "Definitions 1-2 and Theorems 1-3; no experiment",
    "02_isometric_dgp": "Figure 1: a simple isometric data-generating process",
    "03_bilipschitz": "Figures 2, A.3-A.6: MNIST autoencoders, the leaky-ReLU leak alpha swept, weight decay",
    "04_alignment": "Table 1: Pythia-160M seeds 0 and 1; MAE-timm against MAE-original; CheXpert-small against "
                    "-base; two ResNet-18 runs",
    "05_disentanglement": "Table 2: AE and AE + ICA on Shapes3D, MPI3D, Falcor3D and Isaac3D; beta-VAE, "
                          "beta-TCVAE and BioAE quoted from Hsu et al. (2023)",
    "06_cell_microscopy": "Tables 3, 4 and 6: a foundation-scale MAE's embeddings of RxRx3-core, 22,062 control "
                          "wells, LightGBM",
}

# Table 1 (arXiv:2603.11970): mean l2 error normalised by latent diameter, fits from model A's
# codes to B's, per model pair.
TABLE1: dict[str, dict[str, float]] = {
    "pythia": {"permutation": 0.219, "rigid": 0.150, "linear": 0.131, "ica": 0.202},
    "mae": {"permutation": 0.197, "rigid": 0.109, "linear": 0.036, "ica": 0.145},
    "chexpert": {"permutation": 0.218, "rigid": 0.104, "linear": 0.048, "ica": 0.175},
    "resnet18": {"permutation": 0.382, "rigid": 0.206, "linear": 0.175, "ica": 0.312},
}
# The paper's names of its Table 1 rows (what we train for each row: ch04_alignment.PAIRS).
TABLE1_LABELS = {
    "pythia": "Pythia-160M-0 -> Pythia-160M-1",
    "mae": "MAE-timm -> MAE-original",
    "chexpert": "CheXpert-small -> CheXpert-base",
    "resnet18": "ResNet-18-fc-1 -> ResNet-18-fc-2",
}
# The row of Table 1 each of chapter 04's pairs stands for: our pair (named for the models it
# trains or loads, nearid.experiments.ch04_alignment.PAIRS) -> the paper's row (the keys above).
TABLE1_STAND_INS = {
    "gpt_neox_seeds": "pythia",
    "mae_timm_vs_ours": "mae",
    "cnn_widths": "chexpert",
    "resnet18_seeds": "resnet18",
}
# The ICA efficiencies printed in Table 1, in percent (rounded by the paper).
TABLE1_ICA_EFFICIENCY_PERCENT = {"pythia": 25, "mae": 59, "chexpert": 38, "resnet18": 40}
# Table 1's claim in one range: ICA closes 25-59% of the permutation-rigid gap (as printed).
TABLE1_EFFICIENCY_RANGE = (min(TABLE1_ICA_EFFICIENCY_PERCENT.values()) / 100,
                           max(TABLE1_ICA_EFFICIENCY_PERCENT.values()) / 100)

# Table 2: (InfoM, InfoE, InfoC). Rows marked * in the paper were quoted from Hsu et al. 2023.
TABLE2_DATASETS = ("shapes3d", "mpi3d", "falcor3d", "isaac3d")
TABLE2: dict[str, dict[str, tuple[float, float, float]]] = {
    "ae": {"aggregated": (0.39, 0.76, 0.25), "shapes3d": (0.34, 0.99, 0.16),
           "mpi3d": (0.42, 0.40, 0.31), "falcor3d": (0.37, 0.83, 0.20),
           "isaac3d": (0.41, 0.80, 0.34)},
    "beta_vae": {"aggregated": (0.59, 0.81, 0.55), "shapes3d": (0.59, 0.99, 0.49),
                 "mpi3d": (0.45, 0.71, 0.51), "falcor3d": (0.71, 0.73, 0.70),
                 "isaac3d": (0.60, 0.80, 0.51)},
    "beta_tcvae": {"aggregated": (0.58, 0.72, 0.59), "shapes3d": (0.61, 0.82, 0.62),
                   "mpi3d": (0.51, 0.60, 0.57), "falcor3d": (0.66, 0.74, 0.71),
                   "isaac3d": (0.54, 0.70, 0.46)},
    "bioae": {"aggregated": (0.54, 0.75, 0.36), "shapes3d": (0.56, 0.98, 0.44),
              "mpi3d": (0.45, 0.66, 0.36), "falcor3d": (0.54, 0.73, 0.31),
              "isaac3d": (0.63, 0.65, 0.33)},
    "ae_ica": {"aggregated": (0.65, 0.83, 0.40), "shapes3d": (0.79, 0.99, 0.52),
               "mpi3d": (0.44, 0.66, 0.31), "falcor3d": (0.71, 0.83, 0.33),
               "isaac3d": (0.64, 0.82, 0.43)},
}
TABLE2_QUOTED_FROM_HSU = ("beta_vae", "beta_tcvae", "bioae")

# Table 5 (appendix, Shapes3D): (mean, std) of InfoM, InfoE, InfoC.
TABLE5_SHAPES3D: dict[str, tuple[tuple[float, float], ...]] = {
    "ae": ((0.41, 0.03), (0.98, 0.01), (0.28, 0.01)),
    "beta_vae": ((0.59, 0.02), (0.99, 0.02), (0.49, 0.03)),
    "beta_tcvae": ((0.61, 0.03), (0.82, 0.02), (0.62, 0.02)),
    "bioae": ((0.56, 0.02), (0.98, 0.01), (0.44, 0.02)),
    "ae_reproduced": ((0.36, 0.05), (1.00, 0.00), (0.18, 0.06)),
}

# Table 3: perturbation classification (AUROC) and Hoyer sparsity per feature set.
TABLE3_FEATURE_SETS = ("base", "pca", "pca_ica", "pca_rand")
TABLE3: dict[str, dict] = {
    "CYP11B1": {"guides": 1, "auroc": (0.663, 0.692, 0.709, 0.678),
                "sparsity": (0.184, 0.204, 0.237, 0.188)},
    "EIF3H": {"guides": 1, "auroc": (0.682, 0.724, 0.749, 0.725),
              "sparsity": (0.192, 0.224, 0.268, 0.214)},
    "HCK": {"guides": 1, "auroc": (0.670, 0.693, 0.711, 0.668),
            "sparsity": (0.156, 0.208, 0.241, 0.166)},
    "MTOR": {"guides": 6, "auroc": (0.663, 0.690, 0.705, 0.679),
             "sparsity": (0.166, 0.201, 0.233, 0.186)},
    "PLK1": {"guides": 6, "auroc": (0.803, 0.811, 0.815, 0.792),
             "sparsity": (0.251, 0.307, 0.305, 0.262)},
}
TABLE3_N_CONTROLS = 22_062

# Table 4: fraction of biological variation in the top 25% of features.
TABLE4 = {"base": 0.163, "pca": 0.332, "pca_ica": 0.386, "pca_rand": 0.287}

# Table 6: LightGBM hyperparameters used in all of the paper's experiments.
TABLE6_LIGHTGBM = {
    "is_unbalance": True,
    "learning_rate": 0.05,
    "num_leaves": 31,
    "feature_fraction": 0.6,
    "reg_alpha": 5.0,
    "reg_lambda": 1.0,
}


def table1_efficiency(row: dict[str, float]) -> float:
    """ICA efficiency (perm - ica) / (perm - rigid): the share of the gap ICA closes."""
    gap = row["permutation"] - row["rigid"]
    if gap == 0:
        return float("nan")
    return (row["permutation"] - row["ica"]) / gap

# Figures 2 and A.3-A.6 (chapter 03): the paper gives captions, no numbers. Its "alpha" is the
# leaky-ReLU "leak"; the captions tie alpha -> 0 to a tighter B(z) and alpha -> 1 to a larger
# bi-Lipschitz constant and better reconstruction.
FIGURE_CAPTIONS_BILIPSCHITZ = {
    "2": "Controlling the bi-Lipschitz constant L leads to improved identifiability (reduced l2 error).",
    "A.3": "The distribution of sample-level bi-Lipschitz constant estimates B(z) tightens around 1 "
           "as alpha -> 0.",
    "A.4": "Controlling L leads to improved identifiability (reduced l2 error). The proportionality "
           "does not appear to differ whether the max or mean bi-Lipschitz constant is estimated.",
    "A.5": "Reconstruction error improves as the bi-Lipschitz constant grows (leak alpha -> 1). "
           "Notably, poor reconstruction does not inhibit identifiability.",
    "A.6": "In digit-specific models, controlling L leads to improved identifiability with a pattern "
           "similar to the full-dataset models.",
}
