"""Platt scaling (``platt``) and beta calibration (``beta``): logistic maps for binary runs (K = 2 only).

Both are logistic regressions fitted by Newton's method to convergence: Platt on the log-odds s = z_1 - z_0
(where the fit split holds an exact-zero probability, s is taken from log(max(p, 1e-12)), stored as
``log_floor``, as :mod:`~calibview.core.calibrators.checks` says; an infinite s of a calibrator without it
counts as +-1e4), beta on (ln p, -ln(1 - p)) with p clipped to
[eps, 1 - eps] like betacal. Platt's smoothed targets ((N+ + 1)/(N+ + 2), 1/(N- + 2)) are off by default
(``smooth_targets=True``, a keyword of ``fit`` or of the constructor, turns them on); they are used anyway, with a
warning, when the fit split is separable and the maximum-likelihood fit does not exist. beta keeps a, b >= 0: a
negative coefficient (a checked first, as betacal) is dropped and the rest refitted; unlike betacal, a
coefficient still negative after that is dropped as well (intercept only, warned).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import expit

from calibview.core.calibrators import checks
from calibview.core.calibrators.base import Method, fit_checks
from calibview.core.calibrators.temperature import log_probabilities
from calibview.core.errors import CalibviewError, check_cancel, report

_EPS = float(np.finfo(np.float64).eps)
_LOG_CLIP = (math.log(_EPS), math.log1p(-_EPS))    # betacal's clip of p to [eps, 1 - eps], in logs
_S_CAP = 1e4             # |log-odds| standing in for an infinite one (a stored probability of exactly 0 or 1)


def _newton_logistic(x: np.ndarray, t: np.ndarray, cancel, max_iter: int = 100) -> tuple[np.ndarray, bool]:
    """Minimise mean[log(1 + e^eta) - t eta], eta = x @ w[:-1] + w[-1]; returns (w, converged)."""
    n = x.shape[0]
    a = np.column_stack([x, np.ones(n)])
    w = np.zeros(a.shape[1])
    w[-1] = math.log(t.mean() / (1 - t.mean()))
    loss = lambda w_: float(np.mean(np.logaddexp(0.0, a @ w_) - t * (a @ w_)))
    f = loss(w)
    for _ in range(max_iter):
        check_cancel(cancel)
        eta = a @ w
        g = a.T @ (expit(eta) - t) / n
        h = (a * (expit(eta) * expit(-eta))[:, None]).T @ a / n
        try:
            step = np.linalg.solve(h, g)
        except np.linalg.LinAlgError:
            return w, False
        if not np.all(np.isfinite(step)):
            return w, False
        alpha = 1.0
        while True:
            new = w - alpha * step
            f_new = loss(new)
            if f_new <= f - 1e-4 * alpha * float(g @ step) or alpha < 1e-12:
                break
            alpha *= 0.5
        done = np.max(np.abs(alpha * step)) <= 1e-11 * (1.0 + np.max(np.abs(w)))
        w, f = new, f_new
        if done:
            return w, bool(np.all(np.isfinite(w)))
    return w, False


def _separable(u: np.ndarray, y: np.ndarray) -> bool:
    """Whether a threshold on ``u`` separates the classes (completely or quasi-completely)."""
    u0, u1 = u[y == 0], u[y == 1]
    return bool(u0.max() <= u1.min() or u1.max() <= u0.min())


def _fit_binary(x: np.ndarray, y: np.ndarray, order: np.ndarray, *, smooth: bool, nonneg: bool, label: str,
                cancel) -> tuple[np.ndarray, float, bool, list[str]]:
    """Logistic regression of y on the columns of x (constant columns get coefficient 0); ``order`` is a score
    monotone in every column, to detect separation. Returns (coefficients, intercept, smoothed, warnings)."""
    n = y.shape[0]
    n1 = int(y.sum())
    if n1 in (0, n):
        raise CalibviewError(f"{label} needs both classes in the fit split, but all {n} of its rows have "
                             f"label {int(y[0])}.")
    warnings: list[str] = []
    keep = [j for j in range(x.shape[1]) if np.ptp(x[:, j]) > 0]
    if not keep:
        warnings.append(f"The {label} input is the same in every row of the fit split; it predicts the "
                        f"class-1 frequency {n1 / n:.6g} everywhere.")
    elif not smooth and _separable(order, y):
        smooth = True
        warnings.append(f"The fit split is separable by the score, so {label} has no maximum-likelihood fit; "
                        "Platt's smoothed targets were used instead.")
    t = y.astype(np.float64)
    if smooth:
        t = np.where(y == 1, (n1 + 1) / (n1 + 2), 1 / (n - n1 + 2))
    while True:
        w, ok = _newton_logistic(x[:, keep], t, cancel)
        if not ok and not smooth:
            smooth, t = True, np.where(y == 1, (n1 + 1) / (n1 + 2), 1 / (n - n1 + 2))
            warnings.append(f"{label} did not converge (the fit split looks separable); Platt's smoothed "
                            "targets were used instead.")
            continue
        if not ok:
            raise CalibviewError(f"{label} did not converge on this fit split; try temperature scaling.")
        neg = [j for j, wj in zip(keep, w[:-1]) if wj < 0] if nonneg else []
        if not neg:
            break
        if len(keep) == 1:
            warnings.append(f"{label}'s remaining coefficient came out negative; it was set to 0 (intercept only).")
        keep = [j for j in keep if j != neg[0]]
    coef = np.zeros(x.shape[1])
    coef[keep] = w[:-1]
    return coef, float(w[-1]), smooth, warnings


def _log_odds(scores: torch.Tensor, floor: Optional[float] = None) -> torch.Tensor:
    z = scores.to(torch.float64)
    if floor is not None:
        z = z.clamp_min(floor)
    return torch.nan_to_num(z[:, 1] - z[:, 0], posinf=_S_CAP, neginf=-_S_CAP)


def _binary_log_probs(eta: torch.Tensor) -> torch.Tensor:
    return torch.stack([F.logsigmoid(-eta), F.logsigmoid(eta)], dim=1)


class _BinaryLogistic(Method):
    """A logistic map on features of the binary scores, fitted by converged NLL (Newton); subclasses give the
    features, whether their coefficients must be >= 0, and the parameter names."""

    binary_only, keeps_argmax = True, False
    coef_names: tuple[str, ...] = ()
    nonneg = False
    floors = True           # fits on log(max(p, 1e-12)) where the fit split holds exact zeros
    zero_rule = "log(max(p, 1e-12))"

    def __init__(self, smooth_targets: bool = False):
        self.smooth_targets = smooth_targets

    def features(self, scores: torch.Tensor, floor: Optional[float] = None) -> torch.Tensor:
        """(N, C) float64 features of ``scores`` (N, 2), one column per name in ``coef_names``; ``floor``: the
        log-probability floor of the exact-zero rule (None: none)."""
        raise NotImplementedError

    def slope(self, params) -> tuple[str, float]:
        """(the name, the value) of the fit's slope, checked against the sane range."""
        raise NotImplementedError

    def fit(self, scores, labels, *, progress=None, cancel=None, smooth_targets: Optional[bool] = None):
        """({coefficient name: value, "c": intercept, "smooth_targets": whether smoothed targets were used},
        warnings) for ``scores`` (N, 2) and ``labels`` (N,) in {0, 1}."""
        smooth = self.smooth_targets if smooth_targets is None else bool(smooth_targets)
        warnings = fit_checks(scores, labels, self.label)
        n_zero = checks.zero_rows(scores)
        floor = checks.LOG_EPS if n_zero and self.floors else None
        y = labels.cpu().numpy().astype(np.int64)
        x = self.features(scores, floor).cpu().numpy()
        coef, c, smoothed, w = _fit_binary(x, y, x[:, 0], smooth=smooth, nonneg=self.nonneg, label=self.label,
                                          cancel=cancel)
        params = {name: float(v) for name, v in zip(self.coef_names, coef)}
        report(progress, 1.0, f"{self.label}: " + ", ".join(f"{k} = {v:.6g}" for k, v in params.items())
               + f", c = {c:.6g}")
        n = int(y.shape[0])
        if n > 1:           # fit_checks warned about a single row
            warnings += checks.split_warnings(labels, 2, self.label, len(self.coef_names) + 1)
        warnings += checks.zero_warning(n_zero, n, self.label, self.zero_rule)
        out = {**params, "c": c, "smooth_targets": smoothed, **({} if floor is None else {"log_floor": floor})}
        return out, tuple(warnings + w + checks.slope_warning(self.label, *self.slope(out)))

    def apply(self, params, scores):
        """(N, 2) float64 log-probabilities: log sigmoid(-eta), log sigmoid(eta), eta = c + coefficients . features;
        the arg-max is class 1 exactly where eta > 0."""
        floor = params.get("log_floor")
        x = self.features(scores, None if floor is None else float(floor))
        eta = float(params["c"]) + sum(float(params[name]) * x[:, j] for j, name in enumerate(self.coef_names))
        # class 1 exactly where eta > 0, also where log sigmoid(+-eta) round to the same value (|eta| < 1e-16)
        return checks.keep_argmax(_binary_log_probs(eta), torch.stack([torch.zeros_like(eta), eta], dim=1))


