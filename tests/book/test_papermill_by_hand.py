"""Rerunning a chapter with papermill by hand, as book/rerun.md shows: from any folder, with
``-p`` overrides as papermill passes them (JSON text), data found wherever the run starts."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nearid.book.profiles import resolve
from nearid.data import data_root

BIN = Path(sys.executable).parent


def test_papermill_from_another_folder_with_json_overrides(root, tmp_path):
    nb = tmp_path / "01.ipynb"
    subprocess.run([str(BIN / "jupytext"), "--to", "ipynb", str(root / "notebooks" / "01_definitions.py"),
                    "-o", str(nb)], check=True, capture_output=True)
    proc = subprocess.run([str(BIN / "papermill"), "--engine", "nearid", nb.name, "out.ipynb", "-p", "profile", "smoke",
                           "-p", "overrides", '{"seed": 1, "n_points": 200}', "-p", "results_path", "01.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "without encryption" not in proc.stderr, "the nearid engine's kernel has encrypted sockets"
    doc = json.loads((tmp_path / "01.json").read_text())
    assert doc["profile"] == "smoke" and doc["params"]["seed"] == 1 and doc["params"]["n_points"] == 200


def test_overrides_as_text_are_read_as_json_and_bad_text_is_named():
    assert resolve("01", "smoke", '{"seed": 4}')["seed"] == 4
    assert resolve("01", "smoke", "")["seed"] == resolve("01", "smoke")["seed"]
    with pytest.raises(ValueError, match="overrides must be a JSON object"):
        resolve("01", "smoke", "{'seed': 4}")
    with pytest.raises(ValueError, match="overrides must be a mapping"):
        resolve("01", "smoke", "[4]")


def test_the_data_folder_does_not_depend_on_the_working_directory(root, tmp_path, monkeypatch, mnist_root):
    from nearid.data.mnist import verify_mnist

    monkeypatch.delenv("NEARID_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    assert data_root() == root / "data"
    assert len(verify_mnist()) == 4, "MNIST found from another folder"
    monkeypatch.setenv("NEARID_DATA", str(tmp_path / "elsewhere"))
    assert data_root() == tmp_path / "elsewhere"
