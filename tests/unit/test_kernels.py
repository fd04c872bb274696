"""The portable CPU kernels: set before numpy and torch load, in effect, recorded, and opted out of."""

import json
import os
import subprocess
import sys

import pytest

from nearid import kernels

ENV_KEYS = (*kernels.PORTABLE_SETTINGS, kernels.NATIVE_ENV)

# 12 training steps of a small conv net (convolution, strided convolution, linear layer):
# prints a digest of the weights, then what nearid.kernels saw.
TRAIN = """
import nearid, hashlib, json, torch
from nearid import kernels
nearid.setup(seed=0)
net = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),
                          torch.nn.Conv2d(8, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
                          torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10))
opt = torch.optim.Adam(net.parameters(), 1e-2)
x, y = torch.randn(32, 1, 16, 16), torch.randint(0, 10, (32,))
for _ in range(12):
    opt.zero_grad(); torch.nn.functional.cross_entropy(net(x), y).backward(); opt.step()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters())).hexdigest()
print(json.dumps({"digest": digest, "record": kernels.record(), "effective": kernels.effective(),
                  "nnpack_built": torch.backends.nnpack.is_available()}))
"""

# A convolution of 32 images against the same images one at a time: torch picks NNPACK for
# batches of 16 or more, whose sums follow the CPU's cache sizes, and a per-image kernel below.
BATCH = """
import nearid, hashlib, json, torch
nearid.setup(seed=0)
x, w = torch.randn(32, 4, 20, 20), torch.randn(8, 4, 3, 3)
together = torch.nn.functional.conv2d(x, w, stride=2)
alone = torch.cat([torch.nn.functional.conv2d(x[i:i + 1], w, stride=2) for i in range(32)])
print(json.dumps({"same": bool(torch.equal(together, alone))}))
"""


def _python(code: str, **env) -> dict:
    """Run ``code`` in a fresh interpreter with ``env`` on top of a clean environment."""
    base = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def portable_run():
    return _python(TRAIN)


def test_apply_sets_every_setting_in_an_environment():
    env = {"OPENBLAS_CORETYPE": "SkylakeX", "ATEN_CPU_CAPABILITY": "avx512"}
    assert kernels.apply(env) == []  # a mapping that is not os.environ: nothing is late
    if kernels.supported()[0]:
        assert {k: env[k] for k in kernels.PORTABLE_SETTINGS} == kernels.PORTABLE_SETTINGS
    native = {kernels.NATIVE_ENV: "1", "OPENBLAS_CORETYPE": "SkylakeX"}
    kernels.apply(native)
    assert native == {kernels.NATIVE_ENV: "1", "OPENBLAS_CORETYPE": "SkylakeX"}  # left alone
    for off in ("", "0", "false", "no"):
        assert not kernels.native_requested({kernels.NATIVE_ENV: off})


def test_a_cpu_without_the_portable_kernels_is_left_alone_and_said_to_be(monkeypatch):
    monkeypatch.setattr(kernels.platform, "machine", lambda: "aarch64")
    env: dict[str, str] = {}
    kernels.apply(env)
    assert env == {}
    ok, why = kernels.supported()
    assert not ok and "aarch64" in why
    rec = kernels.record()
    assert rec["portable"] is False and "not x86-64" in rec["problems"][0]
    assert kernels.signature().startswith("native:aarch64")


def test_import_nearid_pins_the_kernels_and_setup_makes_them_effective(portable_run):
    if not kernels.supported()[0]:
        pytest.skip("this CPU cannot run the portable kernels")
    rec, seen = portable_run["record"], portable_run["effective"]
    assert rec["mode"] == "portable" and rec["portable"] and rec["problems"] == []
    assert rec["settings"] == {**kernels.PORTABLE_SETTINGS, **kernels.TORCH_SETTINGS}
    assert seen == {"numpy_avx512_loops": "none", "openblas_architecture": kernels.OPENBLAS_ARCH,
                    "torch_cpu_capability": kernels.TORCH_CAPABILITY, "torch_onednn_convolutions": "off",
                    "torch_nnpack_convolutions": "off"}


