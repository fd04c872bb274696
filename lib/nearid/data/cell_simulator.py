"""A cell-painting simulator with known biology and known batch effects (chapter 06).

RxRx3-core (the images behind the paper's Tables 3 and 4) ships nowhere we can reach, so we
render a screen whose ground truth we know:

* **cells** -- multi-channel single-cell crops (channel 0 DNA/nucleus, 1 cytoplasm/RNA,
  2 membrane/actin, 3 organelles/mitochondria) drawn from :data:`FACTORS`, two dozen
  biological factors (sizes, shapes, intensities, textures, spot counts) plus per-cell
  nuisances (orientation, position, texture noise, spot positions);
* **perturbations** -- each gene of :data:`GENES` (the rows of the paper's Table 3) shifts a
  sparse subset of factors; a gene has one or six guides (separate experiments) whose
  knockout efficiency differs;
* **wells** -- every well has its own small non-Gaussian biological offset (well-to-well
  variability) on top of its perturbation; many control wells per batch;
* **batches** -- technical effects shared by every well of a batch: channel gains,
  background, an illumination gradient and focus blur.

Everything is vectorised in torch and seeded: the same arguments give the same screen,
whether it is rendered in memory or, chunk by chunk and by two processes, into a file that
later runs memory-map (``simulate(cache=...)``, :mod:`nearid.data.cache`; the full
profile's screen is 153,600 crops, 10 GB).
Factors are in standardised units: control cells have mean 0 and standard deviation 1 per
factor (before the well offsets), and :data:`FACTOR_RANGES` maps them to physical values.
"""

from __future__ import annotations

import contextlib
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

CHANNELS = ("DNA", "RNA / cytoplasm", "membrane / actin", "mitochondria")

# name -> (low, high): factor f maps to low + (high - low) * sigmoid(0.9 f).
FACTOR_RANGES: dict[str, tuple[float, float]] = {
    # nucleus (channel 0)
    "nucleus_size": (0.22, 0.40),
    "nucleus_elongation": (1.0, 1.7),
    "nucleus_offset": (0.0, 0.35),
    "dna_intensity": (0.45, 1.0),
    "chromatin_texture": (0.0, 0.7),
    "chromatin_scale": (0.0, 1.0),
    "nucleoli_count": (0.0, 4.0),
    "nucleoli_intensity": (0.2, 0.9),
    # cell body and cytoplasm (channel 1)
    "cell_size": (0.55, 0.88),
    "cell_elongation": (1.0, 1.9),
    "membrane_ruffling": (0.0, 0.18),
    "cytoplasm_intensity": (0.2, 0.7),
    "cytoplasm_texture": (0.0, 0.6),
    "perinuclear_gradient": (0.0, 0.9),
    "nuclear_rna": (0.0, 0.6),
    # membrane and actin (channel 2)
    "membrane_intensity": (0.3, 1.0),
    "membrane_thickness": (0.025, 0.11),
    "actin_fibres": (0.0, 0.5),
    "fibre_spacing": (2.5, 7.0),
    # organelles (channel 3)
    "organelle_count": (2.0, 15.0),
    "organelle_size": (0.035, 0.09),
    "organelle_intensity": (0.3, 1.0),
    "organelle_clustering": (0.0, 1.0),
    "mito_diffuse": (0.0, 0.3),
}
FACTORS: tuple[str, ...] = tuple(FACTOR_RANGES)
FACTOR_CHANNEL = {name: (0 if i < 8 else 1 if i < 15 else 2 if i < 19 else 3)
                  for i, name in enumerate(FACTORS)}

# gene -> (number of guides, {factor: signed effect in control-cell standard deviations}).
# Guides mirror Table 3 (three genes with one guide, two with six). The factor choices are
# loose nods to each gene's biology; the sizes are set so that classification is neither
# trivial nor hopeless, with PLK1 (mitotic arrest) the strongest, as in the paper.
GENES: dict[str, tuple[int, dict[str, float]]] = {
    "CYP11B1": (1, {"organelle_intensity": -0.5, "mito_diffuse": 0.45, "organelle_size": 0.35}),
    "EIF3H": (1, {"cytoplasm_intensity": -0.5, "nucleoli_intensity": 0.45, "nuclear_rna": 0.4}),
    "HCK": (1, {"actin_fibres": -0.5, "membrane_ruffling": 0.45, "membrane_intensity": -0.35}),
    "MTOR": (6, {"cell_size": -0.45, "organelle_count": -0.4, "cytoplasm_texture": 0.35,
                 "nucleus_size": -0.3}),
    "PLK1": (6, {"nucleus_size": 0.6, "chromatin_texture": 0.55, "cell_elongation": -0.5,
                 "dna_intensity": 0.4, "nucleus_elongation": -0.35}),
}
CONTROL = "control"
N_NUCLEOLI = 4
N_ORGANELLES = 16


