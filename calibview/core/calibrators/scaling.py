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
``prior`` samples per parameter towards the temperature-scaling start (see ``_Objective._prior_and_grad``).
The fitted parameters report ``absent``, ``min_count``, ``prior`` and ``pinned_classes``; a warning names the
count. VS reads the stored scores chunk by chunk (``metrics.chunk_rows(K)`` rows) and makes float64 features per
chunk, so it never holds an (N, K) float64 copy.

Penalties (MS and Dirichlet), with ``off(W)`` the K(K - 1) off-diagonal entries of W, means over the entries named:

- ``"odir"`` (default; Kull et al.'s off-diagonal and intercept regularisation, normalised like dirichletcal's
  ``reg_norm=True``): ``lam * mean(off(W)^2) + mu * mean(b^2)``, plus ``(lam / K) * (W_cc - 1)^2`` for each
  class c absent from the fit split (ODIR leaves the diagonal free, and without data for class c the NLL keeps
  falling as W_cc grows, e.g. to 200 in Dirichlet: its probabilities would collapse to exp(-2000));
- ``"l2"``: ``lam * mean((W - I)^2) + mu * mean(b^2)``.

Defaults ``lam = mu = 1e-3``. ODIR contains temperature scaling (W = I / T) unpenalised.

The probabilities do not change under ``W -> W + 1 v^T, b -> b + c 1`` (the same v.x + c added to every logit).
The returned (W, b) is the representative of its class that minimises the penalty: off-diagonal entries of each
column (ODIR), or the columns of W - I (L2), have mean 0, and b has mean 0 (W_cc above is read in this form).
So the parameters minimise the objective as written; the fit optimises over the classes (see :func:`_canonical`).

Fitting: full-batch L-BFGS (strong-Wolfe line search) in float64 on standardised features, one L-BFGS
iteration per optimiser step, until three iterations in a row each lower the objective by less than 1e-10
relatively (or the largest gradient entry is below 1e-10, or 500 iterations; a cancel stops it between chunks
of rows). The loss and its gradient are written out by hand and evaluated in chunks of rows, so memory stays at
the (N, K) features plus one chunk. Start: ``w = 1`` / ``W = I``, ``b = 0``, the identity map (for Dirichlet
softmax(log p) = p).

