"""Histogram binning (``hb``), isotonic regression (``ir``) and the MRR baseline (``mrr``).

Conventions shared by ``hb`` and ``ir``
  * ``p = softmax(z)`` in float64 (:func:`probabilities`), the same computation at fit and at apply,
    so a fit-split probability lands in exactly the bin / threshold interval it was counted in.
  * One-vs-rest: class k's map is fitted on (p_k, 1[y = k]) over all fit rows; the K maps are then applied to
    a row and the row renormalised to sum 1. Zero entries stay exact zeros (log-probability -inf, infinite NLL
    when the label has it, never clipped). A row whose K mapped values are all 0 has no calibrated
    distribution: it falls back to the uncalibrated row (netcal returns NaN there).
  * A class absent from the fit split maps to 0 everywhere (``ir``) or wherever its bin was non-empty
    (``hb``; empty bins map to their centre); the renormalisation or the fallback still gives a valid row,
    and fit returns a warning naming such classes.

``hb``: bins are ``lo < p <= hi`` with 0 in the first bin (as :func:`calibview.core.stats.metrics.equal_width_bin`),
  edges ``np.linspace(0, 1, B + 1)`` ("uniform") or per class ``0, np.quantile(p_k, j / B) ..., 1`` of the
  fit split ("quantile", equal mass). A bin is mapped to the fraction of positives among the fit rows in it;
  an empty bin to its centre (lo + hi) / 2 (no data: the uncalibrated midpoint). netcal 1.4.0 uses the centre
  too, but counts with ``lo <= p < hi`` at fit and ``lo < p <= hi`` at transform, clips p to [eps, 1 - eps]
  at fit, leaves the column of an absent class at 0 and divides all-zero rows by 0 (NaN).
``ir``: ``scipy.optimize.isotonic_regression`` (increasing) on the unique p_k of the fit split (duplicates
  pooled with their counts as weights), predicted as sklearn's ``IsotonicRegression(out_of_bounds="clip")``:
  linear interpolation between the kept thresholds, clipped to the fitted range. Only the points where the
  step function changes are stored (sklearn's ``trim_duplicates``). Pooled are, as in sklearn's
  ``_make_unique``, the sorted values less than ``POOL_EPS`` (1e-15) above the first of their run, not only
  exact ties: a class's tiny probabilities (1e-20 .. 1e-12 at a million rows) pool into a few runs, and pooling
  exact ties only moved the maps there by up to 1e-5 from sklearn's (1,000,000 x 10).
``mrr``: the arg-max class (first index on ties) gets the fit-split accuracy ``acc``, the others
  (1 - acc)/(K - 1). The arg-max is kept only when acc > 1/K; otherwise the predicted class gets no more
  probability than the others (the arg-max moves to the first other class) and fit warns.

Options are keyword arguments of ``fit`` (or of the constructor, for the registered defaults): hb ``bins``
(15) and ``strategy`` ("uniform"). The quantile-hb and ir fits hold the (K, N) float64 fit-split probabilities
in memory (8 N K bytes). Platt and beta calibration, the binary logistic maps, are in
:mod:`calibview.core.calibrators.logistic`.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import torch

from calibview.core.calibrators.base import Fitted, Method, fit_checks, registered
from calibview.core.calibrators.temperature import log_probabilities
from calibview.core.errors import CalibviewError, check_cancel, report
from calibview.core.stats.metrics import chunk_rows
from calibview.core.stats.rowwise import row_argmax

# Rows per pass at fit time: chunk_rows(K) (float64 (rows, K) temporaries of ~16 MB); apply receives chunks from
# its caller.
CLASS_BLOCK = 64         # classes per block when whole columns are processed (quantiles, isotonic fits)


# --- shared helpers -------------------------------------------------------------------------------------------

def probabilities(scores: torch.Tensor) -> torch.Tensor:
    """(N, K) float64 softmax of ``scores`` (N, K), exactly as the hb / ir fits and maps compute it (torch
    computes each row alike whatever the chunk, so fit and apply see bitwise the same values)."""
    return torch.softmax(scores.to(torch.float64), dim=1)


def _columns(scores: torch.Tensor, cancel, progress, what: str) -> np.ndarray:
    """The (K, N) float64 probabilities of the fit split, one class per row (8 N K bytes)."""
    n, k = scores.shape
    out = np.empty((k, n))
    rows = chunk_rows(k)
    for start in range(0, n, rows):
        check_cancel(cancel)
        stop = min(n, start + rows)
        out[:, start:stop] = probabilities(scores[start:stop]).cpu().numpy().T
        report(progress, stop / n, f"{what}: {stop} of {n} rows")
    return out


def _names(idx: np.ndarray) -> str:
    shown = ", ".join(str(int(i)) for i in idx[:5])
    return shown + (", ..." if len(idx) > 5 else "")


def _renormalise(q: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """log(q / row sum), in q's storage; rows summing to 0 fall back to the uncalibrated log-probabilities."""
    s = q.sum(dim=1, keepdim=True)
    zero = s[:, 0] == 0
    out = q.log_().sub_(s.log())
    if bool(zero.any()):
        out[zero] = log_probabilities(scores[zero])
    return out


