"""``calibview slices FILE --run R --by COLUMN``: every metric per slice of a metadata column (or of the true label,
``--by class``), with paired bootstrap intervals, the difference to the whole split and a flag when the ECE
difference's interval excludes 0 (see calibview.core.evaluation.slices)."""

from __future__ import annotations

import argparse
import sys

from calibview.cli.options import add_eval_options, engine_for, requests_from_args, settings_from_args
from calibview.cli.shared import compute_each

HELP = "every metric per slice of a metadata column (or --by class), its difference to the whole split, flags"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The evaluation options, the column to slice by, where the records go and the slices' own settings."""
    from calibview.core.evaluation.defaults import MIN_SLICE, SLICE_BINS      # plain data: no numpy, no torch

    add_eval_options(p)
    p.add_argument("--by", required=True, metavar="COLUMN",
                   help="metadata column of the evaluation split (see `calibview runs`), 'class' for the label, or "
                        "'epistemic' (a members run) for the terciles of the members' mutual information")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the records as JSON to stdout")
    out.add_argument("--out", "-o", default=None, metavar="DIR", help="write DIR/slices.csv")
    p.add_argument("--slice-bins", type=int, default=SLICE_BINS,
                   help=f"quantile groups of a float column (default {SLICE_BINS})")
    p.add_argument("--min-slice", type=int, default=MIN_SLICE,
                   help=f"slices with fewer samples get no interval and no flag (default {MIN_SLICE})")
    p.add_argument("--smooth-intervals", action="store_true",
                   help="SmoothECE/CAL intervals per slice even for more than 16 slices (slow: a grid per resample)")


def run(args) -> int:
    """Evaluate every slice of every run, then print the table, the JSON records or write slices.csv."""
    from pathlib import Path

    from calibview.core.errors import CalibviewError
    from calibview.core.io.safe_io import atomic_write
    from calibview.core.reports.tables import metrics_json
    from calibview.core.evaluation.slices import evaluate_slices
    from calibview.core.reports.contrasts import slices_csv

    if len(settings_from_args(args)) > 1:
        raise CalibviewError("slices takes one --bins, --bandwidth and --kernel, not a list (an ablation).")
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise CalibviewError(f"--out {args.out} exists and is not a directory; give a directory to write into.")
    with engine_for(args) as engine:
        results = compute_each(
            requests_from_args(args), lambda req: req.run,
            lambda req, bar, cancel: evaluate_slices(engine, req, args.by, slice_bins=args.slice_bins,
                                                     min_slice=args.min_slice,
                                                     smooth_intervals=True if args.smooth_intervals else None,
                                                     progress=bar, cancel=cancel), quiet=args.quiet)
    records = [rec for res in results for rec in res.records]
    if args.json:
        sys.stdout.write(metrics_json(records))
    elif args.out:
        path = Path(args.out) / "slices.csv"
        atomic_write(path, slices_csv(records))
        print(f"wrote {path}")
    else:
        _print_table(records)
    return 0


def _print_table(records) -> None:
    def iv(lo, hi) -> str:
        return f"[{100 * lo:6.2f}, {100 * hi:6.2f}]" if lo == lo and hi == hi else " " * 16

    def name_of(r) -> str:
        return "(whole split)" if r["slice"] is None else str(r["slice"])

    domains = len({r["split"] for r in records}) > 1          # --eval-split test,deploy: say which split
    w = max([22] + [len(name_of(r)) for r in records])       # never cut a slice name
    head = f"{'run':24s} " + ("split      " if domains else "") + f"{'calibrator':10s} {'slice':{w}s} {'n':>7s} " \
        f"{'ECE %':>7s} {'interval':16s} {'delta %':>8s} {'interval':16s} flag"
    print(head)
    for r in records:
        name = name_of(r)
        run = f"{r['model']}/{r['dataset']}" if r["dataset"] else r["model"]
        flag = ("over" if r["delta_ece_lo"] > 0 else "under") if r["flagged"] else ""
        split = f"{r['split'][:10]:10s} " if domains else ""
        print(f"{run[:24]:24s} {split}{r['calibrator'][:10]:10s} {name:{w}s} {r['n']:7d} {100 * r['ece']:7.2f} "
              f"{iv(r['ece_lo'], r['ece_hi'])} {100 * r['delta_ece']:8.2f} "
              f"{iv(r['delta_ece_lo'], r['delta_ece_hi'])} {flag}")
