"""The refinement / calibration split of the NLL and of the Brier score (Berta et al. 2025): the loss after a
temperature fitted on the evaluation split itself is the *refinement* error, what no rescaling of the logits by a
temperature removes; the rest is the *calibration* error. An in-sample diagnostic of the evaluation split, not a
calibrator: the temperature is fitted on the very samples it is scored on.

One temperature per calibrator, the NLL's: T* minimises the split's NLL, and both losses are read there
(``nll_refinement`` = NLL(T*), ``brier_refinement`` = Brier(T*)). NLL - NLL(T*) >= 0 by construction; the Brier
score's difference is usually positive too but need not be (T* is not fitted to it), and is reported as it is.

A temperature rescales a calibrator's log-probabilities ``lp`` (N, K) to ``softmax(beta lp)``, beta = 1 / T. Per
sample, the NLL ``f(beta) = -beta lp_y + log sum_k exp(beta lp_k)`` has the cumulants of ``lp`` under
``softmax(beta lp)`` as its derivatives (mean - lp_y, variance, third and fourth cumulant), and the Brier term
``b(beta) = sum_k p_k^2 - 2 p_y + 1`` has derivatives in moments of ``lp`` weighted by p^2. So one pass over the
rows at a temperature gives both losses and their derivatives there, and over the engine's two passes:

1. while the split is scored (:meth:`Refinement.add`, beta = 1: the calibrator's own probabilities), the split's
   first two NLL derivatives at beta = 1, and a seeded subsample of rows (at most ``SUB_ENTRIES`` entries);
2. :meth:`Refinement.nodes`: a first beta, the minimum of the subsample's exact NLL curve (safeguarded Newton
   between 1/16 and 16) corrected by the split's difference from the subsample to second order at beta = 1 (a
   control variate);
3. in the second pass (:meth:`Refinement.add_node`), the exact derivatives at that beta, to the fourth order
   (NLL) and the third (Brier), whose Taylor polynomial gives the minimum (Newton) and the Brier score there. The
   first beta lies within a few parts in a thousand of the optimum, so the polynomials' errors are far below 1e-9.

The per-sample values and first three derivatives at the first beta (float32) are kept for the bootstrap: each
resample refits its own temperature on the cubic of its sums (:func:`resampled`). beta stays within [BETA_MIN,
BETA_MAX] (a split the model ranks perfectly has no finite optimum: its NLL keeps falling as T -> 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

#: the range of beta = 1 / T searched
BETA_MIN, BETA_MAX = 0.01, 100.0
#: entries (rows x K) of the subsample that finds the first beta
SUB_ENTRIES = 1 << 18
#: log-probabilities below this are clamped (exp of anything below underflows anyway; it keeps 0 * lp finite)
_FLOOR = -1e3
#: the range the first beta is searched in
_SEARCH = (1 / 16, 16.0)


def _moments2(v: torch.Tensor, beta: float, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Write into ``out`` (3, rows) float64 the row sums of the unnormalised weights e = exp(beta v) of (rows, K)
    ``v = u - max_k u``, of e v and of e v^2; return (e, t = e v^2), both (rows, K), t a running product the caller
    may continue in place."""
    e = torch.mul(v, beta).exp_()
    torch.sum(e, 1, out=out[0])
    t = e * v
    torch.sum(t, 1, out=out[1])
    torch.sum(t.mul_(v), 1, out=out[2])
    return e, t


def _node_sums(u: torch.Tensor, y: torch.Tensor, beta: float, out: torch.Tensor) -> None:
    """Write into ``out`` (10, rows) float64 each row's sums over k of the unnormalised weights e = exp(beta v) of
    (rows, K) float64 log-probabilities ``u`` (labels ``y``) clamped at _FLOOR, ``v = u - max_k u`` (<= 0):
    sum e, sum e v, ..., sum e v^4, sum e^2, sum e^2 v, ..., sum e^2 v^3, and v at the label.

    Raw moments of v, not of u, so that a confident row's moments are small numbers and the cumulants lose
    nothing to cancellation. Each power of v multiplies one running product in place, and each row sum goes
    straight into its row of ``out``: the (rows,) arithmetic runs once per chunk in :func:`_node_derivatives`,
    not per block (a block at K = 21,843 is 12 rows, and some 40 small operations per block cost as much as its
    exp). ``amax``, not ``max``: torch's max with indices took 4x as long as the values alone."""
    top = u.amax(dim=1, keepdim=True).clamp_(min=_FLOOR)
    # (u - top) floored at (_FLOOR - top) is (u floored at _FLOOR) - top to the last bit, without a clamped copy
    v = torch.sub(u, top).clamp_(min=_FLOOR - top)
    e, t = _moments2(v, beta, out)
    for j in (3, 4):
        torch.sum(t.mul_(v), 1, out=out[j])
    q = e.mul_(e)                             # e is not needed after: p^2 = e^2 / z^2
    torch.sum(q, 1, out=out[5])
    for j in (6, 7, 8):
        torch.sum(q.mul_(v), 1, out=out[j])
    out[9] = v.gather(1, y[:, None])[:, 0]


