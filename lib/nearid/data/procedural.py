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

Images are rendered in the order that groups those sharing a geometry (camera, object and
its pose), which is ray-cast (or drawn) once per group; lighting and colour follow image
by image, in the same float operations as ever, so the pixels never depend on the order or
the grouping. The full profile's data sets (110,000 images of 64 px, 1.35 GB each) go
straight into a file, generated once by two processes and memory-mapped by every later
run, task and worker (:func:`make_dataset` with ``cache``; :mod:`nearid.data.cache`).
"""

from __future__ import annotations

import sys

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
    """A z-buffer: nearest distance, normal, surface number and (optionally) albedo per ray,
    updated object by object. ``sid`` numbers the surface hit (0: none), so that albedo
    that varies only from image to image can be looked up after the geometry is cast once."""

    def __init__(self, shape, colour: bool = True):
        self.t = np.full(shape, np.inf, dtype=_F)
        self.n = np.zeros((3,) + shape, dtype=_F)
        self.rgb = np.zeros((3,) + shape, dtype=_F) if colour else None
        self.emit = np.zeros(shape, dtype=bool)
        self.sid = np.zeros(shape, dtype=np.uint8)

    def add(self, t, normal, rgb=None, emit: bool = False, sid: int = 0):
        normal = np.asarray(normal, dtype=_F)
        normal = normal.reshape(3, 1, 1, 1) if normal.ndim == 1 else normal
        closer = t < self.t
        np.copyto(self.t, t, where=closer)
        np.copyto(self.n, normal, where=closer)
        if self.rgb is not None:
            rgb = np.asarray(rgb, dtype=_F)
            np.copyto(self.rgb, rgb.reshape(3, 1, 1, 1) if rgb.ndim == 1 else rgb, where=closer)
        np.copyto(self.emit, emit, where=closer)
        np.copyto(self.sid, sid, where=closer)

    def take(self, idx) -> _Hits:
        """The buffers of images ``idx`` (a copy)."""
        h = _Hits.__new__(_Hits)
        h.t, h.n, h.emit, h.sid = self.t[idx], self.n[:, idx], self.emit[idx], self.sid[idx]
        h.rgb = None if self.rgb is None else self.rgb[:, idx]
        return h


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


def _sphere(o, d, center, radius, normals: bool = True):
    c = _vec(center)
    r = _img(radius)
    oc = o - c
    b = _dot(oc, d)
    disc = b * b - (_dot(oc, oc) - r * r)
    hit = disc > 0
    t = _valid(-b - np.sqrt(np.where(hit, disc, 0)), hit)
    if not normals:
        return t, None
    tt = np.where(np.isfinite(t), t, 0)
    n = (o + tt * d - c) / r
    return t, n


def _box(o, d, lo, hi, normals: bool = True):
    """Axis-aligned box by the slab method."""
    lo, hi = _vec(lo), _vec(hi)
    inv = 1.0 / np.where(np.abs(d) < 1e-9, _F(1e-9), d)
    t1, t2 = (lo - o) * inv, (hi - o) * inv
    tn, tf = np.minimum(t1, t2), np.maximum(t1, t2)
    tmin = np.maximum(np.maximum(tn[0], tn[1]), tn[2])
    tmax = np.minimum(np.minimum(tf[0], tf[1]), tf[2])
    t = _valid(tmin, tmax >= tmin)
    if not normals:
        return t, None
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


def _lambert(n, t=None, o=None, d=None, light_dir=None, light_pos=None, shadow=None) -> np.ndarray:
    """Lambertian factor (B, H, W) at hits (normals n, distances t along rays o + t d) under a
    directional or point light (with its falloff and an optional shadow test); the light on
    a hit is ``ambient + intensity * lambert``."""
    if light_pos is not None or shadow is not None:
        p = o + np.where(np.isfinite(t), t, 0) * d
    if light_pos is not None:
        to_l = _vec(light_pos) - p
        dist2 = _dot(to_l, to_l)
        ldir = to_l / np.sqrt(dist2)
        falloff = 4.0 / (1.0 + dist2)
    else:
        ldir = _vec(light_dir)
        falloff = 1.0
    lam = np.clip(_dot(n, ldir), 0.0, None) * falloff
    if shadow is not None:
        lam = lam * (1.0 - 0.8 * shadow(p + 1e-3 * n, ldir))
    return lam


def _lit(albedo, light, hit, emit=None, sky=(0.0, 0.0, 0.0)) -> np.ndarray:
    """Images (3, B, H, W) float: albedo (3, B, H, W) times the light (B, H, W) on each hit,
    emissive hits unlit, the sky where nothing is hit."""
    rgb = albedo * light
    if emit is not None:
        rgb = np.where(emit, albedo, rgb)
    return np.where(hit, rgb, np.asarray(sky, dtype=_F).reshape(3, 1, 1, 1))


def _surface_albedo(table: np.ndarray, sid: np.ndarray) -> np.ndarray:
    """Per-pixel albedo (3, B, H, W) from per-image tables (B, n_surfaces, 3) and surface
    numbers (B, H, W)."""
    B, k = table.shape[:2]
    idx = (np.arange(B) * k)[:, None, None] + sid
    return np.stack([np.take(table[:, :, c].ravel(), idx) for c in range(3)])


def _hue(h, s=0.8, v=0.9) -> np.ndarray:
    h = np.asarray(h, dtype=np.float64)
    return hsv_to_rgb(np.stack([h, np.full_like(h, s), np.full_like(h, v)], -1))


# --------------------------------------------------------------------------- renderers
# Each renderer takes factors f (B, K), sorted by ``_ORDER`` so that images sharing a
# geometry come together, casts every distinct geometry once, then lights and colours the
# images ``_batch(res)`` at a time, handing each batch (indices into f, float images
# (b, res, res, 3)) to ``emit``. Every number an image gets is computed by the same
# elementwise operations, in the same order and precision, as when each image was drawn on
# its own: which images share a batch never changes a pixel.
_RAYS = 1 << 16  # float32 rays per array in one numpy call: small enough to stay in the CPU caches


def _batch(res: int, itemsize: int = 4) -> int:
    """Images per numpy call for arrays of ``itemsize`` bytes a ray."""
    return max(1, _RAYS * 4 // (res * res * itemsize))


def _pieces(n: int, size: int):
    for i in range(0, n, size):
        yield np.arange(i, min(n, i + size))


def _unique(keys: np.ndarray):
    """Distinct rows of ``keys``, the index of each row's distinct row, and a row of each."""
    u, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return u, inv.reshape(-1), first


