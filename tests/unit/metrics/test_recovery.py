"""Recovery of known sources: MCC and the Amari distance against known answers."""

import numpy as np
import pytest

from nearid.data.toy import random_orthogonal
from nearid.metrics.recovery import amari_distance, mean_corr_coef


def test_mcc_and_amari_known_answers():
    rng = np.random.default_rng(0)
    A = rng.laplace(size=(400, 4))
    P = np.eye(4)[[1, 3, 0, 2]] * np.array([1, -1, 1, -1])
    assert mean_corr_coef(A @ P, A) == pytest.approx(1.0)
    assert amari_distance(np.linalg.inv(P), P) == pytest.approx(0.0, abs=1e-12)
    Q = random_orthogonal(4, rng)
    assert amari_distance(np.eye(4), Q) > 0.2
    assert mean_corr_coef(A @ Q, A) < 0.95


def test_mcc_checks_its_inputs():
    with pytest.raises(ValueError, match="same number of rows"):
        mean_corr_coef(np.zeros((5, 2)), np.zeros((4, 2)))


def test_amari_needs_a_square_product():
    with pytest.raises(ValueError, match="square"):
        amari_distance(np.eye(3), np.ones((3, 2)))
