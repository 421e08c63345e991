"""Tests of the hypothesis that a probability forecast is calibrated, each with a p-value.

- :func:`p_ece`: consistency resampling (Bröcker & Smith 2007). Under calibration the outcome of a sample with
  forecast c is Bernoulli(c); redrawing every outcome that way ``n`` times gives the ECE's null distribution,
  and p = (1 + #{ECE* >= ECE}) / (n + 1), never 0: its resolution is 1 / (n + 1). Above ``EXACT_MAX``
  samples the redraws are grouped: the samples that share an ECE bin and a 1/``CELLS``-wide confidence cell are
  drawn together as Binomial(group size, mean confidence), so a redraw costs O(groups), not O(N) (the sum of
  Bernoulli(c_i) with the c_i within 1/CELLS of each other: its variance is short by at most n / (4 CELLS^2)).
- :func:`skce`: the squared kernel calibration error of the top-label reduction (Widmann, Lindsten & Zachariah,
  NeurIPS 2019) with h_ij = k(c_i, c_j) (a_i - c_i)(a_j - c_j), k(s, t) = exp(-(s - t)^2 / (2 l^2)), l the
  median |c_i - c_j| over pairs (over a seeded subsample of ``MEDIAN_SAMPLES`` where N is larger). Up to
  ``QUADRATIC_MAX`` samples it is the unbiased quadratic estimator, mean of h_ij over pairs i != j, with a
  consistency-resampling p-value (the kernel matrix is fixed; each redraw is one quadratic form); above, the
  linear estimator, mean of h over the disjoint pairs (1, 2), (3, 4), ..., with its asymptotic normal p-value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from calibview.core.stats.metrics import ece_from_sums, equal_width_bin

#: samples up to which the SKCE is the quadratic estimator with a resampled p-value (an (N, N) float64 kernel
#: matrix: 128 MB here)
QUADRATIC_MAX = 4096
#: samples the kernel length's median is taken over
MEDIAN_SAMPLES = 2000
#: redraws per block of the quadratic test (a (block, N) matrix of outcomes)
_BLOCK = 64
#: samples up to which the ECE test redraws every outcome; above, groups of samples (see the module docstring)
EXACT_MAX = 16384
#: confidence cells of the grouped redraws
CELLS = 4096


def _redraws(rng: np.random.Generator, c: np.ndarray, rows: int) -> np.ndarray:
    """(rows, N) float64 outcomes drawn as Bernoulli(c)."""
    return (rng.random((rows, c.size)) < c).astype(np.float64)


def p_ece(conf: np.ndarray, correct: np.ndarray, n_bins: int = 15, *, n_resamples: int = 1000,
          seed: int = 0) -> tuple[float, float]:
    """(ECE, p-value) of (N,) confidences and 0/1 correctness with ``n_bins`` equal-width bins: the p-value of
    the consistency-resampling test (``n_resamples`` redraws, seeded). The bins depend on the confidences only,
    so every redraw keeps them and changes only each bin's sum of outcomes."""
    c = np.asarray(conf, dtype=np.float64).reshape(-1)
    a = np.asarray(correct, dtype=np.float64).reshape(-1)
    n = c.size
    b = equal_width_bin(c, n_bins)
    count = np.bincount(b, minlength=n_bins).astype(np.float64)
    s_conf = np.bincount(b, weights=c, minlength=n_bins)
    ece = float(ece_from_sums(count, s_conf, np.bincount(b, weights=a, minlength=n_bins), n)[0])
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 27]))
    if n > EXACT_MAX:
        return ece, _grouped_p(rng, c, b, n_bins, s_conf, ece, int(n_resamples))
    order = np.argsort(b, kind="stable")
    bounds = np.searchsorted(b[order], np.arange(n_bins + 1))
    c_sorted = c[order]
    above = 0
    for start in range(0, int(n_resamples), _BLOCK):
        rows = min(_BLOCK, int(n_resamples) - start)
        cum = np.zeros((rows, n + 1))
        np.cumsum(_redraws(rng, c_sorted, rows), axis=1, out=cum[:, 1:])      # integers: exact
        sums = cum[:, bounds[1:]] - cum[:, bounds[:-1]]
        null = np.abs(sums - s_conf[None, :]).sum(axis=1) / n
        above += int(np.count_nonzero(null >= ece - 1e-15))
    return ece, (1 + above) / (int(n_resamples) + 1)


