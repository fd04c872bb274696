"""Which CPU kernels compute the numbers: one declared choice, the same on every x86-64 CPU with AVX2.

torch, oneDNN, MKL, OpenBLAS and numpy each pick their kernels by the instruction set the CPU
offers (AVX2, AVX-512, ...) and by its vendor, and the kernels sum in different orders, so two
machines of the same kind drift apart after a few training steps (measured on an AMD EPYC
Zen 3: 30 steps of a small conv net give other weights under ``ATEN_CPU_CAPABILITY=default``,
``ONEDNN_MAX_CPU_ISA=SSE41`` or ``MKL_CBWR=COMPATIBLE`` than without). The libraries read
their switches once, when they load or first compute, so :func:`apply` must run before torch
and numpy load: ``import nearid`` does it first thing, and every process the book starts (a
chapter's kernel, a task worker) inherits the environment it set.

The declared choice, :data:`PORTABLE_SETTINGS`:

* ``ATEN_CPU_CAPABILITY=avx2``: torch's element-wise and reduction kernels (ATen) use their
  AVX2 build even where AVX-512 exists;
* ``ONEDNN_MAX_CPU_ISA=AVX2`` and, in every process that trains (:func:`configure_torch`,
  called by :func:`nearid.setup` and by task workers), ``torch.backends.mkldnn.enabled =
  False``: torch's convolutions then run as im2col + MKL matrix products, under the MKL
  setting below. Pinning oneDNN's ISA is not enough: its AVX2 convolutions choose their
  blocking, and so the order of their sums, from the CPU's L1 and L2 cache sizes (the
  ``brgconv`` kernels, e.g. the backward pass of a strided convolution), which differ
  between CPUs with the same instruction set;
* and, in the same processes, ``torch.backends.nnpack.set_flags(False)``: without oneDNN,
  torch convolves a batch of 16 images or more with NNPACK, which also blocks its sums by
  the cache sizes (a Gaussian blur gave other bits on an Intel Sapphire Rapids than on the
  AMD EPYCs); with it off, every convolution torch computes itself is im2col + MKL, image
  by image, whatever the batch size;
* ``MKL_CBWR=COMPATIBLE,STRICT``: MKL (torch's matrix products and LAPACK) runs its
  conditional-numerical-reproducibility branch that is the same on Intel and AMD. The AVX2
  branch would be faster, but MKL honours it on Intel CPUs only: on an AMD EPYC,
  ``MKL_VERBOSE=1`` prints ``CNR:AUTO`` for ``MKL_CBWR=AVX2`` (the native dispatch) and
  ``CNR:COMPATIBLE,STRICT`` for this setting; ``STRICT`` drops the dependence on the
  alignment of the data;
* ``OPENBLAS_CORETYPE=Haswell``: OpenBLAS (numpy's and scipy's matrix products and LAPACK)
  uses its Haswell (AVX2) kernels on every CPU;
* ``NPY_DISABLE_CPU_FEATURES=X86_V4 AVX512_ICL AVX512_SPR``: numpy's own SIMD loops (exp,
  log, sorting, ...) stay on their AVX2 (``X86_V3``) versions;
* the matrix products of training and encoding (linear layers, convolutions, attention) run
  in numpy's OpenBLAS, under the Haswell pin above (:mod:`nearid.gemm`): MKL's compatible
  branch is SSE2 code, 2-4 times slower than OpenBLAS's AVX2 kernels on the same products.
  ``NEARID_MKL_PRODUCTS=1`` keeps them in torch's MKL (other numbers, also portable).

The thread count matters as much (a sum split over threads is summed in another order): the
book runs every kernel and worker with one thread unless ``NEARID_NUM_THREADS`` says
otherwise, and the cache keys include it.

``NEARID_NATIVE_KERNELS=1`` opts out, for speed: each library then picks its fastest kernels
for this CPU, and every result records ``portable: false``. Nothing here reaches a GPU
(CUDA kernels and cuBLAS have their own, per-device, choice) or a CPU without AVX2 (an ARM
CPU, an x86-64 CPU older than 2013): there the settings are not applied and results are
marked not portable.
"""

