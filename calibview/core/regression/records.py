"""The rows that regression evaluations add to metrics.csv and ``metrics --json`` (the same identity and
settings columns as the classification rows; the classification-only metrics empty, and the regression-only
metrics empty in classification rows), regression.csv and calibrators.json."""

from __future__ import annotations

import json
from typing import Iterable, Sequence

from calibview.core.regression.metrics import REG_METRIC_NAMES

#: regression.csv: the interval-coverage curve, one row per nominal level, with its bootstrap band at ``level``
REGRESSION_COLUMNS = ("model", "dataset", "split", "calibrator", "level", "nominal", "observed", "lo", "hi")


def regression_only(class_metrics: Sequence[str]) -> tuple[str, ...]:
    """The regression metrics that have no classification column of the same name (cal and sharpness_gap share
    theirs: they are the regression analogues)."""
    return tuple(m for m in REG_METRIC_NAMES if m not in class_metrics)


def columns_with_regression(columns: Sequence[str], class_metrics: Sequence[str]) -> list[str]:
    """``columns`` (metric_columns() of the classification rows) with the regression-only metrics' value/_lo/_hi
    inserted after the classification metrics, before the settings."""
    cols = list(columns)
    at = cols.index(f"{class_metrics[-1]}_hi") + 1
    extra = [c for m in regression_only(class_metrics) for c in (m, f"{m}_lo", f"{m}_hi")]
    return cols[:at] + extra + cols[at:]


def regression_rows(evaluations: Iterable) -> list[dict]:
    """One dict per regression run x recalibrator: identity, every regression metric's value/_lo/_hi, the
    settings (``k`` empty, ``bandwidth`` the kernel bandwidth of cal in the target's units, ``kernel``
    gaussian), then ``interval_method``."""
    from calibview._version import __version__

    rows = []
    for ev in evaluations:
        req = ev.request
        for r in ev.results:
            row = {"model": ev.run.model, "dataset": ev.run.dataset, "split": req.eval_split, "calibrator": r.name}
            for m in REG_METRIC_NAMES:
                est = r.metrics[m]
                row[m], row[f"{m}_lo"], row[f"{m}_hi"] = est.value, est.lo, est.hi
            row.update({"fit_split": req.fit_split if r.name != "none" else (req.fit_split or ""),
                        "eval_split": req.eval_split, "n": ev.n_eval, "k": None, "bins": req.bins,
                        "bandwidth": float(ev.bandwidth), "kernel": "gaussian", "n_boot": req.n_boot,
                        "seed": req.seed, "level": float(req.level), "options": "{}",
                        "calibview_version": __version__})
            row["interval_method"] = json.dumps({m: e.method for m, e in r.metrics.items() if e.method},
                                                sort_keys=True, separators=(",", ":"))
            rows.append(row)
    return rows


def merged(class_rows: Sequence[dict], reg_rows: Sequence[dict], columns: Sequence[str]) -> list[dict]:
    """Classification rows then regression rows, each with every key of ``columns`` (None where the row's kind
    has no such column)."""
    return [{c: row.get(c) for c in columns} for row in list(class_rows) + list(reg_rows)]


def coverage_rows(evaluations: Iterable) -> list[dict]:
    """The rows of regression.csv: for each regression run and recalibrator, each nominal level in [0, 1] (the
    100 expected proportions), the observed coverage and its bootstrap band (``lo``, ``hi``) at ``level``."""
    rows = []
    for ev in evaluations:
        for r in ev.results:
            for i in range(r.nominal.shape[0]):
                rows.append({"model": ev.run.model, "dataset": ev.run.dataset, "split": ev.request.eval_split,
                             "calibrator": r.name, "level": float(ev.request.level), "nominal": float(r.nominal[i]),
                             "observed": float(r.observed[i]), "lo": float(r.observed_lo[i]),
                             "hi": float(r.observed_hi[i])})
    return rows


def calibrator_records(evaluations: Iterable) -> list[dict]:
    """The calibrators.json records of the regression runs: identity, ``kind`` "regression", the fitted
    recalibrator (``method``, ``params``, ``n_fit``)."""
    out = []
    for ev in evaluations:
        for r in ev.results:
            out.append({"file": ev.run.file, "model": ev.run.model, "dataset": ev.run.dataset, "run": ev.run.name,
                        "kind": "regression", "form": ev.run.form, "fit_split": ev.request.fit_split,
                        "calibrator": r.name, **r.fitted.to_json()})
    return out
