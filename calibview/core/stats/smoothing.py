"""The calibration-sharpness estimator of Chidambaram & Ge (ICLR 2025; reference code ``sharpcal``).

Nadaraya-Watson curve, density, sharpness band and the CAL / TOT numbers: :func:`bin_stats` bins the samples
once onto a grid (:class:`BinnedStats`), :func:`sharpness_curve` draws the diagram at any bandwidth from those
sums (:class:`SharpnessCurve`), :func:`cal_tot` and :func:`cal_resampled` give CAL and TOT of the split and of
bootstrap resamples. Kernels (:data:`KERNELS`) have no boundary correction. The grid, the kernels' FFT transforms
and the bootstrap panels live in :mod:`calibview.core.stats.grid`; SmoothECE in :mod:`calibview.core.stats.smooth_ece`.

Inputs are 1-D arrays: ``conf`` (N,) top-label confidences in [0, 1], ``correct`` (N,) in [0, 1] (usually 0/1),
``loss`` (N,) per-sample full-vector Brier loss; they are converted to float64 and everything is computed in
float64, except one product: bootstrap ``weights`` (R, N) (sample i appears ``weights[r, i]`` times in
resample r) enter as ``unit sums (float64) + (W - 1) @ B`` with B a sparse linear-binning matrix and the
fluctuation product in float32 (resampled CAL agrees with the dense formula to the grid error).

User errors (NaN, values outside [0, 1], shape mismatches, unknown kernel, bad bandwidth or weights) raise
:class:`~calibview.core.errors.CalibviewError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import scipy.fft as sfft
import torch

from calibview.core.errors import CalibviewError
from calibview.core.stats.grid import (Panels, bootstrap_weights, cached, check_panels, grid_kernel_hat,
                                       linear_bin, panel_blocks, panel_product, smooth,
                                       sparse_binning_t, unit_vector, vector)

__all__ = ["BinnedStats", "bin_stats", "SharpnessCurve", "sharpness_curve", "cal_tot", "cal_resampled", "KERNELS",
           "effective_n", "MIN_EFFECTIVE_N",
           "CURVE_GRID", "check_curve_bandwidth"]

KERNELS = ("gaussian", "epanechnikov")

_VALID_FLOOR = 1e-9             # grid point valid when its smoothed count exceeds this fraction of the maximum
_CONSTANT_STD = 1e-6            # near-constant confidences: sharpcal's threshold


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
    c = unit_vector("conf", conf)
    a = unit_vector("correct", correct, c.shape[0])
    loss_v = vector("loss", loss, c.shape[0])
    g = int(grid_size)
    if g < 16:
        raise CalibviewError(f"grid_size must be at least 16, got {grid_size}.")
    sums = linear_bin(c, g, [np.ones_like(c), a, loss_v])
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
    nfft, _ = grid_kernel_hat(g, h, kernel)
    den, num_a, num_l = smooth(None, g, h, kernel, hat=stats._spectrum(nfft), nfft=nfft)
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


#: below this effective number of samples under the kernel the curve is drawn as uncertain
MIN_EFFECTIVE_N = 30


def effective_n(stats: BinnedStats, bandwidth: float = 0.05, kernel: str = "gaussian") -> np.ndarray:
    """(G,) Kish's effective sample size under the kernel at each grid point, (sum_i K)^2 / sum_i K^2 with
    K = K_h(x - c_i), from the linear-binned counts (the binning's error is that of the curve itself). Where it
    is below :data:`MIN_EFFECTIVE_N`, the curve rests on too few samples to be read closely."""
    kernel = _check_kernel(kernel)
    g = stats.grid.shape[0]
    h = _check_bandwidth(bandwidth, g)
    # Two FFT convolutions with the cached count spectrum (~0.2 ms at G = 4096): the window redraws this at
    # every bandwidth step, where direct convolution with a kernel of thousands of nodes took 4-10 ms a curve.
    nfft, k_hat = grid_kernel_hat(g, h, kernel)
    _, k2_hat = grid_kernel_hat(g, h, kernel, 2)
    count_hat = stats._spectrum(nfft)[0]
    s1, s2 = sfft.irfft(np.stack([count_hat * k_hat, count_hat * k2_hat]), nfft, axis=-1)[:, :g]
    live = (s1 > _VALID_FLOOR * max(s1.max(), 0.0)) & (s2 > 0)      # FFT round-off where no sample is near
    with np.errstate(all="ignore"):
        out = np.where(live, s1 * s1 / np.where(live, s2, 1.0), 0.0)
    return _readonly(out)


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


#: entries of one block of the dense CAL's (rows, N) kernel matrix (float64: 2 MB, in the CPU cache)
_DENSE_BLOCK = 1 << 18


def _cal_dense(c: np.ndarray, a: np.ndarray, h: float, kernel: str) -> float:
    """sharpcal's CAL exactly: NW curve at every data point (own kernel included), O(N^2) float64 in blocks of
    rows. The kernel's normalising constant cancels in the curve (a ratio of kernel sums), so each block holds
    the unnormalised kernel, computed in place in one reused buffer, by torch (its exp runs on every core). At
    N = 5,000 the former numpy blocks of 4 million entries, with kernel_values' temporaries, peaked at 134 MB
    (Gaussian) and 172 MB (Epanechnikov) and took 152 and 275 ms; this takes about 45 ms in 2 MB (2026-12-07,
    the 2-core VM; an in-place numpy version took 74-100 ms), the same CAL to a few ulp."""
    n = c.shape[0]
    ct = torch.from_numpy(np.ascontiguousarray(c, np.float64))
    at = torch.from_numpy(np.ascontiguousarray(a, np.float64))
    chunk = max(1, _DENSE_BLOCK // n)
    buf = torch.empty((min(chunk, n), n), dtype=torch.float64)
    total = 0.0
    for s in range(0, n, chunk):
        cs = ct[s:s + chunk]
        k = buf[:cs.shape[0]]
        torch.sub(cs[:, None], ct[None, :], out=k)
        k.div_(h)
        if kernel == "gaussian":                      # exp(-v^2 / 2)
            k.mul_(k).mul_(-0.5).exp_()
        else:                                         # 1 - v^2 on |v| <= 1, else 0 (the Epanechnikov kernel)
            k.abs_().clamp_(max=1.0)
            k.mul_(k).neg_().add_(1.0)
        fit = (k @ at) / k.sum(dim=1)
        total += float(fit.sub_(cs).square_().sum())
    return total / n


def _cal_from_grid(c: np.ndarray, a: np.ndarray, h: float, kernel: str) -> float:
    """CAL with the curve smoothed on a fine grid and linearly interpolated at the data points."""
    g = _cal_grid_size(h)
    den, num = smooth(linear_bin(c, g, [np.ones_like(c), a]), g, h, kernel)
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
    c = unit_vector("conf", conf)
    a = unit_vector("correct", correct, c.shape[0])
    loss_v = vector("loss", loss, c.shape[0])
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
        self.bt = sparse_binning_t(c, [np.ones_like(c), a, loss], g)
        self.unit = linear_bin(c, g, [np.ones_like(c), a, loss]).reshape(-1)


#: the grid (in confidence) at which the resampled curves of the confidence band are kept
CURVE_BAND_X = np.linspace(0.0, 1.0, 257)


def _on_band_grid(fit: np.ndarray) -> np.ndarray:
    """(R, G) curves on linspace(0, 1, G) linearly interpolated to CURVE_BAND_X, (R, 257) float32."""
    g = fit.shape[1]
    pos = CURVE_BAND_X * (g - 1)
    lo = np.minimum(np.floor(pos).astype(np.int64), g - 2)
    t = (pos - lo)[None, :]
    return ((1.0 - t) * fit[:, lo] + t * fit[:, lo + 1]).astype(np.float32)


def cal_resampled(conf, correct, loss, weights: Optional[torch.Tensor] = None, bandwidth: float = 0.05,
                  kernel: str = "gaussian", *, panels: Optional[Sequence[torch.Tensor]] = None,
                  totals: Optional[np.ndarray] = None, store: Optional[dict] = None,
                  curves: Optional[list] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(CAL, TOT) of every bootstrap resample, each an (R,) float64 tensor.

    weights : (R, N) counts (float32). The grid statistics of all resamples are ``weights @ B`` with B the
    sparse linear-binning matrix (float32 product); CAL_r = sum_g count_r[g] (c_hat_r(x_g) - x_g)^2 / n_r on a
    grid with dx <= bandwidth / 50, i.e. (c_hat - x)^2 linearly interpolated at the data points: relative error
    vs the dense formula on the resampled data ~1e-5 or less (see tests); no O(N^2) work. TOT_r is the
    resample's mean loss. With ``panels``, ``totals`` (R,) gives each resample's size when it is not N (resamples
    of groups of samples, see calibview.core.stats.bootstrap). ``curves``, a list, receives each block's
    resampled kernel curves c_hat_r at :data:`CURVE_BAND_X`, (R_b, 257) float32, NaN where a resample has no
    data within the kernel's reach (the confidence band's material).
    """
    c = unit_vector("conf", conf)
    a = unit_vector("correct", correct, c.shape[0])
    loss_v = vector("loss", loss, c.shape[0])
    kernel = _check_kernel(kernel)
    h = _check_bandwidth(bandwidth, 2 ** 18 + 1)
    if panels is not None:
        n_rows = check_panels(panels, c.shape[0])
        # multinomial resamples of samples keep the size N
        n_r = np.full(n_rows, float(c.shape[0])) if totals is None else np.asarray(totals, dtype=np.float64)
        blocks = panel_blocks(panels, c.shape[0], 16 << 20)
    else:
        w, n_r = bootstrap_weights(weights, c.shape[0])
        n_rows = w.shape[0]
        blocks = Panels(w, panel_bytes=16 << 20).blocks() if n_rows else iter(())
    cal, tot = np.empty(n_rows), np.empty(n_rows)
    if n_rows == 0:
        return torch.from_numpy(cal), torch.from_numpy(tot)
    g = _resample_grid_size(h, kernel)
    prep = cached(f"cal{g}", (c, a, loss_v), lambda: _ResampledCal(c, a, loss_v, g), store)
    x = np.linspace(0.0, 1.0, g)
    # Spectra of a block take ~2 * nfft * 16 bytes per resample: blocks of <= 256 resamples.
    for start, stop, block_panels in blocks:
        sums = (panel_product(prep.bt, block_panels).T + prep.unit).reshape(-1, 3, g)
        count = sums[:, 0]
        den, num = smooth(sums[:, :2], g, h, kernel).transpose(1, 0, 2)
        # A node whose samples are all left out of a resample keeps a float32 residue (~1e-7) of a count;
        # where no data is in the kernel's reach its smoothed count is rounding noise: skip such nodes.
        occupied = (count > 0) & (den > _VALID_FLOOR * den.max(axis=1, keepdims=True))
        fit = num / np.where(occupied, den, 1.0)
        n_block = n_r[start:stop]
        cal[start:stop] = np.sum(np.where(occupied, count * (fit - x) ** 2, 0.0), axis=1) / n_block
        tot[start:stop] = sums[:, 2].sum(axis=1) / n_block
        if curves is not None:
            curves.append(_on_band_grid(np.where(den > _VALID_FLOOR * den.max(axis=1, keepdims=True),
                                                 num / np.where(den > 0, den, 1.0), np.nan)))
    return torch.from_numpy(cal), torch.from_numpy(tot)
