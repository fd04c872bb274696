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

Everything is vectorised in torch and seeded: the same arguments give the same screen.
Factors are in standardised units: control cells have mean 0 and standard deviation 1 per
factor (before the well offsets), and :data:`FACTOR_RANGES` maps them to physical values.
"""

from __future__ import annotations

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
    def simulate(self) -> CellScreen:
        """Draw factors, render every cell, apply its batch's technical effects."""
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
        images = render_cells(factors, cell_batch, batch_fx, image_size=self.image_size,
                              rng=rng, noise_sd=self.noise_sd, extra_gain=well_gain[cell_well])
        return CellScreen(images=images, cell_well=cell_well, cell_factors=factors, wells=wells,
                          well_factors=aggregate_wells(factors, cell_well, n_wells),
                          effects=shift, batch_effects=batch_fx)


# ---------------------------------------------------------------------- rendering
def physical(factors: np.ndarray) -> dict[str, np.ndarray]:
    """Map standardised factors (n, K) to physical parameters by :data:`FACTOR_RANGES`."""
    factors = np.asarray(factors, dtype=np.float64)
    if factors.ndim != 2 or factors.shape[1] != len(FACTORS):
        raise ValueError(f"factors must have shape (n, {len(FACTORS)}), got {factors.shape}")
    squash = 1.0 / (1.0 + np.exp(-0.9 * factors))
    return {name: lo + (hi - lo) * squash[:, k] for k, (name, (lo, hi)) in enumerate(FACTOR_RANGES.items())}


def _noise_field(n: int, size: int, cells: int, gen: torch.Generator) -> torch.Tensor:
    """Smooth random texture: a cells x cells Gaussian grid upsampled bilinearly to size."""
    z = torch.randn(n, 1, cells, cells, generator=gen)
    return F.interpolate(z, size=(size, size), mode="bilinear", align_corners=False)[:, 0]


def _gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Same-size Gaussian blur of (n, C, S, S) images with one sigma (pixels) for all."""
    if sigma < 0.05:
        return x
    radius = max(1, int(np.ceil(3 * sigma)))
    t = torch.arange(-radius, radius + 1, dtype=x.dtype)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    k = k / k.sum()
    c = x.shape[1]
    x = F.pad(x, (radius, radius, radius, radius), mode="reflect")
    x = F.conv2d(x, k.view(1, 1, 1, -1).expand(c, 1, 1, -1).contiguous(), groups=c)
    return F.conv2d(x, k.view(1, 1, -1, 1).expand(c, 1, -1, 1).contiguous(), groups=c)


def render_cells(factors, cell_batch, batch_effects: dict[str, np.ndarray], image_size: int = 32,
                 rng: np.random.Generator | None = None, noise_sd: float = 0.02,
                 extra_gain=None, chunk: int = 2048) -> np.ndarray:
    """Render (n, 4, S, S) float32 crops of cells with the given factors and batches.

    Nuisances (orientation, position, textures, spot positions, pixel noise) come from
    ``rng``; the technical effects of ``batch_effects`` are applied per batch.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    factors = np.asarray(factors, dtype=np.float64)
    cell_batch = np.asarray(cell_batch)
    n = len(factors)
    if len(cell_batch) != n:
        raise ValueError(f"need one batch per cell: {n} cells, {len(cell_batch)} batch labels")
    p = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in physical(factors).items()}
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    S = image_size
    ax = (torch.arange(S, dtype=torch.float32) + 0.5) / S * 2 - 1
    yy, xx = torch.meshgrid(ax, ax, indexing="ij")
    out = torch.empty(n, len(CHANNELS), S, S)
    for start in range(0, n, chunk):
        sl = slice(start, min(n, start + chunk))
        out[sl] = _render_chunk({k: v[sl] for k, v in p.items()}, xx, yy, gen)
    # technical effects, batch by batch (shared by all wells of the batch)
    gain = torch.as_tensor(batch_effects["gain"], dtype=torch.float32)
    background = torch.as_tensor(batch_effects["background"], dtype=torch.float32)
    gradient = torch.as_tensor(batch_effects["gradient"], dtype=torch.float32)
    extra = None if extra_gain is None else torch.as_tensor(np.asarray(extra_gain), dtype=torch.float32)
    for b in np.unique(cell_batch):
        idx = torch.as_tensor(np.flatnonzero(cell_batch == b))
        illum = 1.0 + gradient[b, 0] * xx + gradient[b, 1] * yy
        x = out[idx] * illum
        g = gain[b].view(1, -1, 1, 1)
        if extra is not None:
            g = g * extra[idx].view(len(idx), -1, 1, 1)
        x = _gaussian_blur(x * g, float(batch_effects["blur"][b])) + background[b].view(1, -1, 1, 1)
        out[idx] = x
    out += noise_sd * torch.randn(out.shape, generator=gen)
    return out.numpy()


def _soft(t: torch.Tensor, sharpness: float) -> torch.Tensor:
    return torch.sigmoid(sharpness * t)


