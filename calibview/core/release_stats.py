"""The per-sample statistics the release, the acceptance check and drift need: the true-class slices (per-class
ECE), the high-confidence audit, the risk-coverage curve and the thresholds for a target precision.

The per-class slices are those of :mod:`calibview.core.slices` (``--by class``). The selective-prediction pieces
are minimal versions of the definitions of issue 10 until :mod:`calibview.core.selective` lands: swap a function
here, nothing else changes.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
from scipy.stats import norm

from .metrics import wilson_interval

#: the high-confidence thresholds audited by default (issue 10, "Selective prediction and thresholds")
DEFAULT_AUDIT = (0.9, 0.95, 0.99)


class _WithGiven:
    """The engine calls :func:`calibview.core.slices.evaluate_slices` makes, with the shipped calibrators given
    (applied as they are, the fit split not read)."""

    def __init__(self, engine, given: Optional[Mapping]) -> None:
        self._engine, self._given = engine, dict(given or {})

    def scored(self, req, **kw):
        return self._engine.scored(req, given=self._given, **kw)

    def fitted(self, req, **kw):
        return self._engine.fitted(req, given=self._given, **kw)

    def resamples(self, req):
        return self._engine.resamples(req, given=self._given)


def class_slices(engine, req, name: str, min_slice: int, class_names: Sequence[str],
                 given: Optional[Mapping] = None) -> list[dict]:
    """One record per class c of ``class_names`` for calibrator ``name``: the true-class slice of ``calibview slices
    --by class`` (:func:`calibview.core.slices.evaluate_slices`: every metric with the split's resamples restricted
    to the slice) plus ``class_index`` and ``below_min`` (fewer than ``min_slice`` samples: no interval, left out
    of the per-class criterion). A class without samples in the split has n = 0 and NaN metrics."""
    from dataclasses import replace

    from .slices import evaluate_slices

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
    """Per threshold t: n and coverage of samples with confidence >= t, their mean confidence, accuracy with a
    Wilson interval at ``level``, the gap (mean confidence - accuracy) and ``flagged`` when the interval excludes
    the mean confidence (the seed's 0.95 auto-approve bin that was right 70 % of the time)."""
    z = float(norm.ppf(0.5 + level / 2))
    out = []
    for t in thresholds:
        keep = conf >= t
        n = int(keep.sum())
        rec = {"threshold": float(t), "n": n, "coverage": n / max(conf.size, 1), "mean_conf": float("nan"),
               "accuracy": float("nan"), "acc_lo": float("nan"), "acc_hi": float("nan"), "gap": float("nan"),
               "flagged": False}
        if n:
            lo, hi = wilson_interval(np.array([correct[keep].sum()]), np.array([n]), z=z)
            rec.update(mean_conf=float(conf[keep].mean()), accuracy=float(correct[keep].mean()),
                       acc_lo=float(lo[0]), acc_hi=float(hi[0]))
            rec["gap"] = rec["mean_conf"] - rec["accuracy"]
            rec["flagged"] = bool(not rec["acc_lo"] <= rec["mean_conf"] <= rec["acc_hi"])
        out.append(rec)
    return out


def _tie_group_ends(conf: np.ndarray, correct: np.ndarray):
    """(order, k at each tie-group end (1-based), cumulative correct there) for confidences sorted descending."""
    order = np.argsort(-conf, kind="stable")
    c = conf[order]
    ends = np.flatnonzero(np.r_[c[1:] != c[:-1], True]) + 1
    return order, ends, np.cumsum(correct[order])[ends - 1]


def risk_coverage(conf: np.ndarray, correct: np.ndarray) -> dict:
    """The risk-coverage curve at the ends of tie groups (``coverage``, ``risk`` arrays), ``aurc`` and ``e_aurc``
    as issue 10 defines them (r(k) held across a tie group; AURC* with every correct sample first)."""
    n = conf.size
    order, ends, hits = _tie_group_ends(conf, correct)
    risk_at_end = 1.0 - hits / ends
    sizes = np.diff(np.r_[0, ends])
    k = np.arange(1, n + 1)
    # r(k) inside a group is the group's end value: sum over k of r(k) = sum over groups of size * r(end)
    aurc = float((sizes * risk_at_end).sum() / n)
    c_total = float(correct.sum())
    aurc_star = float((np.maximum(0.0, k - c_total) / k).sum() / n)
    return {"coverage": ends / n, "risk": risk_at_end, "aurc": aurc, "e_aurc": aurc - aurc_star}


def global_threshold(conf: np.ndarray, correct: np.ndarray, target_precision: float) -> Optional[float]:
    """The smallest confidence t such that the samples with confidence >= t have accuracy >= the target (None when
    no t reaches it)."""
    if conf.size == 0:
        return None
    order, ends, hits = _tie_group_ends(conf, correct)
    ok = hits / ends >= target_precision
    if not ok.any():
        return None
    return float(conf[order][ends[ok][-1] - 1])


def per_class_thresholds(conf: np.ndarray, pred: np.ndarray, correct: np.ndarray, k: int,
                         target_precision: float) -> list[Optional[float]]:
    """Per class c: the smallest t such that samples whose arg-max is c and whose calibrated p(c) (= their
    confidence) is >= t have precision >= the target, on the split given (the fit split); None when none does."""
    out: list[Optional[float]] = []
    for c in range(k):
        m = pred == c
        out.append(global_threshold(conf[m], correct[m], target_precision))
    return out


def threshold_outcome(conf: np.ndarray, pred: np.ndarray, correct: np.ndarray, k: int,
                      per_class: Sequence[Optional[float]]) -> list[dict]:
    """Per class: the achieved precision and coverage of its threshold on another split (the eval split):
    ``n_pred`` samples predicted c, ``n_kept`` of them at or above the threshold, precision among those kept and
    coverage = n_kept / n_pred."""
    out = []
    for c in range(k):
        t = per_class[c] if c < len(per_class) else None
        m = pred == c
        kept = m & (conf >= t) if t is not None else np.zeros_like(m)
        n_pred, n_kept = int(m.sum()), int(kept.sum())
        out.append({"threshold": t, "n_pred": n_pred, "n_kept": n_kept,
                    "precision": float(correct[kept].mean()) if n_kept else float("nan"),
                    "coverage": n_kept / n_pred if n_pred else float("nan")})
    return out