def _shapes3d_geometry(g: np.ndarray, res: int):
    """Surface numbers and light (G, res, res) of distinct (scale, shape, orientation) rows."""
    G = len(g)
    scale = np.linspace(0.75, 1.25, 8)[g[:, 0]]
    shape = g[:, 1]
    # Shapes3D's orientation is +-30 degrees; we orbit +-50 so that 15 steps stay visible
    theta = np.deg2rad(np.linspace(-50, 50, 15)[g[:, 2]]) + np.pi / 4
    eye = np.stack([2.8 * np.sin(theta), np.full(G, 1.5), 2.8 * np.cos(theta)], 1)
    o, d = _camera_rays(eye, np.tile([0.0, 0.5, 0.0], (G, 1)), res, 50.0)
    h = _Hits(d.shape[1:], colour=False)
    h.add(*_plane(o, d, 1, 0.0, 1.0), sid=1)  # floor
    h.add(*_plane(o, d, 0, -1.6, 1.0), sid=2)  # wall (shaded 0.8)
    h.add(*_plane(o, d, 2, -1.6, 1.0), sid=3)  # wall
    r = 0.5 * scale
    t_obj, n_obj = np.full(d.shape[1:], np.inf, dtype=_F), np.zeros(d.shape, dtype=_F)
    for k in range(4):
        idx = np.flatnonzero(shape == k)
        if not idx.size:
            continue
        ok, dk, rk, zk = o[:, idx], d[:, idx], r[idx], np.zeros(len(idx))
        if k == 0:
            t, n = _box(ok, dk, np.stack([-rk, zk, -rk], 1), np.stack([rk, 2 * rk, rk], 1))
        elif k == 1:
            t, n = _ycylinder(ok, dk, np.zeros((len(idx), 2)), rk, 0.0, 2 * rk)
        elif k == 2:
            t, n = _sphere(ok, dk, np.stack([zk, rk, zk], 1), rk)
        else:  # capsule: a cylinder topped by a hemisphere
            t, n = _ycylinder(ok, dk, np.zeros((len(idx), 2)), 0.8 * rk, 0.0, 1.6 * rk)
            t2, n2 = _sphere(ok, dk, np.stack([zk, 1.6 * rk, zk], 1), 0.8 * rk)
            use = t2 < t
            t, n = np.where(use, t2, t), np.where(use, n2, n)
        t_obj[idx], n_obj[:, idx] = t, n
    h.add(t_obj, n_obj, sid=4)
    lam = _lambert(h.n, light_dir=np.array([0.45, 0.8, 0.4]) / np.linalg.norm([0.45, 0.8, 0.4]))
    return h.sid, 0.35 + _img(0.75) * lam


