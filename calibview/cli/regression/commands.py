"""Regression runs in the evaluating commands. :func:`plan` reads which regression runs, splits and
recalibrators a command line asks for (refusing what cannot work before any work); :func:`evaluate` computes
them; :func:`classification_run_names` and :func:`classification_calibrators` keep the classification requests
free of the regression names. Classification calibrators asked for are skipped for regression runs (and the
reverse) with a note on stderr."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from typing import Optional

from calibview.core.errors import CalibviewError

_log = logging.getLogger("calibview")
#: the recalibrators of regression runs (calibview.core.regression.recalibrators.REG_CALIBRATORS, spelled here so
#: that --help and the refusals load no numpy)
REG_CALIBRATORS = ("none", "var-scaling", "isotonic-pit")


def add_regression_options(p: argparse.ArgumentParser) -> None:
    """``--reg-bandwidth`` and ``--allow-crossing`` (they concern regression runs only)."""
    p.add_argument("--reg-bandwidth", type=float, default=None, metavar="H",
                   help="kernel bandwidth of the regression runs' cal and diagram, in the target's units "
                        "(default: Silverman's rule on the evaluation split's means); --bandwidth is for "
                        "classification runs")
    p.add_argument("--allow-crossing", action="store_true",
                   help="sort the quantiles of rows where they cross instead of refusing the regression run")


def regression_runs(file: str) -> list:
    """The regression runs of ``file`` ([] for a glob of shards: regression runs are read from one file)."""
    from calibview.core.io import shards
    from calibview.core.io.regression.discovery import list_regression_runs

    if shards.is_pattern(file):
        return []
    return list_regression_runs(file)


def _matches(runs: list, name: str) -> bool:
    from calibview.core.io.regression.discovery import find_regression_run

    return bool(runs) and find_regression_run(runs, name) is not None


def classification_run_names(args, file: str, class_runs: list) -> Optional[list[str]]:
    """The --run names meant for classification runs (None without --run: every run), those naming only a
    regression run left out."""
    if not args.run:
        return None
    reg = regression_runs(file)
    from calibview.core.io import discovery

    out = []
    for name in args.run:
        if _matches(reg, name):
            try:
                discovery.find_run(class_runs, name)
            except CalibviewError:
                continue
        out.append(name)
    return out


def classification_calibrators(names: tuple, has_runs: bool) -> tuple:
    """``names`` without the regression-only recalibrators, noted on stderr as skipped when there are
    classification runs (``has_runs``) to skip them for."""
    reg_only = [n for n in names if n in REG_CALIBRATORS and n != "none"]
    if reg_only and has_runs:
        _log.warning(f"note: classification runs: skipping {', '.join(reg_only)} (regression recalibrators).")
    return tuple(n for n in names if n not in reg_only)


def _chosen(args, file: str) -> list:
    runs = regression_runs(file)
    if not args.run:
        return runs
    from calibview.core.io.regression.discovery import find_regression_run

    return [r for r in dict.fromkeys(find_regression_run(runs, n) for n in args.run if _matches(runs, n))]


class Planned(list):
    """The RegRequests of a command line, and the notes (skipped calibrators, single splits) that
    :func:`evaluate` prints: after the classification runs' checks, so that a refusal there stays one line."""

    def __init__(self, requests=(), notes=()):
        super().__init__(requests)
        self.notes = list(notes)


