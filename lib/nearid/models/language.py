"""Small GPT-NeoX language models: Table 1's "Pythia-160M seed 0 -> seed 1" row, offline.

Pythia models are ``GPTNeoXForCausalLM``s trained on the Pile; the paper compares two
training seeds. On a CPU we train two *tiny* GPT-NeoX models (same config, different seeds)
on Shakespeare, with byte-level tokens so that no vocabulary has to be downloaded or
learned. With real checkpoints in local folders, :func:`load_pretrained` loads them and
the same embedding code applies.

The representation is the mean over positions of the hidden state after a middle layer
(``layer = num_hidden_layers // 2``, counting the embedding output as layer 0): middle
layers carry the most general-purpose features of a causal LM, while the last layer is
specialised to next-token prediction.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from nearid import gemm
from nearid.constraints import FRACTION, validate_params

BYTE_VOCAB = 256


class ByteTokenizer:
    """UTF-8 bytes as tokens (vocabulary 256): lossless, nothing to fit or download."""

    vocab_size = BYTE_VOCAB

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)

    def decode(self, ids) -> str:
        return bytes(np.asarray(ids, dtype=np.uint8).tolist()).decode("utf-8", errors="replace")


def tiny_gpt_neox_config(vocab_size: int = BYTE_VOCAB, hidden_size: int = 64,
                         num_hidden_layers: int = 4, num_attention_heads: int = 4,
                         intermediate_size: int | None = None, max_position_embeddings: int = 256):
    """A Pythia-shaped config (parallel residual, rotary positions), only much smaller."""
    from transformers import GPTNeoXConfig

    if hidden_size % num_attention_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be divisible by "
                         f"num_attention_heads ({num_attention_heads})")
    return GPTNeoXConfig(vocab_size=vocab_size, hidden_size=hidden_size,
                         num_hidden_layers=num_hidden_layers,
                         num_attention_heads=num_attention_heads,
                         intermediate_size=intermediate_size or 4 * hidden_size,
                         max_position_embeddings=max_position_embeddings,
                         bos_token_id=0, eos_token_id=0, tie_word_embeddings=False,
                         use_cache=False)


class TinyLM(nn.Module):
    """A ``GPTNeoXForCausalLM`` with ``loss(batch)`` for :func:`nearid.train.fit`.

    A batch is a (N, T) tensor of token ids (given as floats by the training loop, which
    casts everything to float32; ids up to 2^24 are exact).
    """

    def __init__(self, config=None, seed: int | None = None, **config_kwargs):
        super().__init__()
        from transformers import GPTNeoXForCausalLM

        if config is not None and config_kwargs:
            raise ValueError("give either a config or config keyword arguments, not both")
        config = config or tiny_gpt_neox_config(**config_kwargs)
        if seed is not None:
            torch.manual_seed(seed)  # the initial weights are the seed's only other effect
        self.model = GPTNeoXForCausalLM(config)
        self.config = config

    def loss(self, batch):
        ids = (batch[0] if isinstance(batch, (tuple, list)) else batch).long()
        out = self.model(input_ids=ids, labels=ids)  # labels are shifted inside the model
        return out.loss, {"nll": float(out.loss.detach())}

    def embed(self, ids: torch.Tensor, layer: int | None = None) -> torch.Tensor:
        return mean_hidden_state(self.model, ids.long(), layer=layer)


def middle_layer(model) -> int:
    """Index into ``hidden_states`` of the middle block (0 = embeddings)."""
    return model.config.num_hidden_layers // 2


@torch.no_grad()
def mean_hidden_state(model, ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                      layer: int | None = None) -> torch.Tensor:
    """Mean over (unpadded) positions of ``hidden_states[layer]``; shape (N, hidden)."""
    n_layers = model.config.num_hidden_layers
    layer = middle_layer(model) if layer is None else layer
    if not 0 <= layer <= n_layers:
        raise ValueError(f"layer must lie in [0, {n_layers}] (0 = embeddings), got {layer}")
    was_training = model.training
    model.eval()
    out = model(input_ids=ids, attention_mask=attention_mask, output_hidden_states=True)
    model.train(was_training)
    h = out.hidden_states[layer]
    if attention_mask is None:
        return h.mean(dim=1)
    m = attention_mask[..., None].to(h.dtype)
    return (h * m).sum(1) / m.sum(1).clamp_min(1.0)


# --------------------------------------------------------------------------- data
def train_windows(ids: np.ndarray, context: int, n: int, seed: int = 0) -> np.ndarray:
    """``n`` random windows of ``context + 1`` tokens (inputs plus the next token)."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or len(ids) < context + 2:
        raise ValueError(f"need a 1-D token array longer than context + 1 = {context + 1}, "
                         f"got shape {ids.shape}")
    starts = np.random.default_rng(seed).integers(0, len(ids) - context - 1, size=n)
    return np.stack([ids[s:s + context + 1] for s in starts])


