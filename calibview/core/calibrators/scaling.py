"""Vector scaling, matrix scaling and Dirichlet calibration: a softmax of an affine map of the scores.

All three calibrate with ``softmax(A(x) + b)`` on features ``x`` of each row:

- ``vs``, vector scaling: ``x = z`` (the logits), ``A(x) = x * w`` elementwise, ``w, b`` in R^K (2K parameters);
- ``ms``, matrix scaling: ``x = z``, ``A(x) = W x`` with ``W`` (K, K) (K^2 + K parameters);
- ``dirichlet``, Dirichlet calibration (Kull et al. 2019): ``x = log_softmax(z)``, ``A(x) = W x``.

Objective, over the N rows of the fit split:

    mean_i [ -log softmax(A(x_i) + b)[y_i] ]  +  penalty(W, b)

VS fits no penalty, but a class with fewer than ``min_count`` (default 10) rows in the fit split is pinned:
without its data the NLL has no finite optimum (an absent class's probability is pushed to 0, a class with one
or two rows is usually separable along its own score), and at K = 21,843 with 10,000 fit rows no class has 10.
Pinned classes keep the temperature-scaling map (``absent="ts"``, default: w_c = 1/T, T fitted on the same split)
or the identity (``absent="identity"``: w_c = 1), with b_c = 0 and the other classes' b centred to mean 0 (b is
defined up to a common shift; a free shift of the fitted classes against the pinned ones would push the pinned
classes' probabilities to 0 just as well). ``absent="free"`` is the old unpinned fit. When every class has
``min_count`` rows nothing is pinned and the fit is the plain unpenalised one (unchanged). With every class
pinned, VS is temperature scaling (no L-BFGS iterations). ``prior`` (default 0) adds a Gaussian pull worth
``prior`` samples per parameter towards the temperature-scaling start (see
:class:`~calibview.core.calibrators.scaling_fit.Objective`).
The fitted parameters report ``absent``, ``min_count``, ``prior`` and ``pinned_classes``; a warning names the
count. VS reads the stored scores chunk by chunk (``metrics.chunk_rows(K)`` rows) and makes float64 features per
chunk, so it never holds an (N, K) float64 copy.

Penalties (MS and Dirichlet), with ``off(W)`` the K(K - 1) off-diagonal entries of W, means over the entries named:

- ``"odir"`` (default; Kull et al.'s off-diagonal and intercept regularisation, normalised like dirichletcal's
  ``reg_norm=True``): ``lam * mean(off(W)^2) + mu * mean(b^2)``, plus ``(lam / K) * (W_cc - 1)^2`` for each
  class c absent from the fit split (ODIR leaves the diagonal free, and without data for class c the NLL keeps
  falling as W_cc grows, e.g. to 200 in Dirichlet: its probabilities would collapse to exp(-2000));
- ``"l2"``: ``lam * mean((W - I)^2) + mu * mean(b^2)``.

Defaults: ``lam = "auto"`` (chosen on a held-out fifth of the fit split, see ``AUTO_GRID``) and ``mu = lam``.
ODIR contains temperature scaling (W = I / T) unpenalised.

The probabilities do not change under ``W -> W + 1 v^T, b -> b + c 1`` (the same v.x + c added to every logit).
The returned (W, b) is the representative of its class that minimises the penalty: off-diagonal entries of each
column (ODIR), or the columns of W - I (L2), have mean 0, and b has mean 0 (W_cc above is read in this form).
So the parameters minimise the objective as written; the fit optimises over the classes (see
:func:`~calibview.core.calibrators.scaling_fit.canonical`).

Fitting: full-batch L-BFGS in float64 on standardised features, the loss and its gradient written out by hand
and evaluated in chunks of rows (:mod:`calibview.core.calibrators.scaling_fit`). Start: temperature scaling,
``w = 1 / T`` / ``W = I / T``, ``b = 0``, with T fitted on the same split (the identity when T is out of
(1e-3, 1e3)).

Exact zeros of a probabilities file reach these methods as -inf log-probabilities. Where the fit split holds
one, the features are log(max(p, 1e-12)) (``log_floor = log(1e-12)``, the rule of
:mod:`~calibview.core.calibrators.checks`, with a warning that counts the rows); otherwise -inf (and, for
Dirichlet, anything below) is floored at ``log_floor = log(float64 tiny) ~ -708.4`` (dirichletcal clips
probabilities at the dtype's tiny the same way), so ``0 * -inf`` never makes a NaN.
"""

from __future__ import annotations

import functools

import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import torch