def plan(args) -> Planned:
    """The RegRequests of the command line, one per regression run and eval split (checked, no data read); the
    classification calibrators asked for are noted as skipped (by :func:`evaluate`)."""
    from calibview.core.evaluation import defaults
    from calibview.core.io.demo import demo_path

    file = args.shards or args.file or str(demo_path())      # as calibview.cli.options.eval_file
    runs = _chosen(args, file)
    if not runs:
        return Planned()
    explicit = args.calibrators is not None
    given = tuple(c.strip() for c in args.calibrators.split(",") if c.strip()) if explicit else REG_CALIBRATORS
    for name in given:           # a typo is refused here, before it could be noted as skipped for these runs
        if name not in REG_CALIBRATORS and name not in defaults.KNOWN_CALIBRATORS:
            raise CalibviewError(f"Unknown calibrator {name!r}; choose from {', '.join(defaults.KNOWN_CALIBRATORS)} "
                                 f"(classification runs) or {', '.join(REG_CALIBRATORS[1:])} (regression runs).")
    # scipy is loaded only past that refusal, which (as for classification runs) computes nothing
    from calibview.core.evaluation.request import default_splits
    from calibview.core.regression.evaluate import RegRequest, check_regression_request
    from calibview.core.regression.recalibrators import applies

    skipped = [c for c in given if c not in REG_CALIBRATORS]
    bins = str(args.bins).split(",")[0].strip()
    bins = defaults.BINS if bins.lower() == "auto" else _whole(bins)
    out = Planned()
    for run in runs:
        names = tuple(c for c in given if c in REG_CALIBRATORS and (explicit or not applies(c, run.form)))
        if skipped:
            out.notes.append(f"regression run {run.name}: skipping {', '.join(skipped)} (classification "
                             "calibrators; regression runs take none, var-scaling, isotonic-pit).")
        if not names:
            continue
        evals = [e.strip() for e in args.eval_split.split(",")] if args.eval_split else [None]
        for e in evals:
            fit, ev = default_splits(run, e)
            fit = args.fit_split or fit
            req = RegRequest(run=run, eval_split=ev, fit_split=fit if fit != ev or args.fit_split else None,
                             calibrators=names, bins=bins, bandwidth=args.reg_bandwidth, n_boot=args.n_boot,
                             seed=args.seed, level=args.level, interval=args.interval,
                             allow_crossing=args.allow_crossing)
            if req.fit_split is None and any(n != "none" for n in names):
                out.notes.append(f"regression run {run.name} has a single split: reporting it uncalibrated.")
                req = dataclasses.replace(req, calibrators=("none",))
            check_regression_request(req)
            out.append(req)
    return out


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CalibviewError(f"--bins {text!r} is not a whole number; give one such as 15, or 'auto'.") from None


def evaluate(requests: list) -> list:
    """The RegEvaluations of the planned requests (each split read once per run); the plan's notes and the
    evaluations' on stderr."""
    for note in getattr(requests, "notes", ()):
        _log.warning(f"note: {note}")
    if not requests:            # scipy.stats (0.2 s) is imported only for files that have regression runs
        return []
    from calibview.core.regression.evaluate import evaluate_regression

    out, cache = [], {}
    for req in requests:
        data = cache.setdefault(req.run.name, {})
        ev = evaluate_regression(req, data)
        for note in ev.notes:
            _log.warning(f"note: {note}")
        out.append(ev)
    return out


def runs_lines(file: str) -> list[str]:
    """The lines of ``calibview runs`` for the regression runs of ``file``: name, ``regression`` and the form,
    and each split's size."""
    lines = []
    for info in regression_runs(file):
        splits = ", ".join(f"{s.name} (N={s.n})" for s in info.splits)
        lines.append(f"{info.name}\tregression: {info.describe()}\t{splits}")
    return lines


#: the columns of the regression table of ``metrics`` (every metric is in the JSON)
TABLE_COLUMNS = ("rmse", "nll_gaussian", "crps_gaussian", "ma_calibration_error", "sharpness", "ence",
                 "coverage_90", "pinball", "cal")


def print_table(rows) -> None:
    """The regression rows of ``metrics``: one line per run, split and recalibrator, the TABLE_COLUMNS ("n/a"
    where the run's form has no such metric)."""
    print(f"{'regression run':32s} {'split':10s} {'calibrator':12s} " + " ".join(f"{c[:12]:>12s}" for c in TABLE_COLUMNS))
    for row in rows:
        name = f"{row['model']}/{row['dataset']}"
        cells = " ".join("         n/a" if row[c] is None or row[c] != row[c] else f"{row[c]:12.6g}"
                         for c in TABLE_COLUMNS)
        print(f"{name[:32]:32s} {row['eval_split'][:10]:10s} {row['calibrator'][:12]:12s} {cells}")


def summary_lines(evaluations) -> list[str]:
    """One line per regression run of a report: RMSE, the 90 % coverage and the cal of every recalibrator."""
    lines = []
    for ev in evaluations:
        parts = [f"{r.name}: RMSE {r.metrics['rmse'].value:.4g} coverage_90 {100 * r.metrics['coverage_90'].value:.1f}% "
                 f"cal {r.metrics['cal'].value:.4g}" for r in ev.results]
        lines.append(f"{ev.run.name} [{ev.request.eval_split}, N={ev.n_eval}, regression: {ev.run.describe()}] "
                     + "; ".join(parts))
    return lines
