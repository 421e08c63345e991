"""The CORP reliability curve: the isotonic (pool-adjacent-violators) regression of binary outcomes on a
probability forecast, and the bands drawn around it.

Forecasts that are equal are pooled before the fit (one point per distinct value, weighted by its count), so the
curve is a function of the forecast value alone, as CORP requires. ``scipy.optimize.isotonic_regression`` does
the PAV step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class Reliability:
    """The fitted curve: ``x`` (U,) the distinct forecast values in increasing order, ``y`` (U,) the recalibrated
    probability at each (nondecreasing, in [0, 1]), ``counts`` (U,) the samples at each value."""

    x: np.ndarray
    y: np.ndarray
    counts: np.ndarray

    def at(self, values: np.ndarray) -> np.ndarray:
        """(M,) the curve at ``values`` (M,): the fitted value of the nearest distinct forecast at or below each
        value (a step function, constant between forecasts; values below the smallest forecast take its fit)."""
        i = np.searchsorted(self.x, np.asarray(values, dtype=np.float64), side="right") - 1
        return self.y[np.clip(i, 0, self.x.size - 1)]


def pooled(forecast: np.ndarray, order: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct values (U,), index of each sample's value (N,), count of each value (U,)), as ``np.unique``
    returns them; from the forecasts' ascending ``order`` when it is known, without sorting again."""
    if order is None:
        ux, inv, counts = np.unique(forecast, return_inverse=True, return_counts=True)
        return ux, inv.reshape(-1), counts
    sv = forecast[order]
    new = np.r_[True, sv[1:] != sv[:-1]] if sv.size else np.zeros(0, bool)
    inv = np.empty(sv.size, np.int64)
    inv[order] = np.cumsum(new) - 1
    return sv[new], inv, np.diff(np.r_[np.flatnonzero(new), sv.size])


def _pav(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(U,) nondecreasing least-squares fit to the means ``sums / counts`` with weights ``counts``."""
    from scipy.optimize import isotonic_regression

    w = counts.astype(np.float64)
    return np.clip(isotonic_regression(sums / w, weights=w, increasing=True).x, 0.0, 1.0)


def reliability(forecast: np.ndarray, outcome: np.ndarray) -> Reliability:
    """The CORP curve of (N,) forecasts in [0, 1] and (N,) 0/1 outcomes (N >= 1)."""
    f = np.asarray(forecast, dtype=np.float64).reshape(-1)
    a = np.asarray(outcome, dtype=np.float64).reshape(-1)
    ux, inv, counts = pooled(f)
    return Reliability(ux, _pav(np.bincount(inv, weights=a, minlength=ux.size), counts), counts)


def recalibrated(forecast: np.ndarray, outcome: np.ndarray, order: Optional[np.ndarray] = None) -> np.ndarray:
    """(N,) each sample's PAV-recalibrated probability: :func:`reliability` read at its own forecast (``order``:
    the forecasts' ascending order, if known)."""
    f = np.asarray(forecast, dtype=np.float64).reshape(-1)
    a = np.asarray(outcome, dtype=np.float64).reshape(-1)
    ux, inv, counts = pooled(f, order)
    return _pav(np.bincount(inv, weights=a, minlength=ux.size), counts)[inv]


def consistency_band(forecast: np.ndarray, grid: np.ndarray, *, n_resamples: int = 1000, seed: int = 0,
                     level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """((G,) lower, (G,) upper) pointwise ``level`` band of the CORP curve at ``grid`` (G,) under the hypothesis
    of calibration: the outcomes are redrawn as Bernoulli(forecast) ``n_resamples`` times (seeded) and the curve
    refitted each time; the band is the (1 - level) / 2 and (1 + level) / 2 quantiles (5-95 % by default)."""
    f = np.asarray(forecast, dtype=np.float64).reshape(-1)
    ux, inv, counts = pooled(f)
    cell = np.clip(np.searchsorted(ux, np.asarray(grid, dtype=np.float64), side="right") - 1, 0, ux.size - 1)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 25]))
    curves = np.empty((int(n_resamples), cell.size))
    for r in range(int(n_resamples)):
        drawn = (rng.random(f.size) < f).astype(np.float64)
        curves[r] = _pav(np.bincount(inv, weights=drawn, minlength=ux.size), counts)[cell]
    return _quantiles(curves, level)


def bootstrap_band(forecast: np.ndarray, outcome: np.ndarray, grid: np.ndarray, *, n_resamples: int = 1000,
                   seed: int = 0, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """((G,) lower, (G,) upper) pointwise ``level`` bootstrap band of the CORP curve at ``grid`` (G,): samples
    drawn with replacement ``n_resamples`` times (seeded), the curve refitted on each resample (a resample's
    distinct values are a subset of the sample's, so each fit is read off by the nearest value at or below)."""
    f = np.asarray(forecast, dtype=np.float64).reshape(-1)
    a = np.asarray(outcome, dtype=np.float64).reshape(-1)
    ux, inv, _ = pooled(f)
    g = np.asarray(grid, dtype=np.float64)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 26]))
    curves = np.empty((int(n_resamples), g.size))
    for r in range(int(n_resamples)):
        w = np.bincount(rng.integers(0, f.size, f.size), minlength=f.size).astype(np.float64)
        counts = np.bincount(inv, weights=w, minlength=ux.size)
        seen = counts > 0
        fit = _pav(np.bincount(inv, weights=w * a, minlength=ux.size)[seen], counts[seen])
        xs = ux[seen]
        curves[r] = fit[np.clip(np.searchsorted(xs, g, side="right") - 1, 0, xs.size - 1)]
    return _quantiles(curves, level)


def _quantiles(curves: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.quantile(curves, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=0)
    return lo, hi
