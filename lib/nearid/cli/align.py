"""``nearid align A B``: Table 1 for anyone's two embedding files, or a layer-by-layer map.

Rows of A and B must be the same inputs in the same order. The command fits every family on
a random ``--fit-fraction`` of the rows and reports normalised errors on the rest, the ICA
efficiency and linear CKA on the fit rows: a readable table, or one JSON object with
``--json``. ``--families`` and ``--measures`` choose what runs (any subset; FastICA only
with ``ica``), ``--intervals`` adds 95% intervals and the value with B's rows shuffled, and
the output states the rows each measure used and the BLAS thread count. With
``--layers`` it compares every array of A's file with every array of B's and prints the
matrix (``--plot`` draws it). Files: .npy, .npz, .pt, .safetensors, .h5, .parquet; pick one
array of a multi-array file as ``file.npz:key``. Bad input (missing file or key, unknown
type, pickled objects, different row counts, NaN/inf, too few rows, constant, not 2-D) is
reported on stderr with exit code 2, and nothing is written.

The work is :func:`nearid.align.compare` (and :func:`nearid.align.compare_layers`); this
module only reads files, prints and plots.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings

import numpy as np

from nearid.align import (
    FAMILIES,
    PAPER_FAMILIES,
    ICA_COMPONENTS,
    ICA_MAX_COMPONENTS,
    ICA_MAX_ITER,
    ICA_MAX_ROWS,
    MEASURES,
    METRICS,
    compare,
    compare_layers,
    format_alignment_table,
)
from nearid.align.intervals import MEASURE_PARAMS, N_PERMUTATIONS, N_RESAMPLES
from nearid.align.measures import MAX_ROWS
from nearid.data.embedding_files import SUFFIXES, EmbeddingFileError, load_embeddings, load_layers

JSON_KEYS = (*PAPER_FAMILIES, "ica_efficiency", "ica_efficiency_caveat", "cka", "n_fit",
             "n_eval",
             "ica_components", "ica_variance", "ica_converged", "ica_max_components", "ica_components_by_rule",
             "ica_cap_bound", "fallbacks", "dim_a", "dim_b", "dtype", "seconds", "timings", "measures",
             "measure_rows", "threads")
EXIT_BAD_INPUT = 2
DESCRIPTION = ("Compare two embeddings of the same inputs: fit signed-permutation, rigid, "
               "linear and ICA maps from A to B on a fit split, report the mean l2 error on "
               "the held-out rows normalised by B's diameter (lower = more alike), the ICA "
               "efficiency (perm - ica)/(perm - rigid), and linear CKA on the fit rows; "
               "--families and --measures choose what runs (debiased, minibatch and RBF CKA, "
               "CCA, SVCCA, PWCCA, RSA, mutual kNN, Procrustes and Bures shape metrics), "
               "--intervals adds 95%% intervals and the value for unrelated rows. With "
               "--layers, compare every layer of A with every layer of B under one --metric.")
FILES_HELP = f"{', '.join(SUFFIXES)}; one array of a multi-array file as FILE:KEY"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``align`` on the main CLI's subparsers; returns the new parser."""
    p = subparsers.add_parser("align", help="alignment table (Table 1) for two embedding files",
                              description=DESCRIPTION)
    p.add_argument("a", metavar="A", help=f"embeddings of model A ({FILES_HELP})")
    p.add_argument("b", metavar="B", help="embeddings of model B, same rows in the same order")
    p.add_argument("--layers", action="store_true",
                   help="A and B are multi-array files (.npz, .pt, .safetensors, .h5): compare every "
                        "array of A with every array of B and print the matrix")
    p.add_argument("--families", type=_names(FAMILIES, "family"), default=PAPER_FAMILIES, metavar="LIST",
                   help=f"comma-separated transform families to fit, any of {','.join(FAMILIES)}, or 'none' "
                        f"(default the paper's {','.join(PAPER_FAMILIES)}; FastICA runs only with ica)")
    p.add_argument("--measures", type=_names(tuple(MEASURES), "measure"), default=("cka",), metavar="LIST",
                   help=f"comma-separated similarity measures, any of {','.join(MEASURES)}, or 'none' "
                        "(default cka: linear CKA on the fit rows). Fitted ones (cca, svcca, pwcca) are fitted on "
                        "the fit rows and scored on the held-out rows; n x n ones (rbf_cka, rsa, mutual_knn) use "
                        "at most --max-rows of the fit rows; the rest use every fit row")
    p.add_argument("--max-rows", type=int, default=MAX_ROWS,
                   help=f"rows of the n x n measures (default {MAX_ROWS}; 0 = every fit row)")
    p.add_argument("--measure-param", action="append", default=[], metavar="KEY=VALUE",
                   help=f"a measure's option, repeatable: {', '.join(f'{k} ({v})' for k, v in MEASURE_PARAMS.items())}")
    p.add_argument("--intervals", action="store_true",
                   help="add a 95%% interval to every error and measure (half-samples of the rows) and, to every "
                        "measure, its value with B's rows shuffled (what unrelated looks like at this n and width); "
                        "costs --resamples half-measures and --permutations whole measures each")
    p.add_argument("--resamples", type=int, default=N_RESAMPLES,
                   help=f"half-samples per interval (default {N_RESAMPLES})")
    p.add_argument("--permutations", type=int, default=N_PERMUTATIONS,
                   help=f"shuffles per baseline (default {N_PERMUTATIONS})")
    p.add_argument("--metric", choices=METRICS, default="rigid",
                   help="with --layers: the number in each cell (an error, lower = more alike; or "
                        "a measure; default rigid)")
    p.add_argument("--plot", metavar="OUT.png",
                   help="with --layers: write the matrix as a labelled heatmap (png, pdf or svg)")
    p.add_argument("--fit-fraction", type=float, default=0.5,
                   help="share of rows used to fit the maps (default 0.5); the rest is held out")
    p.add_argument("--seed", type=int, default=0, help="seed of the split and of ICA (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--ica-components", type=_components, default=ICA_COMPONENTS,
                   help="how many whitened components each side keeps before ICA: a share of the "
                        "fit rows' variance in (0, 1], a count >= 1, or 'all' (default "
                        f"{ICA_COMPONENTS}; at most one component per 10 fit rows, and --ica-max-components). "
                        "B's directions outside its kept components are predicted by the signed-permutation "
                        "map, so the ICA family pays no error the permutation family does not: the families "
                        "are scored on equal terms")
    p.add_argument("--ica-max-rows", type=int, default=ICA_MAX_ROWS,
                   help=f"fit FastICA on at most this many fit rows (default {ICA_MAX_ROWS}; 0 = all)")
    p.add_argument("--ica-max-components", type=int, default=ICA_MAX_COMPONENTS,
                   help=f"at most this many whitened components per side, whatever --ica-components asks "
                        f"(default {ICA_MAX_COMPONENTS}; 0 = no cap). It bounds FastICA's cost on wide "
                        "embeddings (4 x rows x k^2 per iteration) and keeps rows per component high; the "
                        "output says when it bound")
    p.add_argument("--float64", action="store_true",
                   help="compute in float64 even for float32 inputs (default: float32 where the data "
                        "allow it, which the output's dtype reports)")
    p.add_argument("--threads", type=int, default=None,
                   help="BLAS threads for the large matrix products (default: the cores idle now, measured "
                        "over 0.2 s, at most the BLAS default; on 2 cores that other jobs kept busy, 1 thread "
                        "ran twice as fast as 2). The output states the count")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (it is also off with --json when stderr is not a terminal)")
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


