"""``calibview metrics [FILE]``: the metric rows of every run, calibrator and setting, as a table or (``--json``)
as JSON records on stdout; nothing is written to disk."""

from __future__ import annotations

import argparse
import sys

from calibview.cli.options import (add_eval_options, add_member_options, evaluate_all, first_settings,
                                   log_calibrator_warnings, member_rows)

HELP = "print the metric rows (as JSON with --json, else a table)"

#: the columns of the table (every metric is in the JSON)
TABLE_COLUMNS = ("accuracy", "nll", "brier", "ece", "ace", "classwise_ece", "smece", "cal", "tot", "sharpness_gap")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The evaluation options and ``--json``."""
    add_eval_options(p)
    add_member_options(p)
    p.add_argument("--json", action="store_true", help="print JSON rows to stdout")


def run(args) -> int:
    """Evaluate and print the rows."""
    from calibview.cli.regression import commands as regression

    planned = regression.plan(args)          # regression runs: refused before any work too
    evaluations = evaluate_all(args)         # first: it refuses bad input before torch loads
    reg = regression.evaluate(planned)
    from calibview.core.reports.tables import metrics_json, with_regression

    for ev in first_settings(evaluations):
        log_calibrator_warnings(ev)
    rows = with_regression(member_rows(evaluations, args.members), reg)
    if args.json:
        sys.stdout.write(metrics_json(rows))
    else:
        print_table([r for r in rows if r["k"] is not None])
        if reg:
            regression.print_table([r for r in rows if r["k"] is None])
    return 0


def print_table(rows) -> None:
    """One line per row: the run, (with several eval splits) the split, the calibrator, (in an ablation) the
    setting, then the TABLE_COLUMNS."""
    cols = TABLE_COLUMNS
    if not rows:
        return
    ablation = len({(r["bins"], r["bandwidth"], r["kernel"]) for r in rows}) > 1
    domains = len({r["eval_split"] for r in rows}) > 1

    def setting(row) -> str:
        return f"{row['bins']:>4} {row['bandwidth']:<7g} {row['kernel'][:5]:5s} " if ablation else ""

    members = any(r.get("member") is not None for r in rows)
    head = f"{'run':32s} " + ("split      " if domains else "") + ("member        " if members else "") + \
        f"{'calibrator':10s} " + \
        ("bins bw      kern. " if ablation else "") + " ".join(f"{c[:13]:>13s}" for c in cols)
    print(head)
    for row in rows:
        name = f"{row['model']}/{row['dataset']}"
        split = f"{row['eval_split'][:10]:10s} " if domains else ""
        member = f"{str(row.get('member') or ''):13s} " if members else ""
        print(f"{name[:32]:32s} {split}{member}{row['calibrator'][:10]:10s} " + setting(row) +
              " ".join(f"{'n/a':>13s}" if row[c] is None else f"{row[c]:13.6g}" for c in cols))
