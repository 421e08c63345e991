"""The CORP reliability curve as a drawable, tabulable object: the PAV step function of one calibrator's forecast
with its consistency band, its bootstrap band and its Brier score decomposition, evaluated on a fixed grid.

The step function is right-continuous: between two distinct forecasts it keeps the fit of the lower one
(:meth:`Reliability.at`). It is defined on [smallest forecast, largest forecast] only; the bands and every value
read off the grid are NaN outside, so nothing is extrapolated to confidences no sample has.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Mapping, Optional

import numpy as np

from calibview.core.errors import Cancelled
from calibview.core.stats.corp.decomposition import decompose
from calibview.core.stats.corp.reliability import bootstrap_band, consistency_band, reliability
from calibview.core.stats.positive_class import binary_forecast

#: the bands' resamples when the request has none (n_boot 0): the bands are drawn, at a coarser resolution
DEFAULT_RESAMPLES = 200
#: the bands' pointwise level (5-95 %)
LEVEL = 0.9


@dataclass(frozen=True, eq=False)         # compared by identity: a curve is computed once and kept
class CorpCurve:
    """One forecast's CORP curve. ``x`` (S,) the first forecast of each constant step (increasing), ``y`` (S,) its
    recalibrated probability, ``x_max`` the largest forecast; ``grid`` (G,) the points the bands are read at
    (the kernel curve's grid), ``cons_lo`` / ``cons_hi`` the consistency band and ``boot_lo`` / ``boot_hi`` the
    bootstrap band there ((G,) each, NaN off [x[0], x_max]; None when not computed); ``n`` samples,
    ``n_resamples`` and ``seed`` of the bands; ``decomposition`` the Brier score's {"score", "mcb", "dsc",
    "unc"} (calibview.core.stats.corp.decomposition)."""

    x: np.ndarray
    y: np.ndarray
    x_max: float
    grid: np.ndarray
    n: int
    decomposition: Mapping[str, float]
    cons_lo: Optional[np.ndarray] = None
    cons_hi: Optional[np.ndarray] = None
    boot_lo: Optional[np.ndarray] = None
    boot_hi: Optional[np.ndarray] = None
    n_resamples: int = 0
    seed: int = 0

    def at(self, values: np.ndarray) -> np.ndarray:
        """(M,) the step function at ``values`` (M,): the fit of the step at or below each value, NaN below the
        smallest or above the largest forecast."""
        v = np.asarray(values, dtype=np.float64)
        i = np.clip(np.searchsorted(self.x, v, side="right") - 1, 0, self.x.size - 1)
        return np.where((v >= self.x[0]) & (v <= self.x_max), self.y[i], np.nan)

    def stairs(self) -> tuple[np.ndarray, np.ndarray]:
        """((2S,), (2S,)) the step function as a polyline of horizontal and vertical segments from the smallest
        to the largest forecast, for drawing."""
        ends = np.append(self.x[1:], self.x_max)
        return np.column_stack([self.x, ends]).ravel(), np.repeat(self.y, 2)

    @property
    def has_bands(self) -> bool:
        """Whether the consistency band (and the bootstrap band) were computed."""
        return self.cons_lo is not None

    def without_bootstrap(self) -> "CorpCurve":
        """The same curve with its bootstrap band left out (drawn with its consistency band only)."""
        return replace(self, boot_lo=None, boot_hi=None)


def forecast_outcome(sample_stats, positive: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """((N,), (N,)) float64 forecast and 0/1 outcome of per-sample vectors (core.stats.metrics.SampleStats):
    the top-label confidence and whether the arg-max is right, or (``positive``, a binary run) the predicted
    probability of class 1 and whether the label is 1."""
    if positive:
        return binary_forecast(sample_stats, 1)
    return (np.asarray(sample_stats.conf, dtype=np.float64),
            np.asarray(sample_stats.correct, dtype=np.float64))


def corp_curve(forecast: np.ndarray, outcome: np.ndarray, grid: np.ndarray, *, bands: bool = True,
               n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
               cancel: Optional[threading.Event] = None) -> CorpCurve:
    """The :class:`CorpCurve` of (N,) forecasts in [0, 1] and (N,) 0/1 outcomes (N >= 1), its bands read at
    ``grid`` (G,) from ``n_resamples`` seeded resamples each (``bands`` False: the curve and its decomposition
    alone, O(N log N)). ``cancel`` is checked between the two bands (Cancelled)."""
    f = np.asarray(forecast, dtype=np.float64).reshape(-1)
    a = np.asarray(outcome, dtype=np.float64).reshape(-1)
    rel = reliability(f, a)
    first = np.concatenate(([True], np.diff(rel.y) != 0))       # the steps: one point where the fit changes
    g = np.asarray(grid, dtype=np.float64)
    curve = CorpCurve(x=rel.x[first], y=rel.y[first], x_max=float(rel.x[-1]), grid=g, n=int(f.size),
                      decomposition=decompose(f, a, "brier"), seed=int(seed))
    if not bands:
        return curve
    inside = (g >= rel.x[0]) & (g <= rel.x[-1])
    out = {}
    for name, band in (("cons", lambda: consistency_band(f, g, n_resamples=n_resamples, seed=seed, level=LEVEL)),
                       ("boot", lambda: bootstrap_band(f, a, g, n_resamples=n_resamples, seed=seed, level=LEVEL))):
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        lo, hi = band()
        out[f"{name}_lo"], out[f"{name}_hi"] = (np.where(inside, v, np.nan) for v in (lo, hi))
    return replace(curve, n_resamples=int(n_resamples), **out)
