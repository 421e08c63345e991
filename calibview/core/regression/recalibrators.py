"""The regression recalibrators, fitted on the fit split and applied to any split: ``none``; ``var-scaling``
(the variance times one scalar s = mean(residual^2 / var), the closed-form minimum of the Gaussian NLL over s;
var and sample runs); ``isotonic-pit`` (Kuleshov, Fenner & Ermon 2018: the recalibration map R of the PIT
fitted isotonically, which for the empirical CDF of the fit split's PIT values is that CDF itself, so that the
recalibrated quantile at level t is F^-1(R^-1(t)) with R^-1 the PIT values' empirical quantile function; it
gives quantiles, at the run's own levels or at 0.01 ... 0.99). The predictive mean is never changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.regression.forms import Predictive

REG_CALIBRATORS = ("none", "var-scaling", "isotonic-pit")
#: the quantile levels isotonic-pit gives a var or sample run
OUTPUT_LEVELS = np.round(np.arange(1, 100) / 100.0, 2)
_KNOTS = 1001
_EPS = 1e-6


@dataclass(frozen=True)
class RegFitted:
    """A fitted regression recalibrator: its name, parameters (JSON-able) and the fit split's size."""

    name: str
    params: dict
    n_fit: int = 0

    def to_json(self) -> dict:
        """The record of calibrators.json: ``method``, ``params``, ``n_fit``."""
        return {"method": self.name, "params": self.params, "n_fit": self.n_fit}

    def apply(self, pred: Predictive) -> Predictive:
        """The recalibrated predictive of ``pred`` (same N)."""
        if self.name == "none":
            return pred
        if self.name == "var-scaling":
            s = float(self.params["s"])
            if pred.form == "var":
                return Predictive("var", pred.mean, var=pred.var * s)
            centre = pred.samples.mean(axis=1, keepdims=True)
            return Predictive("samples", pred.mean, samples=centre + np.sqrt(s) * (pred.samples - centre))
        levels = np.asarray(self.params["levels"], dtype=np.float64)
        inner = np.clip(np.interp(levels, self.params["knots_t"], self.params["knots_u"]), _EPS, 1 - _EPS)
        return Predictive("quantiles", pred.mean, quantiles=np.sort(pred.quantile(inner), axis=1), levels=levels)


def applies(name: str, form: str) -> Optional[str]:
    """None when recalibrator ``name`` applies to runs of ``form``, else the reason it does not."""
    if name == "var-scaling" and form == "quantiles":
        return "var-scaling scales a variance, and quantile runs have none"
    return None


def fit(name: str, pred: Predictive, y: np.ndarray) -> RegFitted:
    """Fit recalibrator ``name`` (one of :data:`REG_CALIBRATORS`) on the fit split's predictive ``pred`` and
    targets ``y`` (N,)."""
    n = int(y.shape[0])
    if name == "none":
        return RegFitted("none", {}, n)
    if name == "var-scaling":
        reason = applies(name, pred.form)
        if reason:
            raise CalibviewError(f"{reason}; choose isotonic-pit for them.")
        var = pred.var if pred.form == "var" else pred.samples.var(axis=1)
        if np.any(var <= 0):
            raise CalibviewError("var-scaling needs a positive predictive variance for every fit sample; some sample "
                                 "runs have all samples equal.")
        return RegFitted("var-scaling", {"s": float(np.mean((y - pred.mean) ** 2 / var))}, n)
    if name == "isotonic-pit":
        u = pred.pit(y)
        t = np.linspace(0.0, 1.0, min(_KNOTS, n + 1))
        levels = pred.levels if pred.form == "quantiles" else OUTPUT_LEVELS
        return RegFitted("isotonic-pit", {"knots_t": t.tolist(), "knots_u": np.quantile(u, t).tolist(),
                                          "levels": [float(v) for v in levels]}, n)
    raise CalibviewError(f"Unknown regression calibrator {name!r}; choose from {', '.join(REG_CALIBRATORS)}.")


def from_json(record: dict) -> RegFitted:
    """The fitted recalibrator of a calibrators.json record (:meth:`RegFitted.to_json`)."""
    return RegFitted(str(record["method"]), dict(record.get("params", {})), int(record.get("n_fit", 0)))
