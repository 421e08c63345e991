"""Domains: the same fitted calibrators evaluated on several evaluation splits, and each split's difference to the
first (the reference domain, e.g. the validation-domain test split against a deployment split).

The splits hold different samples, so a paired bootstrap of the difference is impossible. The difference of the
point estimates is exact; its interval (when the evaluations have bootstrap resamples) is the percentile interval
of differences of the two splits' *independent* resamples: resample i of the split minus resample pi(i) of the
reference, pi a seeded permutation, so that two splits of equal size (drawn with the same seed, hence the same
index pattern) are not paired by accident.
"""

from __future__ import annotations

import csv
import io
from typing import Callable, Optional, Sequence

import numpy as np

from .bootstrap import percentile_interval
from .evaluate import Evaluation
from .metrics import METRIC_NAMES

ID_COLUMNS = ("model", "dataset", "calibrator", "fit_split", "eval_split", "reference_split", "n",
              "bins", "bandwidth", "kernel")


def domain_columns() -> list[str]:
    cols = list(ID_COLUMNS)
    for m in METRIC_NAMES:
        cols += [m, f"{m}_lo", f"{m}_hi", f"delta_{m}", f"delta_{m}_lo", f"delta_{m}_hi"]
    return cols


def _groups(evaluations: Sequence[Evaluation]) -> list[list[Evaluation]]:
    """Evaluations of one run, fit split and setting, one per eval split (in the order given)."""
    groups: dict[tuple, list[Evaluation]] = {}
    for ev in evaluations:
        r = ev.request
        key = (ev.run.file, ev.run.name, r.fit_split, ev.n_bins, float(r.bandwidth), r.kernel)
        groups.setdefault(key, []).append(ev)
    return list(groups.values())


def independent_difference(dist: np.ndarray, ref: np.ndarray, level: float, seed: int):
    """Percentile interval of ``dist - ref`` over independently paired resamples; None when either is missing."""
    if dist is None or ref is None or len(dist) == 0 or len(dist) != len(ref):
        return None
    perm = np.random.default_rng([seed, 0x0D0A1]).permutation(len(ref))
    return percentile_interval(np.asarray(dist) - np.asarray(ref)[perm], level)


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
                d_ev = dists[id(ev)].get(r.name, {})
                d_ref = dists[id(ref)].get(r.name, {})
                for m in METRIC_NAMES:
                    est, base = r.metrics[m], r_ref.metrics[m]
                    row[m], row[f"{m}_lo"], row[f"{m}_hi"] = est.value, est.lo, est.hi
                    if ev is ref:
                        delta, iv = 0.0, None
                    else:
                        delta = est.value - base.value
                        iv = independent_difference(d_ev.get(m), d_ref.get(m), req.level, req.seed)
                    row[f"delta_{m}"] = delta
                    row[f"delta_{m}_lo"] = iv.lo if iv is not None else float("nan")
                    row[f"delta_{m}_hi"] = iv.hi if iv is not None else float("nan")
                rows.append(row)
    return rows


def domains_csv(rows: Sequence[dict]) -> str:
    from .report import _fmt            # one spelling of numbers in every CSV

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = domain_columns()
    w.writerow(cols)
    for row in rows:
        w.writerow([_fmt(row[c]) if isinstance(row[c], float) else row[c] for c in cols])
    return buf.getvalue()
