"""``calibview report --compare A,B,... [--reference A]``: compare.csv, the paired differences of every run to a
reference run on the same samples (see :mod:`calibview.core.evaluation.compare`), and compare.png. Not a command of
its own: options of ``report``."""

from __future__ import annotations

import argparse
from pathlib import Path

from calibview.cli.options import requests_from_args
from calibview.core.errors import CalibviewError


def add_compare_options(p: argparse.ArgumentParser) -> None:
    """``--compare`` (the runs to compare) and ``--reference`` (the run the others are compared with)."""
    p.add_argument("--compare", metavar="MODEL/DATASET,...", default=None,
                   help="compare these runs (same dataset and eval split, identical labels): compare.csv with each "
                        "metric's paired bootstrap difference to the reference run")
    p.add_argument("--reference", metavar="MODEL/DATASET", default=None,
                   help="the reference run of --compare (default: the first)")


def prepare(args) -> None:
    """Turn --compare into the runs to evaluate (``args.run``) and refuse, before any work, what cannot be
    compared."""
    from calibview.core.evaluation.compare import check_comparable

    if args.reference and not args.compare:
        raise CalibviewError("--reference names the reference run of --compare; give --compare too.")
    if not args.compare:
        return
    if args.run:
        raise CalibviewError("--compare names the runs to compare; leave out --run.")
    runs = [r.strip() for r in args.compare.split(",")]
    if not all(runs):
        raise CalibviewError(f"--compare {args.compare!r} has an empty item; give MODEL/DATASET,MODEL/DATASET.")
    for option, text in (("--eval-split", args.eval_split), ("--bins", args.bins), ("--bandwidth", args.bandwidth),
                         ("--kernel", args.kernel)):
        if text is not None and "," in str(text):
            raise CalibviewError(f"--compare takes one {option[2:]}, not the list {text!r}; compare one setting at "
                                 "a time.")
    args.run = runs
    if args.reference is not None:
        args.reference_index = _reference_index(args)
    check_comparable(requests_from_args(args))


def _reference_index(args) -> int:
    from calibview.core.io import discovery
    from calibview.core.io import shards

    req = requests_from_args(args)[0]
    listing = (shards if shards.is_pattern(req.file) else discovery).list_runs(req.file)
    names = [discovery.find_run(listing, r).name for r in args.run]
    ref = discovery.find_run(listing, args.reference).name
    if ref not in names:
        raise CalibviewError(f"--reference {args.reference} is not among the compared runs ({', '.join(names)}); "
                             "name one of them.")
    return names.index(ref)


def write_compare(engine, evaluations, args, out: Path, figure=None) -> list[Path]:
    """compare.csv from the report's evaluations (one per compared run, in --compare order; the distributions
    behind the intervals are the engine's cached ones) and, unless --no-diagram, compare.png: a panel per
    calibrator with the runs overlaid (line style: run), each titled with every run's ECE and its paired
    difference; ``figure`` ((FigureOptions, formats) of the figure options) sets its size and formats."""
    from calibview.core.evaluation.compare import Comparison, compare_rows
    from calibview.core.reports.contrasts import compare_csv
    from calibview.core.io.safe_io import atomic_write

    dists = [engine.distributions(ev.request) if ev.request.n_boot else {} for ev in evaluations]
    ref = getattr(args, "reference_index", 0)
    rows = compare_rows(evaluations, dists, ref)
    atomic_write(out / "compare.csv", compare_csv(rows))
    paths = [out / "compare.csv"]
    if not args.no_diagram:
        order = [ref] + [i for i in range(len(evaluations)) if i != ref]          # the reference first
        paths += _figure(Comparison(tuple(evaluations[i] for i in order), 0, tuple(rows)), out, figure)
    return paths


def _figure(comparison, out: Path, figure) -> list[Path]:
    import dataclasses
    import logging

    try:
        from calibview.plot.compare import comparison_panels
        from calibview.plot.export import render_figure
        from calibview.plot.spec import FigureOptions
    except ImportError as e:          # a headless install without Qt still gets compare.csv
        logging.getLogger("calibview").warning(f"warning: no compare.png ({e}); install PySide6 and pyqtgraph for it.")
        return []
    ref = comparison.evaluations[0]
    opts, formats = figure if figure is not None else (FigureOptions(), ["png"])
    opts = dataclasses.replace(opts, layout="grid", title=(
        f"{len(comparison.evaluations)} runs on {ref.run.dataset or ref.run.name} {ref.request.eval_split} "
        f"(N = {ref.n_eval:,}), reference {ref.run.name}"), extra={"bandwidth": f"{ref.request.bandwidth:g}",
                                                                   "kernel": ref.request.kernel})
    panels = comparison_panels(comparison.evaluations, "calibrator", comparison)
    return render_figure(panels, out / "compare.png", opts, bandwidth=ref.request.bandwidth,
                         kernel=ref.request.kernel, formats=formats)


def summary(path: Path) -> list[str]:
    """One line per compared run and calibrator naming its significant differences (read back from the CSV)."""
    import csv

    lines = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            run = f"{row['model']}/{row['dataset']}"
            if run == row["reference"]:
                continue
            marks = [m[len("significant_"):] for m, v in row.items() if m.startswith("significant_") and v == "true"]
            lines.append(f"{run} vs {row['reference']} [{row['calibrator']}]: "
                         + (f"significant differences in {', '.join(marks)}" if marks else
                            "no significant difference"))
    return lines