Exact zeros of a probabilities file reach these methods as -inf log-probabilities; features are floored at
``log_floor = log(float64 tiny) ~ -708.4`` (dirichletcal clips probabilities at the dtype's tiny the same way),
so ``0 * -inf`` never makes a NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import torch

from calibview.core.io import stream
from calibview.core.calibrators.base import Method, fit_temperature, register
from calibview.core.errors import CalibviewError, check_cancel, report
from calibview.core.stats.metrics import chunk_rows

LOG_FLOOR = math.log(np.finfo(np.float64).tiny)     # -708.396...
MAX_MATRIX_PARAMS = 25_000_000                      # K^2 above this is refused (K > 5000)
PENALTIES = ("odir", "l2")
ABSENT = ("ts", "identity", "free")                 # VS: the map of classes absent from the fit split
_CHUNK_FLOPS = 1 << 26                              # rows per chunk <= this / K^2 for a matrix (a cancel check
                                                    # per ~0.05 s), and <= metrics.chunk_rows(K) for all
_SCALE_WARN = 1e3
_SEPARABLE_NLL = 1e-6
_PATIENCE = 3                                       # iterations in a row below rel_tol to stop


def _features(scores: torch.Tensor, log_probs: bool, floor: float) -> torch.Tensor:
    """float64 features: the scores, or their log-softmax (Dirichlet), with -inf (and anything below the floor
    for log-probabilities) replaced by ``floor``."""
    x = scores.to(torch.float64)
    if log_probs:
        return torch.log_softmax(x, dim=1).clamp_min_(floor)
    return torch.nan_to_num(x, neginf=floor) if bool(torch.isneginf(x).any()) else x


def _unpack(theta: torch.Tensor, k: int, matrix: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of a flat parameter vector: (W (K, K) or w (K,), b (K,))."""
    if matrix:
        return theta[:k * k].view(k, k), theta[k * k:]
    return theta[:k], theta[k:]


def _canonical(w: torch.Tensor, b: torch.Tensor, penalty: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The penalty-minimising representative of (W, b) among the maps with the same probabilities.

    softmax(W x + b) does not change when the same vector v^T x + c is added to every logit, i.e. under
    W -> W + 1 v^T, b -> b + c 1. The NLL is flat along these K + 1 directions and only the (weak) penalty pins
    them, which makes L-BFGS crawl. The fit therefore penalises the best representative (closed form: v_k
    centres column k of the penalised entries, c centres b); the minimum of the objective is unchanged, and the
    returned parameters are this representative, i.e. a minimiser of the objective as stated."""
    k = w.shape[0]
    eye = torch.eye(k, dtype=w.dtype, device=w.device)
    if penalty == "odir":
        off = (w - w * eye).sum(dim=0) / max(1, k - 1)              # mean off-diagonal entry of each column
    else:
        off = (w - eye).mean(dim=0)
    return w - off, b - b.mean()


class _Objective:
    """Mean NLL + penalty and its gradient, evaluated chunk by chunk.

    The optimiser works on standardised features u = (x - m) / s (column means and standard deviations of the
    fit split) with parameters theta = (A, c) and logits A u + c; the model's own parameters are W = A / s
    (column-wise; w = a / s for VS) and b = c - W m. Same model, but the Hessian is far better conditioned:
    log-probability features have a large common offset that makes plain L-BFGS crawl (thousands of
    iterations for Dirichlet at K = 100). The penalty is defined on (W, b) and chained back to (A, c)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, matrix: bool, penalty: str | None, lam: float,
                 mu: float, cancel=None, feature=None, tick=None, pinned: torch.Tensor | None = None,
                 pinned_w: float = 1.0):
        self.y, self.matrix, self.penalty, self.lam, self.mu = y, matrix, penalty, lam, mu
        self.n, self.k = x.shape
        self.cancel, self.tick = cancel, tick
        self.rows = max(1, min(chunk_rows(self.k), _CHUNK_FLOPS // self.k ** 2 if matrix else self.n))
        if feature is None:
            self.m = x.mean(dim=0)
            sd = x.std(dim=0, correction=0)
            self.u, self.source, self.feature = None, None, None
        else:
            # x holds the raw scores (in memory in their own dtype, or a StreamedSplit read from disk on every
            # pass) and ``feature`` maps a chunk of rows to float64 features: no (N, K) float64 copy. One first
            # pass gives the column means and standard deviations.
            self.u, self.source, self.feature = None, x, feature
            shift = s1 = s2 = None
            for _, z, _ in self._chunks(standardised=False):
                if shift is None:
                    shift = z.mean(dim=0)
                    s1, s2 = torch.zeros_like(shift), torch.zeros_like(shift)
                d = z - shift
                s1 += d.sum(dim=0)
                s2 += d.square().sum(dim=0)
            mean_d = s1 / self.n
            self.m = shift + mean_d
            sd = (s2 / self.n - mean_d.square()).clamp_min(0).sqrt()
        self.s = torch.where(sd > 1e-8, sd, torch.ones_like(sd))
        if feature is None:
            self.u = (x - self.m).div_(self.s)
        counts = torch.bincount(y, minlength=self.k)
        self.absent = (counts == 0).to(torch.float64) if bool((counts == 0).any()) else None
        # VS with pinned classes (the absent ones): their (w_c, b_c) stay where the start put them (gradient 0),
        # and the other classes' b are centred (mean 0, the pinned b_c = 0): b is only defined up to a common
        # shift, and a free shift of the present classes against the pinned ones would push the pinned classes'
        # probabilities to 0 as surely as free parameters do.
        self.pinned, self.pinned_w = pinned, pinned_w
        self.prior, self.theta0 = 0.0, None         # VS prior strength and centre (set by the fit)
        if pinned is not None:
            self.free = (~pinned).to(torch.float64)
            self.n_free = max(1.0, float(self.free.sum()))

    def _chunks(self, standardised: bool = True):
        """(first row, standardised features u, labels) over the fit split: the features in memory, or chunks
        read from disk and standardised on the fly."""
        if self.source is None:
            yield 0, self.u, self.y
            return
        chunks = self.source.chunks() if stream.is_streamed(self.source) else \
            stream.tensor_chunks(self.source, self.y, self.rows)
        for start, z, y in chunks:
            check_cancel(self.cancel)
            x = self.feature(z)
            yield start, ((x - self.m).div_(self.s) if standardised else x), y
            if self.tick is not None:
                self.tick(min(self.n, start + z.shape[0]) / self.n)

    def _centred(self, a_par: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """c with the free classes' b = c - w m shifted to mean 0 (VS with pinned classes; else c itself)."""
        if self.pinned is None:
            return c
        delta = ((c - a_par * self.m / self.s) * self.free).sum() / self.n_free
        return c - delta * self.free

    def to_model(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, c = _unpack(theta, self.k, self.matrix)
        w = a / self.s
        b = self._centred(a, c) - (w @ self.m if self.matrix else w * self.m)
        if self.pinned is not None:         # exactly the pinned values (theta holds them up to rounding)
            w, b = w.clone(), b.clone()
            w[self.pinned] = self.pinned_w
            b[self.pinned] = 0.0
        return w, b

    def from_model(self, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.cat([(w * self.s).reshape(-1), b + (w @ self.m if self.matrix else w * self.m)])

    def nll_and_grad(self, theta: torch.Tensor) -> tuple[float, torch.Tensor]:
        a_par, b = _unpack(theta, self.k, self.matrix)
        b = self._centred(a_par, b)
        grad = torch.zeros_like(theta)
        g_a, g_b = _unpack(grad, self.k, self.matrix)
        total = torch.zeros((), dtype=torch.float64, device=theta.device)
        for _, u, y in self._chunks():
            for start in range(0, u.shape[0], self.rows):
                check_cancel(self.cancel)
                self._accumulate(a_par, b, u[start:start + self.rows], y[start:start + self.rows, None],
                                 total, g_a, g_b)
        grad /= self.n
        if self.pinned is not None:
            # chain rule through the centring (c_j -= free_j * mean_free(c - a m / s)), then pin
            g_sum = (g_b * self.free).sum() / self.n_free
            g_b.sub_(g_sum * self.free)
            g_a.add_(g_sum * self.free * self.m / self.s)
            g_a[self.pinned] = 0.0
            g_b[self.pinned] = 0.0
        return float(total) / self.n, grad

    def _accumulate(self, a_par, b, uc, yc, total, g_a, g_b) -> None:
        """Add one chunk's NLL sum and gradient (in place)."""
        a = torch.addmm(b, uc, a_par.T) if self.matrix else torch.addcmul(b, uc, a_par)
        a.sub_(a.amax(dim=1, keepdim=True))
        a_y = a.gather(1, yc)
        s = a.exp_().sum(dim=1, keepdim=True)
        total += (s.log() - a_y).sum()
        a.div_(s).scatter_add_(1, yc, torch.full_like(a_y, -1.0))     # softmax - one-hot
        g_b += a.sum(dim=0)
        if self.matrix:
            g_a.addmm_(a.T, uc)
        else:
            g_a += a.mul_(uc).sum(dim=0)

    def penalty_and_grad(self, theta: torch.Tensor) -> tuple[float, torch.Tensor]:
        grad = torch.zeros_like(theta)
        if not self.matrix:
            return self._prior_and_grad(theta, grad)
        if self.penalty is None:
            return 0.0, grad
        k = self.k
        w, b = _canonical(*self.to_model(theta), self.penalty)
        d = w - torch.eye(k, dtype=w.dtype, device=w.device)
        if self.penalty == "odir":
            d.fill_diagonal_(0.0)
            count = max(1, k * (k - 1))
        else:
            count = k * k
        # the shift in _canonical minimises the penalty, so its gradient is the penalty's gradient at the
        # shifted point (envelope theorem); chain it through b = c - W m, W = A / s
        g_w = (2 * self.lam / count) * d
        g_b = (2 * self.mu / k) * b
        value = self.lam * d.square().sum() / count + self.mu * b.square().sum() / k
        if self.penalty == "odir" and self.absent is not None:
            # absent classes: lam / K * (W'_cc - 1)^2 with W'_cc = W_cc - mean_{j != c} W_jc (shift-invariant)
            e = (w.diagonal() - 1) * self.absent
            value = value + self.lam / k * e.square().sum()
            t = (2 * self.lam / k) * e
            g_w -= t / max(1, k - 1)
            g_w.diagonal().add_(t * (1 + 1 / max(1, k - 1)))
        g_a, g_c = _unpack(grad, k, True)
        g_c += g_b
        g_a += (g_w - torch.outer(g_b, self.m)).div_(self.s)
        return float(value), grad

    def _prior_and_grad(self, theta: torch.Tensor, grad: torch.Tensor) -> tuple[float, torch.Tensor]:
        """VS: (prior / 2N) * sum over the free classes of (a_k - a0_k)^2 + (d_k - mean d)^2, d = c - c0, in the
        standardised parameters (slope per standard deviation of the class's score, logit at its mean score)
        around the start (a0, c0), temperature scaling: a Gaussian prior worth ``prior`` samples per parameter."""
        if not self.prior or self.theta0 is None:
            return 0.0, grad
        k = self.k
        d = theta - self.theta0
        da, dc = d[:k], d[k:]
        free = self.free if self.pinned is not None else torch.ones_like(dc)
        dc = (dc - (dc * free).sum() / free.sum()) * free
        da = da * free
        scale = self.prior / self.n
        grad[:k] = scale * da
        grad[k:] = scale * dc
        return float(0.5 * scale * (da.square().sum() + dc.square().sum())), grad

    def __call__(self, theta: torch.Tensor) -> tuple[float, float, torch.Tensor]:
        """(objective, NLL, gradient of the objective in theta)."""
        nll, g = self.nll_and_grad(theta)
        pen, gp = self.penalty_and_grad(theta)
        return nll + pen, nll, g.add_(gp)


def _minimise(objective: _Objective, theta: torch.Tensor, *, max_iter: int, rel_tol: float, what: str,
              progress=None) -> tuple[torch.Tensor, dict[str, Any]]:
    """Full-batch L-BFGS to convergence; returns (parameters, info with objective, nll, iterations, converged).

    One L-BFGS iteration per ``step`` (its curvature history persists across steps); stops when three iterations
    in a row each lower the objective by less than ``rel_tol`` relatively (one such iteration is no proof: near
    the optimum L-BFGS alternates tiny and useful steps; L-BFGS also stops moving once the largest gradient
    entry is below 1e-10), or after ``max_iter`` iterations."""
    theta = theta.detach().clone()
    history = int(min(20, max(5, 2e9 // (16 * theta.numel()))))        # keep the L-BFGS memory under ~2 GB
    opt = torch.optim.LBFGS([theta], lr=1.0, max_iter=1, max_eval=25, tolerance_grad=1e-10,
                            tolerance_change=1e-16, history_size=history, line_search_fn="strong_wolfe")
    cache: dict[str, Any] = {}      # the last evaluation: each step re-evaluates where the previous one ended

    def evaluate() -> tuple[float, float, torch.Tensor]:
        if "theta" not in cache or not torch.equal(cache["theta"], theta):
            cache["value"] = objective(theta)
            cache["theta"] = theta.clone()
        return cache["value"]

    def closure():
        f, _, theta.grad = evaluate()
        return f

    f_prev, shown, converged, it, small = math.inf, 0.0, False, 0, 0
    for it in range(1, max_iter + 1):
        before = theta.clone()
        f = float(opt.step(closure))            # the objective at ``before``
        if not bool(torch.isfinite(theta).all()):
            theta = before                      # a runaway line search: keep the last finite point
            break
        decrease = (f_prev - f) / max(abs(f), 1e-300) if math.isfinite(f_prev) else math.inf
        if 0 < decrease < math.inf:            # progress: how far the decrease is on its way down to rel_tol
            shown = max(shown, min(1.0, math.log10(decrease) / math.log10(rel_tol)))
        shown = max(shown, it / max_iter)
        report(progress, 0.98 * shown, f"{what}: NLL {cache['value'][1]:.8g} after {it} iterations")
        small = small + 1 if decrease < rel_tol else 0
        if small >= _PATIENCE:
            converged = True
            break
        f_prev = f
    f, nll, _ = objective(theta) if not torch.equal(cache["theta"], theta) else cache["value"]
    return theta, {"objective": f, "nll": nll, "iterations": it, "converged": converged}


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
            objective = _Objective(x[train], y[train], True, self.penalty, lam, lam, cancel)
            theta, _ = _minimise(objective, self._theta0(objective, k, x.device, temperature),
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
        with torch.no_grad():
            # VS reads the scores chunk by chunk in their own dtype (features made per chunk, no (N, K) float64
            # copy: 1.7 GB at 10,000 x 21,843); matrix methods (K <= 5,000) keep the features in memory
            x = scores if streamed or not self.matrix else _features(scores, self.log_probs, LOG_FLOOR)
            y = labels.to(device=x.device, dtype=torch.int64)
            counts = torch.bincount(y, minlength=k)
            absent = int((counts == 0).sum())
            temperature = fit_temperature(scores, y, cancel=cancel)[0]
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
                stream_args.update(feature=lambda z: _features(z, self.log_probs, LOG_FLOOR), pinned=pinned,
                                   pinned_w=pinned_w)
            objective = _Objective(x, y, self.matrix, self.penalty, lam, mu, cancel, **stream_args)
            del x
            theta0 = self._theta0(objective, k, y.device, temperature)
            if not self.matrix:
                objective.prior, objective.theta0 = self.prior, theta0
            if pinned is not None and bool(pinned.all()):       # nothing to fit: temperature scaling
                f, nll, _ = objective(theta0)
                theta, info = theta0, {"objective": f, "nll": nll, "iterations": 0, "converged": True}
            else:
                theta, info = _minimise(objective, theta0, max_iter=self.max_iter, rel_tol=self.rel_tol,
                                        what=self.label, progress=main)
            a_par, b = objective.to_model(theta)
            if self.matrix:
                a_par, b = _canonical(a_par, b, self.penalty)
        scale = max(float(a_par.abs().max()), float(b.abs().max()))
        if info["nll"] < _SEPARABLE_NLL or scale > _SCALE_WARN:
            warnings.append(f"{self.label} drove the fit-split NLL to {info['nll']:.3g} with parameters up to "
                            f"{scale:.3g} in size: the fit split is (nearly) separable, so the fit is overconfident "
                            "and was stopped at finite parameters.")
        if not info["converged"]:
            warnings.append(f"{self.label} did not converge in {info['iterations']} L-BFGS iterations.")
        params: dict[str, Any] = {("W" if self.matrix else "w"): a_par.cpu().numpy().tolist(),
                                  "b": b.cpu().numpy().tolist()}
        if self.matrix:
            params.update(penalty=self.penalty, lam=lam, mu=mu)
            if selection:
                params["lam_selection"] = selection
        else:
            params.update(absent=absent_rule, min_count=self.min_count, prior=self.prior,
                          pinned_classes=0 if pinned is None else int(pinned.sum()))
        params.update(log_floor=LOG_FLOOR, fit_nll=info["nll"], fit_objective=info["objective"],
                      iterations=info["iterations"], converged=info["converged"])
        report(progress, 1.0, f"{self.label}: fit-split NLL {info['nll']:.6g}")
        return params, tuple(warnings)

    def prepare(self, params: Mapping[str, Any], device: torch.device) -> Any:
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


register(VectorScaling())
register(MatrixScaling())
register(Dirichlet())
