"""The grid machinery of the smoothed estimators: bin once onto a uniform grid, then convolve, so that the cost
after the binning depends on the grid size, not on N.

Here: input checks shared by the estimators (:func:`vector`, :func:`unit_vector`, :func:`bootstrap_weights`);
linear binning onto a grid, dense (:func:`linear_bin`) and as a sparse matrix for bootstrap weights
(:func:`linear_csr`, :func:`sparse_binning_t`); bootstrap weights served as float32 fluctuation panels
(:class:`Panels`, :func:`panel_blocks`, :func:`check_panels`, :func:`panel_product`); the Gaussian and
Epanechnikov kernels and their FFT transforms on a grid (:func:`kernel_values`, :func:`grid_kernel_hat`,
:func:`smooth`); and a small cache of per-data helper objects (:func:`cached`).

Used by SmoothECE (:mod:`calibview.core.stats.smooth_ece`) and by the calibration-sharpness estimator
(:mod:`calibview.core.stats.smoothing`). Everything is float64 except the bootstrap fluctuation products (float32).
"""

from __future__ import annotations

import hashlib
import math
import threading
import warnings
from collections import OrderedDict
from functools import lru_cache
from typing import Optional, Sequence

import numpy as np
import scipy.fft as sfft
import torch

from calibview.core.errors import CalibviewError

FFT_WORKERS = 1                 # scipy.fft threads: the batched transforms here are small; 2 gained nothing
_GAUSS_SUPPORT = 10.0           # Gaussian truncated at 10 bandwidths: exp(-50) ~ 2e-22, far below float64 rounding


# ----------------------------------------------------------------------------------------------- validation
def vector(name: str, values, n: Optional[int] = None) -> np.ndarray:
    """``values`` as a (N,) float64 array of finite numbers (N >= 1, N = ``n`` when given); CalibviewError naming
    ``name`` otherwise."""
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


def unit_vector(name: str, values, n: Optional[int] = None) -> np.ndarray:
    """Like :func:`vector`, and every value in [0, 1] (confidences, correctness)."""
    arr = vector(name, values, n)
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise CalibviewError(f"{name} must lie in [0, 1] (found {arr.min():.6g} .. {arr.max():.6g}); "
                             "pass probabilities, not logits.")
    return arr


def bootstrap_weights(weights, n: int) -> tuple[torch.Tensor, np.ndarray]:
    """(R, N) float32 CPU counts and their (R,) float64 row sums (the resample sizes).

    weights : (R, N) non-negative counts (tensor on any device, or array-like), every row summing to > 0."""
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


def cached(tag: str, arrays: tuple, build, store: Optional[dict] = None):
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


# ------------------------------------------------------------------------------ sparse binning, panels
def linear_csr(node: np.ndarray, t: np.ndarray, columns: list[np.ndarray], n_nodes: int) -> torch.Tensor:
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