from __future__ import annotations

import functools
import os
import platform
import sys
from collections.abc import MutableMapping

NATIVE_ENV = "NEARID_NATIVE_KERNELS"
THREADS_ENV = "NEARID_NUM_THREADS"  # torch threads of a chapter's kernel or a task worker
# Every thread count the book pins (torch reads NEARID_NUM_THREADS through nearid.setup):
# the runner sets them for a chapter's kernel, nearid.tasks for a worker.
THREAD_VARS = (THREADS_ENV, "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
PORTABLE_SETTINGS: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_CBWR": "COMPATIBLE,STRICT",
    "OPENBLAS_CORETYPE": "Haswell",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
}
# Set in Python where torch computes (configure_torch), not through the environment.
PRODUCTS_KEY = "training matrix products"
PRODUCTS_ENV = "NEARID_MKL_PRODUCTS"  # "1": training's products stay in torch's MKL (compatible branch)
TORCH_SETTINGS: dict[str, str] = {"torch.backends.mkldnn.enabled": "False", "torch.backends.nnpack.enabled": "False",
                                  PRODUCTS_KEY: "OpenBLAS"}
# What each setting pins, as the report page and `nearid kernels` say it.
WHAT = {
    "ATEN_CPU_CAPABILITY": "torch element-wise and reduction kernels",
    "ONEDNN_MAX_CPU_ISA": "oneDNN, where torch still calls it (not for convolutions, see below)",
    "MKL_CBWR": "MKL (torch matrix products outside nearid.gemm, LAPACK)",
    "OPENBLAS_CORETYPE": "OpenBLAS (numpy and scipy matrix products, LAPACK)",
    "NPY_DISABLE_CPU_FEATURES": "numpy SIMD loops",
    "torch.backends.mkldnn.enabled": "torch convolutions: im2col + MKL instead of oneDNN",
    "torch.backends.nnpack.enabled": "torch convolutions of 16 images or more: im2col + MKL instead of NNPACK",
    PRODUCTS_KEY: "products of linear layers, convolutions and attention in training and encoding "
                  "(nearid.gemm): numpy's OpenBLAS, Haswell kernels",
}
# Libraries that read a setting when they load: if one is already loaded, the setting is late.
READ_AT_LOAD = {"OPENBLAS_CORETYPE": "numpy", "NPY_DISABLE_CPU_FEATURES": "numpy",
                "ATEN_CPU_CAPABILITY": "torch", "ONEDNN_MAX_CPU_ISA": "torch", "MKL_CBWR": "torch"}
NUMPY_TARGETS = tuple(PORTABLE_SETTINGS["NPY_DISABLE_CPU_FEATURES"].split())
OPENBLAS_ARCH = "Haswell"  # what threadpoolctl reports for OpenBLAS under OPENBLAS_CORETYPE=Haswell
TORCH_CAPABILITY = "AVX2"  # torch.backends.cpu.get_cpu_capability() under ATEN_CPU_CAPABILITY=avx2


