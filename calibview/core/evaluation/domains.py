"""Domains: the same fitted calibrators evaluated on several evaluation splits, and each split's difference to the
first (the reference domain, e.g. the validation-domain test split against a deployment split).

The splits hold different samples, so a paired bootstrap of the difference is impossible. The difference of the
point estimates is exact; its interval (when the evaluations have bootstrap resamples) is the percentile interval
of differences of the two splits' *independent* resamples: resample i of the split minus resample pi(i) of the
reference, pi a seeded permutation, so that two splits of equal size (drawn with the same seed, hence the same
index pattern) are not paired by accident.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence


from calibview.core.stats.deltas import (delta_columns, independent_difference,  # noqa: F401 (public here)
                                        reference_columns)
from calibview.core.evaluation.results import Evaluation
from calibview.core.evaluation.toplabel.absent import absent_metrics, blank
from calibview.core.stats.metrics import METRIC_NAMES


def _groups(evaluations: Sequence[Evaluation]) -> list[list[Evaluation]]:
    """Evaluations of one run, fit split and setting, one per eval split (in the order given)."""
    groups: dict[tuple, list[Evaluation]] = {}
    for ev in evaluations:
        r = ev.request
        key = (ev.run.file, ev.run.name, r.fit_split, ev.n_bins, float(r.bandwidth), r.kernel)
        groups.setdefault(key, []).append(ev)
    return list(groups.values())


def domain_rows(evaluations: Sequence[Evaluation],
                distributions: Optional[Callable[[Evaluation], dict]] = None) -> list[dict]:
    """One flat record per run x setting x calibrator x eval split: every metric with its interval, and
    ``delta_<metric>`` (this split minus the group's first split) with ``_lo``/``_hi`` from independent
    resamples when ``distributions(ev)`` (calibrator -> metric -> (n_boot,) array, e.g. Engine.distributions of
    ev.request) is given, else NaN. The reference split's own rows have delta 0 and no interval."""
    rows = []
    for group in _groups(evaluations):
        ref = group[0]
        dists = {id(ev): (distributions(ev) if distributions and ev.request.n_boot else {}) for ev in group}
        for r_ref in ref.results:
            for ev in group:
                try:
                    r = ev.result(r_ref.name)
                except KeyError:
                    continue
                req = ev.request
                row = {"model": ev.run.model, "dataset": ev.run.dataset, "calibrator": r.name,
                       "fit_split": req.fit_split if r.name != "none" else (req.fit_split or ""),
                       "eval_split": req.eval_split, "reference_split": ref.request.eval_split, "n": ev.n_eval,
                       "bins": ev.n_bins, "bandwidth": float(req.bandwidth), "kernel": req.kernel}
                for m in METRIC_NAMES:
                    est = r.metrics[m]
                    row[m], row[f"{m}_lo"], row[f"{m}_hi"] = est.value, est.lo, est.hi
                if ev is ref:
                    row.update(reference_columns())
                else:
                    row.update(delta_columns(
                        {m: e.value for m, e in r.metrics.items()}, {m: e.value for m, e in r_ref.metrics.items()},
                        dists[id(ev)].get(r.name, {}), dists[id(ref)].get(r.name, {}),
                        lambda d, ref, req=req: independent_difference(d, ref, req.level, req.seed)))
                rows.append(blank(row, absent_metrics(ev.run)))     # as in metrics: None, not NaN
    return rows
