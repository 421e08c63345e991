"""The :class:`~calibview.core.evaluation.results.Estimate` of every metric of a calibrator: its point value and
the interval read off its bootstrap resamples by the request's ``interval`` method
(:mod:`calibview.core.stats.intervals`), with BCa's jackknife accelerations where the method needs them.

Accelerations come from leave-one-out values (:mod:`calibview.core.stats.jackknife`): exact over every sample for
the top-label binned metrics and the means (accuracy, NLL, Brier), over the seeded row subsample of the scoring
pass for class-wise ECE. The other metrics (SmoothECE, CAL, the selective metrics, AUROC) have no cheap jackknife
and keep the percentile interval under every method; their ``method`` says so. :func:`curve_band` is the
kernel curve's pointwise confidence band from the resampled curves.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import numpy as np

from calibview.core.stats import intervals, jackknife
from calibview.core.stats.metrics import METRIC_NAMES
from calibview.core.evaluation.results import Estimate, Scored

#: the means, whose leave-one-out values are (sum - x_i) / (N - 1)
_MEANS = ("accuracy", "nll", "brier", "brier_top")


def _loo_means(sc: Scored) -> dict[str, np.ndarray]:
    s = sc.stats
    x = {"accuracy": s.correct, "nll": s.nll, "brier": s.brier, "brier_top": (s.conf - s.correct) ** 2}
    n = s.conf.shape[0]
    return {m: (v.sum() - v) / (n - 1) for m, v in x.items() if np.isfinite(v).all()}


def estimates(values: Mapping[str, float], dists: Mapping[str, np.ndarray], sc: Scored, n_bins: int, level: float,
              choice: str) -> dict[str, Estimate]:
    """metric -> Estimate for every name of METRIC_NAMES: ``values`` the point estimates, ``dists`` metric ->
    (n_boot,) resamples (a metric without is NaN-bounded, method ""), ``sc`` the calibrator's scores (for the
    jackknife), ``n_bins`` the bin count of the binned metrics, ``choice`` the request's ``interval``."""
    n = sc.stats.conf.shape[0]
    loo: dict[str, np.ndarray] = {}
    wanted = {m for m in dists if intervals.method_for(m, choice, True) == "bca"}
    if wanted and n >= 2:
        if wanted & {"ece", "rmsce", "mce", "ace"}:
            loo.update(jackknife.binned_loo(sc.stats.conf, sc.stats.correct, n_bins, sc.stats.conf_order))
        if wanted & set(_MEANS):
            loo.update(_loo_means(sc))
        if "classwise_ece" in wanted and n_bins in sc.classwise_loo:
            loo["classwise_ece"] = sc.classwise_loo[n_bins]
    out = {}
    for m in METRIC_NAMES:
        if m not in dists:
            out[m] = Estimate(values[m], float("nan"), float("nan"))
            continue
        method = intervals.method_for(m, choice, m in loo)
        accel = intervals.acceleration(loo[m], n) if method == "bca" else None
        iv, used = intervals.interval(dists[m], values[m], level, method, accel,
                                      nonnegative=m in intervals.BIASED_METRICS)
        out[m] = Estimate(values[m], iv.lo, iv.hi, used)
    return out


class CurveBand(NamedTuple):
    """The kernel curve's pointwise bootstrap confidence band: ``x``, ``lo``, ``hi`` (257,) read-only float64
    (confidence; accuracy bounds, NaN where fewer than half the resamples have data), at ``bandwidth`` and
    ``kernel`` (those of the curve it belongs to) and ``level``."""

    x: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    bandwidth: float
    kernel: str
    level: float


def curve_band(curves, level: float, bandwidth: float, kernel: str):
    """The :class:`CurveBand` of the resampled curves ``curves`` (R, 257) at
    :data:`~calibview.core.stats.smoothing.CURVE_BAND_X`: their percentiles at ``level``; None without
    resamples."""
    from calibview.core.stats.smoothing import CURVE_BAND_X

    if curves is None or len(curves) == 0:
        return None
    s = np.sort(np.asarray(curves, dtype=np.float64), axis=0)        # NaN (no data there) sorts last
    alpha = (1.0 - level) / 2.0
    finite = np.isfinite(s).sum(axis=0)
    enough = finite >= 0.5 * s.shape[0]
    cols = np.arange(s.shape[1])
    ends = []
    for q in (alpha, 1.0 - alpha):              # np.percentile's linear rule over each column's finite values
        pos = q * np.maximum(finite - 1, 0)
        lo_i = np.floor(pos).astype(np.int64)
        hi_i = np.minimum(lo_i + 1, np.maximum(finite - 1, 0))
        t = pos - lo_i
        ends.append((1.0 - t) * s[lo_i, cols] + t * s[hi_i, cols])
    out = []
    for a in (CURVE_BAND_X.copy(), np.where(enough, ends[0], np.nan), np.where(enough, ends[1], np.nan)):
        a.setflags(write=False)
        out.append(a)
    return CurveBand(*out, float(bandwidth), kernel, float(level))