def native_requested(environ: MutableMapping[str, str] | None = None) -> bool:
    """Whether ``$NEARID_NATIVE_KERNELS`` asks for each library's fastest kernels."""
    env = os.environ if environ is None else environ
    return env.get(NATIVE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def products(environ: MutableMapping[str, str] | None = None) -> str:
    """Where training's matrix products run with portable kernels: "OpenBLAS" (numpy's, the
    Haswell kernels; :mod:`nearid.gemm`) unless ``$NEARID_MKL_PRODUCTS`` keeps them in "MKL"."""
    env = os.environ if environ is None else environ
    return "MKL" if env.get(PRODUCTS_ENV, "").strip().lower() not in ("", "0", "false", "no") else "OpenBLAS"


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``); empty where they cannot be read. Read
    once per process: :func:`nearid.gemm.active` asks on every training step, and reading the
    file cost 0.3 ms a step (a tenth of a chapter 03 step)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_model() -> str:
    """The CPU's model name, for the record (never compared between machines)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def supported() -> tuple[bool, str]:
    """(whether this CPU can run the portable choice, why not)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False, f"this CPU is {platform.machine()}, not x86-64: the AVX2 kernels do not exist here"
    flags = cpu_flags()
    if flags and not {"avx2", "fma"} <= flags:
        return False, "this x86-64 CPU lacks AVX2/FMA, which the portable kernels need"
    return True, ""


