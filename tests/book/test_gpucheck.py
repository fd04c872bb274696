"""`make check-gpu`: says so and exits 0 without CUDA; with a pretend device list, every step
runs (stubbed runner and plan) and lands in one report."""

import json
import os

from nearid.book import gpucheck
from nearid.book.gpucheck import StepResult


def test_without_cuda_it_says_so_and_exits_0(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gpucheck, "cuda_devices", lambda: [])
    assert gpucheck.main(["--out", str(tmp_path / "gpu")]) == 0
    assert "skipped: no CUDA device" in capsys.readouterr().out
    report = json.loads((tmp_path / "gpu" / "report.json").read_text())
    assert report["devices"] == [] and report["steps"] == []
    assert "nothing to check" in (tmp_path / "gpu" / "report.md").read_text()


def test_with_a_pretend_device_every_step_lands_in_the_report(tmp_path, root, monkeypatch):
    runs, caches = [], set()
    monkeypatch.delenv("NEARID_TASK_CACHE", raising=False)

    def fake_run(chapter, profile, overrides, *, out_dir, force, root):
        runs.append((chapter, profile, dict(overrides)))
        caches.add(os.environ.get("NEARID_TASK_CACHE"))
        if chapter.startswith("06") and overrides.get("dry_run"):
            raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(gpucheck, "compare_with_reference", lambda executed, root: StepResult(
        "smoke on CUDA vs the CPU reference", True, 1.0, {"compared": 10, "rtol": 0.1, "atol": 0.02,
                                                          "verdicts_differ": [], "numbers_outside_tolerance": 2}))
    monkeypatch.setattr(gpucheck, "_nvidia_smi_used_mb", lambda: 512.0)
    report = gpucheck.check(tmp_path / "gpu", root=root, devices=["Pretend H200"], run=fake_run,
                            plan=lambda out, budget: StepResult("nearid plan --profile full on CUDA", True, 2.0))
    smoke = [r for r in runs if r[1] == "smoke"]
    assert {r[0] for r in smoke} >= {"01_definitions", "05_disentanglement"}
    assert all(r[2].get("device") == "cuda" for r in smoke if not r[0].startswith(("01", "07")))
    assert all(r[2] == {"dry_run": True, **({"device": "cuda"} if "device" in r[2] else {})} for r in runs
               if r[1] == "full")
    assert caches == {str(tmp_path / "gpu" / "tasks")}, "the chapters use the check's own task cache"
    assert "NEARID_TASK_CACHE" not in os.environ, "and it is gone after the check (it served later tests' tasks)"
    assert report["status"] == "NOT OK"  # the full dry run of 06 failed, and the report says where
    names = [s["name"] for s in report["steps"]]
    assert names == ["smoke on CUDA", "smoke on CUDA vs the CPU reference", "full dry run on CUDA",
                     "nearid plan --profile full on CUDA"]
    dry = report["steps"][2]["detail"]
    assert "06_cell_microscopy" in dry["failed"] and dry["chapters"]["01_definitions"]["peak_gpu_mb"] == 0.0
    md = (tmp_path / "gpu" / "report.md").read_text()
    assert "Pretend H200" in md and "CUDA out of memory" in md and "2 outside rtol 0.1" in md


def test_the_plan_step_times_the_chapters_a_gpu_can_change():
    from nearid.book import gpucheck

    chapters = gpucheck.gpu_chapters()
    assert "01" not in chapters and {"02", "03", "04", "05", "06"} <= set(chapters)
