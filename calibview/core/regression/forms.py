"""The three predictive forms of a regression run as one interface: central intervals, the PIT and the
per-sample quantities the metrics average.

- ``var``: a Gaussian N(mean, var);
- ``quantiles``: the quantile function is linear between the given levels and extended linearly beyond the
  first and last level with the slope of the end segments, so that every level in (0, 1) has an interval;
- ``samples``: the empirical distribution of the S samples (intervals from ``numpy.quantile``'s linear rule, the
  PIT the fraction of samples at or below the target).

scipy.stats is imported in the methods that use it: its import costs 0.2-1 s, which the window's start-up (it
builds regression requests) and the commands that only list runs need not pay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class Predictive:
    """A predictive distribution per sample: ``mean`` (N,) and the one form (``var`` (N,), ``quantiles`` (N, Q)
    sorted along Q with ``levels`` (Q,), or ``samples`` (N, S)), all in the target's units (var: squared)."""

    form: str
    mean: np.ndarray
    var: Optional[np.ndarray] = None
    quantiles: Optional[np.ndarray] = None
    levels: Optional[np.ndarray] = None
    samples: Optional[np.ndarray] = None

    @classmethod
    def of(cls, data) -> "Predictive":
        """The predictive of a :class:`calibview.core.io.regression.schema.RegSplitData`."""
        return cls(form=data.form, mean=data.mean, var=data.var, quantiles=data.quantiles, levels=data.levels,
                   samples=data.samples)

    @property
    def std(self) -> Optional[np.ndarray]:
        """The predicted standard deviation (N,): sqrt(var), the samples' standard deviation (ddof 0), or None
        for quantiles."""
        if self.form == "var":
            return np.sqrt(self.var)
        if self.form == "samples":
            return self.samples.std(axis=1)
        return None

    def inside(self, y: np.ndarray, levels: np.ndarray) -> np.ndarray:
        """(N, P) bool: whether target y_i lies in the central interval of level p (for each of ``levels`` in
        [0, 1]), bounds included. For ``var`` it is exactly uncertainty-toolbox's rule on the standardised
        residual (mean - y) / std between norm.ppf(0.5 -+ p/2)."""
        from scipy import stats

        p = np.asarray(levels, dtype=np.float64)
        if self.form == "var":
            r = ((self.mean - y) / np.sqrt(self.var))[:, None]
            return (r >= stats.norm.ppf(0.5 - p / 2.0)) & (r <= stats.norm.ppf(0.5 + p / 2.0))
        lo, hi = self.quantile(0.5 - p / 2.0), self.quantile(0.5 + p / 2.0)
        return (y[:, None] >= lo) & (y[:, None] <= hi)

    def quantile(self, taus: np.ndarray) -> np.ndarray:
        """(N, P) predicted quantiles at ``taus`` in [0, 1] (0 and 1 give -inf and +inf for var and quantiles)."""
        from scipy import stats

        t = np.asarray(taus, dtype=np.float64)
        if self.form == "var":
            return self.mean[:, None] + np.sqrt(self.var)[:, None] * stats.norm.ppf(t)[None, :]
        if self.form == "samples":
            return np.quantile(self.samples, t, axis=1).T
        q, lv = extended(self.quantiles, self.levels)
        out = np.empty((q.shape[0], t.shape[0]))
        j = np.clip(np.searchsorted(lv, t, side="right") - 1, 0, lv.shape[0] - 2)
        frac = (t - lv[j]) / (lv[j + 1] - lv[j])
        out[:] = q[:, j] + (q[:, j + 1] - q[:, j]) * frac[None, :]
        out[:, t <= 0] = -np.inf
        out[:, t >= 1] = np.inf
        return out

    def pit(self, y: np.ndarray) -> np.ndarray:
        """(N,) the probability integral transform F_i(y_i) in [0, 1]."""
        from scipy import stats

        if self.form == "var":
            return stats.norm.cdf(y, loc=self.mean, scale=np.sqrt(self.var))
        if self.form == "samples":
            return (self.samples <= y[:, None]).mean(axis=1)
        q, lv = extended(self.quantiles, self.levels)
        k = (q <= y[:, None]).sum(axis=1)              # the segment y lies in: between columns k-1 and k
        out = np.where(k == 0, 0.0, 1.0)
        mid = (k > 0) & (k < q.shape[1])
        rows, j = np.nonzero(mid)[0], k[mid]
        lo, hi = q[rows, j - 1], q[rows, j]
        width = hi - lo
        frac = np.divide(y[rows] - lo, width, out=np.ones_like(width), where=width > 0)
        out[rows] = lv[j - 1] + frac * (lv[j] - lv[j - 1])
        return out


def extended(quantiles: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, Q + 2) quantiles at the (Q + 2,) levels 0, levels, 1: the first and last segments extended linearly
    to levels 0 and 1 (Q >= 2), or for one level a point mass there."""
    lv = np.asarray(levels, dtype=np.float64)
    q = np.asarray(quantiles, dtype=np.float64)
    if lv.shape[0] == 1:
        return np.concatenate([q, q, q], axis=1), np.array([0.0, lv[0], 1.0])
    slope_lo = (q[:, 1] - q[:, 0]) / (lv[1] - lv[0])
    slope_hi = (q[:, -1] - q[:, -2]) / (lv[-1] - lv[-2])
    first = q[:, 0] - slope_lo * lv[0]
    last = q[:, -1] + slope_hi * (1.0 - lv[-1])
    return np.column_stack([first, q, last]), np.concatenate([[0.0], lv, [1.0]])
