import json

from nearid.book.runner import run_chapter


def test_chapter_02_smoke(tmp_path, mnist_root):
    res = run_chapter("02", profile="smoke", out_dir=tmp_path)
    deltas = {"0.0", "0.5"}
    assert set(res["mcc"]) == {"ae", "ae_ica"}
    assert set(res["mcc"]["ae_ica"]) == deltas
    assert set(res["error_between_seeds"]) == {"permutation", "rigid", "linear", "ica"}
    for family in res["error_between_seeds"].values():
        assert set(family) == deltas and all(0 <= v < 2 for v in family.values())
    assert all(0 <= v <= 1 for v in res["mcc"]["ae_ica"].values())
    assert res["bilipschitz"]["0.0"] == 1.0 and res["bilipschitz"]["0.5"] > 1.0


def test_chapter_02_is_deterministic(tmp_path, mnist_root):
    """Same seed and profile, two fresh kernels: identical numbers."""
    a = run_chapter("02", profile="smoke", out_dir=tmp_path / "a")
    b = run_chapter("02", profile="smoke", out_dir=tmp_path / "b")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
