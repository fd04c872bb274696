import numpy as np
import pytest
from scipy.stats import ortho_group

from nearid.data.procedural import sample_factors
from nearid.metrics.dci_mig import dci_disentanglement, dci_importance, discretise, mig


@pytest.fixture(scope="module")
def factors():
    return sample_factors("falcor3d", 1500, seed=0)


def _codes(F, seed=0):
    return F.astype(float) + 0.1 * np.random.default_rng(seed).standard_normal(F.shape)


def test_dci_planted(factors):
    Z = _codes(factors)
    assert dci_disentanglement(factors, Z) > 0.9
    rot = Z @ ortho_group.rvs(Z.shape[1], random_state=0)
    assert dci_disentanglement(factors, rot) < 0.6
    R = dci_importance(factors, Z)
    assert R.shape == (7, 7) and (R.argmax(0) == np.arange(7)).all()


def test_dci_known_importance():
    assert dci_disentanglement(None, None, importance=np.eye(3)) == pytest.approx(1.0)
    assert dci_disentanglement(None, None, importance=np.ones((3, 3))) == pytest.approx(0.0)
    # a latent split evenly over two of four sources: 1 - log(2)/log(4) = 0.5
    assert dci_disentanglement(None, None, importance=np.array([[1, 1, 0, 0.0]])) == pytest.approx(0.5)


def test_mig_planted(factors):
    assert mig(factors, _codes(factors)) > 0.8
    noise = np.random.default_rng(1).standard_normal((len(factors), 7))
    assert mig(factors, noise) < 0.05
    # two copies of every factor: no gap at all
    assert mig(factors, np.repeat(_codes(factors), 2, axis=1)) < 0.1


def test_discretise_twenty_bins():
    z = np.linspace(0, 1, 1000)[:, None]
    b = discretise(z)
    assert b.min() == 0 and b.max() == 19 and len(np.unique(b)) == 20
    assert (discretise(np.zeros((10, 1))) == 0).all()


def test_mig_needs_two_latents(factors):
    with pytest.raises(ValueError, match="at least 2 latents"):
        mig(factors, np.zeros((len(factors), 1)))