class _OneVsRest(Method):
    """hb and ir: K independent maps p_k -> [0, 1], then renormalised rows."""

    def map(self, prepared: Any, p: torch.Tensor) -> torch.Tensor:
        """(N, K) contiguous unnormalised per-class values for probabilities ``p`` (may reuse p's storage)."""
        raise NotImplementedError

    def apply(self, prepared, scores):
        """(N, K) float64 log-probabilities: the K maps of softmax(``scores``), each row renormalised."""
        return _renormalise(self.map(prepared, probabilities(scores)), scores)


def one_vs_rest(fitted: Fitted, scores: torch.Tensor) -> torch.Tensor:
    """The (N, K) float64 per-class maps of a fitted ``hb`` / ``ir`` calibrator on ``scores`` (N, K), in [0, 1],
    before renormalisation."""
    method = registered(fitted.method)
    if not isinstance(method, _OneVsRest):
        raise CalibviewError(f"{method.label} is not a one-vs-rest calibrator.")
    return method.map(method.prepare(fitted.params, scores.device), probabilities(scores))


def _absent_warning(y: np.ndarray, k: int, label: str, what: str) -> list[str]:
    absent = np.flatnonzero(np.bincount(y, minlength=k) == 0)
    if not absent.size:
        return []
    return [f"{absent.size} of {k} classes never occur in the fit split (class {_names(absent)}); {label} "
            f"maps them to probability 0{what}."]


# --- histogram binning ----------------------------------------------------------------------------------------

def _quantiles(srt: np.ndarray, b: int) -> np.ndarray:
    """np.quantile(x, j / b, method="linear") for j = 1..b-1 along the rows of the row-sorted ``srt``."""
    n = srt.shape[1]
    v = (n - 1) * (np.arange(1, b) / b)
    lo = np.floor(v).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    t = v - lo
    a, d = srt[:, lo], srt[:, hi] - srt[:, lo]
    return np.where(t >= 0.5, srt[:, hi] - d * (1 - t), a + d * t)     # numpy's _lerp