from calibview.core.calibrators import checks
from calibview.core.calibrators.base import Method
from calibview.core.calibrators.scaling_fit import Objective, canonical, minimise, polish
from calibview.core.calibrators.temperature import fit_temperature
from calibview.core.errors import CalibviewError, check_cancel, report
from calibview.core.io import stream
from calibview.core.stats.metrics import chunk_rows

LOG_FLOOR = math.log(np.finfo(np.float64).tiny)     # -708.396...
MAX_MATRIX_PARAMS = 25_000_000                      # K^2 above this is refused (K > 5000)
PENALTIES = ("odir", "l2")
ABSENT = ("ts", "identity", "free")                 # VS: the map of classes absent from the fit split
_SCALE_WARN = 1e3
_SEPARABLE_NLL = 1e-6


def _features(scores: torch.Tensor, log_probs: bool, floor: float) -> torch.Tensor:
    """float64 features: the scores, or their log-softmax (Dirichlet), with -inf (and anything below the floor
    for log-probabilities) replaced by ``floor``; a floor above LOG_FLOOR is the exact-zero rule
    log(max(p, eps)), applied to every score."""
    x = scores.to(torch.float64)
    if log_probs:
        return torch.log_softmax(x, dim=1).clamp_min_(floor)
    if floor > LOG_FLOOR:
        return x.clamp_min(floor)
    # the -inf check reads the scores as they came (float32 or float16: half the bytes of x or less)
    return torch.nan_to_num(x, neginf=floor) if checks.has_neg_inf(scores) else x


def _map_nll(scores, y: torch.Tensor, w: float, floor: float, cancel) -> float:
    """Mean NLL of softmax(w * features) over the fit split ``scores`` (N, K) (a tensor or a streamed split) with
    labels ``y`` (N,), float64, one pass in chunks of rows."""
    n, k = int(scores.shape[0]), int(scores.shape[1])
    chunks = scores.chunks() if stream.is_streamed(scores) else stream.tensor_chunks(scores, y, chunk_rows(k))
    total = 0.0
    for _, z, yc in chunks:
        check_cancel(cancel)
        lp = torch.log_softmax(_features(z, False, floor) * w, dim=1)      # (the features may be z itself)
        total -= float(lp.gather(1, yc.to(lp.device, torch.int64)[:, None]).sum())
    return total / n


