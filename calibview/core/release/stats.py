"""The per-sample statistics the release, the acceptance check and drift need: the true-class slices (per-class
ECE), the high-confidence audit, the risk-coverage curve and the thresholds for a target precision.

The per-class slices are those of :mod:`calibview.core.evaluation.slices` (``--by class``), the audit, the
risk-coverage curve and the thresholds those of :mod:`calibview.core.stats.selective`, as flat records for the
config, the report and the checklist.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

from calibview.core.reports.selective import DEFAULT_AUDIT


class _WithGiven:
    """The engine calls :func:`calibview.core.evaluation.slices.evaluate_slices` makes, with the shipped calibrators
    given (applied as they are, the fit split not read)."""

    def __init__(self, engine, given: Optional[Mapping]) -> None:
        self._engine, self._given = engine, dict(given or {})

    def scored(self, req, **kw):
        return self._engine.scored(req, given=self._given, **kw)

    def fitted(self, req, **kw):
        return self._engine.fitted(req, given=self._given, **kw)

    def resamples(self, req):
        return self._engine.resamples(req, given=self._given)

    def resampler(self, req):
        return self._engine.resampler(req)


def class_slices(engine, req, name: str, min_slice: int, class_names: Sequence[str],
                 given: Optional[Mapping] = None) -> list[dict]:
    """One record per class c of ``class_names`` for calibrator ``name``: the true-class slice of ``calibview slices
    --by class`` (:func:`calibview.core.evaluation.slices.evaluate_slices`: every metric with the split's resamples
    restricted to the slice) plus ``class_index`` and ``below_min`` (fewer than ``min_slice`` samples: no interval,
    left out of the per-class criterion). A class without samples in the split has n = 0 and NaN metrics."""
    from dataclasses import replace

    from calibview.core.evaluation.slices import evaluate_slices

    res = evaluate_slices(_WithGiven(engine, given), replace(req, calibrators=(name,)), "class",
                          min_slice=min_slice, smooth_intervals=False)
    by_name = {r["slice"]: r for r in res.records if r["calibrator"] == name and r["slice"] is not None}
    out = []
    for c, cname in enumerate(class_names):
        rec = dict(by_name.get(str(cname), {"slice": str(cname), "n": 0, "ece": float("nan"), "accuracy":
                                             float("nan"), "ece_lo": float("nan"), "ece_hi": float("nan")}))
        rec.update(class_index=c, below_min=bool(rec["n"] < min_slice))
        out.append(rec)
    return out


def audit(conf: np.ndarray, correct: np.ndarray, thresholds: Sequence[float] = DEFAULT_AUDIT,
          level: float = 0.95) -> list[dict]:
    """Per threshold t (:func:`calibview.core.stats.selective.audit`): n and coverage of samples with confidence >= t,
    their mean confidence, accuracy with a Wilson interval at ``level``, the gap (mean confidence - accuracy) and
    ``flagged`` when the interval excludes the mean confidence (e.g. samples at 0.95 confidence right 70 % of the
    time)."""
    from calibview.core.stats.selective import audit as _audit

    return [{"threshold": a.threshold, "n": a.n, "coverage": a.coverage, "mean_conf": a.mean_conf,
             "accuracy": a.accuracy, "acc_lo": a.lo, "acc_hi": a.hi, "gap": a.mean_conf - a.accuracy,
             "flagged": bool(a.flagged)} for a in _audit(conf, correct, thresholds, level)]


def risk_coverage(conf: np.ndarray, correct: np.ndarray) -> dict:
    """The risk-coverage curve at tie-group ends (``coverage``, ``risk``), ``aurc`` and ``e_aurc``
    (:func:`calibview.core.stats.selective.risk_coverage`)."""
    from calibview.core.stats.selective import risk_coverage as _rc

    rc = _rc(conf, correct)
    return {"coverage": rc.coverage, "risk": rc.risk, "aurc": rc.aurc, "e_aurc": rc.e_aurc}


def per_class_thresholds(conf: np.ndarray, pred: np.ndarray, correct: np.ndarray, k: int,
                         target_precision: float) -> list[Optional[float]]:
    """Per class c: the smallest t such that samples whose arg-max is c and whose calibrated p(c) (= their
    confidence) is >= t have precision >= the target on this split (None when none does)."""
    from calibview.core.stats.selective import per_class_thresholds as _pct

    return _pct(conf, pred, correct, k, target_precision)


def global_threshold(conf: np.ndarray, correct: np.ndarray, target_precision: float) -> Optional[float]:
    """The smallest confidence t such that the samples with confidence >= t have accuracy >= the target (None when
    no t reaches it): the per-class rule with every sample in one class."""
    if np.asarray(conf).size == 0:
        return None
    return per_class_thresholds(conf, np.zeros(np.asarray(conf).shape, np.int64), correct, 1, target_precision)[0]


def threshold_outcome(conf: np.ndarray, pred: np.ndarray, correct: np.ndarray, k: int,
                      per_class: Sequence[Optional[float]]) -> list[dict]:
    """Per class: the precision and coverage its threshold achieves on another split (the eval split): ``n_pred``
    samples predicted c, ``n_kept`` of them at or above the threshold, precision among those kept, coverage =
    n_kept / n_pred (:func:`calibview.core.stats.selective.apply_thresholds`)."""
    from calibview.core.stats.selective import apply_thresholds

    per_class = list(per_class) + [None] * (k - len(per_class))
    return [{"threshold": t.threshold, "n_pred": t.n_pred, "n_kept": t.n_accepted, "precision": t.precision,
             "coverage": t.coverage} for t in apply_thresholds(conf, pred, correct, per_class[:k])]
