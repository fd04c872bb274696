"""Named parameter sets per chapter: ``smoke`` (tests), ``quick`` (default book), ``full``.

A chapter reads its parameters with :func:`resolve`, which validates the profile name,
every override's name and every override's type before any work starts, and lists what is
valid when something is not. The runner calls the same function, so a bad ``-p`` fails at
once instead of minutes into a run.

Conventions: ``seeds`` is a number of seeds (0, 1, ..., seeds-1); ``seed`` is a base seed;
``device`` is "auto", "cpu" or "cuda".
"""

from __future__ import annotations

import ast
from typing import Any

PROFILES = ("smoke", "quick", "full")

CHAPTERS: dict[str, dict[str, dict[str, Any]]] = {
    # ---------------------------------------------------------------- 01 definitions
    "01_definitions": {
        "smoke": dict(seed=0, n_points=300, noise_levels=[0.0, 0.1], ica_sample_sizes=[200, 1000],
                      ica_sources=["laplace", "uniform"], ica_dim=3, ica_repeats=2),
        "quick": dict(seed=0, n_points=2000, noise_levels=[0.0, 0.02, 0.05, 0.1, 0.2, 0.4],
                      ica_sample_sizes=[100, 300, 1000, 3000, 10000],
                      ica_sources=["laplace", "uniform", "gennorm_1.5", "gennorm_2.5", "gaussian"],
                      ica_dim=4, ica_repeats=5),
        "full": dict(seed=0, n_points=10000, noise_levels=[0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8],
                     ica_sample_sizes=[100, 300, 1000, 3000, 10000, 30000, 100000],
                     ica_sources=["laplace", "uniform", "gennorm_1.5", "gennorm_2.5", "gaussian"],
                     ica_dim=8, ica_repeats=20),
    },
    # ---------------------------------------------------------------- 02 isometric DGP
    "02_isometric_dgp": {
        "smoke": dict(seed=0, seeds=2, deltas=[0.0, 0.5], latent_dim=3, observed_dim=10,
                      n_train=600, n_test=300, epochs=3, batch_size=128, lr=3e-3,
                      weight_decay=1e-4, hidden=32, image_size=16, image_epochs=2,
                      device="auto"),
        "quick": dict(seed=0, seeds=3, deltas=[0.0, 0.2, 0.4, 0.6, 0.8], latent_dim=3,
                      observed_dim=20, n_train=3000, n_test=2000, epochs=30, batch_size=128,
                      lr=3e-3, weight_decay=1e-4, hidden=64, image_size=24, image_epochs=20,
                      device="auto"),
        "full": dict(seed=0, seeds=10, deltas=[0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
                     latent_dim=5, observed_dim=50, n_train=50000, n_test=10000, epochs=100,
                     batch_size=256, lr=1e-3, weight_decay=1e-4, hidden=256, image_size=32,
                     image_epochs=100, device="auto"),
    },
    # ---------------------------------------------------------------- 03 bi-Lipschitz
    "03_bilipschitz": {
        "smoke": dict(seed=0, seeds=2, alphas=[0.0, 1.0], weight_decays=[0.0, 0.5], latent_dim=4,
                      hidden=[32], tie_encoder=True, n_train=600, n_test=300, epochs=2,
                      batch_size=64, lr=2e-3, digits=[1], digit_alphas=[0.0, 1.0], digit_seeds=3,
                      digit_weight_decay=0.5, digit_n_train=1200, device="auto"),
        "quick": dict(seed=0, seeds=3, alphas=[0.0, 0.05, 0.2, 0.5, 1.0], weight_decays=[0.0, 0.5],
                      latent_dim=8, hidden=[128, 64], tie_encoder=True, n_train=5000, n_test=2000,
                      epochs=30, batch_size=64, lr=2e-3, digits=[0, 1, 7],
                      digit_alphas=[0.0, 0.2, 1.0], digit_seeds=3, digit_weight_decay=0.5,
                      digit_n_train=10000, device="auto"),
        "full": dict(seed=0, seeds=5, alphas=[0.0, 0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0],
                     weight_decays=[0.0, 0.1, 0.5], latent_dim=16, hidden=[512, 256],
                     tie_encoder=True, n_train=60000, n_test=10000, epochs=50, batch_size=128,
                     lr=1e-3, digits=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                     digit_alphas=[0.0, 0.05, 0.2, 0.5, 1.0], digit_seeds=5,
                     digit_weight_decay=0.5, digit_n_train=60000, device="auto"),
    },
    # ---------------------------------------------------------------- 06 cell microscopy
    # n_components 0 = keep every whitened direction; rxrx_* "" = simulate (give the paths
    # of metadata_rxrx3_core.csv and OpenPhenom_rxrx3_core_embeddings.parquet for real data).
    "06_cell_microscopy": {
        "smoke": dict(seed=0, device="auto", image_size=16, n_batches=3, controls_per_batch=6,
                      wells_per_guide=1, cells_per_well=2, well_sd=0.5, effect_scale=1.5,
                      batch_strength=0.5, patch_size=4, embed_dim=16, depth=1, num_heads=2,
                      decoder_embed_dim=8, decoder_depth=1, mask_ratio=0.75, epochs=1,
                      batch_size=64, lr=1.5e-3, weight_decay=0.05, n_components=0,
                      ica_fit_on="controls", n_splits=3, n_estimators=10, rxrx_embeddings="",
                      rxrx_metadata="", rxrx_batch_column="experiment_name"),
        "quick": dict(seed=0, device="auto", image_size=32, n_batches=6, controls_per_batch=48,
                      wells_per_guide=3, cells_per_well=12, well_sd=0.5, effect_scale=1.5,
                      batch_strength=0.5, patch_size=8, embed_dim=64, depth=4, num_heads=4,
                      decoder_embed_dim=32, decoder_depth=2, mask_ratio=0.75, epochs=12,
                      batch_size=128, lr=1.5e-3, weight_decay=0.05, n_components=0,
                      ica_fit_on="controls", n_splits=3, n_estimators=100, rxrx_embeddings="",
                      rxrx_metadata="", rxrx_batch_column="experiment_name"),
        "full": dict(seed=0, device="auto", image_size=64, n_batches=12, controls_per_batch=200,
                     wells_per_guide=8, cells_per_well=40, well_sd=0.5, effect_scale=1.5,
                     batch_strength=0.5, patch_size=8, embed_dim=192, depth=8, num_heads=6,
                     decoder_embed_dim=128, decoder_depth=4, mask_ratio=0.75, epochs=100,
                     batch_size=256, lr=1.5e-4 * 4, weight_decay=0.05, n_components=0,
                     ica_fit_on="controls", n_splits=4, n_estimators=300, rxrx_embeddings="",
                     rxrx_metadata="", rxrx_batch_column="experiment_name"),
    },
    # ---------------------------------------------------------------- 04 alignment (Table 1)
    # pythia_paths: [] = train two tiny GPT-NeoX; two local checkpoint folders = load them
    # (full lists where real Pythia-160M seeds would live; missing folders -> tiny models).
    "04_alignment": {
        "smoke": dict(seed=0, device="auto", pairs=["pythia", "mae", "chexpert", "resnet18",
                                                    "sentence_encoders"],
                      fit_fraction=0.5, mnist_train=256, mnist_eval=1100, batch_size=64,
                      lr=1e-3, mae_embed_dim=16, mae_depth=1, mae_epochs=1, clf_feature_dim=16,
                      clf_epochs=1, resnet_train=128, resnet_epochs=1, resnet_stem_stride=2,
                      lm_hidden=16, lm_layers=2, lm_context=16, lm_train_windows=64,
                      lm_epochs=1, lm_eval_windows=120, pythia_paths=[], sentences=800),
        "quick": dict(seed=0, device="auto", pairs=["pythia", "mae", "chexpert", "resnet18",
                                                    "sentence_encoders"],
                      fit_fraction=0.5, mnist_train=10000, mnist_eval=4000, batch_size=128,
                      lr=1e-3, mae_embed_dim=64, mae_depth=4, mae_epochs=5, clf_feature_dim=64,
                      clf_epochs=3, resnet_train=6000, resnet_epochs=3, resnet_stem_stride=2,
                      lm_hidden=64, lm_layers=4, lm_context=64, lm_train_windows=4000,
                      lm_epochs=2, lm_eval_windows=1000, pythia_paths=[], sentences=2400),
        "full": dict(seed=0, device="auto", pairs=["pythia", "mae", "chexpert", "resnet18",
                                                   "sentence_encoders"],
                     fit_fraction=0.5, mnist_train=60000, mnist_eval=10000, batch_size=256,
                     lr=1e-3, mae_embed_dim=192, mae_depth=8, mae_epochs=50, clf_feature_dim=256,
                     clf_epochs=20, resnet_train=60000, resnet_epochs=20, resnet_stem_stride=1,
                     lm_hidden=256, lm_layers=6, lm_context=128, lm_train_windows=200000,
                     lm_epochs=2, lm_eval_windows=5000,
                     pythia_paths=["data/pythia/pythia-160m-seed0", "data/pythia/pythia-160m-seed1"],
                     sentences=5000),
    },
    # ---------------------------------------------------------------- 05 disentanglement (Table 2)
    "05_disentanglement": {
        "smoke": dict(seed=0, seeds=2, datasets=["shapes3d", "mpi3d", "falcor3d", "isaac3d"],
                      image_size=16, supersample=1, n_train=160, n_eval=120, epochs=1,
                      batch_size=64, lr=1e-3, width=8, hidden=32, hyper={}, ica_components="k",
                      heatmap_dataset="shapes3d", traversal_size=32, device="auto"),
        "quick": dict(seed=0, seeds=2, datasets=["shapes3d", "mpi3d", "falcor3d", "isaac3d"],
                      image_size=32, supersample=1, n_train=3000, n_eval=1000, epochs=12,
                      batch_size=64, lr=2e-3, width=16, hidden=128, hyper={}, ica_components="k",
                      heatmap_dataset="shapes3d", traversal_size=64, device="auto"),
        "full": dict(seed=0, seeds=5, datasets=["shapes3d", "mpi3d", "falcor3d", "isaac3d"],
                     image_size=64, supersample=2, n_train=100000, n_eval=10000, epochs=30,
                     batch_size=64, lr=1e-3, width=32, hidden=256, hyper={}, ica_components="k",
                     heatmap_dataset="shapes3d", traversal_size=64, device="auto"),
    },
}


class Params(dict):
    """A dict of resolved chapter parameters that also reads as attributes (``P.seeds``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no parameter {name!r}; have: {', '.join(sorted(self))}") from None


def chapter_key(chapter: str) -> str:
    """Resolve "02" or "02_isometric_dgp" to the full chapter key."""
    if chapter in CHAPTERS:
        return chapter
    hits = [k for k in CHAPTERS if k.split("_", 1)[0] == chapter]
    if len(hits) == 1:
        return hits[0]
    raise ValueError(f"unknown chapter {chapter!r}; valid: {', '.join(CHAPTERS)}")


def _coerce(name: str, value: Any, reference: Any) -> Any:
    """Check ``value`` against the type of the quick profile's ``reference`` value."""
    def fail(expected: str):
        raise TypeError(f"parameter {name!r} must be {expected} (like {reference!r}), "
                        f"got {value!r} of type {type(value).__name__}")

    if isinstance(reference, bool):
        if not isinstance(value, bool):
            fail("a bool")
        return value
    if isinstance(reference, int):
        if isinstance(value, bool) or not isinstance(value, int):
            fail("an int")
        return value
    if isinstance(reference, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail("a number")
        return float(value)
    if isinstance(reference, str):
        if not isinstance(value, str):
            fail("a string")
        return value
    if isinstance(reference, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            fail("a list")
        if reference:
            return [_coerce(f"{name}[{i}]", v, reference[0]) for i, v in enumerate(value)]
        return list(value)
    if isinstance(reference, dict):
        if not isinstance(value, dict):
            fail("a dict")
        return dict(value)
    return value


def resolve(chapter: str, profile: str = "quick", overrides: dict[str, Any] | None = None) -> Params:
    """The chapter's parameters for ``profile`` with ``overrides`` applied, validated."""
    key = chapter_key(chapter)
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid: {', '.join(PROFILES)}")
    base = CHAPTERS[key][profile]
    reference = CHAPTERS[key]["quick"]
    params = Params(base)
    for name, value in (overrides or {}).items():
        if name not in reference:
            raise KeyError(f"unknown parameter {name!r} for chapter {key}; valid: "
                           f"{', '.join(sorted(reference))}")
        params[name] = _coerce(name, value, reference[name])
    if "device" in params and params["device"] not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {params['device']!r}")
    return params


def parse_override(text: str) -> tuple[str, Any]:
    """Parse ``key=value`` from the command line; the value is a Python literal or a string."""
    if "=" not in text:
        raise ValueError(f"an override looks like key=value, got {text!r}")
    key, raw = text.split("=", 1)
    key, raw = key.strip(), raw.strip()
    if not key:
        raise ValueError(f"empty parameter name in {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return key, value