def _grouped_p(rng: np.random.Generator, c: np.ndarray, b: np.ndarray, n_bins: int, s_conf: np.ndarray,
               ece: float, n_resamples: int) -> float:
    """The p-value of the ECE test with outcomes redrawn per (bin, confidence cell) group (module docstring)."""
    cell = np.minimum((c * CELLS).astype(np.int64), CELLS - 1)
    # the groups present, as np.unique(..., return_inverse=True) gives them, by counting over the (bin, cell) grid
    # instead of sorting N keys (0.31 s against 0.01 s at N = 2,000,000)
    full = b.astype(np.int64) * CELLS + cell
    per_key = np.bincount(full, minlength=n_bins * CELLS)
    key = np.flatnonzero(per_key)
    lookup = np.zeros(per_key.size, dtype=np.int64)
    lookup[key] = np.arange(key.size)
    inv, size = lookup[full], per_key[key]
    del full
    mean = np.clip(np.bincount(inv, weights=c) / size, 0.0, 1.0)
    group_bin = key // CELLS            # non-decreasing: a bin's groups are one run of columns
    first = np.flatnonzero(np.r_[True, group_bin[1:] != group_bin[:-1]])
    present = group_bin[first]
    above = 0
    for start in range(0, n_resamples, _BLOCK):
        rows = min(_BLOCK, n_resamples - start)
        drawn = rng.binomial(size[None, :], mean[None, :], size=(rows, size.size)).astype(np.float64)
        sums = np.zeros((rows, n_bins))
        # each bin's run of groups summed at once (integers: exact in any order): 0.06 ms a block of 64 redraws
        # of 4,000 groups, against 2.4 ms by np.add.at (the binomial draws take 21 ms)
        sums[:, present] = np.add.reduceat(drawn, first, axis=1)
        null = np.abs(sums - s_conf[None, :]).sum(axis=1) / c.size
        above += int(np.count_nonzero(null >= ece - 1e-15))
    return (1 + above) / (n_resamples + 1)


@dataclass(frozen=True)
class Skce:
    """The SKCE estimate, its p-value, the estimator ("quadratic" or "linear"), the kernel length and N."""

    value: float
    p: float
    estimator: str
    length: float
    n: int


def kernel_length(conf: np.ndarray, seed: int = 0) -> float:
    """The median of |c_i - c_j| over pairs i < j (of a seeded subsample of MEDIAN_SAMPLES when N is larger);
    1.0 if it is 0 (every confidence equal)."""
    c = np.asarray(conf, dtype=np.float64).reshape(-1)
    if c.size > MEDIAN_SAMPLES:
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 28]))
        c = c[np.sort(rng.choice(c.size, MEDIAN_SAMPLES, replace=False))]
    i, j = np.triu_indices(c.size, k=1)
    d = np.abs(c[i] - c[j])
    med = float(np.median(d)) if d.size else 0.0
    return med if med > 0 else 1.0


def skce(conf: np.ndarray, correct: np.ndarray, *, n_resamples: int = 1000, seed: int = 0,
         length: float | None = None) -> Skce:
    """The SKCE test of (N,) confidences and 0/1 correctness (N >= 2); see the module docstring."""
    c = np.asarray(conf, dtype=np.float64).reshape(-1)
    a = np.asarray(correct, dtype=np.float64).reshape(-1)
    n = c.size
    ell = kernel_length(c, seed) if length is None else float(length)
    if n <= QUADRATIC_MAX:
        kern = np.exp(-np.subtract.outer(c, c) ** 2 / (2.0 * ell * ell))
        np.fill_diagonal(kern, 0.0)
        e = a - c
        value = float(e @ kern @ e) / (n * (n - 1))
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 29]))
        above = 0
        for start in range(0, int(n_resamples), _BLOCK):
            rows = min(_BLOCK, int(n_resamples) - start)
            er = _redraws(rng, c, rows) - c[None, :]
            null = np.einsum("rn,rn->r", er @ kern, er) / (n * (n - 1))
            above += int(np.count_nonzero(null >= value - 1e-15))
        return Skce(value, (1 + above) / (int(n_resamples) + 1), "quadratic", ell, n)
    m = n // 2
    c1, c2, a1, a2 = c[0:2 * m:2], c[1:2 * m:2], a[0:2 * m:2], a[1:2 * m:2]
    h = np.exp(-(c1 - c2) ** 2 / (2.0 * ell * ell)) * (a1 - c1) * (a2 - c2)
    value = float(h.mean())
    sd = float(h.std(ddof=1))
    p = 0.5 * math.erfc(value / (sd / math.sqrt(m)) / math.sqrt(2.0)) if sd > 0 else (0.0 if value > 0 else 1.0)
    return Skce(value, p, "linear", ell, n)
