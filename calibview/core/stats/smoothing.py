"""Smoothed calibration estimators: SmoothECE and the calibration-sharpness diagram.

Two estimators live here, both built on "bin once onto a grid, then convolve", so that their cost after the
binning depends on the grid size, not on N:

* **SmoothECE** (:func:`smece`, :func:`smece_at`, :func:`smece_resampled`) reproduces ``relplot.smECE`` of
  relplot 1.0.3 operation for operation (linear binning onto ``max(2000, round(20/sigma))//2 + 1`` points,
  reflected Gaussian convolution, linear interpolation onto ``max(round(10/sigma), 200)`` points, density
  epsilon 1e-4, bisection for the fixed point ``sigma = smECE_sigma``). The reflected ``np.convolve`` of relplot
  equals a circular convolution of the even-periodic extension (period ``2M - 2``), which is done here by FFT.
* **The calibration-sharpness estimator** of Chidambaram & Ge (ICLR 2025; reference code ``sharpcal``):
  Nadaraya-Watson curve, density, sharpness band and the CAL / TOT numbers (:func:`bin_stats`,
  :func:`sharpness_curve`, :func:`cal_tot`, :func:`cal_resampled`). Kernels have no boundary correction.

Inputs are 1-D arrays: ``conf`` (N,) top-label confidences in [0, 1], ``correct`` (N,) in [0, 1] (usually 0/1),
``loss`` (N,) per-sample full-vector Brier loss; they are converted to float64 and everything is computed in
float64, except one product: bootstrap ``weights`` (R, N) (sample i appears ``weights[r, i]`` times in
resample r) enter as ``unit sums (float64) + (W - 1) @ B`` with B a sparse linear-binning matrix and the
fluctuation product in float32 (resampled SmoothECE agrees with relplot on the explicitly resampled data to
~1e-9, resampled CAL to the grid error).

User errors (NaN, values outside [0, 1], shape mismatches, unknown kernel, bad bandwidth or weights) raise
:class:`~calibview.core.errors.CalibviewError`.
"""

from __future__ import annotations

import hashlib
import math
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional, Sequence

import numpy as np
import scipy.fft as sfft
import torch

from calibview.core.errors import CalibviewError

__all__ = ["smece", "smece_at", "smece_resampled", "BinnedStats", "bin_stats", "SharpnessCurve",
           "sharpness_curve", "cal_tot", "cal_resampled", "KERNELS"]

KERNELS = ("gaussian", "epanechnikov")

_WORKERS = 1                    # scipy.fft threads: the batched transforms here are small; 2 gained nothing


# ----------------------------------------------------------------------------------------------- validation
def _vector(name: str, values, n: Optional[int] = None) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise CalibviewError(f"{name} must be numeric; pass a 1-D array of numbers.") from exc
    if arr.ndim != 1:
        raise CalibviewError(f"{name} must be 1-D, got shape {arr.shape}; pass one value per sample.")
    if n is not None and arr.shape[0] != n:
        raise CalibviewError(f"{name} has {arr.shape[0]} values but conf has {n}; pass one value per sample.")
    if arr.shape[0] == 0:
        raise CalibviewError(f"{name} is empty; the split needs at least one sample.")
    if not np.isfinite(arr).all():
        raise CalibviewError(f"{name} contains NaN or infinite values; check the logits for non-finite entries.")
    return arr


def _unit_vector(name: str, values, n: Optional[int] = None) -> np.ndarray:
    arr = _vector(name, values, n)
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise CalibviewError(f"{name} must lie in [0, 1] (found {arr.min():.6g} .. {arr.max():.6g}); "
                             "pass probabilities, not logits.")
    return arr


def _binary_inputs(conf, correct) -> tuple[np.ndarray, np.ndarray]:
    f = _unit_vector("conf", conf)
    return f, _unit_vector("correct", correct, f.shape[0])


def _weights(weights, n: int) -> tuple[torch.Tensor, np.ndarray]:
    """(R, N) float32 CPU counts and their (R,) float64 row sums (the resample sizes)."""
    if not isinstance(weights, torch.Tensor):
        weights = torch.as_tensor(np.asarray(weights))
    if weights.ndim != 2 or weights.shape[1] != n:
        raise CalibviewError(f"bootstrap weights must have shape (R, {n}), got {tuple(weights.shape)}.")
    w = weights.detach().to(device="cpu", dtype=torch.float32).contiguous()
    sums = np.zeros(0)
    if w.shape[0]:
        # Two cheap passes: a NaN or inf anywhere shows in the row sums, a negative count in the minimum.
        # float32 sums are exact for integer counts below 2**24 (and 30x faster than float64 ones).
        sums = w.sum(dim=1).double().numpy()
        if not np.isfinite(sums).all() or float(w.min()) < 0:
            raise CalibviewError("bootstrap weights must be finite non-negative counts.")
        if (sums <= 0).any():
            raise CalibviewError("every bootstrap resample needs at least one sample (a row of weights sums to 0).")
    return w, sums


_CACHE: "OrderedDict[tuple, object]" = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _cached(tag: str, arrays: tuple, build, store: Optional[dict] = None):
    """Per-data helper objects (sparse binning matrices) shared by successive calls on the same samples, as
    when the bootstrap feeds one evaluation split in several blocks of resamples. ``store``: a dict owned by the
    caller, who promises the same samples on every call (and frees the helpers by dropping it); otherwise a
    global cache keyed by a hash of the data keeps the two most recent entries."""
    if store is not None:
        if tag not in store:
            store[tag] = build()
        return store[tag]
    digest = hashlib.blake2b(digest_size=16)
    for arr in arrays:
        digest.update(np.ascontiguousarray(arr).view(np.uint8))
    key = (tag, arrays[0].shape[0], digest.hexdigest())
    with _CACHE_LOCK:
        obj = _CACHE.get(key)
        if obj is not None:
            _CACHE.move_to_end(key)
            return obj
    obj = build()
    with _CACHE_LOCK:
        _CACHE[key] = obj
        while len(_CACHE) > 2:
            _CACHE.popitem(last=False)
    return obj


def _check_kernel(kernel: str) -> str:
    k = str(kernel).lower()
    if k not in KERNELS:
        raise CalibviewError(f"unknown kernel {kernel!r}; choose one of {', '.join(KERNELS)}.")
    return k


