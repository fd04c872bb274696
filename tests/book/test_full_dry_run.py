"""The full profile's shapes, memory and code paths on a CPU: every chapter in `full` with
`-p dry_run=true` (each task cut to two optimisation steps, evaluation subsampled), forced,
into a scratch folder (not book/executed) with its own task cache.

Runs under `make check-full`, which sets NEARID_CHECK_FULL to that folder (the executed
notebooks and timings.json stay there for inspection). Not part of `make test`: 13 min 44 s
on an idle 2-core clean clone (benchmarks/README.md, "The full-shape dry run") plus make test's 8.5 minutes fits
30 minutes there, but not on the two-to-three times slower machines of the same kind we have
seen."""

import os
import time
from pathlib import Path

import pytest

from nearid.book import profiles, runner

TARGET = os.environ.get("NEARID_CHECK_FULL", "")

pytestmark = pytest.mark.skipif(not TARGET, reason="the full-shape dry run runs under `make check-full` "
                                                   "(NEARID_CHECK_FULL=<scratch folder>)")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, root) -> Path:
    if TARGET in ("1", "true", "yes"):
        return tmp_path_factory.mktemp("check-full")
    folder = Path(TARGET) if Path(TARGET).is_absolute() else root / TARGET
    assert folder.resolve() != runner.default_out_dir(root).resolve(), "the dry run never writes the book's outputs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("chapter", sorted(profiles.CHAPTERS))
def test_full_profile_dry_run(chapter, root, mnist_root, scratch, monkeypatch):
    if "dry_run" not in profiles.CONSTRAINTS[chapter]:
        pytest.fail(f"chapter {chapter} has no dry_run parameter: add dry_run=DRY_RUN from "
                    "nearid.book.profiles.shared to its parameter module and honour it (COMMON.md)")
    monkeypatch.setenv("NEARID_TASK_CACHE", str(scratch / "tasks"))
    start = time.perf_counter()
    results = runner.run_chapter(chapter, "full", {"dry_run": True}, out_dir=scratch, force=True, root=root)
    print(f"{chapter}: full profile, dry run, {time.perf_counter() - start:.0f} s")
    assert results["profile"] == "full"
    assert (scratch / f"{chapter}.ipynb").is_file()