class _AffineSoftmax(Method):
    """softmax(A(x) + b) on features x of the scores; subclasses set ``matrix`` and ``log_probs``."""

    matrix = False          # W (K, K) instead of w (K,)
    log_probs = False       # features are log_softmax(scores) (Dirichlet) instead of the scores

    def __init__(self, penalty: str | None = None, lam: float | Literal["auto"] = "auto", mu: float | None = None,
                 max_iter: int = 500, rel_tol: float = 1e-10):
        if self.matrix:
            penalty = "odir" if penalty is None else penalty
            if penalty not in PENALTIES:
                raise CalibviewError(f"Unknown penalty {penalty!r} for {self.label}; choose from "
                                     f"{', '.join(PENALTIES)}.")
            if lam != "auto":
                mu = lam if mu is None else mu
                if not (lam >= 0 and mu >= 0 and math.isfinite(lam) and math.isfinite(mu)):
                    raise CalibviewError(f"The {self.label} penalty strengths must be finite and >= 0 "
                                         f"(got lam = {lam}, mu = {mu}).")
        elif penalty is not None:
            raise CalibviewError(f"{self.label} takes no penalty; use matrix scaling or Dirichlet for one.")
        self.penalty = penalty
        self.lam = "auto" if lam == "auto" else float(lam)
        self.mu = None if mu is None else float(mu)
        self.max_iter, self.rel_tol = int(max_iter), float(rel_tol)

    #: lam = "auto": the strength is chosen on a held-out fifth of the fit split from this grid, times K^3 / N
    #: (the mean-normalised penalty needs ~K^2 more weight as K grows, and less as N grows). With a fixed small
    #: strength, matrix scaling on CIFAR-100's 5,000 validation samples lost 12 points of accuracy.
    AUTO_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)

    def _strengths(self, x, y, k: int, cancel, progress, temperature: float = 1.0) -> tuple[float, float, dict]:
        """(lam, mu, selection record) for the main fit."""
        if not self.matrix:
            return 0.0, 0.0, {}
        if self.lam != "auto":
            return self.lam, self.mu, {}
        n = x.shape[0]
        if n < 20:
            lam = k ** 3 / max(n, 1)
            return lam, lam, {"rule": "K^3/N (too few samples to hold out)"}
        gen = torch.Generator(device="cpu").manual_seed(0)
        perm = torch.randperm(n, generator=gen).to(x.device)
        hold, train = perm[: n // 5], perm[n // 5:]
        scale = k ** 3 / train.numel()
        scores = {}
        for i, c in enumerate(self.AUTO_GRID):
            lam = c * scale
            sub = None if progress is None else (lambda f, m, i=i: progress(0.6 * (i + f) / len(self.AUTO_GRID), m))
            objective = Objective(x[train], y[train], True, self.penalty, lam, lam, cancel)
            theta, _ = minimise(objective, self._theta0(objective, k, x.device, temperature),
                                 max_iter=self.max_iter,
                                 rel_tol=1e-7, what=self.label, progress=sub)
            a_par, b = objective.to_model(theta)
            logits = torch.addmm(b, x[hold], a_par.T)
            scores[lam] = float(torch.nn.functional.cross_entropy(logits, y[hold]))
        best = min(scores, key=scores.get)
        best_full = best * train.numel() / n
        return best_full, best_full, {"rule": "held-out fifth of the fit split",
                                      "grid": list(scores), "holdout_nll": list(scores.values())}

    def _theta0(self, objective, k: int, device, temperature: float = 1.0):
        """Start at temperature scaling, W = I / T, b = 0 (contained in all three models: for Dirichlet,
        softmax(log_softmax(z) / T) = softmax(z / T)); from the identity, L-BFGS needed several times more
        iterations on CIFAR-like data. Pinned VS classes start (and stay) at their pinned w."""
        eye = torch.eye(k, dtype=torch.float64, device=device) if self.matrix else \
            torch.ones(k, dtype=torch.float64, device=device)
        eye = eye / temperature
        if getattr(objective, "pinned", None) is not None:
            eye[objective.pinned] = objective.pinned_w
        return objective.from_model(eye, torch.zeros(k, dtype=torch.float64, device=device))

    def fit(self, scores, labels, *, progress=None, cancel=None):
        """({"W" (K, K) or "w" (K,), "b" (K,), the settings and the fit's NLL, objective, iterations and
        convergence}, warnings) for ``scores`` (N, K) logits or log-probabilities and ``labels`` (N,)."""
        check_cancel(cancel)
        n, k = int(scores.shape[0]), int(scores.shape[1])
        if n == 0:
            raise CalibviewError(f"{self.label} needs at least one sample in the fit split, but it is empty.")
        n_params = k * k + k if self.matrix else 2 * k
        if self.matrix and k * k > MAX_MATRIX_PARAMS:
            raise CalibviewError(
                f"{self.label} with K = {k} classes would fit {n_params:,} parameters, more than the "
                f"{MAX_MATRIX_PARAMS:,} supported; use vector or temperature scaling, which scale to any K.")
        warnings: list[str] = []
        if n == 1:
            warnings.append(f"{self.label} was fitted on a single sample; its parameters are meaningless.")
        streamed = stream.is_streamed(scores)
        absent_rule = getattr(self, "absent", "free")
        n_zero = checks.zero_rows(scores)
        floor = checks.LOG_EPS if n_zero else LOG_FLOOR
        warnings += checks.zero_warning(n_zero, n, self.label)
        with torch.no_grad():
            # VS reads the scores chunk by chunk in their own dtype (features made per chunk, no (N, K) float64
            # copy: 1.7 GB at 10,000 x 21,843); matrix methods (K <= 5,000) keep the features in memory
            x = scores if streamed or not self.matrix else _features(scores, self.log_probs, floor)
            y = labels.to(device=x.device, dtype=torch.int64)
            counts = torch.bincount(y, minlength=k)
            absent = int((counts == 0).sum())
            temperature = fit_temperature(scores, y, cancel=cancel, floor=checks.LOG_EPS if n_zero else None)[0]
            if not 1e-3 < temperature < 1e3:        # a separable fit split: start from the identity instead
                temperature = 1.0
            pinned, pinned_w = None, 1.0
            rare = counts < getattr(self, "min_count", 1)
            if bool(rare.any()) and not self.matrix and absent_rule != "free":
                pinned, pinned_w = rare, (1.0 / temperature if absent_rule == "ts" else 1.0)
                n_rare = int(rare.sum())
                warnings.append(
                    f"{n_rare} of the {k} classes have fewer than {self.min_count} rows in the fit split "
                    f"({absent} do not occur in the fit split); {self.label} keeps "
                    + ("the temperature-scaling map" if absent_rule == "ts" else "the identity map")
                    + f" for them (w = {pinned_w:.6g}, b = the mean b of the other classes).")
            elif absent:
                warnings.append(f"{absent} of the {k} classes do not occur in the fit split, so the fit pushes "
                                "their probabilities down with nothing to say how far; "
                                + ("only the penalty keeps them finite." if self.matrix else
                                   "they stay finite, but are unreliable."))
            # pinned VS classes have no free parameters: count only those the fit really chooses
            n_free = n_params if pinned is None else 2 * (k - int(pinned.sum()))
            if 1 < n < 10 * n_free:
                warnings.append(f"{self.label} fits {n_free:,} parameters on only {n:,} samples (fewer than 10 "
                                "per parameter), so it will overfit the fit split; prefer "
                                + ("temperature or vector scaling" if self.matrix else "temperature scaling")
                                + ", or more fit data.")
            lam, mu, selection = self._strengths(x, y, k, cancel, progress, temperature)
            main = progress
            if selection.get("grid") and progress is not None:      # the selection used 0 .. 0.6
                main = lambda f, m: progress(0.6 + 0.4 * f, m)      # noqa: E731
            stream_args = {}
            if streamed:        # matrix methods refuse a streamed split (calibrators.fit), so this is VS
                passes = [0]

                def tick(fr: float) -> None:
                    passes[0] += fr >= 1.0
                    report(progress, min(0.95, (passes[0] + fr % 1.0) / 100),
                           f"{self.label}: pass {passes[0] + (fr < 1.0)} over the fit split, {fr:.0%} read")
                stream_args = {"tick": tick}
            if not self.matrix:
                stream_args.update(feature=functools.partial(_features, log_probs=self.log_probs, floor=floor),
                                   pinned=pinned, pinned_w=pinned_w)
            if not self.matrix and pinned is not None and bool(pinned.all()) and not stream.is_sharded(scores):
                # nothing to fit (temperature scaling's map for every class): one pass for its NLL, no moments
                nll = _map_nll(scores, y, pinned_w, floor, cancel)
                a_par = torch.full((k,), pinned_w, dtype=torch.float64, device=y.device)
                b = torch.zeros(k, dtype=torch.float64, device=y.device)
                info = {"objective": nll, "nll": nll, "iterations": 0, "converged": True}
                return self._params(a_par, b, info, pinned, absent_rule, floor, lam, mu, selection, warnings,
                                    progress)
            objective = Objective(x, y, self.matrix, self.penalty, lam, mu, cancel, **stream_args)
            del x
            theta0 = self._theta0(objective, k, y.device, temperature)
            if not self.matrix:
                objective.prior, objective.theta0 = self.prior, theta0
            if pinned is not None and bool(pinned.all()):       # the same on a sharded split: its NLL by one map
                f, nll, _ = objective(theta0)
                theta, info = theta0, {"objective": f, "nll": nll, "iterations": 0, "converged": True}
            else:
                theta, info = minimise(objective, theta0, max_iter=self.max_iter, rel_tol=self.rel_tol,
                                        what=self.label, progress=main)
                if not self.matrix and info["converged"] and info["nll"] >= _SEPARABLE_NLL:
                    theta, info["newton_steps"], (info["objective"], info["nll"], _) = polish(
                        objective, theta, info["value"], what=self.label, progress=main)
            a_par, b = objective.to_model(theta)
            if self.matrix:
                a_par, b = canonical(a_par, b, self.penalty)
        return self._params(a_par, b, info, pinned, absent_rule, floor, lam, mu, selection, warnings, progress)

    def _params(self, a_par, b, info, pinned, absent_rule, floor, lam, mu, selection, warnings, progress):
        """(params, warnings) of :meth:`fit` from the fitted model's (w or W, b) and the fit's ``info``."""
        scale = max(float(a_par.abs().max()), float(b.abs().max()))
        if info["nll"] < _SEPARABLE_NLL or scale > _SCALE_WARN:
            warnings.append(f"{self.label} drove the fit-split NLL to {info['nll']:.3g} with parameters up to "
                            f"{scale:.3g} in size: the fit split is (nearly) separable, so the fit is overconfident "
                            "and was stopped at finite parameters.")
        if not info["converged"]:
            warnings.append(f"{self.label} did not converge in {info['iterations']} L-BFGS iterations.")
        warnings += self._slope_warnings(a_par, pinned)
        params: dict[str, Any] = {("W" if self.matrix else "w"): a_par.cpu().numpy().tolist(),
                                  "b": b.cpu().numpy().tolist()}
        if self.matrix:
            params.update(penalty=self.penalty, lam=lam, mu=mu)
            if selection:
                params["lam_selection"] = selection
        else:
            params.update(absent=absent_rule, min_count=self.min_count, prior=self.prior,
                          pinned_classes=0 if pinned is None else int(pinned.sum()))
        params.update(log_floor=floor, fit_nll=info["nll"], fit_objective=info["objective"],
                      iterations=info["iterations"], converged=info["converged"])
        if "newton_steps" in info:
            params["newton_steps"] = info["newton_steps"]
        report(progress, 1.0, f"{self.label}: fit-split NLL {info['nll']:.6g}")
        return params, tuple(warnings)

    def _slope_warnings(self, a_par: torch.Tensor, pinned) -> list[str]:
        """The slope check of :mod:`~calibview.core.calibrators.checks`: every fitted weight (VS; pinned classes
        keep theirs), or the mean diagonal of the canonical W (MS, Dirichlet: the 1/T it stands for)."""
        if self.matrix:
            return checks.slope_warning(self.label, "mean diagonal slope", float(a_par.diagonal().mean()))
        w = a_par if pinned is None else a_par[~pinned]
        if w.numel() == 0:
            return []
        lo, hi = float(w.min()), float(w.max())
        return checks.slope_warning(self.label, "smallest weight", lo) or \
            checks.slope_warning(self.label, "largest weight", hi)

    def prepare(self, params: Mapping[str, Any], device: torch.device) -> Any:
        """(W or w, b, log floor) as float64 tensors on ``device``; malformed parameters are a user error."""
        key = "W" if self.matrix else "w"
        try:
            a_par = torch.tensor(params[key], dtype=torch.float64, device=device)
            b = torch.tensor(params["b"], dtype=torch.float64, device=device)
        except (KeyError, TypeError, ValueError) as e:
            raise CalibviewError(f"The {self.label} parameters are malformed ({e}); refit the calibrator.") from None
        k = b.shape[0] if b.ndim == 1 else -1
        if k < 1 or a_par.shape != ((k, k) if self.matrix else (k,)):
            raise CalibviewError(f"The {self.label} parameters have inconsistent shapes {tuple(a_par.shape)} and "
                                 f"{tuple(b.shape)}; refit the calibrator.")
        return a_par, b, float(params.get("log_floor", LOG_FLOOR))

    def apply(self, prepared, scores):
        """(N, K) float64 log_softmax(A(x) + b) of the features x of ``scores`` (N, K)."""
        a_par, b, floor = prepared
        x = _features(scores, self.log_probs, floor)
        a = torch.addmm(b, x, a_par.T) if self.matrix else torch.addcmul(b, x, a_par)
        return torch.log_softmax(a, dim=1)


class VectorScaling(_AffineSoftmax):
    """softmax(z * w + b), unpenalised mean NLL; classes absent from the fit split keep the temperature-scaling
    map (``absent="ts"``, default), the identity (``"identity"``) or are fitted like the others (``"free"``, no
    finite optimum); see the module docstring."""

    name, label, keeps_argmax, streams = "vs", "Vector scaling", False, True

    def __init__(self, absent: str = "ts", min_count: int = 10, prior: float = 0.0, **kwargs):
        # L-BFGS only has to bring the Newton steps (:func:`polish`) within their reach: stopping it at 1e-8
        # rather than 1e-10 saved ~20 of 69 iterations at 50,000 x 1,000 for one more Newton step
        kwargs.setdefault("rel_tol", 1e-8)
        super().__init__(**kwargs)
        if absent not in ABSENT:
            raise CalibviewError(f"Unknown absent={absent!r} for {self.label}; choose from {', '.join(ABSENT)}.")
        if not (math.isfinite(prior) and prior >= 0):
            raise CalibviewError(f"The {self.label} prior must be finite and >= 0 (got {prior}).")
        if int(min_count) != min_count or min_count < 1:
            raise CalibviewError(f"The {self.label} min_count must be an integer >= 1 (got {min_count}).")
        self.absent, self.min_count, self.prior = absent, int(min_count), float(prior)


class MatrixScaling(_AffineSoftmax):
    """softmax(W z + b), mean NLL + ODIR (default) or L2 penalty; see the module docstring."""

    name, label, keeps_argmax, streams = "ms", "Matrix scaling", False, False
    matrix = True


class Dirichlet(MatrixScaling):
    """softmax(W log_softmax(z) + b) (Kull et al. 2019), mean NLL + ODIR (default) or L2 penalty."""

    name, label = "dirichlet", "Dirichlet calibration"
    log_probs = True

