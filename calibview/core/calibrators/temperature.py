"""The identity (``none``, T = 1) and temperature scaling: ``ts`` fits T by the fit split's NLL, ``ts-grid`` picks
it from a grid by the fit split's ECE.

Both divide the scores by one T > 0, so they keep every row's arg-max. :func:`fit_temperature` is also the start
and the fallback of the scaling family (vs, ms, dirichlet), which is why it lives apart from the registry.
"""

from __future__ import annotations

import math
import weakref

import torch

from calibview.core.calibrators import checks
from calibview.core.calibrators.base import Method
from calibview.core.errors import check_cancel, report
from calibview.core.io import stream
from calibview.core.stats.metrics import chunk_rows, ece_from_sums, equal_width_table
from calibview.core.stats.rowwise import row_argmax


def log_probabilities(scores: torch.Tensor) -> torch.Tensor:
    """float64 log-softmax of ``scores`` (N, K): the uncalibrated (N, K) log-probabilities (the identity)."""
    return torch.log_softmax(scores.to(torch.float64), dim=1)


class Identity(Method):
    """Uncalibrated

    ``none``: the uncalibrated probabilities, softmax of the scores."""

    name, label, keeps_argmax = "none", "Uncalibrated", True
    streams = True

    def fit(self, scores, labels, *, progress=None, cancel=None):
        """Nothing to fit: no parameters, no warnings."""
        return {}, ()

    def apply(self, params, scores):
        """(N, K) float64 log-softmax of ``scores`` (N, K)."""
        return log_probabilities(scores)


def _temperature_moments(scores: torch.Tensor, labels: torch.Tensor, beta: float,
                         rows: int | None = None, cancel=None, has_neg_inf: bool = False, tick=None,
                         floor: float | None = None) -> tuple[float, float, float]:
    """NLL(beta) and its first two derivatives in beta = 1/T, means over rows.

    NLL(beta) = mean[logsumexp(beta z) - beta z_y]; d/dbeta = mean[E_p z - z_y]; d2/dbeta2 = mean[Var_p z] >= 0,
    so the problem is convex in beta and a safeguarded Newton iteration converges from any start.
    Rows are shifted by their maximum first (p is unchanged), so the terms that carry the probability mass are
    small numbers: the pass runs in the scores' own precision, half precision raised to float32 (float32 is 3x
    faster than float64 here), with per-row results accumulated in float64, which keeps T accurate to ~1e-7.
    ``scores`` may be a :class:`~calibview.core.io.stream.StreamedSplit` (each pass reads it from disk);
    ``tick(fraction)`` is called after each chunk. Chunks have :func:`calibview.core.stats.metrics.chunk_rows` rows
    unless ``rows`` says otherwise (a fixed 4,096 rows made 700 MB temporaries at K = 21,843). ``floor``: the
    scores are log-probabilities floored there first (:mod:`~calibview.core.calibrators.checks`' exact-zero rule).
    """
    n = scores.shape[0]
    if stream.is_sharded(scores):       # each shard's sums on the worker holding it
        parts = scores.map_shards(_shard_moments, beta, has_neg_inf, floor)
        f, g, h = (sum(p[i] for p in parts) for i in range(3))
        return f / n, g / n, h / n
    f, g, h = _moment_sums(scores, labels, beta, rows, cancel, has_neg_inf, tick, floor)
    return f / n, g / n, h / n


def _shard_moments(split, beta: float, has_neg_inf: bool, floor: float | None) -> tuple[float, float, float]:
    """The NLL sums of :func:`_temperature_moments` over one shard's ``split`` (run where the shard is)."""
    return _moment_sums(split, split.labels, beta, None, None, has_neg_inf, None, floor)


def _moment_sums(scores, labels: torch.Tensor, beta: float, rows: int | None, cancel, has_neg_inf: bool, tick,
                 floor: float | None) -> tuple[float, float, float]:
    """The sums over rows behind :func:`_temperature_moments`'s means (NLL, first and second derivative)."""
    f = g = h = 0.0
    n, k = scores.shape
    rows = rows or chunk_rows(k)
    for start in range(0, n, rows):
        check_cancel(cancel)
        z = scores[start:start + rows]
        y = labels[start:start + rows]
        if z.dtype in (torch.float16, torch.bfloat16):
            z = z.float()       # half precision sums would round s0, s1, s2 to 3 digits (and run slower on CPU)
        if floor is not None:
            z = z.clamp_min(floor)
        zs = z - z.amax(dim=1, keepdim=True)
        # exact zeros in a probabilities file are -inf here: weight 0, and 0 * -inf must not become NaN
        if has_neg_inf:
            zs = torch.nan_to_num(zs, neginf=-1e30)
        e = torch.exp(zs * beta)
        s0 = e.sum(1).double()
        ez = e.mul_(zs)
        s1 = ez.sum(1).double()
        s2 = ez.mul_(zs).sum(1).double()
        zy = zs.gather(1, y[:, None])[:, 0].double()
        mean = s1 / s0
        f += float((torch.log(s0) - beta * zy).sum())
        g += float((mean - zy).sum())
        h += float((s2 / s0 - mean * mean).clamp_min(0).sum())
        if tick is not None:
            tick(min(n, start + rows) / n)
    return f, g, h