def test_other_kernel_settings_in_the_environment_do_not_change_a_result(portable_run):
    """What differs between CPUs is which kernels the libraries pick; forcing other picks
    through the very switches nearid pins must not move a single bit."""
    if not kernels.supported()[0]:
        pytest.skip("this CPU cannot run the portable kernels")
    other = _python(TRAIN, ATEN_CPU_CAPABILITY="default", ONEDNN_MAX_CPU_ISA="SSE41", MKL_CBWR="AUTO",
                    OPENBLAS_CORETYPE="Sandybridge", NPY_DISABLE_CPU_FEATURES="X86_V3")
    assert other["digest"] == portable_run["digest"]
    assert other["record"]["portable"]


def test_a_convolution_does_not_depend_on_the_batch_size():
    if not kernels.supported()[0]:
        pytest.skip("this CPU cannot run the portable kernels")
    assert _python(BATCH)["same"]


def test_native_kernels_are_an_opt_out_that_results_record(portable_run):
    native = _python(TRAIN, NEARID_NATIVE_KERNELS="1", ATEN_CPU_CAPABILITY="default")
    assert native["record"]["mode"] == "native" and native["record"]["portable"] is False
    assert native["record"]["settings"] == {}
    assert native["effective"]["torch_cpu_capability"] == "DEFAULT"  # the environment was obeyed
    assert native["effective"]["torch_onednn_convolutions"] == "on"
    assert native["effective"]["torch_nnpack_convolutions"] == ("on" if native["nnpack_built"] else "off")
    assert native["digest"] != portable_run["digest"]


def test_libraries_loaded_before_nearid_make_results_not_portable():
    code = ("import numpy, torch, nearid, json; from nearid import kernels; "
            "print(json.dumps({'record': kernels.record()}))")
    rec = _python(code)["record"]
    if kernels.supported()[0]:
        assert rec["portable"] is False
        assert any("OPENBLAS_CORETYPE was set after numpy had loaded" in p for p in rec["problems"])
        assert any("ATEN_CPU_CAPABILITY was set after torch had loaded" in p for p in rec["problems"])


@pytest.mark.skipif(not kernels.supported()[0], reason="this CPU cannot run the portable kernels")
def test_mkl_runs_its_reproducible_branch():
    """MKL says which conditional-numerical-reproducibility branch each call ran."""
    code = ("import nearid, torch, json; a = torch.randn(64, 64); (a @ a).sum(); "
            "print(json.dumps({}))")
    base = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    out = subprocess.run([sys.executable, "-c", code], env={**base, "MKL_VERBOSE": "1"}, capture_output=True,
                         text=True, timeout=300, check=True)
    assert "CNR:COMPATIBLE,STRICT" in out.stdout + out.stderr


def test_the_cache_keys_follow_the_kernels(monkeypatch, root):
    from task_functions import where_am_i

    from nearid.book import runner
    from nearid.tasks import Task, task_key

    chapter = runner.get_chapter("01", root)
    params = runner.profiles.resolve(chapter.key, "smoke")
    task, chapter_key = task_key(Task(where_am_i, {"x": 1}), "v", code="c"), runner.cache_key(chapter, "smoke", params)
    monkeypatch.setenv(kernels.NATIVE_ENV, "1")
    assert task_key(Task(where_am_i, {"x": 1}), "v", code="c") != task
    assert runner.cache_key(chapter, "smoke", params) != chapter_key


def test_a_worker_with_other_kernels_refuses(monkeypatch):
    from nearid import tasks

    kernels.configure_torch()  # as a chapter's setup() does, whatever ran before this test
    tasks._check_kernels(kernels.signature())  # the caller's own kernels: fine
    with pytest.raises(RuntimeError, match="does not compute with the caller's CPU kernels"):
        tasks._check_kernels("native:x86_64:some other CPU")
    assert tasks.WorkerSetup().kernels == kernels.signature()
