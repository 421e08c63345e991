"""The regression calibration-sharpness estimator: the Nadaraya-Watson estimate m(v) of E[Y | mean = v] with a
Gaussian kernel of bandwidth h (in the target's units), the conditional standard deviation of the residual, and
the decomposition MSE = cal + sharpness_gap with cal = mean_i (m(v_i) - v_i)^2 (docs/DEFINITIONS.md).

Up to :data:`DENSE_MAX` samples m is evaluated at the data points by the dense O(N^2) formula (each point's own
kernel included, as the classification CAL does); above, the data are linearly binned onto a grid of
:data:`GRID` points and m is interpolated back, an O(N + G^2) computation that the bootstrap reuses."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DENSE_MAX = 2000
GRID = 512
_REACH = 10.0          # kernel truncated at this many bandwidths (its tail is ~2e-22 of the peak)


def silverman(v: np.ndarray) -> float:
    """Silverman's rule of thumb for the (N,) predictions: 0.9 min(sd, IQR / 1.34) N^(-1/5), in their units;
    the standard deviation alone where the IQR is 0, and 1.0 for constant predictions."""
    v = np.asarray(v, dtype=np.float64)
    sd = float(np.std(v, ddof=1)) if v.size > 1 else 0.0
    iqr = float(np.subtract(*np.percentile(v, [75, 25]))) / 1.34
    spread = min(sd, iqr) if iqr > 0 else sd
    if not spread > 0:
        return 1.0
    return 0.9 * spread * v.size ** (-0.2)


def _gauss(u: np.ndarray, h: float) -> np.ndarray:
    z = u / h
    return np.where(np.abs(z) <= _REACH, np.exp(-0.5 * z * z), 0.0)


@dataclass(frozen=True)
class Smoother:
    """The kernel weights of the (N,) predictions ``v`` at bandwidth ``h``: dense (N, N) weights for small N,
    else linear-binning weights onto a grid and the (G, G) kernel. :meth:`at_points` gives m(v_i) for any
    sample weights (a bootstrap resample's counts), :meth:`curve` the estimates on a grid."""

    v: np.ndarray
    h: float
    dense: bool
    kernel: np.ndarray            # (N, N) dense, or (G, G) on the grid
    grid: np.ndarray              # (G,) grid points (empty when dense)
    cell: np.ndarray              # (N,) left grid index of each point (grid path)
    frac: np.ndarray              # (N,) its linear-binning weight on the right neighbour

    @classmethod
    def build(cls, v: np.ndarray, h: float) -> "Smoother":
        """The smoother of the (N,) predictions ``v`` at bandwidth ``h`` > 0."""
        v = np.asarray(v, dtype=np.float64)
        if v.size <= DENSE_MAX:
            k = _gauss(v[:, None] - v[None, :], h)
            e = np.empty(0)
            return cls(v, h, True, k, e, e.astype(np.int64), e)
        lo, hi = float(v.min()), float(v.max())
        span = hi - lo if hi > lo else 1.0
        grid = np.linspace(lo, lo + span, GRID)
        pos = (v - lo) / span * (GRID - 1)
        cell = np.clip(np.floor(pos).astype(np.int64), 0, GRID - 2)
        return cls(v, h, False, _gauss(grid[:, None] - grid[None, :], h), grid, cell, pos - cell)

    def at_points(self, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        """(B, N) m(v_i) of the targets ``y`` (N,) for each row of sample weights ``w`` (B, N) (ones: the
        sample itself; a resample's counts: that resample)."""
        wy = w * y[None, :]
        if self.dense:
            return (wy @ self.kernel) / (w @ self.kernel)
        num, den = self._binned(wy) @ self.kernel, self._binned(w) @ self.kernel
        m = np.divide(num, den, out=np.full_like(num, np.nan), where=den > 0)
        return m[:, self.cell] * (1 - self.frac) + m[:, self.cell + 1] * self.frac

    def _binned(self, w: np.ndarray) -> np.ndarray:
        out = np.zeros((w.shape[0], GRID))
        for b in range(w.shape[0]):
            out[b] = np.bincount(self.cell, w[b] * (1 - self.frac), GRID) + \
                np.bincount(self.cell + 1, w[b] * self.frac, GRID)
        return out


def decomposition(v: np.ndarray, y: np.ndarray, h: float) -> dict:
    """The decomposition of the MSE of the (N,) predictions ``v`` of targets ``y`` at bandwidth ``h``:
    ``mse`` = mean (y - v)^2, ``cal`` = mean (m(v_i) - v_i)^2, ``rest`` = mean (y_i - m(v_i))^2, ``cross`` =
    2 mean (m(v_i) - v_i)(y_i - m(v_i)) (the estimator's departure from orthogonality, 0 in the population),
    ``sharpness_gap`` = mse - cal = rest + cross; mse == cal + rest + cross to rounding."""
    v, y = np.asarray(v, dtype=np.float64), np.asarray(y, dtype=np.float64)
    m = Smoother.build(v, h).at_points(y, np.ones((1, v.size)))[0]
    mse = float(np.mean((y - v) ** 2))
    cal = float(np.mean((m - v) ** 2))
    return {"mse": mse, "cal": cal, "rest": float(np.mean((y - m) ** 2)),
            "cross": float(2 * np.mean((m - v) * (y - m))), "sharpness_gap": mse - cal, "m": m}


@dataclass(frozen=True)
class RegressionCurve:
    """The regression calibration-sharpness diagram's data on a (G,) grid ``x`` of predictions: the estimate
    ``curve`` of E[Y | mean = x], the band ``curve`` -+ the kernel estimate of the residual's conditional
    standard deviation (``band_lo``, ``band_hi``), and the ``density`` of the predictions normalised to a peak
    of 1; all in the target's units except the density. NaN where no prediction lies within reach."""

    x: np.ndarray
    curve: np.ndarray
    band_lo: np.ndarray
    band_hi: np.ndarray
    density: np.ndarray
    bandwidth: float


def regression_curve(v: np.ndarray, y: np.ndarray, h: float, points: int = 256) -> RegressionCurve:
    """The diagram's curve, band and density of predictions ``v`` and targets ``y`` (N,) at bandwidth ``h``, on
    ``points`` grid points spanning the predictions and 3 h beyond them."""
    v, y = np.asarray(v, dtype=np.float64), np.asarray(y, dtype=np.float64)
    x = np.linspace(v.min() - 3 * h, v.max() + 3 * h, points)
    m_i = Smoother.build(v, h).at_points(y, np.ones((1, v.size)))[0]
    sq = (y - m_i) ** 2
    curve = np.full(points, np.nan)
    spread = np.full(points, np.nan)
    dens = np.zeros(points)
    for start in range(0, points, 64):
        k = _gauss(x[start:start + 64, None] - v[None, :], h)
        den = k.sum(axis=1)
        ok = den > 1e-12 * v.size
        curve[start:start + 64][ok] = (k @ y)[ok] / den[ok]
        spread[start:start + 64][ok] = np.sqrt((k @ sq)[ok] / den[ok])
        dens[start:start + 64] = den
    density = dens / dens.max() if dens.max() > 0 else dens
    return RegressionCurve(x, curve, curve - spread, curve + spread, density, float(h))
