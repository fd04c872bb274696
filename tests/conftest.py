"""Shared fixtures: the repository root, and MNIST provisioned once per session."""

import os
from pathlib import Path

import pytest

import nearid  # noqa: F401  (before any test module loads numpy or torch: it pins their CPU kernels)

ROOT = Path(__file__).resolve().parents[1]
# The task cache authenticates entries with a secret (nearid.tasks.cache_secret); tests and the
# chapters they run use this one rather than creating the user's ~/.config/nearid key file.
os.environ.setdefault("NEARID_CACHE_KEY", "nearid-test-suite")


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