def _render_shapes3d(f: np.ndarray, res: int, emit) -> None:
    B = len(f)
    hues = np.arange(10) / 10
    floor_c, wall_c, obj_c = _hue(hues[f[:, 0]], 0.75, 0.85), _hue(hues[f[:, 1]], 0.6, 0.9), _hue(hues[f[:, 2]], 0.9, 0.95)
    table = np.zeros((B, 5, 3), dtype=_F)  # albedo of nothing, floor, two walls, object
    table[:, 1], table[:, 2], table[:, 3], table[:, 4] = floor_c, wall_c * 0.8, wall_c, obj_c
    geo, gi, _ = _unique(f[:, 3:6])
    sid, light = np.empty((len(geo), res, res), np.uint8), np.empty((len(geo), res, res), _F)
    for j in _pieces(len(geo), _batch(res)):
        sid[j], light[j] = _shapes3d_geometry(geo[j], res)
    for i in _pieces(B, _batch(res)):
        s = sid[gi[i]]
        emit(i, _lit(_surface_albedo(table[i], s), light[gi[i]], s > 0))


_MPI_OBJ = np.array([[0.95, 0.85, 0.1], [0.1, 0.75, 0.2], [0.5, 0.5, 0.1], [0.85, 0.1, 0.1]])
_MPI_BG = np.array([[0.45, 0.3, 0.6], [0.25, 0.6, 0.5], [0.95, 0.6, 0.5]])


def _sd_segment(x, y, ax, ay, bx, by):
    px, py, vx, vy = x - ax, y - ay, bx - ax, by - ay
    t = np.clip((px * vx + py * vy) / np.maximum(vx * vx + vy * vy, 1e-12), 0, 1)
    return np.hypot(px - t * vx, py - t * vy)


def _sd_box(x, y, hx, hy):
    qx, qy = np.abs(x) - hx, np.abs(y) - hy
    return np.hypot(np.maximum(qx, 0), np.maximum(qy, 0)) + np.minimum(np.maximum(qx, qy), 0)


def _mpi3d_object(ox, oy, shape: int):
    """Signed distance to one object shape (mug, ball, banana, cup) in object coordinates."""
    if shape == 0:
        return np.minimum(_sd_box(ox, oy, 0.7, 0.9), np.abs(np.hypot(ox - 0.8, oy) - 0.45) - 0.12)
    if shape == 1:
        return np.hypot(ox, oy) - 1.0
    if shape == 2:
        ang = np.arctan2(oy + 1.2, ox)
        return np.where(np.abs(ang - np.pi / 2) < 0.9, np.abs(np.hypot(ox, oy + 1.2) - 1.6) - 0.3, 9.0)
    return _sd_box(ox, oy, 0.45 + 0.45 * (oy + 1) / 2, 1.0) + 0.0