def fit_temperature(scores: torch.Tensor, labels: torch.Tensor, *, tol: float = 1e-7, max_iter: int = 100,
                    cancel=None, progress=None, floor: float | None = None) -> tuple[float, int, tuple[str, ...]]:
    """Temperature T minimising the NLL of softmax(z / T): safeguarded Newton in beta = 1/T, converged.

    Iterates on a subsample first (cheap), then polishes on the full split; each full pass costs one exp over
    the (N, K) matrix. ``floor``: fit on the scores floored there (log(max(p, eps)) for log-probabilities).
    Returns (T, full passes used, warnings).
    """
    key = (tol, max_iter, floor)
    last = _LAST[0]
    if (last is not None and last[0]() is scores and last[1] == _version(scores) and last[2]() is labels
            and last[3] == _version(labels) and last[4] == key):
        report(progress, 0.95, f"temperature scaling: T = {last[5][0]:.6g}")
        return last[5]
    out = _fit_temperature(scores, labels, tol=tol, max_iter=max_iter, cancel=cancel, progress=progress,
                           floor=floor)
    try:
        _LAST[0] = (weakref.ref(scores), _version(scores), weakref.ref(labels), _version(labels), key, out)
    except TypeError:                   # an object that takes no weak reference: nothing remembered
        _LAST[0] = None
    return out


#: the last fit (weak references to its scores and labels, their versions, the settings, the result): the scaling
#: family starts from T on the same fit split that ``ts`` has just been fitted on, and a second fit (passes over
#: the whole split, a second or more at large K) would give the same bits
_LAST: list = [None]


def forget_last_fit() -> None:
    """Forget the remembered last fit, so that the next :func:`fit_temperature` runs in full (a benchmark timing
    repeated fits of one split calls this before each)."""
    _LAST[0] = None


def _version(t) -> int:
    """A tensor's in-place modification count (a changed tensor is another fit split); 0 for a streamed split,
    which is read from a file that does not change during a run, and -1 for an inference-mode tensor, which keeps
    no count (the engine's fit split: read from a file, never written)."""
    try:
        return int(getattr(t, "_version", 0))
    except RuntimeError:
        return -1


def _fit_temperature(scores, labels, *, tol: float, max_iter: int, cancel, progress, floor
                     ) -> tuple[float, int, tuple[str, ...]]:
    """:func:`fit_temperature` itself."""
    n = scores.shape[0]
    warnings: list[str] = []
    beta = 1.0
    # Exact zeros in a probabilities file are -inf log-probabilities: they need masking in every pass.
    has_neg_inf = (scores.kind == "probs") if stream.is_streamed(scores) else checks.has_neg_inf(scores)
    stages = []
    if n > 20_000:
        stages.append((*stream.subsample(scores, labels, 10_000), 1e-6))
    stages.append((scores, labels, tol))
    passes = 0
    for si, (z, y, stage_tol) in enumerate(stages):
        lo, hi = 0.0, math.inf     # bracket on beta from the sign of the gradient (convexity)
        for it in range(max_iter):
            tick = None
            if stream.is_streamed(z) and progress is not None:        # a pass reads the split: show it going
                tick = (lambda fr, it=it: report(progress, min(0.95, 0.2 + 0.15 * (it + fr)),
                                                 f"temperature scaling: pass {it + 1}, {fr:.0%} read"))
            f, g, h = _temperature_moments(z, y, beta, cancel=cancel, has_neg_inf=has_neg_inf, tick=tick,
                                           floor=floor)
            if si == len(stages) - 1:
                passes += 1
                report(progress, min(0.95, 0.2 + 0.15 * (it + 1)), f"temperature scaling: T = {1 / beta:.6g}")
            if h <= 0.0 and g <= 0.0:
                # every row is numerically one-hot on its label: the NLL only falls further as T -> 0
                beta = 1e6
                break
            if g > 0:
                hi = min(hi, beta)
            else:
                lo = max(lo, beta)
            step = -g / h if h > 0 else math.inf
            new = beta + step
            if not (lo < new < hi) or not math.isfinite(new):
                new = (lo + hi) / 2 if math.isfinite(hi) else max(2 * beta, lo * 2 if lo > 0 else 2 * beta)
            converged = abs(new - beta) <= stage_tol * max(beta, 1e-12)
            beta = new
            if converged:
                break
        else:
            warnings.append(f"temperature scaling did not converge in {max_iter} Newton steps (T = {1 / beta:.6g})")
        if beta >= 1e6:
            warnings.append("the NLL keeps falling as T -> 0: the fit split is separable; T was capped at 1e-6")
            beta = 1e6
            break
    return 1.0 / beta, passes, tuple(warnings)