class HistogramBinning(_OneVsRest):
    """Histogram binning

    ``hb``: per class, p_k mapped to the fraction of positives in its bin (``bins`` bins, "uniform" or
    "quantile" edges); see the module docstring."""

    name, label, keeps_argmax = "hb", "Histogram binning", False
    strategies = ("uniform", "quantile")

    def __init__(self, bins: int = 15, strategy: str = "uniform"):
        if strategy not in self.strategies:      # checked here too, so a bad option fails before any data is read
            raise CalibviewError(f"Unknown histogram-binning strategy {strategy!r}; choose uniform or quantile.")
        self.bins, self.strategy = bins, strategy

    def fit(self, scores, labels, *, progress=None, cancel=None, bins: Optional[int] = None,
            strategy: Optional[str] = None):
        """({"bins": B, "strategy", "edges": (B + 1,) or (K, B + 1), "value": (K, B) fractions}, warnings) for
        ``scores`` (N, K) and ``labels`` (N,); ``bins`` / ``strategy`` override the constructor's."""
        b = int(self.bins if bins is None else bins)
        strategy = self.strategy if strategy is None else strategy
        if b < 1:
            raise CalibviewError(f"Histogram binning needs at least 1 bin, got {b}.")
        if strategy not in self.strategies:
            raise CalibviewError(f"Unknown histogram-binning strategy {strategy!r}; choose uniform or quantile.")
        warnings = fit_checks(scores, labels, self.label)
        n, k = scores.shape
        y = labels.to(device=scores.device, dtype=torch.int64)
        if strategy == "uniform":
            edges = np.linspace(0.0, 1.0, b + 1)
        else:
            edges = np.empty((k, b + 1))
            edges[:, 0], edges[:, -1] = 0.0, 1.0
            cols = _columns(scores, cancel, lambda f, m: report(progress, 0.4 * f, m), "equal-mass edges")
            for k0 in range(0, k, CLASS_BLOCK):
                check_cancel(cancel)
                edges[k0:k0 + CLASS_BLOCK, 1:-1] = _quantiles(np.sort(cols[k0:k0 + CLASS_BLOCK], axis=1), b)
            del cols
            edges = np.maximum.accumulate(np.clip(edges, 0.0, 1.0), axis=1)
        prepared = self._bin_layout(edges, k, b, scores.device)
        count = torch.zeros(k * b, dtype=torch.float64, device=scores.device)
        pos = torch.zeros(k * b, dtype=torch.float64, device=scores.device)
        start0 = 0.0 if strategy == "uniform" else 0.5
        rows = chunk_rows(k)
        for start in range(0, n, rows):
            check_cancel(cancel)
            stop = min(n, start + rows)
            flat = self._flat_bins(prepared, probabilities(scores[start:stop]))
            count += torch.bincount(flat.reshape(-1), minlength=k * b).to(torch.float64)
            pos += torch.bincount(flat.gather(1, y[start:stop, None])[:, 0], minlength=k * b).to(torch.float64)
            report(progress, start0 + (1 - start0) * stop / n, f"histogram binning: {stop} of {n} rows")
        count, pos = count.cpu().numpy().reshape(k, b), pos.cpu().numpy().reshape(k, b)
        e = np.broadcast_to(edges, (k, b + 1))
        empty = count == 0
        value = np.where(empty, 0.5 * (e[:, :-1] + e[:, 1:]), pos / np.maximum(count, 1))
        if empty.any():
            warnings.append(f"{int(empty.sum())} of the {k * b} class bins are empty in the fit split; they map "
                            "to their bin centre.")
        warnings += _absent_warning(labels.cpu().numpy(), k, self.label, " in every non-empty bin")
        return {"bins": b, "strategy": strategy, "edges": edges, "value": value}, tuple(warnings)

    @staticmethod
    def _bin_layout(edges, k: int, b: int, device) -> dict[str, Any]:
        # Searching the edges with the outer two at -inf / +inf puts p = 0 in the first bin and p = 1 in the last
        # without a clamp (the interior edges decide, lo < p <= hi).
        search = np.array(edges, dtype=np.float64)
        search[..., 0], search[..., -1] = -np.inf, np.inf
        return {"edges": torch.as_tensor(search, device=device), "b": b,
                "offset": torch.arange(k, device=device) * b - 1}

    def prepare(self, params, device):
        """The edges (outer ones at -inf / +inf), the flat (K * B,) bin values and per-class offsets on
        ``device``."""
        value = np.asarray(params["value"], dtype=np.float64)
        k, b = value.shape
        return {**self._bin_layout(params["edges"], k, b, device),
                "value": torch.as_tensor(value.reshape(-1), device=device)}

    @staticmethod
    def _flat_bins(prepared, p: torch.Tensor) -> torch.Tensor:
        """(N, K) index k * B + bin of every entry (``lo < p <= hi``, 0 in bin 0)."""
        edges = prepared["edges"]
        if edges.ndim == 1:
            return torch.searchsorted(edges, p, side="left").add_(prepared["offset"])
        return torch.searchsorted(edges, p.T.contiguous(), side="left").T + prepared["offset"]

    def map(self, prepared, p):
        """(N, K): every entry of ``p`` (N, K) replaced by its class bin's value, in ``p``'s storage."""
        flat = self._flat_bins(prepared, p)
        return torch.index_select(prepared["value"], 0, flat.reshape(-1), out=p.view(-1)).view(p.shape)


# --- isotonic regression --------------------------------------------------------------------------------------

#: sorted fit values less than this above the first value of their run are pooled into it (scikit-learn's
#: ``np.finfo(np.float64).resolution`` in ``_make_unique``)
POOL_EPS = float(np.finfo(np.float64).resolution)


