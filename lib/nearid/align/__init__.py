"""Transform families, the errors that measure near-identifiability, and ``compare(A, B)``.

The package has one module per job:

* :mod:`nearid.align.families` -- the estimators the book teaches (signed permutation,
  rigid, linear, ICA), the normalised error, the ICA efficiency, linear CKA, and the ICA
  protocol as one record (:func:`ica_settings`);
* :mod:`nearid.align.result` -- :class:`AlignmentResult` and the text table ``nearid align``
  prints;
* :mod:`nearid.align.api` -- :func:`compare`, :func:`alignment_table`, :func:`compare_layers`;
* :mod:`nearid.align.engine` -- the streaming float32 engine behind them.

Everything public is importable from here: ``from nearid.align import compare, ICAAlignment``.
The identifiability scores of recovered sources (MCC, Amari distance) live in
:mod:`nearid.metrics.recovery`.
"""

from nearid.align.api import METRICS, alignment_table, compare, compare_layers
from nearid.align.engine import split_rows
from nearid.align.families import (
    EFFICIENCY_MIN_GAP,
    FAMILIES,
    ICA_COMPONENTS,
    ICA_MAX_COMPONENTS,
    ICA_MAX_ITER,
    ICA_MAX_ROWS,
    ICAAlignment,
    ICASettings,
    LinearAlignment,
    RigidAlignment,
    SignedPermutationAlignment,
    abs_correlation,
    check_pair,
    ica_efficiency,
    ica_settings,
    latent_diameter,
    linear_cka,
    make_alignment,
    match_columns,
    normalised_error,
)
from nearid.align.result import AlignmentResult, format_alignment_table

__all__ = [
    "EFFICIENCY_MIN_GAP", "FAMILIES", "ICA_COMPONENTS", "ICA_MAX_COMPONENTS", "ICA_MAX_ITER", "ICA_MAX_ROWS",
    "METRICS", "AlignmentResult", "ICAAlignment", "ICASettings", "LinearAlignment", "RigidAlignment",
    "SignedPermutationAlignment", "abs_correlation", "alignment_table", "check_pair", "compare", "compare_layers",
    "format_alignment_table", "ica_efficiency", "ica_settings", "latent_diameter", "linear_cka", "make_alignment",
    "match_columns", "normalised_error", "split_rows",
]
