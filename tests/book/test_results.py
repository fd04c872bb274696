"""Chapter results files: JSON-ready values, and the records the summary page reads."""

import json

import numpy as np
import pytest

from nearid.book import results
from nearid.verdicts import Verdict, claim


def test_save_writes_json_with_profile_and_params(tmp_path):
    path = tmp_path / "r.json"
    results.save(path, {"x": np.float64(0.5), "nan": float("nan"), "arr": np.arange(2)}, params={"a": 1},
                 profile="smoke")
    doc = json.loads(path.read_text())
    kernels = doc.pop("kernels")  # which CPU kernels computed the numbers (nearid.kernels.record)
    assert doc == {"x": 0.5, "nan": None, "arr": [0, 1], "params": {"a": 1}, "profile": "smoke"}
    assert kernels["mode"] in ("portable", "native") and isinstance(kernels["portable"], bool)


def test_verdict_records_are_checked(tmp_path):
    good = claim(Verdict(0.1, 0.05, 0.2, "holds", 20, "bootstrap"), "x beats y", section="ch99-verdict")
    results.save(tmp_path / "ok.json", {"verdicts": {"x_beats_y": good}})
    with pytest.raises(ValueError, match="lacks"):
        results.save(tmp_path / "bad.json", {"verdicts": {"x": {"estimate": 0.1}}})
    with pytest.raises(ValueError, match="valid: holds, fails, inconclusive"):
        results.save(tmp_path / "bad.json", {"verdicts": {"x": {**good, "verdict": "reproduced"}}})
    with pytest.raises(ValueError, match="paper_comparison"):
        results.save(tmp_path / "bad.json", {"paper_comparison": [{"table": "Table 1"}]})
    assert not (tmp_path / "bad.json").exists()