def _render_mpi3d(f: np.ndarray, res: int, emit) -> None:
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
    img = img * (1 - table) + np.array([0.35, 0.35, 0.38]) * table  # (B, res, 1, 3)
    alpha = _values(f, 5, -0.9, 0.9, 40)  # horizontal axis: swing
    beta = _values(f, 6, 0.15, 0.85, 40)  # vertical axis: reach down
    bx, by = 0.0, 1.05
    length = 0.35 + 0.9 * beta
    tx, ty = bx + length * np.sin(alpha * 0.9), by - length * np.cos(alpha * 0.9)
    size = np.array([0.13, 0.21])[f[:, 2]][:, None, None]
    ox, oy = (x - tx) / size, (ys - (ty - 1.0 * size)) / size
    # the arm: one per (camera, horizontal, vertical); the object: one per those and (size, shape)
    _, ai, arep = _unique(f[:, [3, 5, 6]])
    arm = np.empty((len(arep), res, res, 1))
    for j in _pieces(len(arep), _batch(res, 16)):
        r = arep[j]
        arm[j] = np.clip(0.5 - (_sd_segment(x, ys[r], bx, by, tx[r], ty[r]) - 0.06) / px, 0, 1)[..., None]
    okeys, oi, orep = _unique(f[:, [3, 5, 6, 2, 1]])
    obj, shade = np.empty((len(orep), res, res, 1)), np.empty((len(orep), res, res, 1))
    for k in range(4):
        for j in _pieces(int((okeys[:, 4] == k).sum()), _batch(res, 16)):
            j = np.flatnonzero(okeys[:, 4] == k)[j]
            r = orep[j]
            obj[j] = np.clip(0.5 - _mpi3d_object(ox[r], oy[r], k) * size[r] / px, 0, 1)[..., None]
    for j in _pieces(len(orep), _batch(res, 16)):
        r = orep[j]
        shade[j] = (0.75 + 0.25 * np.clip(-ox[r] * 0.5 + oy[r] * 0.5, -1, 1))[..., None]
    img, arm, obj, shade = np.moveaxis(img, -1, 0), arm[..., 0], obj[..., 0], shade[..., 0]
    arm_c, obj_c = np.array([0.75, 0.75, 0.78]), _MPI_OBJ[f[:, 0]]
    for i in _pieces(len(f), _batch(res, 16)):  # colour by colour: the same sums, in long loops
        a, o, sh = arm[ai[i]], obj[oi[i]], shade[oi[i]]
        a1, o1 = 1 - a, 1 - o
        out = np.empty((3, len(i), res, res))
        for c in range(3):
            im = img[c][i] * a1 + arm_c[c] * a
            out[c] = im * o1 + (obj_c[i, c][:, None, None] * sh) * o
        emit(i, out, rows_first=False)


_FALCOR_BALL, _FALCOR_BALL_R = np.array([-0.6, 0.45, 0.6]), 0.45
_FALCOR_SOFA = np.array([0.3, 0.0, -0.9]), np.array([1.5, 0.7, 0.1])


def _falcor3d_room(cams: np.ndarray, res: int):
    """Camera rays and the hits of the furnished room for camera index rows (G, 3)."""
    G = len(cams)
    eye = np.stack([np.linspace(-0.9, 0.9, 6)[cams[:, 0]], np.linspace(0.7, 1.9, 6)[cams[:, 1]],
                    np.linspace(3.4, 5.4, 6)[cams[:, 2]]], 1)
    o, d = _camera_rays(eye, np.tile([0.0, 0.6, 0.0], (G, 1)), res, 55.0)
    h = _Hits(d.shape[1:])
    t, n = _plane(o, d, 1, 0.0, 1.0)
    p = o + np.where(np.isfinite(t), t, 0) * d
    checker = (np.floor(p[0] * 2) + np.floor(p[2] * 2)) % 2
    h.add(t, n, np.array([0.8, 0.75, 0.65], dtype=_F).reshape(3, 1, 1, 1) * (0.8 + 0.2 * checker))
    h.add(*_plane(o, d, 2, -1.0, 1.0), np.array([0.85, 0.82, 0.78]))
    h.add(*_plane(o, d, 0, -2.5, 1.0), np.array([0.6, 0.7, 0.8]))
    h.add(*_plane(o, d, 0, 2.5, -1.0), np.array([0.8, 0.7, 0.6]))
    h.add(*_sphere(o, d, _FALCOR_BALL, _FALCOR_BALL_R), np.array([0.85, 0.2, 0.2]))
    h.add(*_box(o, d, *_FALCOR_SOFA), np.array([0.2, 0.35, 0.8]))
    return o, d, h


def _falcor3d_shadow(light):
    def shadow(p, ldir):
        ts, _ = _sphere(p, ldir, _FALCOR_BALL, _FALCOR_BALL_R, normals=False)
        tb, _ = _box(p, ldir, *_FALCOR_SOFA, normals=False)
        to_l = _vec(light) - p
        dist = np.sqrt(_dot(to_l, to_l))
        return ((ts < dist) | (tb < dist)).astype(_F)
    return shadow