def csr_from_entries(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]) -> torch.Tensor:
    """float32 CSR matrix of ``shape`` from distinct (row, col) entries: rows, cols (E,) integers, vals (E,)."""
    key = torch.from_numpy(rows.astype(np.int64) * shape[1] + cols)
    order = torch.argsort(key)
    crow = torch.zeros(shape[0] + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(torch.from_numpy(rows.astype(np.int64)), minlength=shape[0]), 0, out=crow[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, torch.from_numpy(cols.astype(np.int64))[order],
                                       torch.from_numpy(vals.astype(np.float32))[order], size=shape,
                                       check_invariants=False)


def sparse_binning_t(conf: np.ndarray, columns: list[np.ndarray], grid_size: int) -> torch.Tensor:
    """CSR (len(columns) * G, N) float32 matrix B^T of linear binning onto linspace(0, 1, G): sample i puts
    ``(1 - frac_i) x_i`` on node ``b_i`` and ``frac_i x_i`` on node ``b_i + 1`` of block j, for every column x
    (b_i = min(floor(conf_i (G - 1)), G - 2), frac_i = conf_i (G - 1) - b_i, as relplot's smooth_round_to_grid)."""
    pos = conf * (grid_size - 1)
    b = pos.astype(np.int64).clip(0, grid_size - 2)
    return linear_csr(b, pos - b, columns, grid_size)


class Panels:
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
        """Yield (start, stop, panels) for consecutive blocks of resamples: rows start..stop of the weights as a
        list of (N, <= width) float32 tensors of W - 1 (the buffers are reused by the next block)."""
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


def panel_blocks(panels: Sequence[torch.Tensor], n: int, panel_bytes: int):
    """(start, stop, panels) blocks from precomputed (N, width) fluctuation panels, sized like :class:`Panels`."""
    width = panels[0].shape[1]
    per_block = int(max(1, min(256 // width, panel_bytes // (4 * n * width))))
    start = 0
    for j in range(0, len(panels), per_block):
        part = list(panels[j:j + per_block])
        stop = start + sum(p.shape[1] for p in part)
        yield start, stop, part
        start = stop


def check_panels(panels: Sequence[torch.Tensor], n: int) -> int:
    """Validate shared fluctuation panels, (N, width) float32 CPU tensors of W - 1 (see
    :func:`calibview.core.stats.smooth_ece.smece_resampled`); returns the number of resamples."""
    if not panels or any(p.ndim != 2 or p.shape[0] != n or p.dtype != torch.float32 or p.device.type != "cpu"
                         for p in panels):
        raise CalibviewError(f"bootstrap panels must be (N = {n}, width) float32 CPU tensors.")
    return sum(p.shape[1] for p in panels)


def panel_product(bt: torch.Tensor, panels: list[torch.Tensor], rows: Optional[np.ndarray] = None
                  ) -> np.ndarray:
    """(rows of bt, k) float64 = ((W - 1) @ B)^T for the resamples in ``panels`` (or block-local ``rows``)."""
    width = panels[0].shape[1]
    used = list(range(len(panels))) if rows is None else np.unique(rows // width).tolist()
    out = torch.cat([torch.sparse.mm(bt, panels[p]) for p in used], dim=1)
    if rows is not None:
        local = np.searchsorted(np.asarray(used), rows // width) * width + rows % width
        out = out.index_select(1, torch.from_numpy(local))
    return out.double().numpy()


# ------------------------------------------------------------------------ kernels and dense binning
def kernel_values(u: np.ndarray, h: float, kernel: str) -> np.ndarray:
    """K_h(u) = K(u / h) / h at offsets ``u`` (any shape, same units as the confidences): the Gaussian for
    ``kernel == "gaussian"``, else the Epanechnikov kernel (0.75 (1 - v^2) on |v| <= 1)."""
    if kernel == "gaussian":
        return np.exp(-0.5 * (u / h) ** 2) / (h * math.sqrt(2 * math.pi))
    v = u / h
    return np.where(np.abs(v) <= 1.0, 0.75 / h * (1.0 - v * v), 0.0)


@lru_cache(maxsize=128)
def grid_kernel_hat(grid_size: int, h: float, kernel: str, power: int = 1) -> tuple[int, np.ndarray]:
    """(nfft, rfft of the kernel at grid offsets, raised to ``power`` before the transform) for a non-wrapping
    convolution of a grid_size-point signal; nfft does not depend on ``power``."""
    dx = 1.0 / (grid_size - 1)
    reach = h * (_GAUSS_SUPPORT if kernel == "gaussian" else 1.0)
    half = min(grid_size - 1, int(math.ceil(reach / dx)))
    nfft = sfft.next_fast_len(grid_size + half, real=True)
    d = np.arange(-half, half + 1)
    wrapped = np.zeros(nfft)
    wrapped[d % nfft] = kernel_values(d * dx, h, kernel) ** power
    hat = sfft.rfft(wrapped)
    hat.flags.writeable = False
    return nfft, hat


def linear_bin(conf: np.ndarray, grid_size: int, columns: list[np.ndarray], chunk: int = 1 << 20) -> np.ndarray:
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


def smooth(sums: np.ndarray, grid_size: int, h: float, kernel: str, hat: Optional[np.ndarray] = None,
           nfft: Optional[int] = None) -> np.ndarray:
    """Kernel-smooth grid sums along the last axis: out[..., t] = sum_g sums[..., g] K(x_t - x_g).

    sums : (..., G) float64 on linspace(0, 1, G), G = ``grid_size``; returns (..., G) float64. ``hat``: the
    sums' rfft at length ``nfft`` when the caller has it already (it is used only if ``nfft`` is the kernel's)."""
    n_k, k_hat = grid_kernel_hat(grid_size, h, kernel)
    if hat is None or nfft != n_k:
        hat = sfft.rfft(sums, n_k, axis=-1, workers=FFT_WORKERS)
    return sfft.irfft(hat * k_hat, n_k, axis=-1, workers=FFT_WORKERS)[..., :grid_size]