def _names(allowed: tuple[str, ...], noun: str):
    """argparse type of --families and --measures: a comma-separated subset, or 'none'."""
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if names in ((), ("none",)):
            return ()
        bad = [n for n in names if n not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {noun} {', '.join(map(repr, bad))}; valid: "
                                             f"{', '.join(allowed)} (or none)")
        return names
    return parse


def _busy_cores(cores: set[int], interval: float = 0.2) -> float | None:
    """How many of ``cores`` other processes keep busy now: their busy share over
    ``interval`` seconds, summed (psutil, else /proc/stat); None where neither is readable."""
    try:
        import psutil

        per_cpu = psutil.cpu_percent(interval=interval, percpu=True)
        return sum(per_cpu[c] for c in cores if c < len(per_cpu)) / 100.0
    except ImportError:
        pass
    import time

    def sample():
        out = {}
        with open("/proc/stat") as fh:
            for line in fh:
                head, *fields = line.split()
                if head.startswith("cpu") and head != "cpu":
                    ticks = list(map(int, fields))
                    out[int(head[3:])] = (sum(ticks), ticks[3] + ticks[4])  # total, idle + iowait
        return out

    try:
        first = sample()
        time.sleep(interval)
        second = sample()
    except OSError:
        return None
    busy = 0.0
    for c in cores:
        if c in first and c in second and second[c][0] > first[c][0]:
            total, idle = second[c][0] - first[c][0], second[c][1] - first[c][1]
            busy += 1 - idle / total
    return busy


