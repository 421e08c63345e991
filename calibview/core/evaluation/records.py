"""The flat records of evaluations: one dict per run x member x calibrator x setting, with the identity (``member``:
None for a run without members, "ensemble" or the member's index for one with them), every metric's
value and interval (``<metric>``, ``<metric>_lo``, ``<metric>_hi``) and the settings that produced it. They are
the rows of metrics.csv and of ``metrics --json``, and the base of the comparison, slice and release records.
After ``interval_method`` comes ``p_skce_method``: which SKCE estimator gave ``p_skce`` ("quadratic" or "linear";
None when it was not tested: no resamples)."""

from __future__ import annotations

import json
from typing import Iterable

from calibview.core.stats.metrics import METRIC_NAMES, NO_INTERVAL
from calibview.core.evaluation.results import Evaluation
from calibview.core.evaluation.toplabel.absent import absent_metrics

ID_COLUMNS = ("model", "dataset", "split", "calibrator")
#: the settings that produced every row (metrics.csv columns and JSON keys, in this order, after the metrics)
SETTING_COLUMNS = ("fit_split", "eval_split", "n", "k", "bins", "bandwidth", "kernel", "n_boot", "seed", "level",
                   "options", "calibview_version")


def metric_columns() -> list[str]:
    """The keys of a record, in order: ID_COLUMNS, ``member``, value/_lo/_hi per metric, SETTING_COLUMNS, then
    ``interval_method`` (:func:`interval_methods`) and ``p_skce_method``."""
    cols = list(ID_COLUMNS) + ["member"]
    for m in METRIC_NAMES:
        cols += [m, f"{m}_lo", f"{m}_hi"]
    return cols + list(SETTING_COLUMNS) + ["interval_method", "p_skce_method"]


def run_groups(evaluations: Iterable[Evaluation]) -> list[list[Evaluation]]:
    """Evaluations grouped by run and splits (the settings of an ablation), in first-seen order."""
    groups: dict[tuple, list[Evaluation]] = {}
    for ev in evaluations:
        key = (ev.run.file, ev.run.name, ev.request.fit_split, ev.request.eval_split, ev.request.member)
        groups.setdefault(key, []).append(ev)
    return list(groups.values())


def setting_fields(ev: Evaluation, name: str) -> dict:
    """The settings that produced calibrator ``name``'s numbers in ``ev`` (SETTING_COLUMNS, in order). ``ev``
    needs only ``request``, ``n_eval``, ``k`` and ``n_bins``."""
    from calibview._version import __version__

    req = ev.request
    return {"fit_split": req.fit_split if name != "none" else (req.fit_split or ""), "eval_split": req.eval_split,
            "n": ev.n_eval, "k": ev.k, "bins": ev.n_bins, "bandwidth": float(req.bandwidth), "kernel": req.kernel,
            "n_boot": req.n_boot, "seed": req.seed, "level": float(req.level),
            "options": json.dumps(req.options_for(name), sort_keys=True, separators=(",", ":")),
            "calibview_version": __version__}


def interval_methods(metrics) -> str:
    """JSON text of metric -> the method of its interval (calibview.core.stats.intervals: ``percentile``,
    ``basic``, ``bca``, ``bca-widened``, ...), for the metrics that have one; ``{}`` without intervals."""
    return json.dumps({m: est.method for m, est in metrics.items() if est.method}, sort_keys=True,
                      separators=(",", ":"))


def member_of(ev: Evaluation):
    """The ``member`` of ``ev``'s rows: None for a run without members, "ensemble" for the ensemble of a run with
    members, else the member's index as a string or "deterministic"."""
    if not ev.run.split(ev.request.eval_split).members:
        return None
    return ev.request.member if ev.request.member is not None else "ensemble"


def metrics_rows(evaluations: Iterable[Evaluation]) -> list[dict]:
    """One dict per run x calibrator x setting: the identity, value/_lo/_hi per metric, the settings, then
    ``interval_method`` (:func:`interval_methods`)."""
    rows = []
    for group in run_groups(evaluations):
        for name in dict.fromkeys(r.name for ev in group for r in ev.results):
            for ev in group:
                r = next((r for r in ev.results if r.name == name), None)
                if r is None:
                    continue
                row = {"model": ev.run.model, "dataset": ev.run.dataset, "split": ev.request.eval_split,
                       "calibrator": r.name, "member": member_of(ev)}
                absent = absent_metrics(ev.run)       # a top-label run has no NLL: None, not NaN
                for m in METRIC_NAMES:
                    est = r.metrics[m]
                    row[m], row[f"{m}_lo"], row[f"{m}_hi"] = ((None, None, None) if m in absent else
                                                              (est.value, est.lo, est.hi))
                    if m in NO_INTERVAL:                # a p-value has no interval: empty, not a NaN bound
                        row[f"{m}_lo"] = row[f"{m}_hi"] = None
                row.update(setting_fields(ev, r.name))
                row["interval_method"] = interval_methods({m: e for m, e in r.metrics.items() if m not in absent})
                row["p_skce_method"] = r.tests.get("p_skce_method") or None
                rows.append(row)
    return rows