def _gene_seed(name: str) -> int:
    """A stable per-name seed (Python's hash() is salted per process)."""
    return zlib.crc32(name.encode())


def guide_efficiencies(gene: str, n_guides: int, low: float = 0.55, high: float = 1.15) -> np.ndarray:
    """Knockout efficiency per guide: guides of one gene act alike but not equally strongly."""
    if n_guides == 1:
        return np.array([1.0])
    return np.random.default_rng(_gene_seed(gene)).uniform(low, high, n_guides)


def effect_matrix(genes: dict[str, tuple[int, dict[str, float]]] | None = None
                  ) -> tuple[list[tuple[str, str]], np.ndarray]:
    """All (gene, guide) pairs and their factor shifts, shape (n_guides_total, n_factors)."""
    genes = GENES if genes is None else genes
    pairs, rows = [], []
    for gene, (n_guides, shifts) in genes.items():
        unknown = set(shifts) - set(FACTORS)
        if unknown:
            raise ValueError(f"gene {gene} moves unknown factors {sorted(unknown)}; "
                             f"valid: {', '.join(FACTORS)}")
        base = np.array([shifts.get(f, 0.0) for f in FACTORS])
        for g, eff in enumerate(guide_efficiencies(gene, n_guides)):
            pairs.append((gene, f"{gene}_guide_{g + 1}"))
            rows.append(eff * base)
    return pairs, np.array(rows)


def moved_factors(gene: str, genes: dict | None = None) -> list[int]:
    """Indices into :data:`FACTORS` of the factors a gene moves."""
    genes = GENES if genes is None else genes
    if gene not in genes:
        raise ValueError(f"unknown gene {gene!r}; valid: {', '.join(genes)}")
    return [FACTORS.index(f) for f in genes[gene][1]]


@dataclass
class CellScreen:
    """One simulated screen: cell images, their well, and the ground truth behind them."""

    images: np.ndarray  # (n_cells, 4, S, S) float32
    cell_well: np.ndarray  # (n_cells,) well index of every cell
    cell_factors: np.ndarray  # (n_cells, n_factors) standardised factors of every cell
    wells: pd.DataFrame  # one row per well: well_id, batch, gene, guide, is_control
    well_factors: np.ndarray  # (n_wells, n_factors) mean factors of the well's cells
    effects: np.ndarray  # (n_wells, n_factors) planted perturbation shift of the well
    batch_effects: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_wells(self) -> int:
        return len(self.wells)


def aggregate_wells(values, cell_well, n_wells: int | None = None) -> np.ndarray:
    """Mean of per-cell rows per well (``cell_well`` indexes wells 0..n_wells-1)."""
    values = np.asarray(values, dtype=np.float64)
    cell_well = np.asarray(cell_well)
    if values.ndim != 2 or len(values) != len(cell_well):
        raise ValueError(f"values must be (n_cells, d) with one well index per cell; got "
                         f"{values.shape} and {cell_well.shape}")
    n_wells = int(cell_well.max()) + 1 if n_wells is None else n_wells
    counts = np.bincount(cell_well, minlength=n_wells).astype(np.float64)
    if (counts == 0).any():
        raise ValueError(f"{int((counts == 0).sum())} wells have no cells")
    sums = np.zeros((n_wells, values.shape[1]))
    np.add.at(sums, cell_well, values)
    return sums / counts[:, None]


