"""Transform families, the errors that measure near-identifiability, similarity measures,
and ``compare(A, B)``.

The package has one module per job:

* :mod:`nearid.align.families` -- the estimators the book teaches (signed permutation,
  rigid, linear, ICA);
* :mod:`nearid.align.protocol` -- the families' names, the ICA protocol as one record
  (:func:`ica_settings`), the normalised error and the ICA efficiency;
* :mod:`nearid.align.measures` -- similarity measures from their papers (linear, debiased,
  minibatch and RBF CKA, CCA, SVCCA, PWCCA, RSA, mutual kNN, Procrustes shape metrics);
* :mod:`nearid.align.intervals` -- each measure's interval and permutation baseline;
* :mod:`nearid.align.result` -- :class:`AlignmentResult` and the text table ``nearid align``
  prints;
* :mod:`nearid.align.api` -- :func:`compare`, :func:`alignment_table`, :func:`compare_layers`;
* :mod:`nearid.align.engine` -- the streaming float32 engine behind them.

Everything public is importable from here: ``from nearid.align import compare, ICAAlignment``.
The estimators (and scikit-learn, which they subclass) load on first use, so that
``import nearid.align`` and ``nearid align --measures cka`` start in well under a second.
The identifiability scores of recovered sources (MCC, Amari distance) live in
:mod:`nearid.metrics.recovery`.
"""

from nearid.align.api import METRICS, alignment_table, compare, compare_layers
from nearid.align.engine import split_rows
from nearid.align.measures import (
    MEASURES,
    bures_distance,
    cca,
    debiased_cka,
    linear_cka,
    minibatch_cka,
    mutual_knn,
    procrustes_angle,
    pwcca,
    rbf_cka,
    rdm,
    rsa,
    svcca,
)
from nearid.align.protocol import (
    EFFICIENCY_MIN_GAP,
    FAMILIES,
    FAMILY_INFO,
    ICA_COMPONENTS,
    ICA_MAX_COMPONENTS,
    ICA_MAX_ITER,
    ICA_MAX_ROWS,
    PAPER_FAMILIES,
    PAPER_ORDER,
    ICA_FAMILY,
    LINEAR,
    PERMUTATION,
    RIGID,
    Family,
    ICASettings,
    check_pair,
    ica_efficiency,
    ica_settings,
    latent_diameter,
    normalised_error,
)
from nearid.align.result import AlignmentResult, format_alignment_table

_LAZY = ("ICAAlignment", "LinearAlignment", "RigidAlignment", "SignedPermutationAlignment", "abs_correlation",
         "make_alignment", "match_columns")


def __getattr__(name: str):
    """The estimators of :mod:`nearid.align.families`, imported (with scikit-learn) on first use."""
    if name in _LAZY:
        from nearid.align import families

        return getattr(families, name)
    raise AttributeError(f"module 'nearid.align' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


__all__ = [
    "EFFICIENCY_MIN_GAP", "FAMILIES", "FAMILY_INFO", "PAPER_FAMILIES", "PAPER_ORDER", "PERMUTATION", "RIGID",
    "LINEAR", "ICA_FAMILY", "ICA_COMPONENTS", "ICA_MAX_COMPONENTS",
    "ICA_MAX_ITER", "ICA_MAX_ROWS",
    "MEASURES", "METRICS", "AlignmentResult", "Family", "ICAAlignment", "ICASettings", "LinearAlignment", "RigidAlignment",
    "SignedPermutationAlignment", "abs_correlation", "alignment_table", "bures_distance", "cca", "check_pair",
    "compare", "compare_layers", "debiased_cka", "format_alignment_table", "ica_efficiency", "ica_settings",
    "latent_diameter", "linear_cka", "make_alignment", "match_columns", "minibatch_cka", "mutual_knn",
    "normalised_error", "procrustes_angle", "pwcca", "rbf_cka", "rdm", "rsa", "split_rows", "svcca",
]