def eval_windows(ids: np.ndarray, context: int, n: int) -> np.ndarray:
    """``n`` consecutive, non-overlapping windows of ``context`` tokens (deterministic)."""
    ids = np.asarray(ids)
    if n * context > len(ids):
        raise ValueError(f"{n} windows of {context} tokens need {n * context} tokens, "
                         f"have {len(ids)}")
    return ids[: n * context].reshape(n, context)


@validate_params(eval_fraction=FRACTION)
def split_text(text: str, eval_fraction: float = 0.1) -> tuple[str, str]:
    """First part for training, the last ``eval_fraction`` held out for representations."""
    cut = int(len(text) * (1 - eval_fraction))
    return text[:cut], text[cut:]


def embed_windows(model, windows: np.ndarray, layer: int | None = None, batch_size: int = 64,
                  device: str | torch.device = "cpu") -> np.ndarray:
    """Mean-pooled middle-layer states of fixed-length token windows, as float64 numpy."""
    model = model.model if isinstance(model, TinyLM) else model
    model.to(device)
    ids = torch.as_tensor(np.asarray(windows), dtype=torch.long)
    with gemm.portable_products(device):
        outs = [mean_hidden_state(model, ids[i:i + batch_size].to(device), layer=layer).cpu()
                for i in range(0, len(ids), batch_size)]
    return torch.cat(outs).numpy().astype(np.float64)


@torch.no_grad()
def embed_windows_by_layer(model, windows: np.ndarray, batch_size: int = 64,
                           device: str | torch.device = "cpu") -> dict[str, np.ndarray]:
    """Mean-pooled states of every layer ("layer 0" = the token embeddings), one forward pass
    per batch: what ``nearid align --layers`` and :func:`nearid.align.compare_layers` compare."""
    model = model.model if isinstance(model, TinyLM) else model
    model.to(device)
    was_training = model.training
    model.eval()
    ids = torch.as_tensor(np.asarray(windows), dtype=torch.long)
    per_layer: list[list[torch.Tensor]] = []
    for i in range(0, len(ids), batch_size):
        with gemm.portable_products(device):
            states = model(input_ids=ids[i:i + batch_size].to(device), output_hidden_states=True).hidden_states
        if not per_layer:
            per_layer = [[] for _ in states]
        for acc, h in zip(per_layer, states):
            acc.append(h.mean(dim=1).cpu())
    model.train(was_training)
    return {f"layer {k}": torch.cat(acc).numpy().astype(np.float64) for k, acc in enumerate(per_layer)}


def embed_texts(model, tokenizer, texts: list[str], layer: int | None = None,
                max_length: int = 64, batch_size: int = 32,
                device: str | torch.device = "cpu") -> np.ndarray:
    """Mean-pooled middle-layer states of texts, with a Hugging Face tokenizer (padding masked)."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    model.to(device)
    outs = []
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(list(texts[i:i + batch_size]), padding=True, truncation=True,
                        max_length=max_length, return_tensors="pt")
        outs.append(mean_hidden_state(model, enc["input_ids"].to(device),
                                      enc["attention_mask"].to(device), layer=layer).cpu())
    return torch.cat(outs).numpy().astype(np.float64)


def load_pretrained(path: str | os.PathLike, device: str | torch.device = "cpu"):
    """A GPT-NeoX checkpoint (e.g. Pythia) from a local folder: ``(model, tokenizer or None)``.

    Never downloads (``local_files_only``). The tokenizer is ``None`` when the folder has
    none; feed token ids to :func:`embed_windows` then.
    """
    from transformers import AutoTokenizer, GPTNeoXForCausalLM

    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no checkpoint at {path} (expected a folder with config.json "
                                "and weights, as written by save_pretrained)")
    model = GPTNeoXForCausalLM.from_pretrained(str(path), local_files_only=True).to(device).eval()
    tokenizer = None
    if any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json")):
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    return model, tokenizer