class CellPaintingSimulator:
    """Renders a seeded screen of single-cell crops; see the module docstring.

    Parameters
    ----------
    image_size : crop side in pixels (the cell spans most of it).
    n_batches : technical batches (plates/experiments); every batch holds every well type.
    controls_per_batch : control wells per batch.
    wells_per_guide : wells per guide per batch.
    cells_per_well : cells imaged per well.
    well_sd : standard deviation of the per-well biological offsets (Laplace, so
        non-Gaussian: well-to-well biology that ICA can find among the controls).
    effect_scale : multiplies every gene's shifts (1 = :data:`GENES` as written).
    batch_strength : multiplies every technical batch effect (0 = no batch effects; at 1
        gains vary by about 25% between batches, blur up to 1.3 pixels).
    noise_sd : pixel noise standard deviation.
    seed : the only source of randomness.
    """

    def __init__(self, image_size: int = 32, n_batches: int = 6, controls_per_batch: int = 40,
                 wells_per_guide: int = 3, cells_per_well: int = 12, well_sd: float = 0.5,
                 effect_scale: float = 1.5, batch_strength: float = 0.5, noise_sd: float = 0.02,
                 genes: dict | None = None, seed: int = 0):
        for name, value, low in (("image_size", image_size, 16), ("n_batches", n_batches, 1),
                                 ("controls_per_batch", controls_per_batch, 1),
                                 ("wells_per_guide", wells_per_guide, 1),
                                 ("cells_per_well", cells_per_well, 1)):
            if int(value) != value or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        for name, value in (("well_sd", well_sd), ("effect_scale", effect_scale),
                            ("batch_strength", batch_strength), ("noise_sd", noise_sd)):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        self.image_size = int(image_size)
        self.n_batches = int(n_batches)
        self.controls_per_batch = int(controls_per_batch)
        self.wells_per_guide = int(wells_per_guide)
        self.cells_per_well = int(cells_per_well)
        self.well_sd = float(well_sd)
        self.effect_scale = float(effect_scale)
        self.batch_strength = float(batch_strength)
        self.noise_sd = float(noise_sd)
        self.genes = GENES if genes is None else genes
        self.seed = int(seed)

    # ------------------------------------------------------------------ layout
    def layout(self) -> tuple[pd.DataFrame, np.ndarray]:
        """The plate map: one row per well (controls first in each batch), and its shifts."""
        pairs, effects = effect_matrix(self.genes)
        rows, shift = [], []
        for b in range(self.n_batches):
            for i in range(self.controls_per_batch):
                rows.append((f"batch{b}_ctrl{i}", b, CONTROL, CONTROL, True))
                shift.append(np.zeros(len(FACTORS)))
            for (gene, guide), eff in zip(pairs, effects):
                for i in range(self.wells_per_guide):
                    rows.append((f"batch{b}_{guide}_{i}", b, gene, guide, False))
                    shift.append(self.effect_scale * eff)
        wells = pd.DataFrame(rows, columns=["well_id", "batch", "gene", "guide", "is_control"])
        return wells, np.array(shift)

    def sample_batch_effects(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Technical effects per batch: gains, backgrounds, illumination gradient, blur."""
        s, B, C = self.batch_strength, self.n_batches, len(CHANNELS)
        angle = rng.uniform(0, 2 * np.pi, B)
        return {
            "gain": np.exp(s * rng.normal(0, 0.25, (B, C))),
            "background": s * rng.uniform(0, 0.12, (B, C)),
            "gradient": s * rng.uniform(0.1, 0.45, B)[:, None] * np.c_[np.cos(angle), np.sin(angle)],
            "blur": s * rng.uniform(0.0, 1.3, B),
        }

    # ------------------------------------------------------------------ simulate
    def simulate(self, *, cache: bool | None = None, cache_dir=None, workers: int | None = None) -> CellScreen:
        """Draw factors, render every cell, apply its batch's technical effects.

        ``cache``: True renders the images once into a file under ``cache_dir`` (default
        :func:`nearid.data.cache.cache_root`) and returns them read-only and memory-mapped,
        as every later call with the same simulator does without rendering; False renders
        into memory; None (default) does the first for screens of at least
        :data:`nearid.data.cache.CACHE_MIN_BYTES` (the full profile's, 10 GB). ``workers``
        processes make the file (None: ``$NEARID_DATA_WORKERS``, else two for large
        screens). The pixels are the same every way."""
        from nearid.data import cache as _cache

        rng = np.random.default_rng(self.seed)
        wells, shift = self.layout()
        n_wells, K, n = len(wells), len(FACTORS), self.cells_per_well
        # well-level biology: Laplace offsets (sd well_sd) + the perturbation's shift
        offsets = rng.laplace(0, self.well_sd / np.sqrt(2), (n_wells, K))
        cell_well = np.repeat(np.arange(n_wells), n)
        # cell-level biology: uniform on [-sqrt3, sqrt3] (sd 1), independent per factor
        cell_noise = rng.uniform(-np.sqrt(3), np.sqrt(3), (n_wells * n, K))
        factors = (offsets + shift)[cell_well] + cell_noise
        batch_fx = self.sample_batch_effects(rng)
        cell_batch = wells["batch"].to_numpy()[cell_well]
        well_gain = np.exp(rng.normal(0, 0.03 * self.batch_strength, (n_wells, len(CHANNELS))))
        job = _plan(factors, cell_batch, batch_fx, self.image_size, rng, self.noise_sd,
                    well_gain[cell_well], chunk=2048)
        shape = (job.n, len(CHANNELS), self.image_size, self.image_size)
        if _cache.use_disk(cache, 4 * int(np.prod(shape))):
            workers = _cache.check_workers(workers, job.n, min_rows=16384)
            images = _cache.cached_array(
                "cells", self.params(), shape, np.float32,
                lambda writer: render_cells_to_file(job, writer, workers),
                version={"code": _cache.source_version(sys.modules[__name__], _cache), "pandas": pd.__version__,
                         **_cache.environment_version(torch=True)},
                root=cache_dir, compute=lambda: _render_all(job))
        else:
            images = _render_all(job)
        return CellScreen(images=images, cell_well=cell_well, cell_factors=factors, wells=wells,
                          well_factors=aggregate_wells(factors, cell_well, n_wells),
                          effects=shift, batch_effects=batch_fx)

    def params(self) -> dict:
        """The arguments that decide the screen (its cache key)."""
        return {"image_size": self.image_size, "n_batches": self.n_batches,
                "controls_per_batch": self.controls_per_batch, "wells_per_guide": self.wells_per_guide,
                "cells_per_well": self.cells_per_well, "well_sd": self.well_sd,
                "effect_scale": self.effect_scale, "batch_strength": self.batch_strength,
                "noise_sd": self.noise_sd, "seed": self.seed,
                "genes": {g: [int(k), {f: float(v) for f, v in shifts.items()}]
                          for g, (k, shifts) in self.genes.items()}}


# ---------------------------------------------------------------------- rendering
def physical(factors: np.ndarray) -> dict[str, np.ndarray]:
    """Map standardised factors (n, K) to physical parameters by :data:`FACTOR_RANGES`."""
    factors = np.asarray(factors, dtype=np.float64)
    if factors.ndim != 2 or factors.shape[1] != len(FACTORS):
        raise ValueError(f"factors must have shape (n, {len(FACTORS)}), got {factors.shape}")
    squash = 1.0 / (1.0 + np.exp(-0.9 * factors))
    return {name: lo + (hi - lo) * squash[:, k] for k, (name, (lo, hi)) in enumerate(FACTOR_RANGES.items())}


def _gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Same-size Gaussian blur of (n, C, S, S) images with one sigma (pixels) for all.

    Written as sums of shifted copies, one multiply and one add per tap, in a fixed order,
    rather than as a convolution: torch convolves small batches with its Slow2d kernel
    and larger ones with NNPACK, and NNPACK chooses its blocking, so the order of its sums,
    from the CPU's cache sizes (an Intel Sapphire Rapids gave other pixels than the AMD EPYCs
    had). Element-wise products and sums round the same way in every kernel, so each pixel
    depends only on its neighbourhood: not on the CPU, the batch size or oneDNN.
    """
    if sigma < 0.05:
        return x
    radius = max(1, int(np.ceil(3 * sigma)))
    t = torch.arange(-radius, radius + 1, dtype=x.dtype)
    k = _exp(-0.5 * (t / sigma) ** 2)
    k = k / k.sum()
    S = x.shape[-1]
    x = F.pad(x, (radius, radius, radius, radius), mode="reflect")
    rows = k[0] * x[..., :, 0:S]
    for j in range(1, len(k)):
        rows = rows + k[j] * x[..., :, j:j + S]
    out = k[0] * rows[..., 0:S, :]
    for j in range(1, len(k)):
        out = out + k[j] * rows[..., j:j + S, :]
    return out


_SUB = 32  # cells per pixel-level step: a multiple of 16 keeps every pixel's bits (see _render_range)
_SKIP_COST = 0.07  # skipping a chunk's noise costs this much of rendering it (measured, 2 cores)


@contextlib.contextmanager
def _one_thread():
    """torch on one thread while cells are drawn: a multi-threaded element-wise kernel
    splits a tensor where its threads meet, which moves where the vectorised loop hands
    over to its scalar tail, and so could change the last bit of a transcendental function."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass
class _CellJob:
    """Everything :func:`_render_range` needs, made by :func:`_plan` (picklable, for workers)."""

    params: dict[str, np.ndarray]  # physical parameters per cell, float32
    cell_batch: np.ndarray
    batch_effects: dict[str, np.ndarray]
    extra_gain: np.ndarray | None
    image_size: int
    noise_sd: float
    chunk: int
    seed: int  # of the torch generator that draws every nuisance
    states: list[bytes] = field(default_factory=list)  # its state at the start of every chunk
    noise_state: bytes = b""  # ... and after every chunk has drawn its nuisances

    @property
    def n(self) -> int:
        return len(self.cell_batch)


def _plan(factors, cell_batch, batch_effects, image_size, rng, noise_sd, extra_gain, chunk) -> _CellJob:
    rng = np.random.default_rng(0) if rng is None else rng
    factors = np.asarray(factors, dtype=np.float64)
    cell_batch = np.asarray(cell_batch)
    n = len(factors)
    if len(cell_batch) != n:
        raise ValueError(f"need one batch per cell: {n} cells, {len(cell_batch)} batch labels")
    if int(chunk) != chunk or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    return _CellJob(params={k: v.astype(np.float32) for k, v in physical(factors).items()},
                    cell_batch=cell_batch, batch_effects={k: np.asarray(v) for k, v in batch_effects.items()},
                    extra_gain=None if extra_gain is None else np.asarray(extra_gain, dtype=np.float32),
                    image_size=int(image_size), noise_sd=float(noise_sd), chunk=int(chunk),
                    seed=int(rng.integers(2**62)))


def _with_states(job: _CellJob) -> _CellJob:
    """``job`` with the generator's state at the start of every chunk and after the last
    (drawing the nuisances alone, which are small, to learn them)."""
    if job.states:
        return job
    gen = torch.Generator().manual_seed(job.seed)
    with _one_thread():
        for start in range(0, job.n, job.chunk):
            job.states.append(gen.get_state().numpy().tobytes())
            _draw(min(job.chunk, job.n - start), job.image_size, gen)
    job.noise_state = gen.get_state().numpy().tobytes()
    return job


def _set_state(gen: torch.Generator, state: bytes) -> torch.Generator:
    gen.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))
    return gen


def _skip(gen: torch.Generator, count: int, block: int = 1 << 22) -> None:
    """Advance ``gen`` past ``count`` random 32-bit words (one per float32 uniform)."""
    buf = torch.empty(min(block, max(count, 1)))
    while count > 0:
        k = min(count, len(buf))
        buf[:k].uniform_(generator=gen)
        count -= k


def render_cells(factors, cell_batch, batch_effects: dict[str, np.ndarray], image_size: int = 32,
                 rng: np.random.Generator | None = None, noise_sd: float = 0.02,
                 extra_gain=None, chunk: int = 2048) -> np.ndarray:
    """Render (n, 4, S, S) float32 crops of cells with the given factors and batches.

    Nuisances (orientation, position, textures, spot positions, pixel noise) come from
    ``rng``; the technical effects of ``batch_effects`` are applied per batch.
    """
    return _render_all(_plan(factors, cell_batch, batch_effects, image_size, rng, noise_sd, extra_gain, chunk))


def _render_all(job: _CellJob) -> np.ndarray:
    out = np.empty((job.n, len(CHANNELS), job.image_size, job.image_size), dtype=np.float32)

    def put(start, block):
        out[start:start + len(block)] = block

    _render_range(_with_states(job), 0, len(_with_states(job).states), put)
    return out


def _split(K: int, workers: int, skip: float = _SKIP_COST) -> list[tuple[int, int]]:
    """Consecutive chunk ranges, one per worker, of equal cost: a worker that starts at
    chunk a first skips a * ``skip`` chunks' worth of the noise stream."""
    weights = (1 - skip) ** np.arange(workers)
    bounds = np.r_[0, np.cumsum(K * weights / weights.sum())].round().astype(int)
    bounds[-1] = K
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _render_part(job: _CellJob, k0: int, k1: int, writer) -> None:
    """Worker: chunks k0..k1 of ``job`` into ``writer`` (a :class:`~nearid.data.cache.RowWriter`)."""
    _render_range(job, k0, k1, writer.write)


def render_cells_to_file(job: _CellJob, writer, workers: int = 1) -> None:
    """All cells of ``job`` into ``writer``, with ``workers`` processes (this one and
    ``workers - 1`` started ones), each taking consecutive chunks."""
    K = len(_with_states(job).states)
    S = job.image_size
    if (job.chunk % _SUB) * len(CHANNELS) * S * S % 16:  # see _render_range: workers skip whole vectors
        workers = 1
    parts = _split(K, max(1, min(int(workers), K)))
    if len(parts) <= 1:
        _render_range(job, 0, K, writer.write)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(len(parts) - 1, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_render_part, job, a, b, writer) for a, b in parts[1:]]
        _render_range(job, *parts[0], writer.write)
        for fut in futures:
            fut.result()


def _render_range(job: _CellJob, k0: int, k1: int, put) -> None:
    """Chunks ``k0 .. k1`` of ``job``: ``put(first_cell, block)`` receives finished crops.

    The same pixels as rendering all cells at once: every chunk draws its nuisances with
    the generator state it had then; per-cell numbers are computed on the whole chunk (the
    shapes the old single pass used), pixels :data:`_SUB` cells at a time (a multiple of
    16 cells, so that a vectorised loop's scalar tail falls where it always did); the
    technical effects act on each cell alone; the pixel noise continues one stream, in cell
    order, in blocks of whole 16-float vectors.
    """
    S, n, chunk = job.image_size, job.n, job.chunk
    ax = (torch.arange(S, dtype=torch.float32) + 0.5) / S * 2 - 1
    yy, xx = torch.meshgrid(ax, ax, indexing="ij")
    fx = job.batch_effects
    gain = torch.as_tensor(fx["gain"], dtype=torch.float32)
    background = torch.as_tensor(fx["background"], dtype=torch.float32)
    gradient = torch.as_tensor(fx["gradient"], dtype=torch.float32)
    extra = None if job.extra_gain is None else torch.as_tensor(job.extra_gain)
    illum = {}
    with _one_thread():
        gen, noise = torch.Generator(), _set_state(torch.Generator(), job.noise_state)
        _skip(noise, k0 * chunk * len(CHANNELS) * S * S)
        for k in range(k0, k1):
            start = k * chunk
            m = min(chunk, n - start)
            draws = _draw(m, S, gen=_set_state(gen, job.states[k]))
            cell = _per_cell({key: torch.from_numpy(v[start:start + m]) for key, v in job.params.items()}, draws)
            for s0 in range(0, m, _SUB):
                sl = slice(s0, min(m, s0 + _SUB))
                x = _pixels(cell, draws, sl, xx, yy)
                batch = job.cell_batch[start + sl.start:start + sl.stop]
                for b in np.unique(batch):  # technical effects of each cell's batch
                    idx = torch.as_tensor(np.flatnonzero(batch == b))
                    if b not in illum:
                        illum[b] = 1.0 + gradient[b, 0] * xx + gradient[b, 1] * yy
                    g = gain[b].view(1, -1, 1, 1)
                    if extra is not None:
                        g = g * extra[start + sl.start + idx].view(len(idx), -1, 1, 1)
                    y = _gaussian_blur(x[idx] * illum[b] * g, float(fx["blur"][b]))
                    x[idx] = y + background[b].view(1, -1, 1, 1)
                x += job.noise_sd * torch.randn(x.shape, generator=noise)
                put(start + sl.start, x.numpy())


def _soft(t: torch.Tensor, sharpness: float) -> torch.Tensor:
    return torch.sigmoid(sharpness * t)


def _draw(m: int, S: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """The random nuisances of m cells, drawn in the order the renderer has always used."""
    u01 = lambda *shape: torch.rand(*shape, generator=gen)  # noqa: E731
    d = {}
    d["theta"], d["centre"], d["phase"], d["psi"] = u01(m), u01(m, 2), u01(m), u01(m)
    d["coarse"] = torch.randn(m, 1, 4, 4, generator=gen)
    fine = max(4, S // 3)
    d["fine"] = torch.randn(m, 1, fine, fine, generator=gen)
    d["cyto"] = torch.randn(m, 1, 6, 6, generator=gen)
    d["nuc_r"], d["nuc_ang"], d["nuc_present"] = (u01(m, N_NUCLEOLI) for _ in range(3))
    d["fibre_phase"] = u01(m)
    d["org_r"], d["org_ang"], d["org_present"] = (u01(m, N_ORGANELLES) for _ in range(3))
    return d


def _per_cell(p: dict[str, torch.Tensor], d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Per-cell numbers of one chunk (vectors over its cells, spot tables (m, spots))."""
    c: dict[str, torch.Tensor] = dict(p)
    theta = d["theta"] * 2 * np.pi
    c["centre"] = (d["centre"] - 0.5) * 0.12
    c["cos"], c["sin"] = _cos(theta), _sin(theta)
    c["a_c"] = p["cell_size"] * p["cell_elongation"].sqrt()
    c["b_c"] = p["cell_size"] / p["cell_elongation"].sqrt()
    c["phase"] = d["phase"] * 2 * np.pi
    a_n = p["nucleus_size"] * p["nucleus_elongation"].sqrt()
    b_n = p["nucleus_size"] / p["nucleus_elongation"].sqrt()
    c["a_n"], c["b_n"] = a_n, b_n
    psi = d["psi"] * 2 * np.pi
    off = p["nucleus_offset"] * (p["cell_size"] - p["nucleus_size"])
    c["off_u"], c["off_v"] = off * _cos(psi), off * _sin(psi)
    c["mix"] = p["chromatin_scale"]
    r = torch.sqrt(d["nuc_r"]) * 0.55
    ang = d["nuc_ang"] * 2 * np.pi
    c["nuc_u"] = off[:, None] * _cos(psi)[:, None] + r * _cos(ang) * a_n[:, None]
    c["nuc_v"] = off[:, None] * _sin(psi)[:, None] + r * _sin(ang) * b_n[:, None]
    c["nuc_present"] = (d["nuc_present"] < p["nucleoli_count"][:, None] / N_NUCLEOLI).float()
    c["fibre_freq"] = 2 * np.pi * p["fibre_spacing"]
    c["fibre_phase"] = d["fibre_phase"] * 2 * np.pi
    k = N_ORGANELLES
    rr = d["org_r"] ** (0.5 + 1.5 * p["organelle_clustering"][:, None])
    ang = d["org_ang"] * 2 * np.pi
    c["org_u"], c["org_v"] = rr * _cos(ang) * c["a_c"][:, None] * 0.9, rr * _sin(ang) * c["b_c"][:, None] * 0.9
    c["org_present"] = (d["org_present"] < p["organelle_count"][:, None] / k).float()
    return c


def _pixels(c: dict[str, torch.Tensor], d: dict[str, torch.Tensor], sl: slice,
            xx: torch.Tensor, yy: torch.Tensor) -> torch.Tensor:
    """Clean (no technical effects) 4-channel crops of cells ``sl`` of a chunk."""
    c = {k: v[sl] for k, v in c.items()}
    m = len(c["cell_size"])
    S = xx.shape[0]
    col = lambda v: v.view(m, 1, 1)  # noqa: E731
    dx, dy = xx - col(c["centre"][:, 0]), yy - col(c["centre"][:, 1])
    cs, sn = col(c["cos"]), col(c["sin"])
    u, v = dx * cs + dy * sn, -dx * sn + dy * cs  # cell frame: u along the long axis
    # cell body with a ruffled boundary
    rho_c = torch.sqrt((u / col(c["a_c"])) ** 2 + (v / col(c["b_c"])) ** 2 + 1e-9)
    wobble = 1 + col(c["membrane_ruffling"]) * _sin(5 * torch.atan2(v, u) + col(c["phase"]))
    rho_c = rho_c / wobble
    cell = _soft(1 - rho_c, 14.0)
    # nucleus, offset from the cell centre
    nu, nv = u - col(c["off_u"]), v - col(c["off_v"])
    rho_n = torch.sqrt((nu / col(c["a_n"])) ** 2 + (nv / col(c["b_n"])) ** 2 + 1e-9)
    nucleus = _soft(1 - rho_n, 12.0)
    # textures
    coarse, fine = _upsample(d["coarse"][sl], S), _upsample(d["fine"][sl], S)
    mix = col(c["mix"])
    chromatin = (1 - mix) * coarse + mix * fine
    cyto_tex = _upsample(d["cyto"][sl], S)
    # nucleoli: up to N_NUCLEOLI dark-in-DNA, bright-in-RNA spots inside the nucleus
    nucleoli = _spots(u, v, c["nuc_u"], c["nuc_v"], c["nuc_present"], 0.05).clamp(max=1.0)
    # channel 0: DNA
    dna = col(c["dna_intensity"]) * nucleus * (1 + col(c["chromatin_texture"]) * chromatin).clamp(min=0)
    dna = dna * (1 - 0.7 * nucleoli * nucleus)
    # channel 1: RNA / cytoplasm, brighter near the nucleus
    cytoplasm = cell * (1 - nucleus)
    profile = (1 - col(c["perinuclear_gradient"]) * rho_c.clamp(max=1.0)).clamp(min=0)
    rna = (col(c["cytoplasm_intensity"]) * cytoplasm * profile
           * (1 + col(c["cytoplasm_texture"]) * cyto_tex).clamp(min=0)
           + col(c["nuclear_rna"]) * nucleus + col(c["nucleoli_intensity"]) * nucleoli * nucleus)
    # channel 2: membrane ring and actin fibres along the long axis
    dist = (rho_c - 1) * col(c["cell_size"])
    membrane = col(c["membrane_intensity"]) * _exp(-(dist / col(c["membrane_thickness"])) ** 2)
    fibres = 0.5 + 0.5 * _sin(col(c["fibre_freq"]) * v + col(c["fibre_phase"]))
    actin = membrane + col(c["actin_fibres"]) * cytoplasm * fibres
    # channel 3: mitochondria / organelles, clustered around the nucleus or dispersed
    size = c["organelle_size"][:, None, None, None]
    spots = _spots(u, v, c["org_u"], c["org_v"], c["org_present"], size).clamp(max=1.5)
    mito = col(c["organelle_intensity"]) * spots * cell + col(c["mito_diffuse"]) * cytoplasm
    return torch.stack([dna, rna, actin, mito], dim=1)


def _upsample(z: torch.Tensor, size: int) -> torch.Tensor:
    """Smooth random texture: a cells x cells Gaussian grid upsampled bilinearly to size."""
    return F.interpolate(z, size=(size, size), mode="bilinear", align_corners=False)[:, 0]


def _float64(ufunc, x: torch.Tensor) -> torch.Tensor:
    """numpy's float64 ``ufunc`` of the float32 tensor ``x``, rounded back to float32.

    torch's own exp, sin and cos on the CPU give the same bits under every ATen capability
    and every ``MKL_CBWR`` setting on one machine, yet other bits on an AMD Zen 4 than on an
    Intel Sapphire Rapids (the pinned pixels of the tests differed): they are not the
    vectorised kernels the capability pins but a vendor-dependent library path. numpy's
    float64 functions run one code path on every x86-64 CPU under the pinned numpy
    features (nearid.kernels), and rounding to float32 leaves their last bits behind."""
    return torch.from_numpy(ufunc(x.numpy().astype(np.float64)).astype(np.float32))


def _exp(x: torch.Tensor) -> torch.Tensor:
    """exp of a float32 tensor, the same bits on every CPU (:func:`_float64`); exactly +0.0
    at and below -104, where the Gaussians of a crop underflow."""
    return _float64(np.exp, x)


def _sin(x: torch.Tensor) -> torch.Tensor:
    return _float64(np.sin, x)


def _cos(x: torch.Tensor) -> torch.Tensor:
    return _float64(np.cos, x)


def _spots(u, v, su, sv, present, size) -> torch.Tensor:
    """Sum over spots (m, k) at (su, sv) of Gaussian blobs of width ``size`` (a number or
    per cell (m, 1, 1, 1)), absent spots (``present`` 0) adding nothing.

    Where a crop has a multiple of 16 pixels, spot slot by spot slot, only the cells where
    that spot is present are computed and added to their sum: the same numbers, because
    torch sums a short middle axis of such a tensor one row after another from zero and
    the operations are the same element by element (in place); elsewhere, all spots at
    once, as before."""
    if (u.shape[-1] * u.shape[-2]) % 16:
        d2 = (u[:, None] - su[..., None, None]) ** 2 + (v[:, None] - sv[..., None, None]) ** 2
        return (present[..., None, None] * _exp(-d2 / (2 * size ** 2))).sum(1)
    out = torch.zeros_like(u)
    size = size.reshape(-1) if isinstance(size, torch.Tensor) else size
    for j in range(present.shape[1]):
        cells = torch.nonzero(present[:, j]).squeeze(1)
        if not len(cells):
            continue
        s = size[cells][:, None, None] if isinstance(size, torch.Tensor) else size
        d2 = (u[cells] - su[cells, j][:, None, None]).square_()
        d2 += (v[cells] - sv[cells, j][:, None, None]).square_()
        x = d2.neg_().div_(2 * s ** 2)
        out.index_add_(0, cells, _exp(x))
    return out


def to_rgb(images, vmax: float | None = None) -> np.ndarray:
    """Composite (n, 4, S, S) crops to (n, S, S, 3) RGB for display.

    DNA blue, RNA/cytoplasm green, membrane/actin red, mitochondria magenta; one shared
    scale (``vmax``, default the 99.5th percentile) so batches stay comparable.
    """
    x = np.asarray(images, dtype=np.float64)
    if x.ndim == 3:
        x = x[None]
    if x.ndim != 4 or x.shape[1] != len(CHANNELS):
        raise ValueError(f"images must have shape (n, {len(CHANNELS)}, S, S), got {x.shape}")
    colours = np.array([[0.1, 0.3, 1.0], [0.1, 0.9, 0.2], [1.0, 0.2, 0.1], [0.9, 0.1, 0.9]])
    vmax = float(np.quantile(x, 0.995)) if vmax is None else vmax
    x = np.clip(x / max(vmax, 1e-9), 0, 1)
    rgb = np.einsum("nchw,ck->nhwk", x, colours)
    return np.clip(rgb, 0, 1)
