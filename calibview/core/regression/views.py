"""What the regression figures draw, computed from a :class:`calibview.core.regression.evaluate.RegResult`
(numpy only; the figures in calibview.plot read these): the calibration-sharpness curve with its band and
density (:func:`diagram`), the interval-coverage curve with its bootstrap band (:func:`coverage_curve`), the PIT
histogram with its uniform band (:func:`pit_histogram`) and the quantile calibration curve
(:func:`quantile_curve`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibview.core.regression.kernel import RegressionCurve, regression_curve


def diagram(result, bandwidth: float, points: int = 256) -> RegressionCurve:
    """The Nadaraya-Watson curve of E[Y | mean = v], the band -+ the residual's conditional standard deviation
    and the density of the means, at ``bandwidth`` (target units) on ``points`` grid points."""
    return regression_curve(result.predictive.mean, result.targets, bandwidth, points)


def coverage_curve(result) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(nominal, observed, lo, hi), each (P,): the observed coverage of the central interval of each nominal
    level (the 100 expected proportions) and its pointwise bootstrap band (NaN without resamples)."""
    return result.nominal, result.observed, result.observed_lo, result.observed_hi


@dataclass(frozen=True)
class PitHistogram:
    """The PIT histogram: ``edges`` (bins + 1,), ``density`` (bins,) normalised so that a uniform PIT reads 1,
    and the uniform band [``band_lo``, ``band_hi``] of a bin's density at ``level`` (binomial quantiles)."""

    edges: np.ndarray
    density: np.ndarray
    band_lo: float
    band_hi: float
    level: float


def pit_histogram(result, bins: int = 20, level: float = 0.95) -> PitHistogram:
    """The PIT histogram of ``result``'s predictive on its targets, with ``bins`` equal-width bins of [0, 1]."""
    from scipy import stats          # here, not at import: the window's start-up needs none of scipy.stats

    u = result.predictive.pit(result.targets)
    n = u.size
    counts, edges = np.histogram(np.clip(u, 0, 1), bins=bins, range=(0.0, 1.0))
    lo, hi = stats.binom.ppf([(1 - level) / 2, (1 + level) / 2], n, 1.0 / bins)
    scale = bins / n
    return PitHistogram(edges, counts * scale, float(lo) * scale, float(hi) * scale, level)


def quantile_curve(result, levels=None) -> tuple[np.ndarray, np.ndarray]:
    """(levels, observed): the fraction of targets at or below each predicted quantile, against its level
    (the run's levels for a quantile form, else 0.01 ... 0.99)."""
    pred = result.predictive
    lv = np.asarray(levels if levels is not None else
                    (pred.levels if pred.form == "quantiles" else np.arange(1, 100) / 100.0), dtype=np.float64)
    return lv, (result.targets[:, None] <= pred.quantile(lv)).mean(axis=0)