def _render_falcor3d(f: np.ndarray, res: int, emit) -> None:
    inten = np.linspace(0.4, 1.3, 5)[f[:, 0]]
    cams, ci, _ = _unique(f[:, 4:7])
    # one room per camera, then one lit scene per (camera, light position); the intensity
    # only scales the light, image by image
    pairs, pi, prep = _unique(np.c_[ci, f[:, 1:4]])
    for cj in _pieces(len(cams), _batch(res)):
        o, d, room = _falcor3d_room(cams[cj], res)
        for pj in _pieces(len(pairs), _batch(res)):
            pj = pj[(pairs[pj, 0] >= cj[0]) & (pairs[pj, 0] <= cj[-1])]
            if not pj.size:
                continue
            r = prep[pj]
            light = np.stack([np.linspace(-1.6, 1.6, 6)[f[r, 1]], np.linspace(0.5, 2.3, 6)[f[r, 2]],
                              np.linspace(0.2, 2.6, 6)[f[r, 3]]], 1)
            g = pairs[pj, 0] - cj[0]
            oo, dd, h = o[:, g], d[:, g], room.take(g)
            h.add(*_sphere(oo, dd, light, np.full(len(r), 0.07)), np.array([1.0, 1.0, 0.85]), emit=True)
            lam = _lambert(h.n, h.t, oo, dd, light_pos=light, shadow=_falcor3d_shadow(light))
            hit = np.isfinite(h.t)
            rows = np.flatnonzero((pi >= pj[0]) & (pi <= pj[-1]))
            for i in _pieces(len(rows), _batch(res)):
                i = rows[i]
                q = pi[i] - pj[0]
                light_i = 0.12 + _img(inten[i]) * lam[q]
                emit(i, _lit(h.rgb[:, q], light_i, hit[q], emit=h.emit[q]))


_ISAAC_OBJ = np.array([[0.9, 0.15, 0.15], [0.15, 0.75, 0.2], [0.15, 0.3, 0.9], [0.95, 0.8, 0.1]])
_ISAAC_WALL = np.array([[0.85, 0.85, 0.85], [0.55, 0.75, 0.9], [0.9, 0.75, 0.55], [0.7, 0.9, 0.6]])
_ISAAC_GREY = np.array([0.6, 0.6, 0.65])


def _isaac3d_geometry(g: np.ndarray, res: int) -> _Hits:
    """Hits (normals, surface numbers) of distinct (shape, robot x, robot y, camera height,
    object scale) rows."""
    G = len(g)
    rx = np.linspace(-1.1, 1.1, 8)[g[:, 1]]
    rz = np.linspace(-0.8, 1.0, 5)[g[:, 2]]
    cam_h = np.linspace(0.3, 2.7, 4)[g[:, 3]]
    scale = np.linspace(0.18, 0.38, 4)[g[:, 4]]
    eye = np.stack([np.zeros(G), cam_h, np.full(G, 3.4)], 1)
    o, d = _camera_rays(eye, np.tile([0.0, 0.7, 0.0], (G, 1)), res, 55.0)
    h = _Hits(d.shape[1:], colour=False)
    h.add(*_plane(o, d, 1, 0.0, 1.0), sid=1)  # floor
    h.add(*_plane(o, d, 2, -1.5, 1.0), sid=2)  # wall
    zero = np.zeros(G)
    h.add(*_box(o, d, np.stack([rx - 0.25, zero, rz - 0.25], 1),
                np.stack([rx + 0.25, zero + 0.2, rz + 0.25], 1)), sid=3)
    h.add(*_ycylinder(o, d, np.stack([rx, rz], 1), np.full(G, 0.09), 0.2, 0.95), sid=4)
    h.add(*_box(o, d, np.stack([rx - 0.12, zero + 0.95, rz - 0.12], 1),
                np.stack([rx + 0.12, zero + 1.0, rz + 0.12], 1)), sid=5)
    cy = 1.0 + scale
    t_obj, n_obj = np.full(d.shape[1:], np.inf, dtype=_F), np.zeros(d.shape, dtype=_F)
    for k in range(3):
        idx = np.flatnonzero(g[:, 0] == k)
        if not idx.size:
            continue
        ok, dk, s, x, y, z = o[:, idx], d[:, idx], scale[idx], rx[idx], cy[idx], rz[idx]
        if k == 0:
            t, n = _box(ok, dk, np.stack([x - s, y - s, z - s], 1), np.stack([x + s, y + s, z + s], 1))
        elif k == 1:
            t, n = _sphere(ok, dk, np.stack([x, y, z], 1), s)
        else:
            t, n = _ycylinder(ok, dk, np.stack([x, z], 1), s, y - s, y + s)
        t_obj[idx], n_obj[:, idx] = t, n
    h.add(t_obj, n_obj, sid=6)
    return h