class Platt(_BinaryLogistic):
    """Platt scaling: sigmoid(a s + c) on the log-odds s = z_1 - z_0."""

    name, label = "platt", "Platt scaling"
    coef_names = ("a",)

    def features(self, scores, floor=None):
        """(N, 1): the log-odds z_1 - z_0 of the scores floored at ``floor``, infinite ones capped at +-1e4."""
        return _log_odds(scores, floor)[:, None]

    def slope(self, params):
        """Platt's slope a on the log-odds (1/T of temperature scaling on a binary run)."""
        return "slope a", float(params["a"])


def _beta_features(scores: torch.Tensor) -> torch.Tensor:
    """(N, 2): ln p and -ln(1 - p) of class 1, p clipped to [eps, 1 - eps] (betacal)."""
    lp = log_probabilities(scores).clamp(*_LOG_CLIP)
    return torch.stack([lp[:, 1], -lp[:, 0]], dim=1)


class Beta(_BinaryLogistic):
    """Beta calibration (Kull et al. 2017): sigmoid(a ln p + b (-ln(1 - p)) + c), a, b >= 0."""

    name, label = "beta", "Beta calibration"
    coef_names = ("a", "b")
    nonneg = True
    floors = False          # betacal's own clip of p to [eps, 1 - eps] already keeps the features finite
    zero_rule = "p clipped to [2.2e-16, 1 - 2.2e-16] (betacal's clip)"

    def features(self, scores, floor=None):
        """(N, 2): ln p and -ln(1 - p) of class 1, p clipped to [eps, 1 - eps] (``floor`` is not used)."""
        return _beta_features(scores)

    def slope(self, params):
        """Beta's mean slope (a + b) / 2: both are the slope of the log-odds for p = 1/2."""
        return "mean slope (a + b) / 2", (float(params["a"]) + float(params["b"])) / 2

