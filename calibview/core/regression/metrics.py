"""The regression metrics (docs/DEFINITIONS.md, "Regression runs"), computed as uncertainty-toolbox 0.1.1 does
with its defaults: 100 expected proportions ``linspace(0, 1, 100)``, centred intervals for the average
calibration errors, ``sharpness`` = sqrt(mean(var)), ``nll_gaussian`` and ``crps_gaussian`` the means.

Every metric is a function of sample weights, so that the point estimate (weights 1) and each bootstrap
resample (its counts) share one code path: :class:`Terms` holds the per-sample quantities of a split once,
:meth:`Terms.metrics` turns a (B, N) block of weights into each metric's (B,) values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from calibview.core.regression.forms import Predictive
from calibview.core.regression.kernel import Smoother

#: every regression metric, in the column order of metrics.csv
REG_METRIC_NAMES = ("rmse", "mae", "nll_gaussian", "crps_gaussian", "miscalibration_area", "rms_calibration_error",
                    "ma_calibration_error", "sharpness", "ence", "coverage_50", "coverage_80", "coverage_90",
                    "coverage_95", "pinball", "cal", "sharpness_gap")
#: the Gaussian metrics, empty for quantile and sample runs
GAUSSIAN = ("nll_gaussian", "crps_gaussian")
COVERAGE_LEVELS = {"coverage_50": 0.5, "coverage_80": 0.8, "coverage_90": 0.9, "coverage_95": 0.95}
#: uncertainty-toolbox's default: 100 expected proportions in [0, 1]
N_PROPORTIONS = 100


def expected_proportions(n: int = N_PROPORTIONS) -> np.ndarray:
    """The (n,) expected proportions linspace(0, 1, n) of the average calibration errors."""
    return np.linspace(0.0, 1.0, n)


def miscalibration_area_of(exp: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """uncertainty-toolbox's miscalibration area (trapezoids between the diagonal and the (B, P) observed
    proportions ``obs`` at the (P,) expected ``exp``, hourglasses where they cross) for each row: (B,)."""
    xl, xr = exp[:-1], exp[1:]
    dl, dr = obs[:, :-1] - xl, obs[:, 1:] - xr
    cross = (dl * dr < 0) * (1 - ((dl == 0) * (dr == 0)))
    trap = np.abs((xr - xl) * 0.5 * (dl + dr))
    with np.errstate(divide="ignore", invalid="ignore"):
        # the intersection of the segment (xl, obs_l)-(xr, obs_r) with the diagonal, as the toolbox solves it
        x1, y1, x2, y2 = xl, obs[:, :-1], xr, obs[:, 1:]
        x3, y3, x4, y4 = xl, xl, xr, xr
        d = (x1 - x2) * (y3 - y4) - (y1 - y2) * (x3 - x4)
        xi = ((x1 * y2 - y1 * x2) * (x3 - x4) - (x1 - x2) * (x3 * y4 - y3 * x4)) / d
    hour = np.abs(0.5 * dl * (xi - xl)) + np.abs(0.5 * dr * (xr - xi))
    return ((1 - cross) * trap + cross * np.nan_to_num(hour)).sum(axis=1)


@dataclass(frozen=True)
class Terms:
    """The per-sample quantities of one split (all (N,) or (N, P)); see :meth:`build`."""

    form: str
    n: int
    se: np.ndarray                 # squared error (y - mean)^2
    ae: np.ndarray                 # absolute error
    nll: Optional[np.ndarray]      # Gaussian NLL (var runs)
    crps: Optional[np.ndarray]     # Gaussian CRPS (var runs)
    var: Optional[np.ndarray]      # predicted variance (var; samples: their variance)
    inside: np.ndarray             # (N, P) inside the central interval of each expected proportion
    cover: np.ndarray              # (N, 4) inside the 50/80/90/95 % intervals
    pinball: Optional[np.ndarray]  # mean check score over the levels (quantile runs)
    ence_bins: Optional[np.ndarray]  # (N,) equal-mass bin of each sample by predicted std
    n_bins: int
    smoother: Smoother
    y: np.ndarray
    v: np.ndarray

    @classmethod
    def build(cls, pred: Predictive, y: np.ndarray, bins: int, bandwidth: float) -> "Terms":
        """The terms of predictive ``pred`` against targets ``y`` (N,), with ``bins`` equal-mass ENCE bins and
        the kernel ``bandwidth`` of cal (target units)."""
        from scipy import stats

        y = np.asarray(y, dtype=np.float64)
        resid = pred.mean - y
        nll = crps = var = None
        if pred.form == "var":
            std = np.sqrt(pred.var)
            nll = -stats.norm.logpdf(resid, scale=std)
            z = (y - pred.mean) / std
            crps = -std * (1 / np.sqrt(np.pi) - 2 * stats.norm.pdf(z) - z * (2 * stats.norm.cdf(z) - 1))
            var = pred.var
        elif pred.form == "samples":
            var = pred.samples.var(axis=1)
        pin = None
        if pred.form == "quantiles":
            d = y[:, None] - pred.quantiles
            tau = pred.levels[None, :]
            pin = np.maximum(tau * d, (tau - 1) * d).mean(axis=1)
        ence_bins = None
        if var is not None:
            ence_bins = equal_mass_bins(np.sqrt(var), bins)
        return cls(form=pred.form, n=y.size, se=resid ** 2, ae=np.abs(resid), nll=nll, crps=crps, var=var,
                   inside=pred.inside(y, expected_proportions()).astype(np.float64),
                   cover=pred.inside(y, np.array(list(COVERAGE_LEVELS.values()))).astype(np.float64),
                   pinball=pin, ence_bins=ence_bins, n_bins=int(bins), smoother=Smoother.build(pred.mean, bandwidth),
                   y=y, v=np.asarray(pred.mean, dtype=np.float64))

    def metrics(self, w: np.ndarray) -> dict[str, np.ndarray]:
        """Each metric of :data:`REG_METRIC_NAMES` as (B,) values for the (B, N) sample weights ``w`` (NaN where
        the run's form has no such metric)."""
        tot = w.sum(axis=1)

        def mean(x: np.ndarray) -> np.ndarray:
            return (w @ x) / tot if x.ndim == 1 else (w @ x) / tot[:, None]

        nan = np.full(w.shape[0], np.nan)
        mse = mean(self.se)
        out = {"rmse": np.sqrt(mse), "mae": mean(self.ae),
               "nll_gaussian": mean(self.nll) if self.nll is not None else nan,
               "crps_gaussian": mean(self.crps) if self.crps is not None else nan}
        exp = expected_proportions()
        obs = mean(self.inside)
        out["miscalibration_area"] = miscalibration_area_of(exp, obs)
        out["rms_calibration_error"] = np.sqrt(np.mean((exp - obs) ** 2, axis=1))
        out["ma_calibration_error"] = np.mean(np.abs(exp - obs), axis=1)
        out["sharpness"] = np.sqrt(mean(self.var)) if self.var is not None else nan
        out["ence"] = self._ence(w) if self.ence_bins is not None else nan
        cov = mean(self.cover)
        for j, name in enumerate(COVERAGE_LEVELS):
            out[name] = cov[:, j]
        out["pinball"] = mean(self.pinball) if self.pinball is not None else nan
        m = self.smoother.at_points(self.y, w)
        out["cal"] = np.nansum(w * (m - self.v[None, :]) ** 2, axis=1) / tot
        out["sharpness_gap"] = mse - out["cal"]
        return out

    def _ence(self, w: np.ndarray) -> np.ndarray:
        """ENCE = mean over bins of |RMV_j - RMSE_j| / RMV_j, the bins fixed by the full sample's std."""
        total = np.zeros(w.shape[0])
        used = np.zeros(w.shape[0])
        for j in range(int(self.ence_bins.max()) + 1):
            sel = self.ence_bins == j
            wj = w[:, sel]
            cnt = wj.sum(axis=1)
            ok = cnt > 0
            rmv = np.sqrt(np.divide(wj @ self.var[sel], cnt, out=np.ones_like(cnt), where=ok))
            rmse = np.sqrt(np.divide(wj @ self.se[sel], cnt, out=np.zeros_like(cnt), where=ok))
            total += np.where(ok, np.abs(rmv - rmse) / rmv, 0.0)
            used += ok
        return total / used


def equal_mass_bins(std: np.ndarray, bins: int) -> np.ndarray:
    """(N,) bin index of each sample: the samples sorted by predicted ``std`` (stable) and cut into ``bins``
    consecutive groups of sizes differing by at most one (``numpy.array_split``), at most N bins."""
    order = np.argsort(std, kind="stable")
    out = np.empty(std.size, dtype=np.int64)
    for j, part in enumerate(np.array_split(order, max(1, min(int(bins), std.size)))):
        out[part] = j
    return out