def _render_isaac3d(f: np.ndarray, res: int, emit) -> None:
    B = len(f)
    inten = np.linspace(0.45, 1.05, 4)[f[:, 5]]
    phi = np.deg2rad(np.linspace(-70, 70, 6)[f[:, 6]])
    ldir = np.stack([np.sin(phi), np.full(B, 0.9), np.cos(phi)], 1)
    ldir /= np.linalg.norm(ldir, axis=1, keepdims=True)
    table = np.zeros((B, 7, 3), dtype=_F)  # nothing, floor, wall, base, column, plate, object
    table[:, 1], table[:, 2] = np.array([0.55, 0.5, 0.45]), _ISAAC_WALL[f[:, 8]]
    table[:, 3], table[:, 4], table[:, 5] = _ISAAC_GREY * 0.8, _ISAAC_GREY, _ISAAC_GREY * 0.7
    table[:, 6] = _ISAAC_OBJ[f[:, 7]]
    geo, gi, _ = _unique(f[:, :5])
    n, sid = np.empty((3, len(geo), res, res), _F), np.empty((len(geo), res, res), np.uint8)
    for j in _pieces(len(geo), _batch(res)):
        h = _isaac3d_geometry(geo[j], res)
        n[:, j], sid[j] = h.n, h.sid
    for i in _pieces(B, _batch(res)):
        light = 0.25 + _img(inten[i]) * _lambert(n[:, gi[i]], light_dir=ldir[i])
        s = sid[gi[i]]
        emit(i, _lit(_surface_albedo(table[i], s), light, s > 0))


_RENDERERS = {"shapes3d": _render_shapes3d, "mpi3d": _render_mpi3d,
              "falcor3d": _render_falcor3d, "isaac3d": _render_isaac3d}
# the factor columns to sort by, most significant first: images that share a geometry meet
_ORDER = {"shapes3d": [3, 4, 5], "mpi3d": [3, 5, 6, 2, 1], "falcor3d": [4, 5, 6, 1, 2, 3],
          "isaac3d": [0, 1, 2, 3, 4, 5, 6]}
_GROUP = 1024  # images sorted together; their distinct geometries are cast once


def _check_size(image_size, supersample) -> tuple[int, int]:
    if int(image_size) != image_size or int(image_size) < 8:
        raise ValueError(f"image_size must be an integer of at least 8, got {image_size}")
    if int(supersample) != supersample or int(supersample) < 1:
        raise ValueError(f"supersample must be a positive integer, got {supersample}")
    return int(image_size), int(supersample)


def _downsample(img: np.ndarray, S: int, SS: int, rows_first: bool) -> np.ndarray:
    """Mean of each SS x SS block of images (3, B, S*SS, S*SS) -> (3, B, S, S), summed in
    the order numpy's ``mean`` over the two block axes of (B, H, W, 3) images sums them:
    each row of the block first, then the rows (``rows_first``: colour-major memory, as
    the ray-cast renderers keep it), or every sample in row-major order (colour-minor
    memory, as the MPI3D drawing had it). Another order would round a few pixels to the
    next grey level."""
    if SS == 1:
        return img
    r = img.reshape(3, -1, S, SS, S, SS)
    total = None
    for i in range(SS):
        row = None
        for j in range(SS):
            x = r[:, :, :, i, :, j]
            if rows_first:
                row = x.copy() if row is None else row + x
            else:
                total = x.copy() if total is None else total + x
        if rows_first:
            total = row if total is None else total + row
    return np.true_divide(total, np.intp(SS * SS), out=total, casting="unsafe")  # as numpy's mean divides


