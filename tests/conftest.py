"""Shared fixtures: the repository root, and MNIST provisioned once per session."""

import os
from pathlib import Path

import pytest

import nearid  # noqa: F401  (before any test module loads numpy or torch: it pins their CPU kernels)

ROOT = Path(__file__).resolve().parents[1]
# The task cache authenticates entries with a secret (nearid.tasks.cache_secret); tests and the
# chapters they run use this one rather than creating the user's ~/.config/nearid key file.
os.environ.setdefault("NEARID_CACHE_KEY", "nearid-test-suite")


@pytest.fixture(autouse=True)
def _nearid_environment_is_left_as_found():
    """A test (or the code it calls) that leaves a NEARID_* variable behind changes what every
    later test in the process does: a leaked NEARID_TASK_CACHE served one test's cached results
    to another. Fail the test that leaked it, not the one that tripped over it."""
    before = {k: v for k, v in os.environ.items() if k.startswith("NEARID_")}
    yield
    after = {k: v for k, v in os.environ.items() if k.startswith("NEARID_")}
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"the test left these environment variables changed: {', '.join(changed)}"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def mnist_root(root) -> Path:
    """The project's data folder, provisioned (idempotent) so chapters and tests can read MNIST."""
    from nearid.data.mnist import provision_mnist
    from nearid.data.text import provision_shakespeare

    provision_mnist(root / "data")
    provision_shakespeare(root / "data")
    return root / "data"
