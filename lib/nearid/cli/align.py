"""``nearid align A B``: Table 1 for anyone's two embedding files.

Rows of A and B must be the same inputs in the same order. The command fits every family on
a random ``--fit-fraction`` of the rows and reports normalised errors on the rest, the ICA
efficiency and linear CKA: a readable table, or one JSON object with ``--json``. Bad input
(missing file, different row counts, NaN/inf, too few rows, not 2-D) is reported on stderr
with exit code 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

import numpy as np

from nearid.align import ICA_COMPONENTS, ICA_MAX_ITER, ICA_MAX_ROWS, alignment_table, format_alignment_table
from nearid.data.embedding_files import EmbeddingFileError, check_matrix, load_embeddings

JSON_KEYS = ("permutation", "rigid", "linear", "ica", "ica_efficiency", "cka", "n_fit", "n_eval",
             "ica_components", "ica_variance")
EXIT_BAD_INPUT = 2
DESCRIPTION = ("Compare two embeddings of the same inputs: fit signed-permutation, rigid, "
               "linear and ICA maps from A to B on a fit split, report the mean l2 error on "
               "the held-out rows normalised by B's diameter (lower = more alike), the ICA "
               "efficiency (perm - ica)/(perm - rigid), and linear CKA.")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``align`` on the main CLI's subparsers; returns the new parser."""
    p = subparsers.add_parser("align", help="alignment table (Table 1) for two embedding files",
                              description=DESCRIPTION)
    p.add_argument("a", metavar="A", help="embeddings of model A (.npy, .npz or .parquet)")
    p.add_argument("b", metavar="B", help="embeddings of model B, same rows in the same order")
    p.add_argument("--fit-fraction", type=float, default=0.5,
                   help="share of rows used to fit the maps (default 0.5); the rest is held out")
    p.add_argument("--seed", type=int, default=0, help="seed of the split and of ICA (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--ica-components", type=_components, default=ICA_COMPONENTS,
                   help="how many whitened components each side keeps before ICA: a share of the "
                        "fit rows' variance in (0, 1], a count >= 1, or 'all' (default "
                        f"{ICA_COMPONENTS}; at most one component per 10 fit rows)")
    p.add_argument("--ica-max-rows", type=int, default=ICA_MAX_ROWS,
                   help=f"fit ICA on at most this many fit rows (default {ICA_MAX_ROWS}; 0 = all)")
    p.set_defaults(func=run)
    return p


def _components(text: str) -> float | int | str:
    """--ica-components: 'all', an int >= 1, or a share in (0, 1]."""
    if text == "all":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'all', a count or a share in (0, 1], got {text!r}") from None
    if value.is_integer() and value >= 1:
        return int(value)
    if 0 < value <= 1:
        return value
    raise argparse.ArgumentTypeError(f"expected 'all', a count >= 1 or a share in (0, 1], got {text!r}")


def _load(path: str, label: str) -> np.ndarray:
    # float64 once, here, and drop the file's array: alignment_table then copies nothing
    X = check_matrix(load_embeddings(path), f"{label} ({path})")
    return X if X.dtype == np.float64 else X.astype(np.float64)


def compute(a_path: str, b_path: str, fit_fraction: float = 0.5, seed: int = 0,
            ica_components: float | int | str = ICA_COMPONENTS, ica_max_rows: int = ICA_MAX_ROWS) -> dict:
    """Load, validate and align; raises ValueError (incl. EmbeddingFileError) on bad input."""
    if ica_max_rows < 0:
        raise ValueError("--ica-max-rows must be >= 0 (0 = no bound)")
    A = _load(a_path, "A")
    B = _load(b_path, "B")
    if A.shape[0] != B.shape[0]:
        raise EmbeddingFileError(f"A has {A.shape[0]} rows and B has {B.shape[0]}; rows must be "
                                 "the same inputs in the same order")
    # one BLAS thread: on a shared machine, multi-threaded OpenBLAS spent most of a 100k x 768
    # run spin-waiting (64 s -> 15 s at 20k rows); the numbers are the same
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        table = alignment_table(A, B, fit_fraction=fit_fraction, seed=seed,
                                ica_components=ica_components,
                                ica_max_rows=ica_max_rows or None, ica_max_iter=ICA_MAX_ITER)
    return {k: table.get(k, float("nan")) for k in JSON_KEYS} | {"dim_a": A.shape[1],
                                                                 "dim_b": B.shape[1]}


def run(args: argparse.Namespace) -> int:
    """Entry point for ``nearid align``; returns the exit code."""
    try:
        with warnings.catch_warnings():  # FastICA's iteration cap is reported, not warned
            warnings.simplefilter("ignore")
            res = compute(args.a, args.b, fit_fraction=args.fit_fraction, seed=args.seed,
                          ica_components=args.ica_components, ica_max_rows=args.ica_max_rows)
    except ValueError as exc:  # EmbeddingFileError is a ValueError too
        print(f"nearid align: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        from nearid.book.results import to_jsonable

        print(json.dumps(to_jsonable({k: res[k] for k in JSON_KEYS})))
    else:
        print(format_alignment_table(res))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone ``python -m nearid.cli.align A B``, same behaviour as ``nearid align``."""
    parser = argparse.ArgumentParser(prog="nearid")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["align", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