def _render_rows(name: str, f: np.ndarray, image_size: int, supersample: int, put) -> None:
    """Render every row of ``f``; ``put(rows, images)`` receives uint8 images (b, S, S, 3)
    of rows ``rows`` of ``f``, in an order that groups shared geometry."""
    S, SS = image_size, supersample
    order = np.lexsort(f[:, _ORDER[name][::-1]].T) if len(f) else np.arange(0)
    for start in range(0, len(f), _GROUP):
        rows = order[start:start + _GROUP]

        def emit(i, img, rows=rows, rows_first=True):
            img = _downsample(img, S, SS, rows_first)
            put(rows[i], np.moveaxis(np.clip(np.rint(img * 255), 0, 255).astype(np.uint8), 0, -1))

        _RENDERERS[name](f[rows], S * SS, emit)


# --------------------------------------------------------------------------- public API
def render(name: str, factors, image_size: int = 64, supersample: int = SUPERSAMPLE) -> np.ndarray:
    """Images (N, H, W, 3) uint8 for integer factor indices (N, K) of dataset ``name``.

    ``supersample`` renders s x s rays per pixel and averages them (anti-aliasing; the
    cost grows as s^2)."""
    f = check_factors(name, factors)
    image_size, supersample = _check_size(image_size, supersample)
    out = np.empty((len(f), image_size, image_size, 3), dtype=np.uint8)
    _render_rows(name, f, image_size, supersample, out.__setitem__)
    return out


def _render_part(name: str, f: np.ndarray, rows: np.ndarray, image_size: int, supersample: int, writer) -> None:
    """Worker: render rows ``rows`` of ``f`` into ``writer`` (a :class:`~nearid.data.cache.RowWriter`)."""
    _render_rows(name, f[rows], image_size, supersample, lambda r, img: writer.put(rows[r], img))


def render_to_file(name: str, factors, image_size: int, supersample: int, writer, workers: int = 1) -> None:
    """Render ``factors`` into ``writer`` (a :class:`~nearid.data.cache.RowWriter` of shape
    (N, S, S, 3) uint8), with ``workers`` processes (this one and ``workers - 1`` started
    ones, each casting its share of the geometries)."""
    f = check_factors(name, factors)
    image_size, supersample = _check_size(image_size, supersample)
    order = np.lexsort(f[:, _ORDER[name][::-1]].T) if len(f) else np.arange(0)
    parts = [p for p in np.array_split(order, max(1, int(workers))) if p.size]
    if len(parts) <= 1:
        _render_part(name, f, order, image_size, supersample, writer)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(len(parts) - 1, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_render_part, name, f, p, image_size, supersample, writer) for p in parts[1:]]
        _render_part(name, f, parts[0], image_size, supersample, writer)
        for fut in futures:
            fut.result()


def make_dataset(name: str, n: int | None = 10_000, image_size: int = 64, seed: int = 0,
                 supersample: int = SUPERSAMPLE, *, cache: bool | None = None, cache_dir=None,
                 workers: int | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """n distinct grid points of ``name`` rendered: (images uint8 (N,H,W,3), factors (N,K), names).

    ``cache``: True renders the images once into a file under ``cache_dir`` (default
    :func:`nearid.data.cache.cache_root`) and returns it read-only and memory-mapped, as
    every later call with the same arguments does without rendering; False renders into
    memory; None (default) does the first for arrays of at least
    :data:`nearid.data.cache.CACHE_MIN_BYTES` (the full profile's). ``workers`` processes
    make the file (None: ``$NEARID_DATA_WORKERS``, else two for large files). The pixels
    are the same every way."""
    from nearid.data import cache as _cache

    factors = sample_factors(name, n, seed)
    image_size, supersample = _check_size(image_size, supersample)
    shape = (len(factors), image_size, image_size, 3)
    if not _cache.use_disk(cache, int(np.prod(shape))):
        return render(name, factors, image_size, supersample), factors, list(FACTOR_GRIDS[name])
    workers = _cache.check_workers(workers, len(factors), min_rows=8192)
    import matplotlib

    params = {"name": name, "n": None if n is None else int(n), "seed": int(seed),
              "image_size": image_size, "supersample": supersample}
    version = {"code": _cache.source_version(sys.modules[__name__], _cache), "matplotlib": matplotlib.__version__,
               **_cache.environment_version()}
    images = _cache.cached_array(
        "procedural", params, shape, np.uint8,
        lambda writer: render_to_file(name, factors, image_size, supersample, writer, workers),
        version=version, root=cache_dir, compute=lambda: render(name, factors, image_size, supersample))
    return images, factors, list(FACTOR_GRIDS[name])
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