def _idle_threads() -> int | None:
    """BLAS threads for a machine others share: the cores idle now (at least 1), or None (no
    change) when that is not fewer than BLAS uses already.

    Measured over 0.2 s, not from the load average, which lags by minutes: on an idle 2-core
    machine a minute after other work it still said "busy" and ran one thread. Multi-threaded
    OpenBLAS spin-waits for cores other processes hold: on 2 shared cores at load 2-10,
    2 threads made every product of ``nearid align`` about twice as slow as 1."""
    from threadpoolctl import threadpool_info

    try:
        cores = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return None
    busy = _busy_cores(cores)
    if busy is None:
        return None
    idle = max(1, int(round(len(cores) - busy)))
    return idle if idle < _blas_threads(threadpool_info()) else None


def _blas_threads(info) -> int:
    return max((i.get("num_threads", 1) for i in info if i.get("user_api") == "blas"), default=1)


def _measure_params(items: list[str]) -> dict:
    """--measure-param KEY=VALUE items as a dict (numbers converted), checked."""
    out: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in MEASURE_PARAMS:
            raise ValueError(f"--measure-param {item!r}: expected KEY=VALUE with KEY one of "
                             f"{', '.join(MEASURE_PARAMS)}")
        for kind in (int, float):
            try:
                out[key] = kind(value)
                break
            except ValueError:
                out[key] = value
    return out


def _options(args) -> dict:
    if args.ica_max_rows < 0:
        raise ValueError("--ica-max-rows must be >= 0 (0 = no bound)")
    if args.ica_max_components < 0:
        raise ValueError("--ica-max-components must be >= 0 (0 = no cap)")
    if args.threads is not None and args.threads < 1:
        raise ValueError("--threads must be >= 1")
    if args.max_rows < 0 or 0 < args.max_rows < 4:
        raise ValueError("--max-rows must be 0 (every fit row) or at least 4")
    return dict(fit_fraction=args.fit_fraction, seed=args.seed, ica_components=args.ica_components,
                ica_max_rows=args.ica_max_rows or None, ica_max_iter=ICA_MAX_ITER,
                ica_max_components=args.ica_max_components or None,
                dtype="float64" if args.float64 else None,
                progress=not args.no_progress and not (args.json and not sys.stderr.isatty()))


def _pair_options(args) -> dict:
    """What only the two-file comparison takes: the selection, the measures' options, intervals."""
    if args.resamples < 2 or args.permutations < 1:
        raise ValueError("--resamples must be >= 2 and --permutations >= 1")
    return dict(families=args.families, measures=args.measures, max_rows=args.max_rows or None,
                measure_params=_measure_params(args.measure_param), intervals=args.intervals,
                n_resamples=args.resamples, n_permutations=args.permutations)


