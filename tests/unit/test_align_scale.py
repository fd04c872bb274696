"""benchmarks/align_scale.py at a tiny size: the rows it hands a peer are the rows nearid's
measure uses (else its agreement with a peer would prove nothing), and a run without peers
reports every measure it was asked for."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from nearid import align

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def scale():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # it imports align_benchmark from its folder
    spec = importlib.util.spec_from_file_location("align_scale", ROOT / "benchmarks" / "align_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("pairwise", [False, True])
def test_peer_rows_are_the_rows_nearid_measures(scale, pairwise):
    n = 2 * scale.MAX_ROWS + 1000  # more fit rows than the n x n measures take
    A, B = scale.ab.related_embeddings(n, 8, 3)
    idx = scale.peer_rows(n, pairwise)
    assert idx.size == (scale.MAX_ROWS if pairwise else n // 2)
    name, direct = ("mutual_knn", align.mutual_knn) if pairwise else ("procrustes", align.procrustes_angle)
    ours = align.compare(A, B, families=(), measures=(name,)).measures[name]
    assert ours == pytest.approx(direct(A[idx], B[idx], **({"max_rows": None} if pairwise else {})), abs=1e-12)


def test_a_run_without_peers_reports_each_measure(scale, tmp_path, capsys):
    out = tmp_path / "scale.json"
    assert scale.main(["--rows", "600", "--dim", "8", "--factors", "3", "--measures", "cka,rsa", "--threads", "1",
                       "--json", str(out), "--keep", str(tmp_path / "run")]) == 0
    import json

    report = json.loads(out.read_text())
    assert [r["measure"] for r in report["results"]] == ["cka", "rsa"]
    for r in report["results"]:
        assert r["nearid"]["rc"] == 0 and 0 <= r["nearid"]["value"] <= 1 and r["peers"] == []
    assert "| cka |" in capsys.readouterr().out
    assert np.load(tmp_path / "run" / "a.npy").shape == (600, 8)
