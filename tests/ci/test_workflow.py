"""The GitHub Actions workflow that tests, builds, verifies and publishes the book: checked
offline by zizmor (security audits: pinned actions, no credential persistence, least
privilege) and by check-jsonschema against GitHub's workflow schema, and read for the steps
the README promises."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name if (BIN / name).exists() else shutil.which(name)
    if path is None:  # in the lock (test extra): its absence is a broken set-up, not a skip
        pytest.fail(f"{name} is not installed: `make setup` installs it from requirements/lock.txt")
    return str(path)


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def test_workflow_matches_githubs_schema():
    done = _run(_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(WORKFLOW))
    assert done.returncode == 0, done.stdout + done.stderr


def test_schema_check_can_fail(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    stepz: []\n")
    done = _run(_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(bad))
    assert done.returncode != 0


def test_zizmor_finds_nothing():
    done = _run(_tool("zizmor"), "--offline", "--no-progress", str(WORKFLOW))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings" in done.stdout + done.stderr


def test_zizmor_can_fail(tmp_path):
    """An unpinned action and persisted credentials are findings (so the test above can fail)."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("name: x\non: push\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-24.04\n"
                   "    permissions:\n      contents: read\n    steps:\n      - uses: actions/checkout@v4\n")
    done = _run(_tool("zizmor"), "--offline", "--no-progress", str(bad))
    assert done.returncode != 0 and "unpinned" in done.stdout + done.stderr


def test_workflow_runs_what_the_readme_says():
    wf = _workflow()
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as True
    assert {"push", "pull_request"} <= set(triggers)
    assert wf["permissions"] == {}  # every job asks for what it needs, nothing more
    jobs = wf["jobs"]
    runs = {name: " ; ".join(s.get("run", "") for s in job["steps"]) for name, job in jobs.items()}
    assert "make test" in runs["test"]
    assert "make book" in runs["book"] and "nearid verify --profile quick" in runs["book"]
    upload = [s for s in jobs["book"]["steps"] if "upload-pages-artifact" in s.get("uses", "")]
    assert upload and upload[0]["with"]["path"] == "_build/html"
    deploy = jobs["deploy"]
    assert "refs/heads/main" in deploy["if"] and deploy["permissions"] == {"pages": "write", "id-token": "write"}
    readme = (ROOT / "README.md").read_text()
    assert ".github/workflows/book.yml" in readme