def run_starts(x: np.ndarray) -> np.ndarray:
    """Indices (runs,) where the runs of the sorted (n,) float64 ``x`` start, greedily from the left as sklearn's
    ``_make_unique``: a value starts a new run when ``x[j] - x[start] >= POOL_EPS`` (in float64 arithmetic)
    for the current run's first value ``x[start]``; n >= 1."""
    n = x.shape[0]
    start = np.r_[True, np.diff(x) >= POOL_EPS]       # a gap of eps or more always starts a run
    # Between two such gaps the values climb in steps under eps; where they climb by eps or more in all, the
    # runs are found by stepping from each run's first value to the first value eps above it, in every such
    # block at once (a million-row class has thousands of these blocks among its tiny probabilities).
    first = np.flatnonzero(start)
    end = np.r_[first[1:], n]
    wide = x[end - 1] - x[first] >= POOL_EPS
    cur, stop = first[wide], end[wide]
    while cur.size:
        nxt = np.minimum(np.searchsorted(x, x[cur] + POOL_EPS, side="left"), stop)
        # the test is the subtraction, as sklearn's; x + eps may round the other way: settle the last ulp
        while True:
            back = (nxt - 1 > cur) & (x[np.maximum(nxt - 1, 0)] - x[cur] >= POOL_EPS)
            fwd = ~back & (nxt < stop) & (x[np.minimum(nxt, n - 1)] - x[cur] < POOL_EPS)
            if not (back.any() or fwd.any()):
                break
            nxt = nxt - back + fwd
        more = nxt < stop
        start[nxt[more]] = True
        cur, stop = nxt[more], stop[more]
    return np.flatnonzero(start)