def _node_derivatives(raw: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """((rows, 5) NLL f, f', ..., f'''' and (rows, 4) Brier b, ..., b''') at ``beta`` from the (10, rows) sums of
    :func:`_node_sums`: the raw moments are those sums divided by their row sum z (a division of (rows,) sums,
    not of the (rows, K) block), then turned into cumulants (NLL) and moments of p^2 about the mean (Brier)."""
    z, v_y = raw[0], raw[9]
    e1, e2, e3, e4 = (raw[j] / z for j in (1, 2, 3, 4))
    k2 = e2 - e1 * e1
    k3 = e3 - 3.0 * e1 * e2 + 2.0 * e1 ** 3
    k4 = e4 - 4.0 * e1 * e3 - 3.0 * e2 * e2 + 12.0 * e1 * e1 * e2 - 6.0 * e1 ** 4
    f = torch.stack([z.log() - beta * v_y, e1 - v_y, k2, k3, k4], 1)
    zz = z * z
    g0, h1, h2, h3 = (raw[j] / zz for j in (5, 6, 7, 8))
    m = e1                                    # centre: d = v - m
    g1 = h1 - m * g0
    g2 = h2 - 2.0 * m * h1 + m * m * g0
    g3 = h3 - 3.0 * m * h2 + 3.0 * m * m * h1 - m ** 3 * g0
    p_y = (beta * v_y).exp() / z
    d_y = v_y - m
    b = torch.stack([g0 - 2.0 * p_y + 1.0,
                     2.0 * g1 - 2.0 * p_y * d_y,
                     2.0 * (2.0 * g2 - k2 * g0) - 2.0 * p_y * (d_y * d_y - k2),
                     2.0 * (4.0 * g3 - 6.0 * k2 * g1 - k3 * g0) - 2.0 * p_y * (d_y ** 3 - 3.0 * k2 * d_y - k3)], 1)
    return f, b


#: entries per block of rows in :func:`_blocks`: a 2 MB float64 block and its running product stay in a 2 MB L2
#: cache (2x faster than a 16 MB chunk; smaller blocks pay torch's per-operation overhead instead)
_BLOCK_ENTRIES = 1 << 18


def _blocks(u: torch.Tensor, y: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_node_derivatives` of (rows, K) float64 log-probabilities ``u`` and labels ``y``, their sums taken
    over blocks of rows."""
    rows = max(1, _BLOCK_ENTRIES // max(u.shape[1], 1))
    raw = torch.empty((10, u.shape[0]), dtype=torch.float64, device=u.device)
    for a in range(0, u.shape[0], rows):
        _node_sums(u[a:a + rows], y[a:a + rows], beta, raw[:, a:a + rows])
    return _node_derivatives(raw, beta)


#: calls of :func:`_curve_sums` (tests count them)
curve_evaluations = 0


def _curve_sums(v: torch.Tensor, v_y: torch.Tensor, beta: float) -> np.ndarray:
    """(3,) sums over rows of the NLL f and its first two derivatives in beta (the first three columns of
    :func:`_node_derivatives`' f) of (rows, K) float64 ``v = u - max_k u`` (u clamped at _FLOOR) and (rows,)
    ``v_y``: what the first beta's search evaluates a few times on one subsample, so ``v`` is computed once and
    the third and fourth cumulants, which the search does not read, are left out."""
    global curve_evaluations
    curve_evaluations += 1
    rows = max(1, _BLOCK_ENTRIES // max(v.shape[1], 1))
    out = np.zeros(3)
    raw = torch.empty((3, min(rows, v.shape[0])), dtype=torch.float64, device=v.device)
    for a in range(0, v.shape[0], rows):
        vb, vy = v[a:a + rows], v_y[a:a + rows]
        sums = raw[:, :vb.shape[0]]
        _moments2(vb, beta, sums)
        z = sums[0]
        e1, e2 = sums[1] / z, sums[2] / z
        out += [float((z.log() - beta * vy).sum()), float((e1 - vy).sum()), float((e2 - e1 * e1).sum())]
    return out


def _taylor(c: np.ndarray, d):
    """sum_j c_j d^j / j! (numpy arrays broadcast)."""
    return sum(c[..., j] * d ** j / math.factorial(j) for j in range(c.shape[-1]))


def _newton(c: np.ndarray, beta0: float, steps: int) -> np.ndarray:
    """(R,) d minimising each row's Taylor polynomial sum_j c_rj d^j / j! near 0 ((R, J) coefficients, J >= 3),
    kept within [BETA_MIN, BETA_MAX] and within half of ``beta0`` either way: at most ``steps`` Newton steps,
    fewer once a step leaves every d unchanged (a fixed point: the further steps would return the same bits;
    the point estimate's Newton converges in 4-5 of its 50, and its 50 cost 2.4 ms)."""
    lo, hi = max(BETA_MIN, 0.5 * beta0) - beta0, min(BETA_MAX, 1.5 * beta0) - beta0
    d = np.zeros(c.shape[0])
    for _ in range(steps):
        g = _taylor(c[:, 1:], d)
        h = _taylor(c[:, 2:], d)
        new = np.clip(np.where(h > 0, d - g / np.where(h > 0, h, 1.0), d - np.sign(g) * 0.05 * beta0), lo, hi)
        if np.array_equal(new, d):
            break
        d = new
    return d


@dataclass(frozen=True)
class RefinementResult:
    """The point values (``nll``, ``brier``: the losses at the NLL's eval-split temperature ``t``) and, for the
    bootstrap, ``coef`` (N, 8) float32 (None without one): per sample the NLL and its first three derivatives in
    beta at ``beta`` (the first estimate), then the Brier term and its first three there; ``note`` says when the first estimate was
    far from the optimum (then the values are approximate)."""

    nll: float
    brier: float
    t: float
    beta: float
    coef: Optional[np.ndarray]
    note: str = ""


class Refinement:
    """Collects what the refinement split needs over the engine's two passes (see the module docstring):
    :meth:`add` per chunk of the scoring pass, :meth:`nodes` between the passes, :meth:`add_node` per chunk of
    the second pass (the same rows), then :meth:`result`."""

    def __init__(self, n: int, k: int, seed: int = 0, resampled: bool = True) -> None:
        """``resampled`` False (no bootstrap will read them): the (N, 8) per-sample coefficients are not kept."""
        self.n, self.k = int(n), int(k)
        m = int(min(self.n, max(64, min(4096, SUB_ENTRIES // max(self.k, 1)))))
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 30]))
        self.rows = np.sort(rng.choice(self.n, m, replace=False)) if m < self.n else np.arange(self.n)
        self._sub: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._at1 = np.zeros(2)              # sums of f' and f'' at beta = 1
        self._sum_f = np.zeros(5)
        self._sum_b = np.zeros(4)
        self.coef: Optional[np.ndarray] = np.empty((self.n, 8), dtype=np.float32) if resampled else None
        self.beta: Optional[float] = None

    def add(self, start: int, lp: torch.Tensor, p: torch.Tensor, y: torch.Tensor) -> None:
        """Scoring-pass rows ``start ..``: (rows, K) float64 log-probabilities (log-normalised), their
        probabilities ``p`` (read before anything overwrites them), labels ``y``."""
        rows = max(1, _BLOCK_ENTRIES // max(lp.shape[1], 1))
        # per row, the first two raw moments of lp under p, written block by block and summed once per chunk (a
        # block at K = 21,843 is 12 rows: two float() syncs per block cost more than its arithmetic)
        m1 = torch.empty(lp.shape[0], dtype=torch.float64, device=lp.device)
        m2 = torch.empty_like(m1)
        for a in range(0, lp.shape[0], rows):
            u = lp[a:a + rows].clamp(min=_FLOOR)
            t = p[a:a + rows] * u
            torch.sum(t, 1, out=m1[a:a + rows])
            torch.sum(t.mul_(u), 1, out=m2[a:a + rows])
        u_y = lp.gather(1, y[:, None])[:, 0].clamp(min=_FLOOR)
        self._at1 += [float((m1 - u_y).sum()), float((m2 - m1 * m1).sum())]
        sub = self.rows[np.searchsorted(self.rows, start):np.searchsorted(self.rows, start + lp.shape[0])] - start
        if sub.size:
            idx = torch.from_numpy(sub).to(lp.device)
            self._sub.append((lp[idx].clamp(min=_FLOOR).cpu(), y[idx].cpu()))

    def nodes(self) -> float:
        """The first beta, at which the second pass expands the losses."""
        u = torch.cat([s[0] for s in self._sub])
        y = torch.cat([s[1] for s in self._sub])
        self._sub = []
        m = u.shape[0]
        v = u - u.amax(dim=1, keepdim=True)           # u was clamped at _FLOOR as the subsample was taken
        v_y = v.gather(1, y[:, None])[:, 0]
        at1 = _curve_sums(v, v_y, 1.0) / m
        cv = self._at1 / self.n - at1[1:]              # split minus subsample: f', f'' at 1

        def curve(beta: float) -> np.ndarray:
            """(value, slope, curvature) of the corrected mean NLL at ``beta`` (the value uncorrected)."""
            sums = at1 if beta == 1.0 else _curve_sums(v, v_y, beta) / m
            return sums + np.array([0.0, cv[0] + cv[1] * (beta - 1.0), cv[1]])

        # The mean NLL is convex in beta (a log-sum-exp of beta times fixed values, less a linear term), so its
        # slope's sign brackets the minimum: Newton from beta = 1, kept inside the bracket, bisecting (in log
        # beta) when a step leaves it. 2-7 curve evaluations where a grid of 9 and then Newton took up to 29;
        # each is some 15 tensor operations on the subsample, most of the refinement's cost at small N.
        lo, hi = _SEARCH
        lo_seen = hi_seen = False                  # whether a bracket end is a point whose slope was read
        beta = 1.0
        for _ in range(60):
            _, g, h = curve(beta)
            if g > 0:
                hi, hi_seen = beta, True
            else:
                lo, lo_seen = beta, True
            if lo >= hi:                           # the slope points out of the searched range at its end
                break
            new = beta - g / h if h > 0 else (lo if g > 0 else hi)
            if abs(new - beta) <= 1e-10 * beta:    # converged: the step is within the bracket's rounding
                beta = min(hi, max(lo, new))
                break
            if not lo < new < hi:
                if new >= hi and not hi_seen:
                    new = hi
                elif new <= lo and not lo_seen:
                    new = lo
                else:
                    new = math.sqrt(lo * hi)
            beta = new
        self.beta = min(BETA_MAX, max(BETA_MIN, beta))
        return self.beta

    def add_node(self, start: int, lp: torch.Tensor, y: torch.Tensor) -> None:
        """Second-pass rows ``start ..``: the exact derivatives at the first beta."""
        f, b = _blocks(lp, y, self.beta)
        self._sum_f += f.sum(0).cpu().numpy()
        self._sum_b += b.sum(0).cpu().numpy()
        if self.coef is not None:
            stop = start + lp.shape[0]
            self.coef[start:stop, :4] = f[:, :4].cpu().numpy()
            self.coef[start:stop, 4:] = b.cpu().numpy()

    def result(self, nll_finite: bool) -> RefinementResult:
        """The refinement losses; ``nll_finite`` False (a calibrator gave a label probability 0, which no
        temperature changes) makes the NLL's infinite."""
        c = (self._sum_f / self.n)[None, :]
        d = float(_newton(c, self.beta, 50)[0])
        nll = float(_taylor(c, d)[0])
        brier = float(_taylor((self._sum_b / self.n)[None, :], d)[0])
        note = ("the eval-split temperature was far from its first estimate: the refinement values are approximate"
                if abs(d) > 0.1 * self.beta else "")
        coef, self.coef = self.coef, None
        return RefinementResult(nll=nll if nll_finite else math.inf, brier=brier, t=1.0 / (self.beta + d),
                                beta=self.beta, coef=coef, note=note)


def resampled(sums: np.ndarray, n: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """((R,) NLL, (R,) Brier refinement) of resamples from their (R, 8) sums of the per-sample coefficients
    (:attr:`RefinementResult.coef`) and sizes ``n`` (R,): each resample's NLL cubic in beta minimised (Newton
    from the first beta), both cubics read there."""
    c = sums / n[:, None]
    d = _newton(c[:, :4], beta, 8)
    return _taylor(c[:, :4], d), _taylor(c[:, 4:], d)
