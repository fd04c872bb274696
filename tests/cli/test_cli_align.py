"""`nearid align`: tables on small files, JSON output, every bad input -> exit 2, no files."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from nearid.cli.align import JSON_KEYS, main


def _pair(n=200, d=4, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.laplace(size=(n, d))
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return A, 2.0 * A @ Q + 1.0


def _write(tmp_path, A, B, suffix=".npy"):
    pa, pb = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    for p, X in ((pa, A), (pb, B)):
        if suffix == ".npy":
            np.save(p, X)
        elif suffix == ".npz":
            np.savez(p, embeddings=X)
        else:
            pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).to_parquet(p)
    return str(pa), str(pb)


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".parquet"])
def test_json_output(tmp_path, capsys, suffix):
    A, B = _pair()
    pa, pb = _write(tmp_path, A, B, suffix)
    assert main([pa, pb, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == list(JSON_KEYS)
    # B is an exact rigid image of A (scaled rotation + shift): rigid and linear are exact
    assert out["rigid"] < 1e-10 and out["linear"] < 1e-10
    assert out["cka"] == pytest.approx(1.0)
    assert out["n_fit"] == 100 and out["n_eval"] == 100
    assert out["permutation"] > out["rigid"]


def test_table_output_and_options(tmp_path, capsys):
    A, B = _pair()
    pa, pb = _write(tmp_path, A, B)
    assert main([pa, pb, "--fit-fraction", "0.7", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    for word in ("permutation", "rigid", "linear", "ica", "ica efficiency", "linear CKA",
                 "fitted on 140 rows", "evaluated on 60"):
        assert word in text


def test_seed_changes_split_deterministically(tmp_path, capsys):
    rng = np.random.default_rng(1)
    A = rng.laplace(size=(120, 3))
    B = A + 0.3 * rng.normal(size=A.shape)
    pa, pb = _write(tmp_path, A, B)
    runs = []
    for seed in (0, 0, 1):
        main([pa, pb, "--json", "--seed", str(seed)])
        runs.append(json.loads(capsys.readouterr().out))
    assert runs[0] == runs[1] and runs[0]["linear"] != runs[2]["linear"]


def _bad_inputs(tmp_path):
    A, B = _pair(n=50, d=3)
    cases = {}
    np.save(tmp_path / "a.npy", A)
    cases["missing"] = (str(tmp_path / "a.npy"), str(tmp_path / "nope.npy"), "no such file")
    np.save(tmp_path / "short.npy", B[:40])
    cases["rows"] = (str(tmp_path / "a.npy"), str(tmp_path / "short.npy"), "50 rows and B has 40")
    Bn = B.copy()
    Bn[3, 0] = np.nan
    np.save(tmp_path / "nan.npy", Bn)
    cases["nan"] = (str(tmp_path / "a.npy"), str(tmp_path / "nan.npy"), "NaN or infinite")
    Bi = B.copy()
    Bi[5, 1] = np.inf
    np.save(tmp_path / "inf.npy", Bi)
    cases["inf"] = (str(tmp_path / "a.npy"), str(tmp_path / "inf.npy"), "NaN or infinite")
    np.save(tmp_path / "few_a.npy", A[:6])
    np.save(tmp_path / "few_b.npy", B[:6])
    cases["few"] = (str(tmp_path / "few_a.npy"), str(tmp_path / "few_b.npy"), "too few rows")
    np.save(tmp_path / "3d.npy", B.reshape(50, 3, 1))
    cases["3d"] = (str(tmp_path / "a.npy"), str(tmp_path / "3d.npy"), "2-D")
    np.save(tmp_path / "1d.npy", B[:, 0])
    cases["1d"] = (str(tmp_path / "1d.npy"), str(tmp_path / "a.npy"), "2-D")
    (tmp_path / "x.txt").write_text("1 2 3")
    cases["type"] = (str(tmp_path / "a.npy"), str(tmp_path / "x.txt"), "unsupported file type")
    return cases


@pytest.mark.parametrize("case", ["missing", "rows", "nan", "inf", "few", "3d", "1d", "type"])
def test_bad_inputs_exit_2_and_write_nothing(tmp_path, capsys, case):
    pa, pb, message = _bad_inputs(tmp_path)[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([pa, pb, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err and captured.err.startswith("nearid align: error:")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_bad_fit_fraction(tmp_path, capsys):
    A, B = _pair()
    pa, pb = _write(tmp_path, A, B)
    assert main([pa, pb, "--fit-fraction", "1.5"]) == 2
    assert "fit_fraction" in capsys.readouterr().err


def test_module_entry_point(tmp_path):
    A, B = _pair(n=60, d=2)
    pa, pb = _write(tmp_path, A, B)
    ok = subprocess.run([sys.executable, "-m", "nearid.cli.align", pa, pb, "--json"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and set(json.loads(ok.stdout)) == set(JSON_KEYS)
    bad = subprocess.run([sys.executable, "-m", "nearid.cli.align", pa, str(tmp_path / "z.npy")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no such file" in bad.stderr and bad.stdout == ""