#: points of the grid the diagram's curves are drawn on (bin_stats' default)
CURVE_GRID = 4096


def check_curve_bandwidth(bandwidth: float) -> float:
    """The bandwidth, if the diagram's grid resolves it (every request is checked before any work)."""
    return _check_bandwidth(bandwidth, CURVE_GRID)


def _check_bandwidth(bandwidth: float, grid_size: int) -> float:
    try:
        h = float(bandwidth)
    except (TypeError, ValueError) as exc:
        raise CalibviewError(f"bandwidth must be a number, got {bandwidth!r}.") from exc
    dx = 1.0 / (grid_size - 1)
    if not math.isfinite(h) or h <= 0.0:
        raise CalibviewError(f"bandwidth must be a positive number, got {bandwidth!r}.")
    if h < 2.0 * dx:
        raise CalibviewError(f"bandwidth {h:g} is finer than the {grid_size}-point grid resolves; use a bandwidth "
                             f">= {2 * dx:.2g} or bin onto a finer grid.")
    return h


def _linear_csr(node: np.ndarray, t: np.ndarray, columns: list[np.ndarray], n_nodes: int) -> torch.Tensor:
    """CSR (len(columns) * n_nodes, N) float32 matrix of linear binning: sample i puts ``(1 - t_i) x_i`` on node
    ``node_i`` and ``t_i x_i`` on ``node_i + 1`` of block j, for the j-th column x (``node_i <= n_nodes - 2``).

    Built by one stable sort of the N node indices: with S[m] the number of samples below node m, node m's row
    holds the samples of node m - 1 (their right entries) then those of node m (left entries), so the sample at
    sorted position q lands at S[node] + q and S[node + 1] + q of its block. Memory stays a few N-vectors beyond
    the matrix (int32 indices), where sorting all 2 N len(columns) entries needed ~5x the matrix: for the
    bootstrap of a 2,000,000-sample split that was ~0.5 GB."""
    n = node.shape[0]
    node = np.asarray(node, dtype=np.int64)
    perm = np.argsort(node, kind="stable")
    sorted_node = node[perm]
    starts = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(node, minlength=n_nodes), out=starts[1:])
    q = np.arange(n, dtype=np.int64)
    left = starts[sorted_node] + q
    right = starts[sorted_node + 1] + q
    del sorted_node, q
    per_block = 2 * n
    prev = np.concatenate([[0], starts[:-1]])
    local_crow = prev + starts                      # row m starts after the entries of nodes < m - 1 and < m
    n_cols = len(columns)
    small = max(n, n_cols * per_block) < 2 ** 31 - 1
    idx = np.int32 if small else np.int64
    crow = np.empty(n_cols * n_nodes + 1, dtype=np.int64)
    cols = np.empty(n_cols * per_block, dtype=idx)
    vals = np.empty(n_cols * per_block, dtype=np.float32)
    t_sorted = t[perm]
    for j, x in enumerate(columns):
        crow[j * n_nodes:(j + 1) * n_nodes] = j * per_block + local_crow[:-1]
        block_cols = cols[j * per_block:(j + 1) * per_block]
        block_vals = vals[j * per_block:(j + 1) * per_block]
        block_cols[left] = perm
        block_cols[right] = perm
        xs = x[perm]
        block_vals[left] = (1.0 - t_sorted) * xs
        block_vals[right] = t_sorted * xs
    crow[-1] = n_cols * per_block
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)        # "sparse CSR support is in beta state"
        return torch.sparse_csr_tensor(torch.from_numpy(crow.astype(idx)), torch.from_numpy(cols),
                                       torch.from_numpy(vals), size=(n_cols * n_nodes, n), check_invariants=False)


def _sparse_binning_t(conf: np.ndarray, columns: list[np.ndarray], grid_size: int) -> torch.Tensor:
    """CSR (len(columns) * G, N) float32 matrix B^T of linear binning onto linspace(0, 1, G): sample i puts
    ``(1 - frac_i) x_i`` on node ``b_i`` and ``frac_i x_i`` on node ``b_i + 1`` of block j, for every column x
    (b_i = min(floor(conf_i (G - 1)), G - 2), frac_i = conf_i (G - 1) - b_i, as relplot's smooth_round_to_grid)."""
    pos = conf * (grid_size - 1)
    b = pos.astype(np.int64).clip(0, grid_size - 2)
    return _linear_csr(b, pos - b, columns, grid_size)


