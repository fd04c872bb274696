"""Synthetic data-generating processes with known factors (chapters 01 and 02).

* :func:`sample_sources` -- independent unit-variance sources of a chosen non-Gaussianity.
* :class:`IsometricDGP` -- u -> x = g(u) in R^D with a bi-Lipschitz constant set by ``delta``:
  ``delta = 0`` is an exact isometric embedding, larger ``delta`` bends and warps it.
* :func:`blob_images` -- a Gaussian blob translated on a canvas: an image DGP that is
  locally isometric in the blob's position.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from nearid.constraints import POSITIVE_INT, Interval, Text, validate_params

SOURCE_KINDS = ("laplace", "uniform", "gaussian", "gennorm_<beta>")


def _gennorm_shape(kind: str) -> float | None:
    """The generalised-normal shape beta of a source kind (None for "uniform"); ValueError
    for a kind :func:`sample_sources` cannot sample."""
    if kind == "uniform":
        return None
    if kind in ("laplace", "gaussian"):
        return 1.0 if kind == "laplace" else 2.0
    beta = float(kind.split("_", 1)[1]) if kind.startswith("gennorm_") else float("nan")
    if not beta > 0:
        raise ValueError(f"unknown source kind {kind!r}")
    return beta


# What a source kind (sample_sources, IsometricDGP and chapter 02's `sources`) may be.
SOURCE_KIND = Text(_gennorm_shape, what="a source kind: 'uniform', 'laplace', 'gaussian' or 'gennorm_<beta>' "
                                        "with beta > 0")
DELTA = Interval(float, 0, 1, closed="left")  # IsometricDGP's distance from an isometry: g stays invertible


@validate_params(kind=SOURCE_KIND, n=POSITIVE_INT, d=POSITIVE_INT)
def sample_sources(kind: str, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """(n, d) i.i.d. sources with zero mean and unit variance.

    ``gennorm_<beta>`` is the generalised normal with shape beta: beta=2 is Gaussian (ICA
    cannot separate it), beta<2 heavier tails, beta>2 lighter tails.
    """
    beta = _gennorm_shape(kind)
    if beta is None:
        return rng.uniform(-np.sqrt(3), np.sqrt(3), size=(n, d))
    dist = stats.gennorm(beta)
    return dist.rvs(size=(n, d), random_state=rng) / dist.std()


def random_orthogonal(d: int, rng: np.random.Generator, rows: int | None = None) -> np.ndarray:
    """A Haar-random (rows x d) matrix with orthonormal columns (square when rows is None)."""
    rows = rows or d
    if rows < d:
        raise ValueError(f"need rows >= d for orthonormal columns, got {rows} < {d}")
    q, r = np.linalg.qr(rng.standard_normal((rows, d)))
    return q * np.sign(np.diag(r))


class IsometricDGP:
    """x = g(u) = Q [u + delta * tanh(W u + b),  delta * tanh(V u + c)],  u ~ independent.

    Q (D x 2d) has orthonormal columns and W, V are rotations, so the Jacobian's singular
    values lie in [1 - delta, sqrt((1 + delta)^2 + delta^2)]: ``delta = 0`` is an exact
    isometric embedding of u into R^D, and ``delta`` is the knob on how far g is from one.
    The first block warps u within its own subspace; the second bends the manifold out of it.
    """

    @validate_params(delta=DELTA, sources=SOURCE_KIND)  # an unknown kind fails here, not at the first sample
    def __init__(self, latent_dim: int = 3, observed_dim: int = 20, delta: float = 0.0,
                 sources: str = "uniform", random_state: int = 0):
        if observed_dim < 2 * latent_dim:
            raise ValueError(f"observed_dim must be >= 2 * latent_dim, got {observed_dim} < {2 * latent_dim}")
        self.latent_dim, self.observed_dim, self.delta = latent_dim, observed_dim, delta
        self.sources, self.random_state = sources, random_state
        rng = np.random.default_rng(random_state)
        d = latent_dim
        self.Q_ = random_orthogonal(2 * d, rng, rows=observed_dim)
        self.W_ = random_orthogonal(d, rng)
        self.V_ = random_orthogonal(d, rng)
        self.b_ = rng.uniform(-1, 1, d)
        self.c_ = rng.uniform(-1, 1, d)

    def sample_latents(self, n: int, seed: int) -> np.ndarray:
        return sample_sources(self.sources, n, self.latent_dim, np.random.default_rng(seed))

    def __call__(self, U: np.ndarray) -> np.ndarray:
        U = np.asarray(U, dtype=np.float64)
        inner = U + self.delta * np.tanh(U @ self.W_.T + self.b_)
        outer = self.delta * np.tanh(U @ self.V_.T + self.c_)
        return np.concatenate([inner, outer], axis=1) @ self.Q_.T

    def sample(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """(X, U): n observations and their true factors."""
        U = self.sample_latents(n, seed)
        return self(U), U

    def jacobian_singular_values(self, U: np.ndarray) -> np.ndarray:
        """Singular values of dg/du at each row of U, shape (n, latent_dim)."""
        U = np.asarray(U, dtype=np.float64)
        d = self.latent_dim
        s1 = 1 - np.tanh(U @ self.W_.T + self.b_) ** 2  # (n, d)
        s2 = 1 - np.tanh(U @ self.V_.T + self.c_) ** 2
        J_in = np.eye(d)[None] + self.delta * s1[:, :, None] * self.W_[None]
        J_out = self.delta * s2[:, :, None] * self.V_[None]
        J = np.concatenate([J_in, J_out], axis=1)  # Q has orthonormal columns: drop it
        return np.linalg.svd(J, compute_uv=False)

    def bilipschitz_constant(self, U: np.ndarray) -> float:
        """max over samples of max(s_max, 1 / s_min): the measured local bi-Lipschitz constant."""
        s = self.jacobian_singular_values(U)
        return float(np.maximum(s[:, 0], 1.0 / s[:, -1]).max())


@validate_params(size=Interval(int, 8))
def blob_images(n: int, size: int = 24, width: float | None = None, seed: int = 0,
                margin: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """(images (n, size, size) float32 in [0, 1], positions u (n, 2) in pixels).

    A Gaussian blob whose centre is uniform on the canvas's inner square: its two
    coordinates are independent, non-Gaussian factors, and the map from position to image is
    locally isometric (up to one global scale) because every translation moves the same
    amount of ink.
    """
    width = width or size / 8
    rng = np.random.default_rng(seed)
    lo, hi = margin * (size - 1), (1 - margin) * (size - 1)
    U = rng.uniform(lo, hi, size=(n, 2))
    grid = np.arange(size, dtype=np.float64)
    gx = np.exp(-((grid[None, :] - U[:, :1]) ** 2) / (2 * width ** 2))  # (n, size) over columns
    gy = np.exp(-((grid[None, :] - U[:, 1:]) ** 2) / (2 * width ** 2))  # rows
    # the outer product in float32: a full-profile canvas set (50k x 32 x 32) stays at 200 MB
    images = gy.astype(np.float32)[:, :, None] * gx.astype(np.float32)[:, None, :]
    return images, U