def apply(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Set :data:`PORTABLE_SETTINGS` in ``environ`` (``os.environ``) unless native kernels are
    asked for or the CPU cannot run them; returns the settings that came too late for a
    library already loaded in this process (empty when nothing was late)."""
    env = os.environ if environ is None else environ
    if native_requested(env) or not supported()[0]:
        return []
    late = []
    for var, value in PORTABLE_SETTINGS.items():
        if var == "NPY_DISABLE_CPU_FEATURES" and env.get("NPY_ENABLE_CPU_FEATURES"):
            continue  # numpy refuses both at once; problems() says the results are not portable
        if env.get(var) != value:
            env[var] = value
            if environ is None and READ_AT_LOAD[var] in sys.modules:
                late.append(var)
    if environ is None:
        LATE.update(late)
    return late


LATE: set[str] = set()  # settings this process made after the library that reads them had loaded


def effective() -> dict[str, str]:
    """What the loaded libraries report they use (only those already loaded; importing one
    here would load it with whatever the environment says now)."""
    out: dict[str, str] = {}
    if "numpy" in sys.modules:
        try:
            from numpy._core._multiarray_umath import __cpu_features__ as features
        except ImportError:  # numpy < 2
            from numpy.core._multiarray_umath import __cpu_features__ as features
        # the hardware flags (AVX512F, ...) stay True on an AVX-512 CPU; what the setting turns
        # off is numpy's dispatch targets, so those are what must read False
        wide = [k for k in NUMPY_TARGETS if features.get(k)]
        out["numpy_avx512_loops"] = ", ".join(wide) or "none"
        try:
            from threadpoolctl import threadpool_info

            archs = sorted({str(i.get("architecture")) for i in threadpool_info()
                            if i.get("internal_api") == "openblas"})
            out["openblas_architecture"] = ", ".join(archs) or "none loaded"
        except ImportError:
            pass
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch_cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())
        out["torch_onednn_convolutions"] = "on" if torch.backends.mkldnn.enabled else "off"
        out["torch_nnpack_convolutions"] = "on" if _nnpack_on(torch) else "off"
    return out


def setting_problems() -> list[str]:
    """Why this process's *settings* are not the portable choice (empty: they are): opted
    out, a CPU without AVX2, a setting changed or made after its library loaded. These decide
    :func:`signature`, so they are the same at every moment of a process's life."""
    if native_requested():
        return [f"{NATIVE_ENV} is set: each library chose its fastest kernels for this CPU"]
    ok, why = supported()
    if not ok:
        return [why]
    found = [f"{var}={os.environ.get(var)!r}, not {value!r}" for var, value in PORTABLE_SETTINGS.items()
             if os.environ.get(var) != value]
    if os.environ.get("NPY_ENABLE_CPU_FEATURES"):
        found.append("NPY_ENABLE_CPU_FEATURES is set, so numpy's loops follow it, not the portable choice")
    found += [f"{var} was set after {READ_AT_LOAD[var]} had loaded, so {READ_AT_LOAD[var]} may not use it "
              f"(import nearid before numpy and torch)" for var in sorted(LATE)]
    return found


def problems() -> list[str]:
    """Why results computed in this process are not portable (empty: they are): the
    settings (:func:`setting_problems`), then what the loaded libraries report they run."""
    found = setting_problems()
    if found and (native_requested() or not supported()[0]):
        return found
    seen = effective()
    if seen.get("numpy_avx512_loops", "none") != "none":
        found.append(f"numpy runs AVX-512 loops ({seen['numpy_avx512_loops']}): it was loaded before "
                     "nearid set NPY_DISABLE_CPU_FEATURES")
    arch = seen.get("openblas_architecture")
    if arch not in (None, "none loaded", OPENBLAS_ARCH):
        found.append(f"OpenBLAS runs its {arch} kernels, not {OPENBLAS_ARCH}: numpy was loaded before "
                     "nearid set OPENBLAS_CORETYPE")
    if seen.get("torch_onednn_convolutions") == "on":
        found.append("torch runs its convolutions in oneDNN, whose blocking follows the CPU's cache sizes "
                     "(call nearid.setup() or nearid.kernels.configure_torch() before training)")
    if seen.get("torch_nnpack_convolutions") == "on":
        found.append("torch runs its convolutions of 16 images or more in NNPACK, whose blocking follows "
                     "the CPU's cache sizes (call nearid.setup() or nearid.kernels.configure_torch() before "
                     "training)")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        found.append("torch computed on a GPU: CUDA kernels are outside the portable CPU choice")
    cap = seen.get("torch_cpu_capability")
    if cap is not None and cap != TORCH_CAPABILITY:
        found.append(f"torch runs its {cap} kernels, not {TORCH_CAPABILITY}: torch was loaded before "
                     "nearid set ATEN_CPU_CAPABILITY")
    return found


def configure_torch() -> bool:
    """Route torch's convolutions through MKL (oneDNN and NNPACK off) when kernels are
    portable; returns whether they are off. Call it where torch computes (``nearid.setup``
    does); a no-op without torch loaded or with native kernels."""
    torch = sys.modules.get("torch")
    if torch is None or native_requested() or not supported()[0]:
        return False
    torch.backends.mkldnn.enabled = False
    torch.backends.nnpack.set_flags(False)
    return True


def _nnpack_on(torch) -> bool:
    """Whether torch may convolve in NNPACK (built with it and not switched off)."""
    return bool(torch.backends.nnpack.is_available() and torch._C._get_nnpack_enabled())


def signature() -> str:
    """One line that changes whenever results could: for cache keys."""
    if native_requested() or not supported()[0]:
        return f"native:{platform.machine()}:{cpu_model()}"
    found = setting_problems()
    if found:  # asked for, but not (all) in effect: never the key of portable results
        return f"unpinned:{platform.machine()}:{cpu_model()}:" + ";".join(found)
    return ("portable:" + ";".join(f"{k}={v}" for k, v in PORTABLE_SETTINGS.items())
            + f";torch_onednn=off;torch_nnpack=off;products={products()}")


def record() -> dict:
    """What a chapter's JSON and the report page say about the kernels its numbers came from.

    ``cpu`` describes this machine and differs between machines that agree on every number
    (``nearid verify`` ignores it); the rest must be the same wherever the numbers are.
    """
    found = problems()
    native = native_requested()
    return {"mode": "native" if native else "portable", "portable": not found,
            "settings": {} if native else {**{k: os.environ.get(k) for k in PORTABLE_SETTINGS},
                                           **TORCH_SETTINGS, PRODUCTS_KEY: products()},
            "problems": found, "cpu": cpu_model()}


def export_lines() -> list[str]:
    """``export VAR=value`` lines for a shell that starts other workers (``dask worker``)."""
    if native_requested():
        return [f"export {NATIVE_ENV}=1"]
    ok, why = supported()
    if not ok:
        return [f"# {why}: no portable settings to export"]
    return [f"export {k}='{v}'" for k, v in PORTABLE_SETTINGS.items()]