class _Panels:
    """Bootstrap weights (R, N) served as transposed (N, width) float32 panels of the fluctuations W - 1, a
    block of resamples at a time.

    Grid sums are ``base + (W - 1) @ B``: the base (all counts 1) is summed exactly in float64 by the caller,
    and float32 only touches the fluctuation, whose partial sums stay ~sqrt(n) instead of ~n even where
    thousands of samples share a grid node (saturated confidences), so their rounding stays ~1e-7 relative.
    torch.sparse.mm(CSR, dense) is ~5x faster with a contiguous dense operand than with a transposed view, and
    fastest with ~32 columns (its output stays in cache); buffers are reused from block to block.
    """

    def __init__(self, weights: torch.Tensor, panel_bytes: int = 64 << 20) -> None:
        self.w = weights.numpy()
        n_rows, n = self.w.shape
        self.width = 32 if n <= 1 << 17 else 16 if n <= 1 << 18 else 8
        self.per_block = int(max(1, min(256 // self.width, panel_bytes // (4 * n * self.width))))
        self.block = self.width * self.per_block
        self._buf = [np.empty((n, self.width), dtype=np.float32) for _ in range(min(self.per_block,
                                                                                    -(-n_rows // self.width)))]

    def blocks(self):
        """Yield (start, stop, panels) for consecutive blocks of resamples."""
        n_rows = self.w.shape[0]
        for start in range(0, n_rows, self.block):
            stop = min(n_rows, start + self.block)
            panels = []
            for j, p in enumerate(range(start, stop, self.width)):
                q = min(stop, p + self.width)
                buf = self._buf[j] if q - p == self.width else np.empty((self.w.shape[1], q - p), np.float32)
                np.subtract(self.w[p:q].T, np.float32(1.0), out=buf)
                panels.append(torch.from_numpy(buf))
            yield start, stop, panels


def _panel_blocks(panels: Sequence[torch.Tensor], n: int, panel_bytes: int):
    """(start, stop, panels) blocks from precomputed (N, width) fluctuation panels, sized like :class:`_Panels`."""
    width = panels[0].shape[1]
    per_block = int(max(1, min(256 // width, panel_bytes // (4 * n * width))))
    start = 0
    for j in range(0, len(panels), per_block):
        part = list(panels[j:j + per_block])
        stop = start + sum(p.shape[1] for p in part)
        yield start, stop, part
        start = stop


def _check_panels(panels: Sequence[torch.Tensor], n: int) -> int:
    """Validate shared fluctuation panels (see :func:`smece_resampled`); returns the number of resamples."""
    if not panels or any(p.ndim != 2 or p.shape[0] != n or p.dtype != torch.float32 or p.device.type != "cpu"
                         for p in panels):
        raise CalibviewError(f"bootstrap panels must be (N = {n}, width) float32 CPU tensors.")
    return sum(p.shape[1] for p in panels)


def _panel_product(bt: torch.Tensor, panels: list[torch.Tensor], rows: Optional[np.ndarray] = None
                   ) -> np.ndarray:
    """(rows of bt, k) float64 = ((W - 1) @ B)^T for the resamples in ``panels`` (or block-local ``rows``)."""
    width = panels[0].shape[1]
    used = list(range(len(panels))) if rows is None else np.unique(rows // width).tolist()
    out = torch.cat([torch.sparse.mm(bt, panels[p]) for p in used], dim=1)
    if rows is not None:
        local = np.searchsorted(np.asarray(used), rows // width) * width + rows % width
        out = out.index_select(1, torch.from_numpy(local))
    return out.double().numpy()


# ======================================================================================== SmoothECE (relplot)
_SMECE_EPS = 0.001              # relplot.smECE eps: bandwidths below it count as "small enough"
_SMECE_REFINE = 10              # relplot.search_param refinements
_DENS_EPS = 1e-4                # relplot BaseKernelMixin.smooth eps
_MIN_SIGMA = 1e-4               # smece_at: below this relplot's grid exceeds 100,001 points


def _smece_grid_size(sigma: float) -> int:
    return max(2000, round(20 / sigma)) // 2 + 1


def _smece_eval_size(sigma: float) -> int:
    return max(round(10 / sigma), 200)


@lru_cache(maxsize=512)
def _smece_kernel_hat(sigma: float, m: int) -> np.ndarray:
    """rfft of relplot's kernel (Gaussian on linspace(0, 1, m) centred at 0.5, unnormalised on the grid),
    wrapped for a circular convolution of period 2m - 2. Offset d sits at kernel index m//2 + d, which is
    exactly the alignment of relplot's ``np.convolve(..., 'valid')[m//2 : m//2 + m]``."""
    t = np.linspace(0, 1, m)
    var = sigma ** 2
    ker = np.exp(-(t - 0.5) * (t - 0.5) / (2 * var))
    ker /= np.sqrt(2 * np.pi) * sigma
    period = 2 * m - 2
    wrapped = np.zeros(period)
    wrapped[(np.arange(m) - m // 2) % period] = ker
    return sfft.rfft(wrapped)


@lru_cache(maxsize=64)
def _smece_interp(t_size: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """relplot ``interpolate`` indices and weights from an m-point grid onto linspace(0, 1, t_size)."""
    t = np.linspace(0, 1, t_size)
    bucket = 1 / (m - 1)
    inds = (t * (m - 1)).astype(int).clip(0, m - 2)
    return inds, (t - inds * bucket) / bucket


def _even_periodic_hat(values: np.ndarray) -> np.ndarray:
    """rfft over the last axis of the even (reflect-at-both-ends) periodic extension, period 2m - 2."""
    m = values.shape[-1]
    ext = np.concatenate([values, values[..., m - 2:0:-1]], axis=-1)
    return sfft.rfft(ext, axis=-1, workers=_WORKERS)


def _smece_grid_sums(moments: torch.Tensor, f: torch.Tensor, m: int) -> np.ndarray:
    """(2, m) relplot ``smooth_round_to_grid`` of r = f - y and of 1, from per-cell moments.

    moments : (4, N) rows (r, f r, 1, f). With p = f (m - 1) and cell b = min(floor(p), m - 2), a sample puts
    (1 + b - p) x on node b and (p - b) x on node b + 1, so each node needs only the cell sums of x and f x:
    one index_add_ of fixed per-sample rows per grid size (rounding differs from relplot's np.add.at by ~1e-13
    relative).
    """
    b = (f * (m - 1)).to(torch.int64).clamp_(max=m - 2)
    cell = torch.zeros(4, m - 1, dtype=torch.float64).index_add_(1, b, moments).numpy()
    g = np.arange(m - 1, dtype=np.float64)
    x, px = cell[0::2], cell[1::2] * (m - 1)
    out = np.zeros((2, m))
    out[:, :-1] = (1 + g) * x - px
    out[:, 1:] += px - g * x
    return out


class _SmeceEvaluator:
    """``relplot.smooth_ece(f, y, sigma)`` with the binning done once per grid size and values memoised."""

    def __init__(self, f: np.ndarray, y: np.ndarray) -> None:
        r = f - y
        self._f = torch.from_numpy(f)
        self._moments = torch.from_numpy(np.stack([r, f * r, np.ones_like(f), f]))
        self._hats: dict[int, np.ndarray] = {}
        self._values: dict[float, float] = {}

    def _hat(self, m: int) -> np.ndarray:
        hat = self._hats.get(m)
        if hat is None:
            hat = self._hats[m] = _even_periodic_hat(_smece_grid_sums(self._moments, self._f, m))
        return hat

    def __call__(self, sigma: float) -> float:
        value = self._values.get(sigma)
        if value is None:
            m = _smece_grid_size(sigma)
            smoothed = sfft.irfft(self._hat(m) * _smece_kernel_hat(sigma, m), 2 * m - 2, axis=-1)[:, :m]
            inds, res = _smece_interp(_smece_eval_size(sigma), m)
            at_t = smoothed[:, inds] * (1 - res) + smoothed[:, inds + 1] * res
            dens = at_t[1] + _DENS_EPS
            rs = at_t[0] / dens
            value = self._values[sigma] = float(np.sum(np.abs(rs) * dens) / np.sum(dens))
        return value


def smece_at(conf, correct, sigma: float) -> float:
    """SmoothECE at a fixed bandwidth: ``relplot.smECE_sigma(conf, correct, sigma)`` (relplot 1.0.3).

    conf, correct : (N,) in [0, 1]. sigma : bandwidth >= 1e-4.
    """
    f, y = _binary_inputs(conf, correct)
    try:
        s = float(sigma)
    except (TypeError, ValueError) as exc:
        raise CalibviewError(f"sigma must be a number, got {sigma!r}.") from exc
    if not math.isfinite(s) or s < _MIN_SIGMA:
        raise CalibviewError(f"sigma must be a number >= {_MIN_SIGMA:g}, got {sigma!r}.")
    return _SmeceEvaluator(f, y)(s)


def smece(conf, correct) -> tuple[float, float]:
    """SmoothECE with relplot's automatic bandwidth: ``relplot.smECE(conf, correct, return_width=True)``.

    conf, correct : (N,) in [0, 1]. Returns (SmoothECE, sigma*), sigma* = the upper bracket of the bisection
    (1 when ``sigma = 1`` already satisfies ``sigma < smECE_sigma``). Agrees with relplot to ~1e-15.
    """
    f, y = _binary_inputs(conf, correct)
    ev = _SmeceEvaluator(f, y)

    def too_wide(alpha: float) -> bool:
        return alpha < _SMECE_EPS or alpha < ev(alpha)

    if too_wide(1.0):
        return ev(1.0), 1.0
    start, end = 1.0, 0.0
    for _ in range(_SMECE_REFINE):
        mid = (start + end) / 2
        if too_wide(mid):
            end = mid
        else:
            start = mid
    return ev(start), start


@lru_cache(maxsize=512)
def _smece_density_weights(sigma: float, m: int) -> np.ndarray:
    """u (m,) such that sum_t interp(conv(o))_t = u @ o for any m-point grid vector o: the transpose of
    relplot's reflected convolution followed by interpolation, applied to a vector of ones. It turns the
    density sum of every resample into one dot product."""
    inds, res = _smece_interp(_smece_eval_size(sigma), m)
    c = np.bincount(inds, 1 - res, minlength=m) + np.bincount(inds + 1, res, minlength=m)
    period = 2 * m - 2
    z = sfft.irfft(sfft.rfft(c, period) * np.conj(_smece_kernel_hat(sigma, m)), period)
    u = z[:m].copy()
    u[1:m - 1] += z[period - 1:m - 1:-1]          # fold the reflected copies back: E^T
    return u


_SMECE_KERNEL_REACH = 10.0      # fine grids: relplot's Gaussian truncated at 10 sigma (tail < 2e-22 of the peak)


@lru_cache(maxsize=64)
def _smece_truncated_kernel_hat(sigma: float, m: int) -> tuple[int, int, np.ndarray]:
    """(half-width L, nfft, rfft) of relplot's kernel restricted to offsets |d| <= L ~ 10 sigma, for a linear
    convolution of the reflected signal v[L:0:-1] ++ v ++ v[m-2:m-2-L:-1] at an FFT-friendly length."""
    t = np.linspace(0, 1, m)
    ker = np.exp(-(t - 0.5) * (t - 0.5) / (2 * sigma ** 2))
    ker /= np.sqrt(2 * np.pi) * sigma
    half = min(m // 2 - 1, int(math.ceil(_SMECE_KERNEL_REACH * sigma * (m - 1))))
    nfft = sfft.next_fast_len(m + 2 * half, real=True)
    return half, nfft, sfft.rfft(ker[m // 2 - half:m // 2 + half + 1], nfft)


def _smece_convolve_truncated(v: np.ndarray, sigma: float, m: int) -> np.ndarray:
    """(k, m) relplot reflected convolution of the rows of v (k, m), kernel truncated at 10 sigma."""
    half, nfft, k_hat = _smece_truncated_kernel_hat(sigma, m)
    ext = np.concatenate([v[:, half:0:-1], v, v[:, m - 2:m - 2 - half:-1]], axis=1)
    out = sfft.irfft(sfft.rfft(ext, nfft, axis=1, workers=_WORKERS) * k_hat, nfft, axis=1, workers=_WORKERS)
    return out[:, 2 * half:2 * half + m]


def _csr(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]) -> torch.Tensor:
    """float32 CSR matrix from distinct (row, col) entries."""
    key = torch.from_numpy(rows.astype(np.int64) * shape[1] + cols)
    order = torch.argsort(key)
    crow = torch.zeros(shape[0] + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(torch.from_numpy(rows.astype(np.int64)), minlength=shape[0]), 0, out=crow[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, torch.from_numpy(cols.astype(np.int64))[order],
                                       torch.from_numpy(vals.astype(np.float32))[order], size=shape,
                                       check_invariants=False)


class _FineGrids:
    """Exact grid sums on every grid finer than relplot's base grid, from one sparse product per panel.

    Bisection midpoints are k/1024; those below ~0.0107 (k = 2..10) each have their own grid. The samples are
    linearly binned once onto the (non-uniform) union of all those grids' nodes and the base grid's (``bt``).
    Every hat function of one of those grids is linear between consecutive union nodes, so it is exactly the
    combination of union hats with weights hat(e_j): a second, small sparse map (:meth:`to_nodes`) turns the
    union sums into the node sums of any of the grids, identical (up to rounding) to binning onto it directly.
    """

    # The base grid is included, so that blocks that need fine grids get everything from one product.
    GRIDS = tuple(sorted({_smece_grid_size(k / 1024) for k in range(2, 11)} | {_smece_grid_size(1.0)}))

    def __init__(self, f: np.ndarray, r: np.ndarray) -> None:
        self.nodes = e = np.unique(np.concatenate([self._nodes(m) for m in self.GRIDS]))
        self.size = size = e.shape[0]
        j = np.minimum(np.searchsorted(e, f, side="right") - 1, size - 2)
        t = (f - e[j]) / (e[j + 1] - e[j])
        self.bt = _linear_csr(j, t, [r, np.ones_like(r)], size)
        self._to_nodes: dict[int, torch.Tensor] = {}

    @staticmethod
    def _nodes(m: int) -> np.ndarray:
        return np.arange(m) / (m - 1)

    def to_nodes(self, m: int) -> torch.Tensor:
        """CSR (2m, 2 size): union-node sums -> residual and count node sums on grid m."""
        mat = self._to_nodes.get(m)
        if mat is None:
            size, e = self.size, self.nodes
            pos = e * (m - 1)
            cell = np.minimum(pos.astype(np.int64), m - 2)
            t = pos - cell
            idx = np.arange(size)
            rows = np.concatenate([cell, cell + 1, m + cell, m + cell + 1])
            cols = np.concatenate([idx, idx, size + idx, size + idx])
            vals = np.concatenate([1 - t, t, 1 - t, t])
            keep = vals != 0                     # union nodes that are grid nodes touch one node only
            mat = self._to_nodes[m] = _csr(rows[keep], cols[keep], vals[keep], (2 * m, 2 * size))
        return mat


class _ResampledSmece:
    """smooth_ece of bootstrap resamples at per-row bandwidths, from float32 sparse grid sums.

    Per row only the residual needs a convolution: sum(|rs| * dens) = sum |ys| and sum(dens) = u @ o + T eps.
    The base grid (every sigma >= ~0.0107) is convolved through its DCT-I (relplot's kernel is symmetric there);
    each finer grid belongs to a single sigma and is convolved directly with the truncated kernel.
    """

    def __init__(self, f: np.ndarray, y: np.ndarray) -> None:
        r = f - y
        self.f, self.columns = f, [r, np.ones_like(f)]
        self._f_t = torch.from_numpy(f)
        self._moments = torch.from_numpy(np.stack([r, f * r, np.ones_like(f), f]))
        self.base_m = _smece_grid_size(1.0)       # 1001
        self._bt: dict[int, torch.Tensor] = {}
        self._exact: dict[int, np.ndarray] = {}
        self._fine: Optional[_FineGrids] = None

    def _unit_sums(self, m: int) -> np.ndarray:
        """(2m,) float64 residual and count node sums of the split itself (every count 1)."""
        sums = self._exact.get(m)
        if sums is None:
            sums = self._exact[m] = _smece_grid_sums(self._moments, self._f_t, m).reshape(-1)
        return sums

    def _binning(self, m: int) -> torch.Tensor:
        bt = self._bt.get(m)
        if bt is None:
            bt = self._bt[m] = _sparse_binning_t(self.f, self.columns, m)
        return bt

    def _union(self, block: "_Block", p: int) -> torch.Tensor:
        """(2 * union size, width) float32 union-node sums of panel p, computed once per block."""
        if self._fine is None:
            self._fine = _FineGrids(self.f, self.columns[0])
        seg = block.segments.get(p)
        if seg is None:
            seg = block.segments[p] = torch.sparse.mm(self._fine.bt, block.panels[p])
        return seg

    def _grid_sums(self, block: "_Block", m: int, rows: Optional[np.ndarray] = None) -> np.ndarray:
        """(k, 2m) float64 residual and count node sums on grid m of the block's resamples (or ``rows``)."""
        if m in _FineGrids.GRIDS and (block.union or m != self.base_m):
            width = block.panels[0].shape[1]
            used = np.arange(len(block.panels)) if rows is None else np.unique(rows // width)
            to_nodes = None
            parts = []
            for p in used.tolist():
                seg = self._union(block, p)
                to_nodes = to_nodes if to_nodes is not None else self._fine.to_nodes(m)
                parts.append(torch.sparse.mm(to_nodes, seg))
            out = torch.cat(parts, dim=1)
            if rows is not None:
                out = out.index_select(1, torch.from_numpy(np.searchsorted(used, rows // width) * width
                                                           + rows % width))
            sums = out.double().numpy().T
        else:                   # the base grid, or a sigma that is not one of relplot's midpoints
            sums = _panel_product(self._binning(m), block.panels, rows).T
        return sums + self._unit_sums(m)

    def bisect(self, panels: list[torch.Tensor], union: bool = False) -> tuple[np.ndarray, bool]:
        """relplot.smECE of the resamples in the columns of ``panels``: relplot's search_param bisection, run
        for all of them at once. ``union``: take the base grid from the union-node sums too (worth it when
        the fine grids will be needed, as they were in the previous block). Returns (values, fine grids used)."""
        k = sum(p.shape[1] for p in panels)
        m = self.base_m
        block = _Block(panels, union)
        sums = self._grid_sums(block, m)
        block.spec, block.o = sfft.dct(sums[:, :m], type=1, axis=1, workers=_WORKERS), sums[:, m:]
        rows = np.arange(k)
        # relplot first tests sigma = 1, which never passes (smooth_ece < 1 always: |conv r| <= conv 1 < dens);
        # the value at sigma = 1 is needed only by rows whose bracket never moves below 1.
        start, end = np.ones(k), np.zeros(k)
        result = np.full(k, np.nan)
        for _ in range(_SMECE_REFINE):
            mid = (start + end) / 2
            need = mid >= _SMECE_EPS
            at_mid = np.full(k, np.inf)
            if need.any():
                at_mid[need] = self._values(block, rows[need], mid[need])
            too_wide = (mid < _SMECE_EPS) | (mid < at_mid)
            end = np.where(too_wide, mid, end)
            start = np.where(too_wide, start, mid)
            result[~too_wide] = at_mid[~too_wide]
        at_one = np.flatnonzero(start == 1.0)
        if at_one.size:
            result[at_one] = self._values(block, at_one, np.ones(at_one.size))
        return result, block.fine_used

    def _values(self, block: "_Block", rows: np.ndarray, sigmas: np.ndarray) -> np.ndarray:
        """smooth_ece of block-local resample ``rows[j]`` at bandwidth ``sigmas[j]``."""
        out = np.empty(rows.shape[0])
        uniq, inv = np.unique(sigmas, return_inverse=True)
        for u, sigma in enumerate(uniq.tolist()):
            part = np.flatnonzero(inv == u)
            m = _smece_grid_size(sigma)
            if m == self.base_m:
                sm = sfft.idct(block.spec[rows[part]] * _smece_kernel_hat(sigma, m).real, type=1, axis=1,
                               workers=_WORKERS)
                o = block.o[rows[part]]
            else:
                # Below sigma ~0.0107 every sigma has its own grid: a row visits it at most once.
                block.fine_used = True
                sums = self._grid_sums(block, m, rows[part])
                v, o = sums[:, :m], sums[:, m:]
                sm = _smece_convolve_truncated(v, sigma, m)
            t_size = _smece_eval_size(sigma)
            inds, res = _smece_interp(t_size, m)
            num = np.abs(sm[:, inds] * (1 - res) + sm[:, inds + 1] * res).sum(axis=1)
            out[part] = num / (o @ _smece_density_weights(sigma, m) + t_size * _DENS_EPS)
        return out


@dataclass
class _Block:
    """Per-block state of the resampled bisection: weight panels, base-grid spectra and count sums, and the
    lazily computed union-node sums of each panel."""
    panels: list
    union: bool
    spec: Optional[np.ndarray] = None
    o: Optional[np.ndarray] = None
    segments: dict = field(default_factory=dict)
    fine_used: bool = False


def smece_resampled(conf, correct, weights: Optional[torch.Tensor] = None, *,
                    panels: Optional[Sequence[torch.Tensor]] = None, store: Optional[dict] = None) -> torch.Tensor:
    """SmoothECE (relplot.smECE) of every bootstrap resample.

    conf, correct : (N,) in [0, 1]. weights : (R, N) counts (float32 tensor, any device; sample i appears
    weights[r, i] times in resample r). Returns (R,) float64 CPU tensor; each value equals relplot.smECE on the
    explicitly resampled data (np.repeat) to ~1e-9 (float32 fluctuation sums). The bisection runs for blocks of
    resamples at once; sigma below ~0.0107 (each such sigma has its own grid in relplot) is served exactly from
    one extra sparse product per block. About 0.17 s for R = 1000, N = 50,000 (0.3 s when sigma* < 0.01).
    """
    f, y = _binary_inputs(conf, correct)
    if panels is not None:
        # Multinomial resamples of size N, already laid out as fluctuation panels by the caller (shared
        # between metrics and calibrators, see calibview.core.stats.bootstrap.ResampleBlock.panels).
        n_rows = _check_panels(panels, f.shape[0])
        blocks = _panel_blocks(panels, f.shape[0], 32 << 20)
    else:
        w, _ = _weights(weights, f.shape[0])
        n_rows = w.shape[0]
        blocks = _Panels(w, panel_bytes=32 << 20).blocks() if n_rows else iter(())
    result = np.empty(n_rows)
    if n_rows:
        ev = _cached("smece", (f, y), lambda: _ResampledSmece(f, y), store)
        # Segment sums of a panel take 16 bytes per segment and resample: blocks of ~128 resamples.
        union = False
        for start, stop, block_panels in blocks:
            result[start:stop], union = ev.bisect(block_panels, union)
    return torch.from_numpy(result)


# ====================================================================== the calibration-sharpness estimator
_GAUSS_SUPPORT = 10.0           # Gaussian truncated at 10 bandwidths (exp(-50) ~ 2e-22; METRICS.md asks >= 8)
_VALID_FLOOR = 1e-9             # grid point valid when its smoothed count exceeds this fraction of the maximum
_CONSTANT_STD = 1e-6            # near-constant confidences: sharpcal's threshold


def _kernel(u: np.ndarray, h: float, kernel: str) -> np.ndarray:
    if kernel == "gaussian":
        return np.exp(-0.5 * (u / h) ** 2) / (h * math.sqrt(2 * math.pi))
    v = u / h
    return np.where(np.abs(v) <= 1.0, 0.75 / h * (1.0 - v * v), 0.0)


@lru_cache(maxsize=128)
def _grid_kernel_hat(grid_size: int, h: float, kernel: str) -> tuple[int, np.ndarray]:
    """(nfft, rfft of the kernel at grid offsets) for a non-wrapping convolution of a grid_size-point signal."""
    dx = 1.0 / (grid_size - 1)
    reach = h * (_GAUSS_SUPPORT if kernel == "gaussian" else 1.0)
    half = min(grid_size - 1, int(math.ceil(reach / dx)))
    nfft = sfft.next_fast_len(grid_size + half, real=True)
    d = np.arange(-half, half + 1)
    wrapped = np.zeros(nfft)
    wrapped[d % nfft] = _kernel(d * dx, h, kernel)
    hat = sfft.rfft(wrapped)
    hat.flags.writeable = False
    return nfft, hat


def _linear_bin(conf: np.ndarray, grid_size: int, columns: list[np.ndarray], chunk: int = 1 << 20) -> np.ndarray:
    """(len(columns), G) float64 linear-binned sums of each column onto linspace(0, 1, G): sample i puts
    (1 - frac_i) x_i on node b_i and frac_i x_i on node b_i + 1. Chunked so memory stays O(chunk)."""
    out = np.zeros((len(columns), grid_size))
    for s in range(0, conf.shape[0], chunk):
        pos = conf[s:s + chunk] * (grid_size - 1)
        b = np.minimum(pos.astype(np.int64), grid_size - 2)
        frac = pos - b
        for j, x in enumerate(columns):
            xs = x[s:s + chunk]
            upper = frac * xs
            out[j] += np.bincount(b, weights=xs - upper, minlength=grid_size)
            out[j, 1:] += np.bincount(b, weights=upper, minlength=grid_size)[:-1]
    return out


def _smooth(sums: np.ndarray, grid_size: int, h: float, kernel: str, hat: Optional[np.ndarray] = None,
            nfft: Optional[int] = None) -> np.ndarray:
    """Kernel-smooth grid sums along the last axis: out[..., t] = sum_g sums[..., g] K(x_t - x_g)."""
    n_k, k_hat = _grid_kernel_hat(grid_size, h, kernel)
    if hat is None or nfft != n_k:
        hat = sfft.rfft(sums, n_k, axis=-1, workers=_WORKERS)
    return sfft.irfft(hat * k_hat, n_k, axis=-1, workers=_WORKERS)[..., :grid_size]


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class BinnedStats:
    """Sufficient statistics of the calibration-sharpness estimator: linear-binned sums on a uniform grid.

    grid : (G,) float64 linspace(0, 1, G). count, correct, loss : (G,) float64 linear-binned sums of 1, of the
    correctness and of the per-sample full-vector Brier loss. n : number of samples; conf_std : standard
    deviation of the confidences; mean_correct : accuracy; mean_loss : mean Brier (TOT). Arrays are read-only.
    """
    grid: np.ndarray
    count: np.ndarray
    correct: np.ndarray
    loss: np.ndarray
    n: int
    conf_std: float
    mean_correct: float
    mean_loss: float
    _spectra: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def _spectrum(self, nfft: int) -> np.ndarray:
        """rfft of (count, correct, loss) zero-padded to nfft, cached per nfft (the only per-object cache)."""
        hat = self._spectra.get(nfft)
        if hat is None:
            hat = sfft.rfft(np.stack([self.count, self.correct, self.loss]), nfft, axis=-1)
            self._spectra[nfft] = hat
        return hat


def bin_stats(conf, correct, loss, grid_size: int = CURVE_GRID) -> BinnedStats:
    """Bin the samples once onto linspace(0, 1, grid_size); every bandwidth afterwards costs O(G log G).

    conf : (N,) confidences in [0, 1]; correct : (N,) in [0, 1]; loss : (N,) full-vector Brier loss.
    """
    c = _unit_vector("conf", conf)
    a = _unit_vector("correct", correct, c.shape[0])
    loss_v = _vector("loss", loss, c.shape[0])
    g = int(grid_size)
    if g < 16:
        raise CalibviewError(f"grid_size must be at least 16, got {grid_size}.")
    sums = _linear_bin(c, g, [np.ones_like(c), a, loss_v])
    return BinnedStats(grid=_readonly(np.linspace(0.0, 1.0, g)), count=_readonly(sums[0]),
                       correct=_readonly(sums[1]), loss=_readonly(sums[2]), n=int(c.shape[0]),
                       conf_std=float(np.std(c)), mean_correct=float(np.mean(a)), mean_loss=float(np.mean(loss_v)))


@dataclass(frozen=True)
class SharpnessCurve:
    """The calibration-sharpness diagram at one bandwidth; all arrays (G,) float64 (valid: bool), read-only.

    x : grid. curve : Nadaraya-Watson E[correct | conf = x]. band_lo, band_hi : the sharpness band
    [max(curve - w, 0), curve + w], w = p(x) [m(x) - (curve - x)^2] / 2 with m the NW regression of the loss
    (w is not clipped, as in sharpcal; it can be slightly negative). density : p / max p; density_raw : the
    kernel density p(x) (both finite, >= 0 everywhere). valid : where the smoothed count is above 1e-9 of its
    maximum. **curve, band_lo and band_hi are NaN where ``valid`` is False** (no data within reach of the
    kernel: Epanechnikov tails, Gaussian underflow); mask them before drawing or reporting. notice : a message
    when the confidences are near-constant (curve = mean accuracy everywhere, all valid), else None.
    """
    x: np.ndarray
    curve: np.ndarray
    band_lo: np.ndarray
    band_hi: np.ndarray
    density: np.ndarray
    density_raw: np.ndarray
    valid: np.ndarray
    bandwidth: float
    kernel: str
    notice: Optional[str]


def sharpness_curve(stats: BinnedStats, bandwidth: float = 0.05, kernel: str = "gaussian") -> SharpnessCurve:
    """Curve, band and density at ``bandwidth`` from binned statistics: three FFT convolutions over the grid
    (~0.2 ms for G = 4096), independent of N. The kernel transform is cached per (G, bandwidth, kernel).

    Grid error vs the dense formula: O((dx/h)^2) for the Gaussian (~3e-7 at h = 0.05, G = 4096), O(dx/h) near
    the Epanechnikov kernel's edges (~1e-4 at h = 0.05); bandwidths below 2 dx are refused.
    """
    kernel = _check_kernel(kernel)
    g = stats.grid.shape[0]
    h = _check_bandwidth(bandwidth, g)
    x = stats.grid
    nfft, _ = _grid_kernel_hat(g, h, kernel)
    den, num_a, num_l = _smooth(None, g, h, kernel, hat=stats._spectrum(nfft), nfft=nfft)
    density_raw = np.maximum(den, 0.0) / stats.n
    peak = density_raw.max()
    density = density_raw / peak if peak > 0 else np.zeros(g)
    notice = None
    if stats.conf_std < _CONSTANT_STD:
        valid = np.ones(g, dtype=bool)
        curve = np.full(g, stats.mean_correct)
        m_loss = np.full(g, stats.mean_loss)
        notice = (f"The confidences are nearly constant (std {stats.conf_std:.2g} < 1e-6): the calibration curve "
                  f"is drawn at the mean accuracy {stats.mean_correct:.4g}.")
    else:
        valid = den > _VALID_FLOOR * den.max()
        safe = np.where(valid, den, 1.0)
        curve = np.where(valid, num_a / safe, np.nan)
        m_loss = np.where(valid, num_l / safe, np.nan)
    half = 0.5 * density_raw * (m_loss - (curve - x) ** 2)
    return SharpnessCurve(x=x, curve=_readonly(curve), band_lo=_readonly(np.maximum(curve - half, 0.0)),
                          band_hi=_readonly(curve + half), density=_readonly(density),
                          density_raw=_readonly(density_raw), valid=_readonly(valid), bandwidth=h, kernel=kernel,
                          notice=notice)


def _cal_grid_size(h: float) -> int:
    """Grid for CAL from binned data: dx <= h / 400 (relative error ~1e-7 or less vs the dense formula)."""
    return min(1 << 20, max(1 << 14, int(math.ceil(400.0 / h)))) + 1


def _resample_grid_size(h: float, kernel: str = "gaussian") -> int:
    """Grid for bootstrap CAL: dx <= h / 50 (relative error ~1e-6 for the Gaussian, far below bootstrap spread),
    at least 1,025 points; at least 2,049 for the Epanechnikov kernel, whose kink needs dx <= h / 100 for ~1e-5.
    The per-resample FFTs dominate a bandwidth change with intervals, so the grid is no finer than that (the
    former 4,097-point floor made a seven-calibrator bandwidth change 3x slower at h = 0.05)."""
    floor = 1 << 10 if kernel == "gaussian" else 1 << 11
    return min(1 << 18, max(floor, int(math.ceil(50.0 / h)))) + 1


def _cal_dense(c: np.ndarray, a: np.ndarray, h: float, kernel: str) -> float:
    """sharpcal's CAL exactly: NW curve at every data point (own kernel included), chunked O(N^2) float64."""
    n = c.shape[0]
    chunk = max(1, (1 << 22) // n)
    total = 0.0
    for s in range(0, n, chunk):
        k = _kernel(c[s:s + chunk, None] - c[None, :], h, kernel)
        fit = (k @ a) / k.sum(axis=1)
        total += float(np.sum((fit - c[s:s + chunk]) ** 2))
    return total / n


def _cal_from_grid(c: np.ndarray, a: np.ndarray, h: float, kernel: str) -> float:
    """CAL with the curve smoothed on a fine grid and linearly interpolated at the data points."""
    g = _cal_grid_size(h)
    den, num = _smooth(_linear_bin(c, g, [np.ones_like(c), a]), g, h, kernel)
    # Both neighbours of a data point hold its own kernel mass (K(0), K(dx) > 0), so den > 0 there.
    fit = num / np.where(den > 0, den, np.inf)
    pos = c * (g - 1)
    b = np.minimum(pos.astype(np.int64), g - 2)
    frac = pos - b
    at = (1 - frac) * fit[b] + frac * fit[b + 1]
    return float(np.mean((at - c) ** 2))


def cal_tot(conf, correct, loss, bandwidth: float = 0.05, kernel: str = "gaussian", *,
            exact_max_n: int = 5000) -> tuple[float, float]:
    """(CAL, TOT) of the calibration-sharpness estimator; the paper reports both x 100.

    CAL = mean_i (c_hat(conf_i) - conf_i)^2 with the Nadaraya-Watson curve evaluated at the data points (own
    kernel included, as sharpcal); TOT = mean loss. For N <= exact_max_n the dense formula is computed exactly
    (float64, O(N^2) in chunks); above, the curve comes from a grid with dx <= bandwidth / 400 and is linearly
    interpolated at the data points (relative error ~1e-7 at bandwidth 0.05).
    """
    c = _unit_vector("conf", conf)
    a = _unit_vector("correct", correct, c.shape[0])
    loss_v = _vector("loss", loss, c.shape[0])
    kernel = _check_kernel(kernel)
    h = _check_bandwidth(bandwidth, 2 ** 20 + 1)
    tot = float(np.mean(loss_v))
    if c.shape[0] <= exact_max_n:
        return _cal_dense(c, a, h, kernel), tot
    return _cal_from_grid(c, a, h, kernel), tot


class _ResampledCal:
    """Sparse linear-binning matrix (count, correct, loss) of one split for one resampling grid, and the split's
    own float64 sums (every count 1)."""

    def __init__(self, c: np.ndarray, a: np.ndarray, loss: np.ndarray, g: int) -> None:
        self.bt = _sparse_binning_t(c, [np.ones_like(c), a, loss], g)
        self.unit = _linear_bin(c, g, [np.ones_like(c), a, loss]).reshape(-1)


def cal_resampled(conf, correct, loss, weights: Optional[torch.Tensor] = None, bandwidth: float = 0.05,
                  kernel: str = "gaussian", *, panels: Optional[Sequence[torch.Tensor]] = None,
                  totals: Optional[np.ndarray] = None, store: Optional[dict] = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(CAL, TOT) of every bootstrap resample, each an (R,) float64 tensor.

    weights : (R, N) counts (float32). The grid statistics of all resamples are ``weights @ B`` with B the
    sparse linear-binning matrix (float32 product); CAL_r = sum_g count_r[g] (c_hat_r(x_g) - x_g)^2 / n_r on a
    grid with dx <= bandwidth / 50, i.e. (c_hat - x)^2 linearly interpolated at the data points: relative error
    vs the dense formula on the resampled data ~1e-5 or less (see tests); no O(N^2) work. TOT_r is the
    resample's mean loss. With ``panels``, ``totals`` (R,) gives each resample's size when it is not N (resamples
    of groups of samples, see calibview.core.stats.bootstrap).
    """
    c = _unit_vector("conf", conf)
    a = _unit_vector("correct", correct, c.shape[0])
    loss_v = _vector("loss", loss, c.shape[0])
    kernel = _check_kernel(kernel)
    h = _check_bandwidth(bandwidth, 2 ** 18 + 1)
    if panels is not None:
        n_rows = _check_panels(panels, c.shape[0])
        # multinomial resamples of samples keep the size N
        n_r = np.full(n_rows, float(c.shape[0])) if totals is None else np.asarray(totals, dtype=np.float64)
        blocks = _panel_blocks(panels, c.shape[0], 16 << 20)
    else:
        w, n_r = _weights(weights, c.shape[0])
        n_rows = w.shape[0]
        blocks = _Panels(w, panel_bytes=16 << 20).blocks() if n_rows else iter(())
    cal, tot = np.empty(n_rows), np.empty(n_rows)
    if n_rows == 0:
        return torch.from_numpy(cal), torch.from_numpy(tot)
    g = _resample_grid_size(h, kernel)
    prep = _cached(f"cal{g}", (c, a, loss_v), lambda: _ResampledCal(c, a, loss_v, g), store)
    x = np.linspace(0.0, 1.0, g)
    # Spectra of a block take ~2 * nfft * 16 bytes per resample: blocks of <= 256 resamples.
    for start, stop, block_panels in blocks:
        sums = (_panel_product(prep.bt, block_panels).T + prep.unit).reshape(-1, 3, g)
        count = sums[:, 0]
        den, num = _smooth(sums[:, :2], g, h, kernel).transpose(1, 0, 2)
        # A node whose samples are all left out of a resample keeps a float32 residue (~1e-7) of a count;
        # where no data is in the kernel's reach its smoothed count is rounding noise: skip such nodes.
        occupied = (count > 0) & (den > _VALID_FLOOR * den.max(axis=1, keepdims=True))
        fit = num / np.where(occupied, den, 1.0)
        n_block = n_r[start:stop]
        cal[start:stop] = np.sum(np.where(occupied, count * (fit - x) ** 2, 0.0), axis=1) / n_block
        tot[start:stop] = sums[:, 2].sum(axis=1) / n_block
    return torch.from_numpy(cal), torch.from_numpy(tot)