class Temperature(Method):
    """Temperature scaling

    ``ts``: softmax(z / T) with T minimising the fit split's NLL (:func:`fit_temperature`); streams."""

    name, label, keeps_argmax, streams = "ts", "Temperature scaling", True, True

    def fit(self, scores, labels, *, progress=None, cancel=None):
        """({"temperature": T, "objective": "nll", "passes": full passes, and "log_floor" where the fit split
        holds exact-zero probabilities}, warnings) for ``scores`` (N, K); see
        :mod:`~calibview.core.calibrators.checks` for the checks and the exact-zero rule."""
        n_zero = checks.zero_rows(scores)
        floor = checks.LOG_EPS if n_zero else None
        t, passes, warnings = fit_temperature(scores, labels, cancel=cancel, progress=progress, floor=floor)
        params = {"temperature": t, "objective": "nll", "passes": passes}
        return _with_floor(params, floor), self._checked(scores, labels, t, n_zero, warnings)

    def _checked(self, scores, labels, t: float, n_zero: int, warnings=()) -> tuple[str, ...]:
        """The fit's warnings: the split's, the exact zeros', the fit's own (``warnings``) and T's range."""
        n, k = int(scores.shape[0]), int(scores.shape[1])
        return tuple(checks.split_warnings(labels, k, self.label, 1) + checks.zero_warning(n_zero, n, self.label)
                     + list(warnings) + checks.temperature_warning(self.label, t))

    def prepare(self, params, device):
        """(T, the log-probability floor or None)."""
        floor = params.get("log_floor")
        return float(params["temperature"]), None if floor is None else float(floor)

    def apply(self, prepared, scores):
        """(N, K) float64 log_softmax(scores / T), every row's arg-max kept (:func:`checks.keep_argmax`)."""
        t, floor = prepared
        # divided in place in a copy: one (N, K) temporary fewer, the same values as scores / T
        z = scores.to(torch.float64, copy=True)
        if floor is not None:
            z.clamp_min_(floor)
        return checks.keep_argmax(torch.log_softmax(z.div_(t), dim=1), scores)


def _with_floor(params: dict, floor: float | None) -> dict:
    """``params`` with the log-probability floor the fit used, when it used one (none: unchanged params)."""
    return params if floor is None else {**params, "log_floor": floor}


class TemperatureGrid(Temperature):
    """Mukhoti et al.'s protocol: the first T on 0.1, 0.2, ..., 10.0 with minimal fit-split ECE (15 bins)."""

    name, label, streams = "ts-grid", "Temperature scaling (ECE grid)", False
    grid = tuple(round(0.1 * i, 1) for i in range(1, 101))

    def fit(self, scores, labels, *, progress=None, cancel=None, n_bins: int = 15):
        """({"temperature": T, "objective": "ece-grid", "fit_ece": the fit split's top-label ECE over ``n_bins``
        equal-width bins, a fraction, and "log_floor" as for ``ts``}, warnings) for ``scores`` (N, K); ties go to
        the smallest T; a T at either end of the grid is warned about (the optimum may lie beyond)."""
        n_zero = checks.zero_rows(scores)
        floor = checks.LOG_EPS if n_zero else None
        z = scores.to(torch.float64)
        if floor is not None:
            z = z.clamp_min(floor)
        pred = row_argmax(z)        # T > 0 never changes the arg-max
        correct = (pred == labels).to(torch.float64).cpu().numpy()
        zmax = z.amax(dim=1, keepdim=True)
        gap = torch.where(torch.isfinite(z), z - zmax, torch.full((), -math.inf, dtype=torch.float64,
                                                                   device=z.device))
        best_t, best_ece = None, math.inf
        for i, t in enumerate(self.grid):
            check_cancel(cancel)
            conf = (1.0 / torch.exp(gap / t).sum(dim=1)).cpu().numpy()
            table = equal_width_table(conf, correct, n_bins)
            ece = float(ece_from_sums(table.count, table.sum_conf, table.sum_correct, conf.shape[0])[0])
            if ece < best_ece:         # strict: the first T with minimal ECE wins ties
                best_t, best_ece = t, ece
            report(progress, (i + 1) / len(self.grid), f"temperature grid: T = {t:.1f}")
        edge = []
        if best_t in (self.grid[0], self.grid[-1]) and int(scores.shape[0]) > 1:
            edge = [f"{self.label} chose T = {best_t:g}, an end of its grid {self.grid[0]:g}-{self.grid[-1]:g}: "
                    "the ECE may keep falling beyond it, so the search did not converge."]
        params = {"temperature": best_t, "objective": "ece-grid", "fit_ece": best_ece}
        return _with_floor(params, floor), self._checked(scores, labels, best_t, n_zero, edge)