def _isotonic_steps(x_sorted: np.ndarray, x_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Thresholds (x, y) of the increasing isotonic fit of 1[positive] on the sorted sample ``x_sorted``, whose
    positives have the values ``x_pos``, pooled as :func:`run_starts`; only the first and last point of every
    constant run are kept."""
    n = x_sorted.shape[0]
    starts = run_starts(x_sorted)
    ux = x_sorted[starts]
    if x_pos.size == 0:
        fy = np.zeros(ux.shape[0])
    else:
        w = np.diff(np.r_[starts, n]).astype(np.float64)
        # a positive belongs to the last run starting at or below its value (ties never straddle two runs)
        npos = np.bincount(np.searchsorted(ux, x_pos, side="right") - 1, minlength=ux.shape[0])
        from scipy.optimize import isotonic_regression      # 0.2 s of imports, for ir fits only

        fy = np.clip(isotonic_regression(npos / w, weights=w, increasing=True).x, 0.0, 1.0)
    keep = np.ones(ux.shape[0], dtype=bool)
    keep[1:-1] = (fy[1:-1] != fy[:-2]) | (fy[1:-1] != fy[2:])
    return ux[keep], fy[keep]


class Isotonic(_OneVsRest):
    """Isotonic regression

    ``ir``: per class, the increasing isotonic regression of 1[y = k] on p_k, interpolated linearly between
    its thresholds and clipped to the fitted range (as sklearn's); see the module docstring."""

    name, label, keeps_argmax = "ir", "Isotonic regression", False

    def fit(self, scores, labels, *, progress=None, cancel=None):
        """({"x": thresholds, "y": their values, "offsets": (K + 1,) where each class's run starts}, warnings) for
        ``scores`` (N, K) and ``labels`` (N,); x and y hold the K classes' runs one after the other."""
        warnings = fit_checks(scores, labels, self.label)
        k = scores.shape[1]
        y = labels.cpu().numpy()
        order = np.argsort(y, kind="stable")
        bounds = np.searchsorted(y[order], np.arange(k + 1))
        cols = _columns(scores, cancel, lambda f, m: report(progress, 0.3 * f, m), "isotonic regression")
        xs, ys, offsets = [], [], [0]
        for k0 in range(0, k, CLASS_BLOCK):
            srt = np.sort(cols[k0:k0 + CLASS_BLOCK], axis=1)
            for j in range(srt.shape[0]):
                check_cancel(cancel)
                c = k0 + j
                tx, ty = _isotonic_steps(srt[j], cols[c, order[bounds[c]:bounds[c + 1]]])
                xs.append(tx)
                ys.append(ty)
                offsets.append(offsets[-1] + tx.shape[0])
            report(progress, 0.3 + 0.7 * (c + 1) / k, f"isotonic regression: {c + 1} of {k} classes")
        warnings += _absent_warning(y, k, self.label, "")
        return {"x": np.concatenate(xs), "y": np.concatenate(ys), "offsets": offsets}, tuple(warnings)

    def prepare(self, params, device):
        """Per class, segment j = searchsorted(x, p, side="left") of the L thresholds x: segment 0 (p <= x_0) and
        segment L (p > x_{L-1}) are the clipped constants, segment 1 <= j < L interpolates from x_{j-1} with
        scipy interp1d's slope (y_j - y_{j-1}) / (x_j - x_{j-1})."""
        x = np.asarray(params["x"], dtype=np.float64)
        y = np.asarray(params["y"], dtype=np.float64)
        off = np.asarray(params["offsets"], dtype=np.int64)
        lens = np.diff(off)
        k, m = lens.shape[0], int(lens.max())
        search = np.full((k, m), np.inf)
        x_lo = np.zeros((k, m + 1))
        y_lo = np.repeat(y[off[1:] - 1, None], m + 1, axis=1)     # segment L and the padding: y_{L-1}
        slope = np.zeros((k, m + 1))
        for c in range(k):
            xc, yc, n_c = x[off[c]:off[c + 1]], y[off[c]:off[c + 1]], lens[c]
            search[c, :n_c] = xc
            y_lo[c, 0] = yc[0]
            x_lo[c, 1:n_c], y_lo[c, 1:n_c] = xc[:-1], yc[:-1]
            slope[c, 1:n_c] = (yc[1:] - yc[:-1]) / (xc[1:] - xc[:-1])
        t = lambda a: torch.as_tensor(a, device=device)
        return {"search": t(search), "x_lo": t(x_lo), "y_lo": t(y_lo), "slope": t(slope)}

    def map(self, prepared, p):
        """(N, K): every entry of ``p`` (N, K) through its class's interpolated step function, in ``p``'s
        storage."""
        pt = p.T.contiguous()
        seg = torch.searchsorted(prepared["search"], pt, side="left")
        out = pt.sub_(prepared["x_lo"].gather(1, seg))
        out.mul_(prepared["slope"].gather(1, seg)).add_(prepared["y_lo"].gather(1, seg))
        return p.copy_(out.T)


# --- the MRR baseline -----------------------------------------------------------------------------------------

class MRR(Method):
    """MRR baseline

    ``mrr``: the arg-max class gets the fit-split accuracy, the others share the rest equally."""

    # not promised for every fit: the top class keeps the most probability only while the fit accuracy > 1/K
    name, label, keeps_argmax = "mrr", "MRR baseline", False

    def keeps_argmax_with(self, params, k):
        """True while the fitted accuracy is above 1/K."""
        return float(params["accuracy"]) > 1.0 / k

    def fit(self, scores, labels, *, progress=None, cancel=None):
        """({"accuracy": the fit split's top-1 accuracy, a fraction}, warnings) for ``scores`` (N, K), K >= 2."""
        warnings = fit_checks(scores, labels, self.label)
        n, k = scores.shape
        if k < 2:
            raise CalibviewError("The MRR baseline needs at least 2 classes.")
        correct = 0
        rows = chunk_rows(k)
        for start in range(0, n, rows):
            check_cancel(cancel)
            pred = row_argmax(scores[start:start + rows])
            correct += int((pred == labels[start:start + rows].to(pred.device)).sum())
        acc = correct / n
        report(progress, 1.0, f"MRR: fit-split accuracy {acc:.6g}")
        if acc == 1.0:
            warnings.append("The fit-split accuracy is 1, so MRR gives every non-predicted class probability 0 "
                            "(infinite NLL on any error).")
        elif acc <= 1.0 / k:
            warnings.append(f"The fit-split accuracy {acc:.6g} is at most 1/K, so MRR gives the predicted class "
                            "no more probability than the others and does not keep the arg-max.")
        return {"accuracy": acc}, tuple(warnings)

    def apply(self, params, scores):
        """(N, K) float64 log-probabilities: log(acc) at each row's arg-max, log((1 - acc) / (K - 1)) elsewhere."""
        n, k = scores.shape
        acc = float(params["accuracy"])
        log = lambda v: math.log(v) if v > 0 else -math.inf
        out = torch.full((n, k), log((1.0 - acc) / (k - 1)), dtype=torch.float64, device=scores.device)
        return out.scatter_(1, scores.argmax(dim=1, keepdim=True), log(acc))