def compute(a_path: str, b_path: str, **options) -> dict:
    """Load two files and :func:`nearid.align.compare` them; raises ValueError on bad input.
    ``options``: compare's keyword arguments, as the command's options set them (its declared
    ICA protocol, the families, the measures and their options)."""
    A = load_embeddings(a_path)
    B = load_embeddings(b_path)
    for label, X, path in (("A", A, a_path), ("B", B, b_path)):
        if X.ndim != 2:
            raise EmbeddingFileError(f"{label} ({path}): expected a 2-D array (rows = inputs, columns = "
                                     f"features), got shape {X.shape}")
    if A.shape[0] != B.shape[0]:
        raise EmbeddingFileError(f"A has {A.shape[0]} rows and B has {B.shape[0]}; rows must be "
                                 "the same inputs in the same order")
    res = compare(A, B, **options)
    out = res.to_dict()
    out.update(ica_efficiency_caveat=efficiency_caveat(res.row_errors, res.ica_efficiency))
    out.update(measures=list(res.measures), measure_rows=dict(res.measure_rows))
    out.update(ica_converged=None if res.ica_converged is None else list(res.ica_converged), dtype=res.dtype,
               seconds=res.seconds, fallbacks=list(res.fallbacks), timings=dict(res.timings))
    return out


CAVEAT_SHARE = 0.05  # a perm - rigid gap below this share of the permutation error is "small"


