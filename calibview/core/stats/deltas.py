"""Differences of a metric between two evaluations, with bootstrap intervals.

*Paired*: both distributions come from the same resamples of the same samples (a slice and its whole split, two
models on one test set): the interval is the percentile interval of the per-resample differences,
``dist[r] - ref[r]``. *Independent*: the evaluations hold different samples (two eval splits, see
:mod:`calibview.core.evaluation.domains`): resample i is set against resample pi(i) of the reference, pi a seeded
permutation, so that two splits of equal size (drawn with the same seed, hence the same index pattern) are not
paired by accident. A difference is *significant* when its interval excludes 0.
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from calibview.core.stats.resampling import Interval, percentile_interval
from calibview.core.stats.metrics import METRIC_NAMES


def paired_difference(dist: Optional[np.ndarray], ref: Optional[np.ndarray], level: float) -> Optional[Interval]:
    """Percentile interval of ``dist - ref`` resample by resample; None when either is missing, their lengths
    differ, or a resample's difference is undefined (NaN, e.g. inf - inf)."""
    if dist is None or ref is None or len(dist) == 0 or len(dist) != len(ref):
        return None
    with np.errstate(invalid="ignore"):
        diff = np.asarray(dist, dtype=np.float64) - np.asarray(ref, dtype=np.float64)
    if np.isnan(diff).any():
        return None
    return percentile_interval(diff, level)


def independent_difference(dist: Optional[np.ndarray], ref: Optional[np.ndarray], level: float,
                           seed: int) -> Optional[Interval]:
    """Percentile interval of ``dist - ref`` over independently paired resamples; None when either is missing."""
    if dist is None or ref is None or len(dist) == 0 or len(dist) != len(ref):
        return None
    perm = np.random.default_rng([seed, 0x0D0A1]).permutation(len(ref))
    return percentile_interval(np.asarray(dist) - np.asarray(ref)[perm], level)


def significant(lo: float, hi: float) -> Optional[bool]:
    """True when the interval [lo, hi] excludes 0, False when it holds it, None without an interval."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    return bool(lo > 0 or hi < 0)


def delta_columns(values: Mapping[str, float], ref_values: Mapping[str, float],
                  dists: Mapping[str, np.ndarray], ref_dists: Mapping[str, np.ndarray],
                  difference: Callable[[Optional[np.ndarray], Optional[np.ndarray]], Optional[Interval]],
                  *, marks: bool = False, metrics: Sequence[str] = METRIC_NAMES) -> dict:
    """``delta_<metric>``, ``_lo``, ``_hi`` (and with ``marks`` ``significant_<metric>``) for every metric of
    ``metrics``: the difference of the point estimates, and ``difference(dist, ref_dist)``'s interval (NaN
    without one)."""
    out: dict = {}
    with np.errstate(invalid="ignore"):
        for m in metrics:
            iv = difference(dists.get(m), ref_dists.get(m))
            lo, hi = (iv.lo, iv.hi) if iv is not None else (float("nan"), float("nan"))
            out[f"delta_{m}"] = float(values.get(m, np.nan)) - float(ref_values.get(m, np.nan))
            out[f"delta_{m}_lo"], out[f"delta_{m}_hi"] = lo, hi
            if marks:
                out[f"significant_{m}"] = significant(lo, hi)
    return out


def reference_columns(*, marks: bool = False) -> dict:
    """The delta columns of the reference's own rows: difference 0, no interval, no mark."""
    out: dict = {}
    for m in METRIC_NAMES:
        out[f"delta_{m}"], out[f"delta_{m}_lo"], out[f"delta_{m}_hi"] = 0.0, float("nan"), float("nan")
        if marks:
            out[f"significant_{m}"] = None
    return out
