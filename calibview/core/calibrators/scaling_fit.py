"""How the scaling family (:mod:`calibview.core.calibrators.scaling`) fits ``softmax(A(x) + b)``: the objective,
mean NLL + penalty (MS, Dirichlet) or prior (VS), with its gradient written out by hand and evaluated chunk by
chunk (:class:`Objective`), and the full-batch L-BFGS that minimises it (:func:`minimise`).

Full-batch L-BFGS (strong-Wolfe line search) in float64 on standardised features, one L-BFGS iteration per
optimiser step, until three iterations in a row each lower the objective by less than 1e-10 relatively (or the
largest gradient entry is below 1e-10, or 500 iterations; a cancel stops it between chunks of rows). Memory stays
at the (N, K) features plus one chunk, or one chunk only when the features are made per chunk (VS).

VS stops L-BFGS at 1e-8 instead and then takes up to four Newton steps (:func:`polish`), which use gradients
only, so its parameters are pinned to the optimum (largest gradient entry ~1e-16) and do not depend on the order
its sums were added in: loaded, streamed and sharded fits agree to ~1e-12 rather than L-BFGS's ~1e-3 at
K = 1,000.

Parameters are one flat float64 vector theta = (A, c): A is (K, K) for a matrix (W) or (K,) for VS (w), c is (K,).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from calibview.core.errors import check_cancel, report
from calibview.core.io import stream
from calibview.core.stats.metrics import chunk_rows

_CHUNK_FLOPS = 1 << 26                              # rows per chunk <= this / K^2 for a matrix (a cancel check
                                                    # per ~0.05 s), and <= metrics.chunk_rows(K) for all
_PATIENCE = 3                                       # iterations in a row below rel_tol to stop


def _unpack(theta: torch.Tensor, k: int, matrix: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of a flat parameter vector: (W (K, K) or w (K,), b (K,))."""
    if matrix:
        return theta[:k * k].view(k, k), theta[k * k:]
    return theta[:k], theta[k:]


def canonical(w: torch.Tensor, b: torch.Tensor, penalty: str) -> tuple[torch.Tensor, torch.Tensor]:
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