def efficiency_caveat(row_errors: dict, efficiency: float) -> str | None:
    """Why the ICA efficiency says little here, in words; None when its denominator is clear.

    The efficiency divides by the perm - rigid gap. Where that gap is within twice its own
    standard error over the held-out rows (paired), or under 5% of the permutation error, the
    two maps are about equally good (two unrelated inputs: both bad), and the ratio magnifies
    noise (-652% on two unrelated 2-column inputs). Only ``nearid align`` reports this: the
    efficiency itself is computed as before."""
    if efficiency is None or math.isnan(efficiency) or not {"permutation", "rigid"} <= set(row_errors):
        return None
    diff = np.asarray(row_errors["permutation"]) - np.asarray(row_errors["rigid"])
    gap, perm = float(diff.mean()), float(np.mean(row_errors["permutation"]))
    se = float(diff.std(ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else math.inf
    if abs(gap) <= 2 * se:
        return (f"perm - rigid = {gap:.2g} is within twice its standard error ({se:.2g}) over the {diff.size} "
                "held-out rows: the two maps fit about equally well, and the ratio magnifies noise")
    if abs(gap) < CAVEAT_SHARE * perm:
        return (f"perm - rigid = {gap:.2g} is under {100 * CAVEAT_SHARE:.0f}% of the permutation error ({perm:.3g}): "
                "there is little gap for ICA to close, and the ratio magnifies small differences")
    return None


def compute_layers(a_path: str, b_path: str, metric: str = "rigid", **options):
    """Load two multi-array files and :func:`nearid.align.compare_layers` them (a DataFrame)."""
    layers_a, layers_b = load_layers(a_path), load_layers(b_path)
    return compare_layers(layers_a, layers_b, metric=metric, **options)


def _check_plot_path(path: str | None) -> None:
    if path is None:
        return
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in (".png", ".pdf", ".svg"):
        raise ValueError(f"--plot {path}: unsupported image type {suffix or '(none)'!r}; valid: .png, .pdf, .svg")
    from nearid.fileio import new_file_problem

    problem = new_file_problem(path)  # checked before minutes of work, not after
    if problem:
        raise ValueError(f"--plot {path}: cannot write the heatmap there: {problem}; allowed: a new or regular "
                         "file in a folder you can write")


def _layers_json(df) -> dict:
    return {"metric": df.attrs["metric"], "lower_is_better": df.attrs["lower_is_better"],
            "a_layers": list(df.index), "b_layers": list(df.columns), "values": df.to_numpy().tolist(),
            "n_fit": df.attrs["n_fit"], "n_eval": df.attrs["n_eval"], "dtype": df.attrs["dtype"],
            "fallbacks": list(df.attrs.get("fallbacks", [])), "threads": df.attrs.get("threads")}


def _layers_text(df) -> str:
    from nearid.book.plotting import METRIC_LABELS

    a = df.attrs
    how = "lower = more alike" if a["lower_is_better"] else "higher = more alike"
    rows = (f"computed on the {a['n_fit']} fit rows" if a["metric"] == "cka" else
            a["measure_rows"] if "measure_rows" in a else
            f"fitted on {a['n_fit']} rows, evaluated on {a['n_eval']} held-out rows")
    head = f"{METRIC_LABELS.get(a['metric'], a['metric'])} ({how}); rows: A's layers, columns: B's; {rows}"
    notes = "".join(f"\nnumerical fallback: {note}" for note in a.get("fallbacks", []))
    return head + "\n" + df.to_string(float_format=lambda v: f"{v:.3f}") + notes


def run(args: argparse.Namespace) -> int:
    """Entry point for ``nearid align``; returns the exit code."""
    from nearid.ica_protocol import LowVarianceWarning

    try:
        if not args.layers and (args.plot or args.metric != "rigid"):
            raise ValueError("--metric and --plot go with --layers")
        _check_plot_path(args.plot)
        options = _options(args)
        from threadpoolctl import threadpool_limits

        if args.layers and (args.intervals or args.families != PAPER_FAMILIES or args.measures != ("cka",)):
            raise ValueError("--families, --measures and --intervals go with two files, not --layers "
                             "(--metric chooses the one number of a layer grid)")
        pair = {} if args.layers else _pair_options(args)
        if args.layers and args.metric in MEASURES:
            options.update(max_rows=args.max_rows or None, measure_params=_measure_params(args.measure_param))
        from threadpoolctl import threadpool_info

        with warnings.catch_warnings(), threadpool_limits(limits=args.threads or _idle_threads()):
            threads = _blas_threads(threadpool_info())
            warnings.simplefilter("ignore", LowVarianceWarning)  # the table prints its own warning line
            if args.layers:
                res = compute_layers(args.a, args.b, metric=args.metric, **options)
                res.attrs["threads"] = threads
            else:
                res = compute(args.a, args.b, **options, **pair)
                res["threads"] = threads
    except ValueError as exc:  # EmbeddingFileError is a ValueError too
        print(f"nearid align: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from nearid import kernels
    from nearid.book.results import to_jsonable

    kernels.configure_torch()  # a .pt input loaded torch: record it as nearid runs it

    if args.layers:
        if args.plot:
            from nearid.book.plotting import plot_layer_matrix

            plot_layer_matrix(res, args.plot)
        print(json.dumps(to_jsonable({**_layers_json(res), "kernels": kernels.record()}))
              if args.json else _layers_text(res))
        if args.plot and not args.json:
            print(f"heatmap: {args.plot}")
        return 0
    if args.json:
        # which CPU kernels computed it (nearid.kernels): portable between CPUs, or not
        extra = {k: res[k] for k in (*args.families, *res["measures"], "intervals", "baselines")
                 if k in res and k not in JSON_KEYS}  # a family asked for by name beyond the paper's
        print(json.dumps(to_jsonable({**{k: res.get(k) for k in JSON_KEYS}, **extra, "kernels": kernels.record()})))
    else:
        print(format_alignment_table(res))
        if res.get("ica_efficiency_caveat"):
            print(f"caveat: the ica efficiency says little here: {res['ica_efficiency_caveat']}")
        print(f"({res['seconds']:.1f} s; cross-products in {res['dtype']}; {res['threads']} BLAS "
              f"thread{'s' if res['threads'] != 1 else ''})")
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
