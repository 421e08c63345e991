"""The CORP score decomposition S = MCB - DSC + UNC (Dimitriadis, Gneiting & Jordan 2021, eq. 2), for the Brier
score and the log score of a probability forecast of a binary outcome:

- S(f): the mean score of the forecast f;
- MCB = S(f) - S(r): miscalibration, what the PAV recalibration r of f (:mod:`.reliability`) would remove (>= 0);
- UNC = S(mean outcome): the score of the constant climatological forecast;
- DSC = UNC - S(r): discrimination, how much better than climatology the recalibrated forecast is (>= 0).

The identity holds exactly by construction (up to the rounding of the three means). For the top-label reduction
f is the confidence and the outcome whether the prediction is right, so S(f) is the top-label Brier term.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from calibview.core.stats.corp.reliability import recalibrated


def brier_terms(f: np.ndarray, a: np.ndarray) -> np.ndarray:
    """(N,) squared errors (f - a)^2."""
    return (f - a) ** 2


def log_terms(f: np.ndarray, a: np.ndarray) -> np.ndarray:
    """(N,) log losses -a log f - (1 - a) log(1 - f), with 0 log 0 = 0 (a recalibrated 0 or 1 is reached only
    where every outcome agrees), in nats."""
    from scipy.special import xlogy

    return -(xlogy(a, f) + xlogy(1.0 - a, 1.0 - f))


SCORES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {"brier": brier_terms, "log": log_terms}


def decompose(forecast: np.ndarray, outcome: np.ndarray, score: str = "brier",
              order: Optional[np.ndarray] = None) -> dict[str, float]:
    """{"score", "mcb", "dsc", "unc"} of (N,) forecasts in [0, 1] and (N,) 0/1 outcomes under ``score`` ("brier"
    or "log"); NaN for an empty sample. ``order``: the forecasts' ascending order, if known."""
    terms = SCORES[score]
    f = np.asarray(forecast, dtype=np.float64).reshape(-1)
    a = np.asarray(outcome, dtype=np.float64).reshape(-1)
    if f.size == 0:
        return {"score": math.nan, "mcb": math.nan, "dsc": math.nan, "unc": math.nan}
    s_f = float(np.mean(terms(f, a)))
    s_r = float(np.mean(terms(recalibrated(f, a, order), a)))
    s_c = float(np.mean(terms(np.full_like(a, a.mean()), a)))
    return {"score": s_f, "mcb": s_f - s_r, "dsc": s_c - s_r, "unc": s_c}
