"""Bootstrap intervals from a distribution of resampled values and the point estimate: percentile, basic and BCa
(bias-corrected and accelerated, Efron 1987), each widened to contain its own estimate where it would not.

Why more than the percentile interval: the binned calibration errors (ECE, RMSCE, MCE, ACE, class-wise ECE) are
plug-in estimators that are biased upward on resamples (duplicated samples shrink the effective bin counts), so
their resamples can lie almost all above the estimate, and the percentile interval then excludes the estimate it
is reported with. BCa shifts the percentiles by the bias correction ``z0 = Phi^-1(share of resamples below the
estimate)`` and the acceleration ``a`` (the skewness of the jackknife influence values, :func:`acceleration`).

Where every resample lies on one side of the estimate, ``z0`` is infinite; the interval is then the percentile
interval extended to the estimate, and so is any interval of any method that excludes its estimate: the method
is reported with ``-widened`` appended (``bca-widened``), so a reader can see where it happened.

The ``auto`` rule (the default): the basic interval for :data:`BIASED_METRICS`, percentile for every other
metric. Measured by benchmarks/interval_coverage.py (docs/DEFINITIONS.md), the basic interval, which reflects
the resamples' bias back around the estimate, covers the true binned errors far more often than BCa or the
percentile interval (on an overconfident model: MCE 90 % against 40 % and 16 %, class-wise ECE 91 % against 0 %),
so it is the default there; BCa stays available with ``--interval bca``.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from calibview.core.stats.resampling import Interval

METHODS = ("percentile", "basic", "bca")
#: what ``--interval`` accepts: a method for every metric, or the rule of the module docstring
CHOICES = ("auto",) + METHODS
#: the binned calibration errors, whose plug-in estimators are biased on resamples: the basic interval under
#: ``auto``, its lower end clipped at 0 (an error is never negative)
BIASED_METRICS = frozenset({"ece", "rmsce", "mce", "ace", "classwise_ece"})


def method_for(metric: str, choice: str, has_acceleration: bool) -> str:
    """The method ``choice`` (one of :data:`CHOICES`) gives ``metric``; BCa needs a jackknife acceleration, so a
    metric without one (``has_acceleration`` False) keeps the percentile interval."""
    if choice == "auto":
        choice = "basic" if metric in BIASED_METRICS else "percentile"
    if choice == "bca" and not has_acceleration:
        return "percentile"
    return choice


def _ndtr(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _ndtri(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def _quantiles(v: np.ndarray, qs) -> list[float]:
    """Quantiles (in [0, 1]) of sorted-or-not ``v``, order statistics where inf is present (np.percentile would
    interpolate inf - inf into NaN)."""
    if np.isinf(v).any():
        s = np.sort(v)
        return [float(s[int(np.floor(q * (len(s) - 1)))]) if q <= 0.5 else float(s[int(np.ceil(q * (len(s) - 1)))])
                for q in qs]
    return [float(x) for x in np.percentile(v, [100.0 * q for q in qs])]


def interval(values: np.ndarray, estimate: float, level: float = 0.95, method: str = "percentile",
             accel: Optional[float] = None, nonnegative: bool = False) -> tuple[Interval, str]:
    """(interval, the method that produced it) of the bootstrap ``values`` (R,) around ``estimate``, both in the
    metric's units, at ``level`` in (0, 1). ``method`` is one of :data:`METHODS`; ``accel`` is BCa's acceleration
    (:func:`acceleration`; None counts as 0); ``nonnegative`` clips the lower end at 0 (for a metric that is
    never negative, where the basic interval can reach below 0). The interval always contains a finite estimate: where the method's
    would not, it is extended to the estimate and the method returned ends in ``-widened``."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return Interval(float("nan"), float("nan")), method
    alpha = (1.0 - level) / 2.0
    widened = False
    if method == "percentile":
        lo, hi = _quantiles(v, (alpha, 1.0 - alpha))
    elif method == "basic":
        q_lo, q_hi = _quantiles(v, (alpha, 1.0 - alpha))
        lo, hi = 2.0 * estimate - q_hi, 2.0 * estimate - q_lo
    elif method == "bca":
        below = (np.count_nonzero(v < estimate) + 0.5 * np.count_nonzero(v == estimate)) / v.size
        if not np.isfinite(estimate) or below <= 0.0 or below >= 1.0:
            lo, hi = _quantiles(v, (alpha, 1.0 - alpha))       # z0 infinite: the percentile interval, widened
            widened = np.isfinite(estimate)
        else:
            z0, a = _ndtri(below), float(accel or 0.0)
            qs = []
            for z in (_ndtri(alpha), _ndtri(1.0 - alpha)):
                den = 1.0 - a * (z0 + z)
                qs.append(_ndtr(z0 + (z0 + z) / den) if den > 0 else (0.0 if z < 0 else 1.0))
            lo, hi = _quantiles(v, qs)
    else:
        raise ValueError(f"unknown interval method {method!r}; choose from {', '.join(METHODS)}")
    if nonnegative:
        lo = max(lo, 0.0)
    if np.isfinite(estimate) and not (lo <= estimate <= hi):
        lo, hi, widened = min(lo, estimate), max(hi, estimate), True
    return Interval(float(lo), float(hi)), method + ("-widened" if widened else "")


def acceleration(loo: np.ndarray, n_total: Optional[int] = None) -> float:
    """BCa's acceleration from jackknife values: ``loo`` (m,) the metric with one sample left out, for m samples
    drawn at random (without replacement) from the ``n_total`` (default m) of the split.

    a = sum d^3 / (6 (sum d^2)^1.5) with d_i = mean(loo) - loo_i over all samples; from a subsample of m both sums
    scale by n_total / m, so a = a_subsample * sqrt(m / n_total). 0 when the values do not vary."""
    x = np.asarray(loo, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return 0.0
    d = x.mean() - x
    s2 = float(np.dot(d, d))
    if s2 <= 0.0:
        return 0.0
    a = float(np.sum(d ** 3)) / (6.0 * s2 ** 1.5)
    m = x.size
    return a * math.sqrt(m / (n_total or m))