def _render_chunk(p: dict[str, torch.Tensor], xx: torch.Tensor, yy: torch.Tensor,
                  gen: torch.Generator) -> torch.Tensor:
    """Clean (no technical effects) 4-channel crops of one chunk of cells."""
    m = len(p["cell_size"])
    S = xx.shape[0]
    col = lambda v: v.view(m, 1, 1)  # noqa: E731
    u01 = lambda *shape: torch.rand(*shape, generator=gen)  # noqa: E731
    theta = u01(m) * 2 * np.pi
    centre = (u01(m, 2) - 0.5) * 0.12
    dx, dy = xx - col(centre[:, 0]), yy - col(centre[:, 1])
    c, s = col(torch.cos(theta)), col(torch.sin(theta))
    u, v = dx * c + dy * s, -dx * s + dy * c  # cell frame: u along the long axis
    # cell body with a ruffled boundary
    a_c = p["cell_size"] * p["cell_elongation"].sqrt()
    b_c = p["cell_size"] / p["cell_elongation"].sqrt()
    rho_c = torch.sqrt((u / col(a_c)) ** 2 + (v / col(b_c)) ** 2 + 1e-9)
    phase = u01(m) * 2 * np.pi
    wobble = 1 + col(p["membrane_ruffling"]) * torch.sin(5 * torch.atan2(v, u) + col(phase))
    rho_c = rho_c / wobble
    cell = _soft(1 - rho_c, 14.0)
    # nucleus, offset from the cell centre
    a_n = p["nucleus_size"] * p["nucleus_elongation"].sqrt()
    b_n = p["nucleus_size"] / p["nucleus_elongation"].sqrt()
    psi = u01(m) * 2 * np.pi
    off = p["nucleus_offset"] * (p["cell_size"] - p["nucleus_size"])
    nu, nv = u - col(off * torch.cos(psi)), v - col(off * torch.sin(psi))
    rho_n = torch.sqrt((nu / col(a_n)) ** 2 + (nv / col(b_n)) ** 2 + 1e-9)
    nucleus = _soft(1 - rho_n, 12.0)
    # textures
    coarse, fine = _noise_field(m, S, 4, gen), _noise_field(m, S, max(4, S // 3), gen)
    mix = col(p["chromatin_scale"])
    chromatin = (1 - mix) * coarse + mix * fine
    cyto_tex = _noise_field(m, S, 6, gen)
    # nucleoli: up to N_NUCLEOLI dark-in-DNA, bright-in-RNA spots inside the nucleus
    r = torch.sqrt(u01(m, N_NUCLEOLI)) * 0.55
    ang = u01(m, N_NUCLEOLI) * 2 * np.pi
    pu = off[:, None] * torch.cos(psi)[:, None] + r * torch.cos(ang) * a_n[:, None]
    pv = off[:, None] * torch.sin(psi)[:, None] + r * torch.sin(ang) * b_n[:, None]
    present = (u01(m, N_NUCLEOLI) < p["nucleoli_count"][:, None] / N_NUCLEOLI).float()
    d2 = (u[:, None] - pu[..., None, None]) ** 2 + (v[:, None] - pv[..., None, None]) ** 2
    nucleoli = (present[..., None, None] * torch.exp(-d2 / (2 * 0.05 ** 2))).sum(1).clamp(max=1.0)
    # channel 0: DNA
    dna = col(p["dna_intensity"]) * nucleus * (1 + col(p["chromatin_texture"]) * chromatin).clamp(min=0)
    dna = dna * (1 - 0.7 * nucleoli * nucleus)
    # channel 1: RNA / cytoplasm, brighter near the nucleus
    cytoplasm = cell * (1 - nucleus)
    profile = (1 - col(p["perinuclear_gradient"]) * rho_c.clamp(max=1.0)).clamp(min=0)
    rna = (col(p["cytoplasm_intensity"]) * cytoplasm * profile
           * (1 + col(p["cytoplasm_texture"]) * cyto_tex).clamp(min=0)
           + col(p["nuclear_rna"]) * nucleus + col(p["nucleoli_intensity"]) * nucleoli * nucleus)
    # channel 2: membrane ring and actin fibres along the long axis
    dist = (rho_c - 1) * col(p["cell_size"])
    membrane = col(p["membrane_intensity"]) * torch.exp(-(dist / col(p["membrane_thickness"])) ** 2)
    fibres = 0.5 + 0.5 * torch.sin(2 * np.pi * col(p["fibre_spacing"]) * v + col(u01(m) * 2 * np.pi))
    actin = membrane + col(p["actin_fibres"]) * cytoplasm * fibres
    # channel 3: mitochondria / organelles, clustered around the nucleus or dispersed
    k = N_ORGANELLES
    rr = u01(m, k) ** (0.5 + 1.5 * p["organelle_clustering"][:, None])
    ang = u01(m, k) * 2 * np.pi
    ou, ov = rr * torch.cos(ang) * a_c[:, None] * 0.9, rr * torch.sin(ang) * b_c[:, None] * 0.9
    present = (u01(m, k) < p["organelle_count"][:, None] / k).float()
    size = p["organelle_size"][:, None, None, None]
    d2 = (u[:, None] - ou[..., None, None]) ** 2 + (v[:, None] - ov[..., None, None]) ** 2
    spots = (present[..., None, None] * torch.exp(-d2 / (2 * size ** 2))).sum(1).clamp(max=1.5)
    mito = col(p["organelle_intensity"]) * spots * cell + col(p["mito_diffuse"]) * cytoplasm
    return torch.stack([dna, rna, actin, mito], dim=1)


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
