"""Procedural analogues of four disentanglement datasets, with their exact factor grids.

Shapes3D, MPI3D-real-complex, Falcor3D and Isaac3D ship with no package, so chapter 05
renders look-alikes: the same factor names and numbers of values, an image that is a
deterministic function of the factors, and every factor visibly changing the image on its
own. They are *analogues*, not the datasets: absolute scores are not comparable with
published ones, but the comparison between models under one protocol is.

* ``shapes3d`` -- an object on the floor of a room corner, a camera orbiting it
  (ray-cast: floor, two walls, cube / cylinder / sphere / capsule);
* ``mpi3d`` -- an object held by a robot arm over a table, seen by one of three cameras
  (2-D signed-distance drawing, like MPI3D's real photographs of a two-joint arm);
* ``falcor3d`` -- a furnished room under a moving point light and a moving camera
  (ray-cast with a shadow);
* ``isaac3d`` -- a robot on the floor of a room holding an object, under a directional
  light (ray-cast).

Everything is vectorised numpy over a batch of images; the same factors always give the
same pixels. ``image_size`` (any size >= 8) renders directly at that resolution, by default
with 2x2 supersampling so that small images stay smooth (``supersample=1`` is 4x faster).
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import hsv_to_rgb

FACTOR_GRIDS: dict[str, dict[str, int]] = {
    "shapes3d": {"floor_hue": 10, "wall_hue": 10, "object_hue": 10, "scale": 8, "shape": 4,
                 "orientation": 15},
    "mpi3d": {"object_color": 4, "object_shape": 4, "object_size": 2, "camera_height": 3,
              "background_color": 3, "horizontal_axis": 40, "vertical_axis": 40},
    "falcor3d": {"lighting_intensity": 5, "lighting_x": 6, "lighting_y": 6, "lighting_z": 6,
                 "camera_x": 6, "camera_y": 6, "camera_z": 6},
    "isaac3d": {"object_shape": 3, "robot_x": 8, "robot_y": 5, "camera_height": 4,
                "object_scale": 4, "lighting_intensity": 4, "lighting_y_dir": 6,
                "object_color": 4, "wall_color": 4},
}
DATASETS = tuple(FACTOR_GRIDS)
DATASET_LABELS = {"shapes3d": "Shapes3D", "mpi3d": "MPI3D", "falcor3d": "Falcor3D", "isaac3d": "Isaac3D"}
SUPERSAMPLE = 2
_CHUNK = 256


# --------------------------------------------------------------------------- validation
def _check_name(name: str) -> dict[str, int]:
    if name not in FACTOR_GRIDS:
        raise ValueError(f"unknown dataset {name!r}; valid: {', '.join(DATASETS)}")
    return FACTOR_GRIDS[name]


def grid_size(name: str) -> int:
    """Number of distinct factor combinations (images) in the full grid."""
    return int(np.prod(list(_check_name(name).values()), dtype=np.int64))


def check_factors(name: str, factors) -> np.ndarray:
    """Integer factor indices of shape (N, K) inside the grid, or a ValueError saying why not."""
    grid = _check_name(name)
    f = np.asarray(factors)
    if f.ndim != 2 or f.shape[1] != len(grid):
        raise ValueError(f"{name} factors must have shape (N, {len(grid)}) "
                         f"({', '.join(grid)}), got {f.shape}")
    if not np.issubdtype(f.dtype, np.integer):
        raise ValueError(f"factors must be integer grid indices, got dtype {f.dtype}")
    sizes = np.array(list(grid.values()))
    bad = (f < 0) | (f >= sizes)
    if bad.any():
        k = int(np.argwhere(bad)[0, 1])
        raise ValueError(f"factor {list(grid)[k]!r} of {name} takes values 0..{sizes[k] - 1}, "
                         f"got {int(f[bad.any(1)][0, k])}")
    return f.astype(np.int64)


def sample_factors(name: str, n: int | None, seed: int = 0) -> np.ndarray:
    """n distinct grid points drawn uniformly (all of them, in order, when n is None)."""
    sizes = list(_check_name(name).values())
    total = grid_size(name)
    if n is None:
        flat = np.arange(total)
    else:
        if n < 1 or n > total:
            raise ValueError(f"n must lie in 1..{total} (the size of the {name} grid), got {n}")
        flat = np.random.default_rng(seed).choice(total, size=n, replace=False)
    return np.stack(np.unravel_index(flat, sizes), axis=1).astype(np.int64)


def _values(factors: np.ndarray, k: int, lo: float, hi: float, n: int) -> np.ndarray:
    """Map grid index k of each row to a value on linspace(lo, hi, n), shaped (B,1,1)."""
    return np.linspace(lo, hi, n)[factors[:, k]][:, None, None]


# --------------------------------------------------------------------------- ray casting
# Vectors are component-first: ray origins (3,B,1,1), directions and normals (3,B,H,W),
# float32, so every operation is a flat elementwise numpy call (no reductions over a short
# last axis, which numpy does slowly).
_F = np.float32


def _vec(a) -> np.ndarray:
    """A constant (3,) -> (3,1,1,1); per-image (B,3) -> (3,B,1,1)."""
    a = np.asarray(a, dtype=_F)
    return a.reshape(3, 1, 1, 1) if a.ndim == 1 else np.ascontiguousarray(a.T)[:, :, None, None]


def _img(a) -> np.ndarray:
    """A scalar stays; per-image (B,) -> (B,1,1)."""
    a = np.asarray(a, dtype=_F)
    return a[:, None, None] if a.ndim == 1 else a


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _camera_rays(eye: np.ndarray, target: np.ndarray, res: int, fov_deg: float):
    """Ray origins (3,B,1,1) and unit directions (3,B,res,res) of a pinhole camera."""
    fwd = target - eye
    fwd /= np.linalg.norm(fwd, axis=1, keepdims=True)
    right = np.cross(fwd, np.array([0.0, 1.0, 0.0]))
    right /= np.linalg.norm(right, axis=1, keepdims=True)
    up = np.cross(right, fwd)
    s = np.tan(np.deg2rad(fov_deg) / 2)
    c = ((np.arange(res) + 0.5) / res * 2 - 1).astype(_F)
    u = c[None, None, :] * s
    v = -c[None, :, None] * s
    F, R, U = _vec(fwd), _vec(right), _vec(up)
    d = F + u * R + v * U
    d /= np.sqrt(_dot(d, d))
    return _vec(eye), d.astype(_F)


class _Hits:
    """A z-buffer: nearest distance, normal and albedo per ray, updated object by object."""

    def __init__(self, shape):
        self.t = np.full(shape, np.inf, dtype=_F)
        self.n = np.zeros((3,) + shape, dtype=_F)
        self.rgb = np.zeros((3,) + shape, dtype=_F)
        self.emit = np.zeros(shape, dtype=bool)

    def add(self, t, normal, rgb, emit: bool = False):
        normal, rgb = (np.asarray(a, dtype=_F) for a in (normal, rgb))
        normal, rgb = (a.reshape(3, 1, 1, 1) if a.ndim == 1 else a for a in (normal, rgb))
        closer = t < self.t
        np.copyto(self.t, t, where=closer)
        np.copyto(self.n, normal, where=closer)
        np.copyto(self.rgb, rgb, where=closer)
        np.copyto(self.emit, emit, where=closer)


def _valid(t, ok):
    return np.where(ok & (t > 1e-4), t, _F(np.inf)).astype(_F)


def _plane(o, d, axis: int, offset: float, facing: float):
    """Plane x_axis = offset; returns t (inf where missed) and its normal."""
    da = d[axis]
    safe = np.where(np.abs(da) < 1e-9, _F(1e-9), da)
    t = (offset - o[axis]) / safe
    n = np.zeros(3, dtype=_F)
    n[axis] = facing
    return _valid(t, np.abs(da) >= 1e-9), n.reshape(3, 1, 1, 1)


def _sphere(o, d, center, radius):
    c = _vec(center)
    r = _img(radius)
    oc = o - c
    b = _dot(oc, d)
    disc = b * b - (_dot(oc, oc) - r * r)
    hit = disc > 0
    t = _valid(-b - np.sqrt(np.where(hit, disc, 0)), hit)
    tt = np.where(np.isfinite(t), t, 0)
    n = (o + tt * d - c) / r
    return t, n


def _box(o, d, lo, hi):
    """Axis-aligned box by the slab method."""
    lo, hi = _vec(lo), _vec(hi)
    inv = 1.0 / np.where(np.abs(d) < 1e-9, _F(1e-9), d)
    t1, t2 = (lo - o) * inv, (hi - o) * inv
    tn, tf = np.minimum(t1, t2), np.maximum(t1, t2)
    tmin = np.maximum(np.maximum(tn[0], tn[1]), tn[2])
    tmax = np.minimum(np.minimum(tf[0], tf[1]), tf[2])
    t = _valid(tmin, tmax >= tmin)
    n = np.stack([np.where(tmin == tn[k], -np.sign(d[k]), 0) for k in range(3)]).astype(_F)
    return t, n


def _ycylinder(o, d, center_xz, radius, y0, y1):
    """Upright cylinder (side + top cap) with per-image centre (B,2), radius, and y-range."""
    cxz = np.asarray(center_xz, dtype=_F)
    cx, cz = _img(cxz[:, 0]), _img(cxz[:, 1])
    r, y0, y1 = _img(radius), _img(y0), _img(y1)
    ox, oz = o[0] - cx, o[2] - cz
    dx, dz = d[0], d[2]
    a = np.maximum(dx * dx + dz * dz, _F(1e-12))
    b = ox * dx + oz * dz
    disc = b * b - a * (ox * ox + oz * oz - r * r)
    ok = disc > 0
    ts = (-b - np.sqrt(np.where(ok, disc, 0))) / a
    y = o[1] + ts * d[1]
    ts = _valid(ts, ok & (y >= y0) & (y <= y1))
    dy = np.where(np.abs(d[1]) < 1e-9, _F(1e-9), d[1])
    tc = (y1 - o[1]) / dy
    px, pz = ox + tc * dx, oz + tc * dz
    tc = _valid(tc, px * px + pz * pz <= r * r)
    cap = tc < ts
    t = np.minimum(tc, ts)
    tt = np.where(np.isfinite(ts), ts, 0)
    zero = np.zeros_like(t)
    n = np.stack([np.where(cap, 0, (ox + tt * dx) / r), np.where(cap, 1, zero),
                  np.where(cap, 0, (oz + tt * dz) / r)]).astype(_F)
    return t, n


def _shade(h: _Hits, o, d, light_dir=None, light_pos=None, intensity=1.0, ambient=0.3,
           shadow=None, sky=(0.0, 0.0, 0.0)) -> np.ndarray:
    """Lambertian shading under a directional or point light; emissive hits pass unlit.
    Returns images (B, H, W, 3) float in [0, 1]-ish."""
    hit = np.isfinite(h.t)
    p = o + np.where(hit, h.t, 0) * d
    if light_pos is not None:
        to_l = _vec(light_pos) - p
        dist2 = _dot(to_l, to_l)
        ldir = to_l / np.sqrt(dist2)
        falloff = 4.0 / (1.0 + dist2)
    else:
        ldir = _vec(light_dir)
        falloff = 1.0
    lam = np.clip(_dot(h.n, ldir), 0.0, None) * falloff
    if shadow is not None:
        lam = lam * (1.0 - 0.8 * shadow(p + 1e-3 * h.n, ldir))
    light = ambient + _img(intensity) * lam
    rgb = np.where(h.emit, h.rgb, h.rgb * light)
    rgb = np.where(hit, rgb, np.asarray(sky, dtype=_F).reshape(3, 1, 1, 1))
    return np.moveaxis(rgb, 0, -1)


def _hue(h, s=0.8, v=0.9) -> np.ndarray:
    h = np.asarray(h, dtype=np.float64)
    return hsv_to_rgb(np.stack([h, np.full_like(h, s), np.full_like(h, v)], -1))


# --------------------------------------------------------------------------- renderers
def _render_shapes3d(f: np.ndarray, res: int) -> np.ndarray:
    B = len(f)
    hues = np.arange(10) / 10
    floor_c, wall_c, obj_c = _hue(hues[f[:, 0]], 0.75, 0.85), _hue(hues[f[:, 1]], 0.6, 0.9), _hue(hues[f[:, 2]], 0.9, 0.95)
    scale = np.linspace(0.75, 1.25, 8)[f[:, 3]]
    shape = f[:, 4]
    # Shapes3D's orientation is +-30 degrees; we orbit +-50 so that 15 steps stay visible
    theta = np.deg2rad(np.linspace(-50, 50, 15)[f[:, 5]]) + np.pi / 4
    eye = np.stack([2.8 * np.sin(theta), np.full(B, 1.5), 2.8 * np.cos(theta)], 1)
    o, d = _camera_rays(eye, np.tile([0.0, 0.5, 0.0], (B, 1)), res, 50.0)
    h = _Hits(d.shape[1:])
    h.add(*_plane(o, d, 1, 0.0, 1.0), _vec(floor_c))
    h.add(*_plane(o, d, 0, -1.6, 1.0), _vec(wall_c * 0.8))
    h.add(*_plane(o, d, 2, -1.6, 1.0), _vec(wall_c))
    r = 0.5 * scale
    col = _vec(obj_c)
    for k in range(4):
        m = shape == k
        if not m.any():
            continue
        rk = np.where(m, r, 1e-6)  # other images: a vanishing object
        if k == 0:
            t, n = _box(o, d, np.stack([-rk, np.zeros(B), -rk], 1), np.stack([rk, 2 * rk, rk], 1))
        elif k == 1:
            t, n = _ycylinder(o, d, np.zeros((B, 2)), rk, 0.0, 2 * rk)
        elif k == 2:
            t, n = _sphere(o, d, np.stack([np.zeros(B), rk, np.zeros(B)], 1), rk)
        else:  # capsule: a cylinder topped by a hemisphere
            t, n = _ycylinder(o, d, np.zeros((B, 2)), 0.8 * rk, 0.0, 1.6 * rk)
            t2, n2 = _sphere(o, d, np.stack([np.zeros(B), 1.6 * rk, np.zeros(B)], 1), 0.8 * rk)
            use = t2 < t
            t, n = np.where(use, t2, t), np.where(use, n2, n)
        t = np.where(m[:, None, None], t, np.inf)
        h.add(t, n, col)
    return _shade(h, o, d, light_dir=np.array([0.45, 0.8, 0.4]) / np.linalg.norm([0.45, 0.8, 0.4]),
                  intensity=0.75, ambient=0.35)


_MPI_OBJ = np.array([[0.95, 0.85, 0.1], [0.1, 0.75, 0.2], [0.5, 0.5, 0.1], [0.85, 0.1, 0.1]])
_MPI_BG = np.array([[0.45, 0.3, 0.6], [0.25, 0.6, 0.5], [0.95, 0.6, 0.5]])


def _sd_segment(x, y, ax, ay, bx, by):
    px, py, vx, vy = x - ax, y - ay, bx - ax, by - ay
    t = np.clip((px * vx + py * vy) / np.maximum(vx * vx + vy * vy, 1e-12), 0, 1)
    return np.hypot(px - t * vx, py - t * vy)


def _sd_box(x, y, hx, hy):
    qx, qy = np.abs(x) - hx, np.abs(y) - hy
    return np.hypot(np.maximum(qx, 0), np.maximum(qy, 0)) + np.minimum(np.maximum(qx, qy), 0)


def _render_mpi3d(f: np.ndarray, res: int) -> np.ndarray:
    c = (np.arange(res) + 0.5) / res * 2 - 1
    x, y = c[None, None, :], -c[None, :, None]
    px = 2.0 / res
    cam = f[:, 3][:, None, None]
    squash = np.array([0.8, 1.0, 1.2])[cam]
    shift = np.array([0.25, 0.0, -0.25])[cam]
    ys = (y - shift) / squash  # scene coordinates seen by this camera
    bg = _MPI_BG[f[:, 4]][:, None, None, :]
    img = bg * (0.85 + 0.15 * (ys[..., None] + 1) / 2).clip(0, 1.2)
    table_top = -0.55 - 0.15 * (cam - 1)
    table = np.clip(0.5 - (ys - table_top) / px, 0, 1)[..., None]
    img = img * (1 - table) + np.array([0.35, 0.35, 0.38]) * table
    alpha = _values(f, 5, -0.9, 0.9, 40)  # horizontal axis: swing
    beta = _values(f, 6, 0.15, 0.85, 40)  # vertical axis: reach down
    bx, by = 0.0, 1.05
    length = 0.35 + 0.9 * beta
    tx, ty = bx + length * np.sin(alpha * 0.9), by - length * np.cos(alpha * 0.9)
    arm = np.clip(0.5 - (_sd_segment(x, ys, bx, by, tx, ty) - 0.06) / px, 0, 1)[..., None]
    img = img * (1 - arm) + np.array([0.75, 0.75, 0.78]) * arm
    size = np.array([0.13, 0.21])[f[:, 2]][:, None, None]
    ox, oy = (x - tx) / size, (ys - (ty - 1.0 * size)) / size
    shp = f[:, 1][:, None, None]
    sd_mug = np.minimum(_sd_box(ox, oy, 0.7, 0.9),
                        np.abs(np.hypot(ox - 0.8, oy) - 0.45) - 0.12)
    sd_ball = np.hypot(ox, oy) - 1.0
    ang = np.arctan2(oy + 1.2, ox)
    sd_banana = np.where(np.abs(ang - np.pi / 2) < 0.9, np.abs(np.hypot(ox, oy + 1.2) - 1.6) - 0.3, 9.0)
    sd_cup = _sd_box(ox, oy, 0.45 + 0.45 * (oy + 1) / 2, 1.0) + 0.0
    sd = np.choose(shp, [sd_mug, sd_ball, sd_banana, sd_cup])
    obj = np.clip(0.5 - sd * size / px, 0, 1)[..., None]
    shade = (0.75 + 0.25 * np.clip(-ox * 0.5 + oy * 0.5, -1, 1))[..., None]
    colour = _MPI_OBJ[f[:, 0]][:, None, None, :] * shade
    return img * (1 - obj) + colour * obj


def _render_falcor3d(f: np.ndarray, res: int) -> np.ndarray:
    B = len(f)
    inten = np.linspace(0.4, 1.3, 5)[f[:, 0]]
    light = np.stack([np.linspace(-1.6, 1.6, 6)[f[:, 1]], np.linspace(0.5, 2.3, 6)[f[:, 2]],
                      np.linspace(0.2, 2.6, 6)[f[:, 3]]], 1)
    eye = np.stack([np.linspace(-0.9, 0.9, 6)[f[:, 4]], np.linspace(0.7, 1.9, 6)[f[:, 5]],
                    np.linspace(3.4, 5.4, 6)[f[:, 6]]], 1)
    o, d = _camera_rays(eye, np.tile([0.0, 0.6, 0.0], (B, 1)), res, 55.0)
    h = _Hits(d.shape[1:])
    t, n = _plane(o, d, 1, 0.0, 1.0)
    p = o + np.where(np.isfinite(t), t, 0) * d
    checker = (np.floor(p[0] * 2) + np.floor(p[2] * 2)) % 2
    h.add(t, n, np.array([0.8, 0.75, 0.65], dtype=_F).reshape(3, 1, 1, 1) * (0.8 + 0.2 * checker))
    h.add(*_plane(o, d, 2, -1.0, 1.0), np.array([0.85, 0.82, 0.78]))
    h.add(*_plane(o, d, 0, -2.5, 1.0), np.array([0.6, 0.7, 0.8]))
    h.add(*_plane(o, d, 0, 2.5, -1.0), np.array([0.8, 0.7, 0.6]))
    ball_c, ball_r = np.array([-0.6, 0.45, 0.6]), 0.45
    h.add(*_sphere(o, d, ball_c, ball_r), np.array([0.85, 0.2, 0.2]))
    sofa_lo, sofa_hi = np.array([0.3, 0.0, -0.9]), np.array([1.5, 0.7, 0.1])
    h.add(*_box(o, d, sofa_lo, sofa_hi), np.array([0.2, 0.35, 0.8]))
    h.add(*_sphere(o, d, light, np.full(B, 0.07)), np.array([1.0, 1.0, 0.85]), emit=True)

    def shadow(p, ldir):
        ts, _ = _sphere(p, ldir, ball_c, ball_r)
        tb, _ = _box(p, ldir, sofa_lo, sofa_hi)
        to_l = _vec(light) - p
        dist = np.sqrt(_dot(to_l, to_l))
        return ((ts < dist) | (tb < dist)).astype(_F)

    return _shade(h, o, d, light_pos=light, intensity=inten, ambient=0.12, shadow=shadow)


_ISAAC_OBJ = np.array([[0.9, 0.15, 0.15], [0.15, 0.75, 0.2], [0.15, 0.3, 0.9], [0.95, 0.8, 0.1]])
_ISAAC_WALL = np.array([[0.85, 0.85, 0.85], [0.55, 0.75, 0.9], [0.9, 0.75, 0.55], [0.7, 0.9, 0.6]])


def _render_isaac3d(f: np.ndarray, res: int) -> np.ndarray:
    B = len(f)
    rx = np.linspace(-1.1, 1.1, 8)[f[:, 1]]
    rz = np.linspace(-0.8, 1.0, 5)[f[:, 2]]
    cam_h = np.linspace(0.3, 2.7, 4)[f[:, 3]]
    scale = np.linspace(0.18, 0.38, 4)[f[:, 4]]
    inten = np.linspace(0.45, 1.05, 4)[f[:, 5]]
    phi = np.deg2rad(np.linspace(-70, 70, 6)[f[:, 6]])
    ldir = np.stack([np.sin(phi), np.full(B, 0.9), np.cos(phi)], 1)
    ldir /= np.linalg.norm(ldir, axis=1, keepdims=True)
    eye = np.stack([np.zeros(B), cam_h, np.full(B, 3.4)], 1)
    o, d = _camera_rays(eye, np.tile([0.0, 0.7, 0.0], (B, 1)), res, 55.0)
    h = _Hits(d.shape[1:])
    h.add(*_plane(o, d, 1, 0.0, 1.0), np.array([0.55, 0.5, 0.45]))
    h.add(*_plane(o, d, 2, -1.5, 1.0), _vec(_ISAAC_WALL[f[:, 8]]))
    grey = np.array([0.6, 0.6, 0.65])
    zero = np.zeros(B)
    h.add(*_box(o, d, np.stack([rx - 0.25, zero, rz - 0.25], 1),
                np.stack([rx + 0.25, zero + 0.2, rz + 0.25], 1)), grey * 0.8)
    h.add(*_ycylinder(o, d, np.stack([rx, rz], 1), np.full(B, 0.09), 0.2, 0.95), grey)
    h.add(*_box(o, d, np.stack([rx - 0.12, zero + 0.95, rz - 0.12], 1),
                np.stack([rx + 0.12, zero + 1.0, rz + 0.12], 1)), grey * 0.7)
    cy = 1.0 + scale
    col = _vec(_ISAAC_OBJ[f[:, 7]])
    shape = f[:, 0]
    for k in range(3):
        m = shape == k
        if not m.any():
            continue
        s = np.where(m, scale, 1e-6)
        if k == 0:
            t, n = _box(o, d, np.stack([rx - s, cy - s, rz - s], 1), np.stack([rx + s, cy + s, rz + s], 1))
        elif k == 1:
            t, n = _sphere(o, d, np.stack([rx, cy, rz], 1), s)
        else:
            t, n = _ycylinder(o, d, np.stack([rx, rz], 1), s, cy - s, cy + s)
        h.add(np.where(m[:, None, None], t, np.inf), n, col)
    return _shade(h, o, d, light_dir=ldir, intensity=inten, ambient=0.25)


_RENDERERS = {"shapes3d": _render_shapes3d, "mpi3d": _render_mpi3d,
              "falcor3d": _render_falcor3d, "isaac3d": _render_isaac3d}


# --------------------------------------------------------------------------- public API
def render(name: str, factors, image_size: int = 64, supersample: int = SUPERSAMPLE) -> np.ndarray:
    """Images (N, H, W, 3) uint8 for integer factor indices (N, K) of dataset ``name``.

    ``supersample`` renders s x s rays per pixel and averages them (anti-aliasing; the
    cost grows as s^2)."""
    f = check_factors(name, factors)
    if int(image_size) < 8:
        raise ValueError(f"image_size must be at least 8, got {image_size}")
    if int(supersample) < 1:
        raise ValueError(f"supersample must be a positive integer, got {supersample}")
    SS = int(supersample)
    res = int(image_size) * SS
    out = np.empty((len(f), image_size, image_size, 3), dtype=np.uint8)
    for i in range(0, len(f), _CHUNK):
        img = _RENDERERS[name](f[i:i + _CHUNK], res)
        img = img.reshape(-1, image_size, SS, image_size, SS, 3).mean((2, 4))
        out[i:i + _CHUNK] = np.clip(np.rint(img * 255), 0, 255).astype(np.uint8)
    return out


def make_dataset(name: str, n: int | None = 10_000, image_size: int = 64, seed: int = 0,
                 supersample: int = SUPERSAMPLE) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """n distinct grid points of ``name`` rendered: (images uint8 (N,H,W,3), factors (N,K), names)."""
    factors = sample_factors(name, n, seed)
    return render(name, factors, image_size, supersample), factors, list(FACTOR_GRIDS[name])


def traversal(name: str, factor: str | int, base=None, image_size: int = 64,
              steps: int | None = None) -> np.ndarray:
    """Images along one factor with the others held at ``base`` (default: the grid's middle)."""
    grid = _check_name(name)
    names = list(grid)
    k = names.index(factor) if isinstance(factor, str) and factor in names else factor
    if not isinstance(k, (int, np.integer)) or not 0 <= k < len(names):
        raise ValueError(f"unknown factor {factor!r} for {name}; valid: {', '.join(names)}")
    sizes = np.array(list(grid.values()))
    base = sizes // 2 if base is None else check_factors(name, np.asarray(base)[None])[0]
    m = sizes[k]
    idx = np.arange(m) if steps is None or steps >= m else np.rint(np.linspace(0, m - 1, steps)).astype(int)
    f = np.tile(base, (len(idx), 1))
    f[:, k] = idx
    return render(name, f, image_size)