class Objective:
    """Mean NLL + penalty and its gradient, evaluated chunk by chunk.

    The optimiser works on standardised features u = (x - m) / s (column means and standard deviations of the
    fit split) with parameters theta = (A, c) and logits A u + c; the model's own parameters are W = A / s
    (column-wise; w = a / s for VS) and b = c - W m. Same model, but the Hessian is far better conditioned:
    log-probability features have a large common offset that makes plain L-BFGS crawl (thousands of
    iterations for Dirichlet at K = 100). The penalty is defined on (W, b) and chained back to (A, c).

    ``x`` is the (N, K) float64 features, or, with ``feature`` (a chunk of scores -> its float64 features), the
    raw scores in their own dtype or a :class:`~calibview.core.io.stream.StreamedSplit`; ``y`` the (N,) int64
    labels. ``pinned`` (K,) bool marks VS classes held at w = ``pinned_w``, b = 0. Calling it with theta gives
    (objective, NLL, gradient)."""

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
            if stream.is_sharded(x):     # each shard's moments where it is, merged (Chan et al.'s pairwise update)
                self.m, sd = _merged_moments(x.map_shards(_shard_moments, feature))
            else:
                self.m, sd = _moments(self._chunks(standardised=False), self.n)
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
        """The model's own (W (K, K) or w (K,), b (K,)), float64, from the optimiser's parameters ``theta``."""
        a, c = _unpack(theta, self.k, self.matrix)
        w = a / self.s
        b = self._centred(a, c) - (w @ self.m if self.matrix else w * self.m)
        if self.pinned is not None:         # exactly the pinned values (theta holds them up to rounding)
            w, b = w.clone(), b.clone()
            w[self.pinned] = self.pinned_w
            b[self.pinned] = 0.0
        return w, b

    def from_model(self, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The flat optimiser parameters theta (K^2 + K or 2K,) of the model (W (K, K) or w (K,), b (K,))."""
        return torch.cat([(w * self.s).reshape(-1), b + (w @ self.m if self.matrix else w * self.m)])

    def nll_and_grad(self, theta: torch.Tensor) -> tuple[float, torch.Tensor]:
        """(mean NLL over the fit split, its gradient in ``theta``), one pass over the rows in chunks."""
        a_par, b = _unpack(theta, self.k, self.matrix)
        b = self._centred(a_par, b)
        grad = torch.zeros_like(theta)
        g_a, g_b = _unpack(grad, self.k, self.matrix)
        total = torch.zeros((), dtype=torch.float64, device=theta.device)
        if self.source is not None and stream.is_sharded(self.source):
            # one map per evaluation: each shard's NLL sum and gradient where it is, added in shard order
            for t, ga, gb in self.source.map_shards(_shard_nll_grad, a_par.cpu().numpy(), b.cpu().numpy(),
                                                    self.m.cpu().numpy(), self.s.cpu().numpy(), self.feature,
                                                    self.matrix, self.rows):
                total += t
                g_a += torch.from_numpy(ga).to(g_a.device)
                g_b += torch.from_numpy(gb).to(g_b.device)
        else:
            _nll_grad_sums(self._chunks(), self.matrix, self.rows, a_par, b, total, g_a, g_b, self.cancel)
        grad /= self.n
        if self.pinned is not None:
            # chain rule through the centring (c_j -= free_j * mean_free(c - a m / s)), then pin
            g_sum = (g_b * self.free).sum() / self.n_free
            g_b.sub_(g_sum * self.free)
            g_a.add_(g_sum * self.free * self.m / self.s)
            g_a[self.pinned] = 0.0
            g_b[self.pinned] = 0.0
        return float(total) / self.n, grad

    def curvature(self, theta: torch.Tensor) -> torch.Tensor:
        """VS only: (3, K) float64, each class's 2 x 2 block of the objective's Hessian in (a_k, c_k) (rows: the
        a-a, a-c and c-c entries), one pass; the cross-class terms (-p_j p_k, small for K of more than a few
        classes) are left out, so it serves as a preconditioner, not as the Hessian."""
        a_par, b = _unpack(theta, self.k, False)
        b = self._centred(a_par, b)
        out = torch.zeros((3, self.k), dtype=torch.float64, device=theta.device)
        if self.source is not None and stream.is_sharded(self.source):
            for part in self.source.map_shards(_shard_curvature, a_par.cpu().numpy(), b.cpu().numpy(),
                                               self.m.cpu().numpy(), self.s.cpu().numpy(), self.feature, self.rows):
                out += torch.from_numpy(part).to(out.device)
        else:
            _curvature_sums(self._chunks(), self.rows, a_par, b, out, self.cancel)
        out /= self.n
        if self.prior and self.theta0 is not None:
            out[0] += self.prior / self.n
            out[2] += self.prior / self.n
        return out

    def penalty_and_grad(self, theta: torch.Tensor) -> tuple[float, torch.Tensor]:
        """(penalty of the canonical (W, b) (MS, Dirichlet) or VS's prior, its gradient in ``theta``)."""
        grad = torch.zeros_like(theta)
        if not self.matrix:
            return self._prior_and_grad(theta, grad)
        if self.penalty is None:
            return 0.0, grad
        k = self.k
        w, b = canonical(*self.to_model(theta), self.penalty)
        d = w - torch.eye(k, dtype=w.dtype, device=w.device)
        if self.penalty == "odir":
            d.fill_diagonal_(0.0)
            count = max(1, k * (k - 1))
        else:
            count = k * k
        # the shift in canonical minimises the penalty, so its gradient is the penalty's gradient at the
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


def _nll_grad_sums(chunks, matrix: bool, rows: int, a_par, b, total, g_a, g_b, cancel=None) -> None:
    """Add the NLL sum and gradient of every chunk ((start, standardised features, labels)) in steps of ``rows``
    rows (in place)."""
    for _, u, y in chunks:
        for start in range(0, u.shape[0], rows):
            check_cancel(cancel)
            part = slice(start, start + rows)
            _accumulate(matrix, a_par, b, u[part], y[part, None], total, g_a, g_b)


def _accumulate(matrix: bool, a_par, b, uc, yc, total, g_a, g_b) -> None:
    """Add one chunk's NLL sum and gradient (in place): ``uc`` (rows, K) standardised features, ``yc`` (rows, 1)
    labels, logits ``uc A^T + b`` (``matrix``) or ``uc * a + b``."""
    a = torch.addmm(b, uc, a_par.T) if matrix else torch.addcmul(b, uc, a_par)
    a.sub_(a.amax(dim=1, keepdim=True))
    a_y = a.gather(1, yc)
    s = a.exp_().sum(dim=1, keepdim=True)
    total += (s.log() - a_y).sum()
    a.div_(s).scatter_add_(1, yc, torch.full_like(a_y, -1.0))     # softmax - one-hot
    g_b += a.sum(dim=0)
    if matrix:
        g_a.addmm_(a.T, uc)
    else:
        g_a += a.mul_(uc).sum(dim=0)


def _curvature_sums(chunks, rows: int, a_par, b, out, cancel=None) -> None:
    """Add every chunk's per-class sums of p (1 - p) u^2, p (1 - p) u and p (1 - p) to ``out`` (3, K) in place
    (VS: logits u * a + b)."""
    for _, u, y in chunks:
        for start in range(0, u.shape[0], rows):
            check_cancel(cancel)
            uc = u[start:start + rows]
            p = torch.softmax(torch.addcmul(b, uc, a_par), dim=1)
            w = p.mul_(1.0 - p)
            out[2] += w.sum(dim=0)
            w.mul_(uc)
            out[1] += w.sum(dim=0)
            out[0] += w.mul_(uc).sum(dim=0)


def _shard_curvature(split, a_par, b, m, s, feature, rows: int):
    """One shard's (3, K) :func:`_curvature_sums`, numpy (run where the shard is)."""
    a_par, b, m, s = (torch.from_numpy(v) for v in (a_par, b, m, s))
    out = torch.zeros((3, a_par.shape[0]), dtype=torch.float64)
    _curvature_sums(((a, (feature(z) - m).div_(s), y) for a, z, y in split.chunks()), rows, a_par, b, out)
    return out.numpy()


def _moments(chunks, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """((K,) column means, (K,) standard deviations) of the features of ``chunks`` ((start, x, y), n rows in
    all), summed about the first chunk's mean (no cancellation for features with a large common offset)."""
    shift = s1 = s2 = None
    for _, z, _ in chunks:
        if shift is None:
            shift = z.mean(dim=0)
            s1, s2 = torch.zeros_like(shift), torch.zeros_like(shift)
        d = z - shift
        s1 += d.sum(dim=0)
        s2 += d.square().sum(dim=0)
    mean_d = s1 / n
    return shift + mean_d, (s2 / n - mean_d.square()).clamp_min(0).sqrt()


def _shard_moments(split, feature) -> tuple:
    """(rows, (K,) means, (K,) sums of squared deviations) of one shard's features, as numpy (run where it is)."""
    n = split.shape[0]
    if n == 0:
        return 0, None, None
    m, sd = _moments(((a, feature(z), y) for a, z, y in split.chunks()), n)
    return n, m.numpy(), (sd.square() * n).numpy()


def _merged_moments(parts) -> tuple[torch.Tensor, torch.Tensor]:
    """The split's (means, standard deviations) from its shards' :func:`_shard_moments`, merged in shard order."""
    n, mean, m2 = 0, None, None
    for n_b, mean_b, m2_b in parts:
        if not n_b:
            continue
        if mean is None:
            n, mean, m2 = n_b, mean_b.copy(), m2_b.copy()
            continue
        delta = mean_b - mean
        total = n + n_b
        mean = mean + delta * (n_b / total)
        m2 = m2 + m2_b + delta ** 2 * (n * n_b / total)
        n = total
    return torch.from_numpy(mean), torch.from_numpy(m2 / n).clamp_min(0).sqrt()


def _shard_nll_grad(split, a_par, b, m, s, feature, matrix: bool, rows: int) -> tuple:
    """(NLL sum, (A) gradient sum, (K,) gradient sum in b) of one shard at the optimiser's (A, b), numpy (run where
    the shard is)."""
    a_par, b, m, s = (torch.from_numpy(v) for v in (a_par, b, m, s))
    g_a, g_b = torch.zeros_like(a_par), torch.zeros_like(b)
    total = torch.zeros((), dtype=torch.float64)
    chunks = ((a, (feature(z) - m).div_(s), y) for a, z, y in split.chunks())
    _nll_grad_sums(chunks, matrix, rows, a_par, b, total, g_a, g_b)
    return float(total), g_a.numpy(), g_b.numpy()


class _LBFGS(torch.optim.LBFGS):
    """torch's L-BFGS without the import of torch._dynamo that Optimizer.add_param_group's dynamo-disabling
    wrapper does on its first call: 1.3-1.8 s once per process (a fifth of the seven-calibrator demo evaluation
    in ``calibview metrics``), for a fit that nothing compiles. The wrapped function is the same code; the
    optimiser's other dynamo-wrapped methods (zero_grad, state dicts) are not called here."""

    add_param_group = getattr(torch.optim.Optimizer.add_param_group, "__wrapped__",
                              torch.optim.Optimizer.add_param_group)


def minimise(objective: Objective, theta: torch.Tensor, *, max_iter: int, rel_tol: float, what: str,
              progress=None) -> tuple[torch.Tensor, dict[str, Any]]:
    """Full-batch L-BFGS to convergence; returns (parameters, info with objective, nll, iterations, converged and
    the objective's (value, NLL, gradient) at the parameters).

    One L-BFGS iteration per ``step`` (its curvature history persists across steps); stops when three iterations
    in a row each lower the objective by less than ``rel_tol`` relatively (one such iteration is no proof: near
    the optimum L-BFGS alternates tiny and useful steps; L-BFGS also stops moving once the largest gradient
    entry is below 1e-10), or after ``max_iter`` iterations."""
    theta = theta.detach().clone()
    history = int(min(20, max(5, 2e9 // (16 * theta.numel()))))        # keep the L-BFGS memory under ~2 GB
    opt = _LBFGS([theta], lr=1.0, max_iter=1, max_eval=25, tolerance_grad=1e-10,
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
    value = objective(theta) if not torch.equal(cache["theta"], theta) else cache["value"]
    return theta, {"objective": value[0], "nll": value[1], "iterations": it, "converged": converged,
                   "value": value}


def polish(objective: Objective, theta: torch.Tensor, value: tuple, *, max_steps: int = 4, max_cg: int = 25,
           g_tol: float = 1e-14, what: str = "", progress=None) -> tuple[torch.Tensor, int, tuple]:
    """VS: Newton steps from L-BFGS's end point (theta (2K,), where the objective is ``value``, (value, NLL,
    gradient), as :func:`minimise` returns it); returns (theta, Newton steps taken, the objective's value there).

    Why: L-BFGS's line search compares objective values, which cannot resolve parameters closer than about
    sqrt(machine epsilon) in flat directions (a class with few rows has a small curvature), so two fits whose sums
    are added in another order (loaded or streamed, one process or shards on a cluster) stop up to ~1e-3 apart at
    K = 1,000. A Newton step uses gradients only: it solves H d = -g by conjugate gradients, preconditioned by the
    per-class 2 x 2 blocks of H (:meth:`Objective.curvature`), with H v from a forward difference of the exact
    gradient (one pass each). A step is kept only if it lowers the largest gradient entry; the steps stop once it
    is below ``g_tol``."""
    last = value
    g, steps = last[2], 0
    for _ in range(max_steps):
        g_max = float(g.abs().max())
        if not g_max > g_tol:
            break
        report(progress, 0.98 + 0.02 * steps / max_steps, f"{what}: Newton step {steps + 1}, gradient {g_max:.1e}")
        blocks = objective.curvature(theta)
        x = _block_cg(lambda v: _hessian_times(objective, theta, g, v), g, blocks, max_cg)
        if objective.pinned is None:
            # b is defined up to a common shift (the Hessian's null direction): the step must not move along it
            x[objective.k:] -= x[objective.k:].mean()
        new = theta + x
        value = objective(new)
        if not float(value[2].abs().max()) < g_max:
            break
        theta, g, last, steps = new, value[2], value, steps + 1
    return theta, steps, last


def _hessian_times(objective: Objective, theta: torch.Tensor, g: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """H v by a forward difference of the gradient (one pass); the step moves theta by ~1e-7 of its size, where
    the difference's truncation and rounding errors are both ~1e-7 relatively, ample for a Newton step."""
    h = 1e-7 * max(1.0, float(theta.abs().max())) / max(float(v.abs().max()), 1e-300)
    return (objective(theta + h * v)[2] - g).div_(h)


def _block_cg(hv, g: torch.Tensor, blocks: torch.Tensor, max_cg: int, rtol: float = 1e-6) -> torch.Tensor:
    """x with H x ~= -g by preconditioned conjugate gradients (``hv``: v -> H v), the preconditioner the inverse
    of the per-class 2 x 2 blocks ``blocks`` (3, K); stops at a residual of ``rtol`` of the start's."""
    k = blocks.shape[1]
    h_aa, h_ac, h_cc = blocks
    det = h_aa * h_cc - h_ac * h_ac
    ok = det > 1e-12 * (h_aa * h_cc).clamp_min(1e-300)

    def precondition(r: torch.Tensor) -> torch.Tensor:
        ra, rc = r[:k], r[k:]
        za = torch.where(ok, (h_cc * ra - h_ac * rc) / torch.where(ok, det, 1.0), ra)
        zc = torch.where(ok, (h_aa * rc - h_ac * ra) / torch.where(ok, det, 1.0), rc)
        return torch.cat([za, zc])

    x = torch.zeros_like(g)
    r = -g
    z = precondition(r)
    p = z.clone()
    rz, r0 = float(r.dot(z)), float(r.norm())
    for _ in range(max_cg):
        hp = hv(p)
        php = float(p.dot(hp))
        if not php > 0:
            break
        alpha = rz / php
        x.add_(p, alpha=alpha)
        r.add_(hp, alpha=-alpha)
        if float(r.norm()) <= rtol * r0:
            break
        z = precondition(r)
        rz_new = float(r.dot(z))
        p.mul_(rz_new / rz).add_(z)
        rz = rz_new
    return x
