"""Two `nearid run 01` at once, with different seeds: one waits for the other (the chapter's
lock), both succeed, and the outputs, key and timings left behind belong together.

Before the lock they shared their temporary files: one run died with "[Errno 2] ...
.running.json" while timings.json said "ok" for both, the JSON came from seed 1 and the .key
from seed 0, and the next cached run served seed 1's numbers for seed 0."""

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

NEARID = str(Path(sys.executable).with_name("nearid"))


TASK_SUMMARY = re.compile(r"\d+ tasks: ")  # the task runner's summary line, for the terminal


@pytest.fixture
def scratch_root(tmp_path, root):
    (tmp_path / "lib" / "nearid").mkdir(parents=True)
    (tmp_path / "notebooks").symlink_to(root / "notebooks")
    return tmp_path


def _nearid(scratch_root, *argv, **popen):
    env = {**os.environ, "NEARID_ROOT": str(scratch_root)}
    return subprocess.Popen([NEARID, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=scratch_root, env=env, **popen)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_two_runs_of_one_chapter_at_once(scratch_root):
    out = scratch_root / "book" / "executed"
    first = _nearid(scratch_root, "run", "01", "--profile", "smoke", "--force", "-p", "seed=0")
    time.sleep(1.0)
    second = _nearid(scratch_root, "run", "01", "--profile", "smoke", "--force", "-p", "seed=1")
    results = [p.communicate(timeout=900) for p in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], results
    for stdout, _ in results:
        status = [line for line in stdout.splitlines() if not TASK_SUMMARY.match(line)]
        assert status[0].startswith("01_definitions: executed in "), stdout
    assert "waiting for it to finish" in results[0][1] + results[1][1], "one of them waited for the other"

    key = json.loads((out / "01_definitions.key").read_text())
    doc = json.loads((out / "01_definitions.json").read_text())
    assert key["params"] == doc["params"], "the key and the JSON come from one run"
    assert key["outputs"] == {"ipynb": _sha(out / "01_definitions.ipynb"), "json": _sha(out / "01_definitions.json")}
    final = doc["params"]["seed"]
    timings = json.loads((out / "timings.json").read_text())
    assert sorted((t["overrides"]["seed"], t["status"]) for t in timings) == [(0, "ok"), (1, "ok")]
    assert [t["overrides"]["seed"] for t in timings][-1] == final, "the last to finish wrote the outputs"
    assert not list(out.glob(".*running*"))

    # the next run of each seed serves that seed's numbers: the last one's from the cache
    for seed, how in ((final, "cached (nothing ran)"), (1 - final, "executed in ")):
        run = _nearid(scratch_root, "run", "01", "--profile", "smoke", "-p", f"seed={seed}", "--json")
        stdout, stderr = run.communicate(timeout=900)
        assert run.returncode == 0, stderr
        assert json.loads(stdout)["params"]["seed"] == seed
        status = [line for line in stderr.splitlines() if not TASK_SUMMARY.match(line)]
        assert status[0].startswith(f"01_definitions: {how}"), stderr
