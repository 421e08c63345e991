"""Percentile bootstrap intervals for every metric, computed as matrix products.

A resample is a vector of counts ``w`` (sample i drawn ``w_i`` times, ``sum w = N``). Every metric here is a
function of sums ``sum_i w_i x_i`` of per-sample features ``x_i``, so a block of resamples ``W`` (R, N) turns into
all metrics at once through ``W @ F`` for a feature matrix ``F``. We split ``W = 1 + (W - 1)``: the ``1`` part is
the exact float64 sum of the evaluation split, and only the fluctuation ``(W - 1) @ F`` is computed in float32
(bfloat16 for the wide class-wise matrix), so rounding touches the spread of the interval, never its centre.

The same resamples (same seed) are used for every calibrator of an evaluation, so differences between
calibrators are paired comparisons.

Conventions (documented in the README):
- equal-width bins are re-decided per resample only through the counts (a sample's bin depends on its own
  confidence, so this is exact);
- equal-mass bins (ACE, debiased ECE) keep the evaluation split's quantile groups in every resample, rather than
  re-sorting each resample; the groups stay nearly equal-mass;
- SmoothECE and CAL/TOT per resample come from :mod:`calibview.core.smoothing`.

Large splits (N > ``UNIT_LIMIT``) are resampled in *units*: a seeded random assignment splits the samples into G
groups of nearly equal size (G between 4,096 and 65,536, fewer for many classes), and a resample draws G groups
with replacement. Every per-sample feature is summed per group once, so a resample costs O(G) instead of O(N) and
memory stays O(G K) instead of O(N K), which is what lets a split larger than memory get intervals at all. The
groups are random, not contiguous rows, so file order does not matter; for a sum the group bootstrap has the
variance of the sample bootstrap, and metrics are normalised by each resample's own size (sum of its groups'
sizes). tests/core/test_streaming.py checks the intervals against the sample bootstrap.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import torch

from . import smoothing
from .errors import check_cancel
from .stream import trim_heap
from .metrics import (SampleStats, debiased_from_sums, ece_from_sums, equal_mass_order, equal_width_bin)


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float


#: resample counts per block (R_b x units): 8M float32 counts are 32 MB per derived operand (4M cost ~5 % more time)
BLOCK_ENTRIES = 1 << 23
#: and R_b x N sample-level fluctuation panels (for the smoothing estimators) at most this many floats (128 MB)
PANEL_ENTRIES = 1 << 25
#: splits with more samples than this are resampled in random groups of samples (see the module docstring)
UNIT_LIMIT = 1 << 17
#: groups x K class-wise entries at most (64 MB of float32), within [MIN_UNITS, MAX_UNITS] groups
UNIT_ENTRIES = 1 << 24
MIN_UNITS, MAX_UNITS = 4096, 1 << 16


def bootstrap_units(n: int, k: int, seed: int = 0) -> Optional[torch.Tensor]:
    """None (resample samples) for N <= UNIT_LIMIT, else the (N,) int64 group of each sample: a seeded random
    assignment to G groups whose sizes differ by at most one."""
    if n <= UNIT_LIMIT:
        return None
    g = int(min(MAX_UNITS, max(MIN_UNITS, UNIT_ENTRIES // max(k, 1))))
    gen = torch.Generator(device="cpu").manual_seed(seed * 1_000_003 + 7919)
    units = torch.empty(n, dtype=torch.int64)
    units[torch.randperm(n, generator=gen)] = torch.arange(n, dtype=torch.int64) % g
    return units


class Resampler:
    """Deterministic multinomial resample counts, generated in blocks of rows so memory stays O(block x N).

    ``units`` (from :func:`bootstrap_units`): resample those groups instead of the N samples."""

    def __init__(self, n: int, n_boot: int = 1000, seed: int = 0, *, device: torch.device | str = "cpu",
                 block: Optional[int] = None, units: Optional[torch.Tensor] = None) -> None:
        if n_boot < 0:
            raise ValueError("the number of bootstrap resamples must be >= 0")
        self.n, self.n_boot, self.seed = int(n), int(n_boot), int(seed)
        self.device = torch.device(device)
        self.units = units
        self.n_units = self.n if units is None else int(units.max()) + 1
        self.sizes = None if units is None else torch.bincount(units, minlength=self.n_units).double()
        # BLOCK_ENTRIES counts per block: big enough for efficient matrix products, small enough that a block
        # and its derived operands (fluctuation, bfloat16 copy, panels) stay well below the logits' size.
        self.block = block or max(1, min(self.n_boot, BLOCK_ENTRIES // max(self.n_units, 1),
                                         PANEL_ENTRIES // max(self.n, 1)))

    def __len__(self) -> int:
        return (self.n_boot + self.block - 1) // self.block if self.n_boot else 0

    def blocks(self) -> Iterator["ResampleBlock"]:
        """Yield blocks of resamples; the same seed gives the same resamples on every device."""
        m = self.n_units
        for i, start in enumerate(range(0, self.n_boot, self.block)):
            rows = min(self.block, self.n_boot - start)
            gen = torch.Generator(device="cpu").manual_seed(self.seed * 1_000_003 + i)
            counts = torch.zeros((rows, m), dtype=torch.float32)
            # 16 rows of draws at a time (the same stream as one call): the int64 indices are 2x the counts
            for r in range(0, rows, 16):
                part = min(16, rows - r)
                idx = torch.randint(0, m, (part, m), generator=gen, dtype=torch.int64)
                counts[r:r + part].scatter_add_(1, idx, torch.ones((1, 1), dtype=torch.float32).expand(part, m))
            del idx
            totals = (np.full(rows, float(self.n)) if self.sizes is None else
                      (counts.double() @ self.sizes).numpy())
            block = ResampleBlock(counts.to(self.device), self.units, totals)
            del counts
            yield block
            del block                   # the generator's frame must not keep the last block alive


class ResampleBlock:
    """One block of resamples, with the derived operands every consumer needs computed once per block."""

    def __init__(self, counts: torch.Tensor, units: Optional[torch.Tensor] = None,
                 totals: Optional[np.ndarray] = None) -> None:
        self.counts = counts                    # (R_b, units) float32 draw counts, rows sum to the number of units
        self.units = units                      # (N,) group of each sample, or None: the units are the samples
        # (R_b,) float64 samples in each resample (N when the units are the samples)
        self.totals = np.full(counts.shape[0], float(counts.shape[1])) if totals is None else totals
        self._cache: dict[str, torch.Tensor] = {}

    def __len__(self) -> int:
        return self.counts.shape[0]

    @property
    def fluct(self) -> torch.Tensor:
        """(R_b, units) float32 counts - 1."""
        if "fluct" not in self._cache:
            self._cache["fluct"] = self.counts - 1.0
        return self._cache["fluct"]

    @property
    def fluct_t(self) -> torch.Tensor:
        """(units, R_b) contiguous: sparse @ dense is several times faster with a contiguous dense operand."""
        if "fluct_t" not in self._cache:
            self._cache["fluct_t"] = self.fluct.T.contiguous()
        return self._cache["fluct_t"]

    def unit_panels(self, width: int = 32) -> list[torch.Tensor]:
        """The fluctuation as (units, width) contiguous float32 CPU panels, the layout sparse @ dense is fastest
        with (see calibview.core.smoothing); built once per block, shared by every calibrator."""
        key = f"unit_panels{width}"
        if key not in self._cache:
            f = self.fluct.cpu()
            self._cache[key] = [f[p:p + width].T.contiguous() for p in range(0, f.shape[0], width)]
        return self._cache[key]

    def panels(self, width: int = 32) -> list[torch.Tensor]:
        """Like :meth:`unit_panels`, per sample: (N, width) panels, each sample carrying its group's count."""
        if self.units is None:
            return self.unit_panels(width)
        key = f"panels{width}"
        if key not in self._cache:
            f = self.fluct.cpu()
            self._cache[key] = [f[p:p + width].T[self.units].contiguous() for p in range(0, f.shape[0], width)]
        return self._cache[key]

    def fluct_as(self, dtype: torch.dtype) -> torch.Tensor:
        key = f"fluct_{dtype}"
        if key not in self._cache:
            self._cache[key] = self.fluct.to(dtype)
        return self._cache[key]


def _onehot_features(index: np.ndarray, n_cols: int, columns: list[np.ndarray]) -> np.ndarray:
    """(N, len(columns) * n_cols): for each feature vector x, x placed in the column of each sample's bin."""
    n = index.shape[0]
    out = np.zeros((n, len(columns) * n_cols), dtype=np.float64)
    rows = np.arange(n)
    for j, x in enumerate(columns):
        out[rows, j * n_cols + index] = x
    return out


class ClasswiseFeatures:
    """Per-chunk consumer that builds the class-wise ECE bootstrap features of one calibrator.

    A dense (units, K) matrix of ``p - y`` for the entries in the first bin (most of them), and a sparse matrix
    for the few entries in higher bins (fewer than B per row). Pass :meth:`add` as ``StatsAccumulator.add``'s
    on_chunk. With ``units`` (see :func:`bootstrap_units`) the rows are summed per group as they arrive.
    """

    def __init__(self, n: int, k: int, n_bins: int, device: torch.device,
                 units: Optional[torch.Tensor] = None) -> None:
        self.n, self.k, self.b, self.device = n, k, n_bins, device
        self.units = None if units is None else units.to(device)
        self.rows = n if units is None else int(units.max()) + 1
        # Wide products dominate the cost when N*K is large: bfloat16 halves it and only rounds the fluctuation.
        self.dtype = torch.bfloat16 if self.rows * k >= 4_000_000 else torch.float32
        # group sums accumulate in float32 and are rounded once, at the end
        self._dense = torch.empty((n, k), dtype=self.dtype, device=device) if units is None else \
            torch.zeros((self.rows, k), dtype=torch.float32, device=device)
        self.edges = torch.from_numpy(np.linspace(0.0, 1.0, n_bins + 1)).to(device)
        self._rows, self._cols, self._vals = [], [], []

    def add(self, start: int, log_probs: torch.Tensor, p: torch.Tensor, labels: torch.Tensor) -> None:
        """Consume one chunk: its log-probabilities and probabilities (``p`` is overwritten)."""
        rows, cols = (p > self.edges[1]).nonzero(as_tuple=True)       # the same test as StatsAccumulator
        if rows.numel():
            bins = (torch.searchsorted(self.edges, p[rows, cols], side="left") - 1).clamp_(1, self.b - 1)
        p[torch.arange(p.shape[0], device=p.device), labels] -= 1.0          # p - y
        if rows.numel():
            unit = rows + start if self.units is None else self.units[rows + start]
            self._rows.append(unit)
            self._cols.append(cols * self.b + bins)
            self._vals.append(p[rows, cols].to(torch.float32))
            p[rows, cols] = 0.0
        if self.units is None:
            self._dense[start:start + p.shape[0]] = p.to(self.dtype)
        else:
            self._dense.index_add_(0, self.units[start:start + p.shape[0]], p.to(torch.float32))

    @property
    def dense(self) -> torch.Tensor:
        if self._dense.dtype != self.dtype:
            self._dense = self._dense.to(self.dtype)
        return self._dense

    def sparse_t(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(cells, CSR (n_cells, units)) of the higher-bin entries; only the non-empty (class, bin) cells get a
        row, ``cells`` holding their index ``class * B + bin``."""
        if self._rows:
            rows, cols, vals = torch.cat(self._rows), torch.cat(self._cols), torch.cat(self._vals)
        else:
            rows = cols = torch.zeros(0, dtype=torch.int64, device=self.device)
            vals = torch.zeros(0, dtype=torch.float32, device=self.device)
        self._rows, self._cols, self._vals = [], [], []
        cells, local = torch.unique(cols, return_inverse=True)
        key = local * self.rows + rows
        if self.units is not None:              # several samples of a group may share a cell: sum them
            key, where = torch.unique(key, return_inverse=True)
            vals = torch.zeros(key.numel(), dtype=torch.float32, device=self.device).index_add_(0, where, vals)
            local, rows = key // self.rows, key % self.rows
        order = torch.argsort(key)
        crow = torch.zeros(cells.numel() + 1, dtype=torch.int64, device=self.device)
        crow[1:] = torch.cumsum(torch.bincount(local, minlength=cells.numel()), 0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)          # "sparse CSR support is in beta"
            mat = torch.sparse_csr_tensor(crow, rows[order], vals[order], size=(cells.numel(), self.rows),
                                          check_invariants=False)
        return cells, mat


#: rows per step when features are summed into groups
_FEATURE_ROWS = 1 << 16


class MetricBootstrap:
    """Accumulates the bootstrap distribution of every metric of one calibrator's predictions.

    stats : the calibrator's :class:`SampleStats` on the evaluation split.
    classwise : the :class:`ClasswiseFeatures` filled while ``stats`` was computed.
    units : the groups of :func:`bootstrap_units` (the same as ``classwise``'s), or None.
    """

    def __init__(self, stats: SampleStats, classwise: ClasswiseFeatures, *, n_bins: int, bandwidth: float,
                 kernel: str, device: torch.device, units: Optional[torch.Tensor] = None, tick=None) -> None:
        tick = tick or (lambda: None)          # a cancel check between the parts (~1 s in all on 2M samples)
        self.stats, self.n_bins, self.bandwidth, self.kernel = stats, n_bins, bandwidth, kernel
        self.device, self.units = device, units
        n, b = stats.n, n_bins
        self.n = n
        nll = stats.nll
        self.nll_inf = ~np.isfinite(nll)
        nll_finite = np.where(self.nll_inf, 0.0, nll)
        top = (stats.conf - stats.correct) ** 2
        ew = equal_width_bin(stats.conf, b)
        order, group = equal_mass_order(stats.conf, b)
        em = np.empty_like(group)
        em[order] = group
        self.n_mass = m = int(group[-1]) + 1 if group.size else 0
        del order, group
        tick()

        def features(a: int, z: int) -> np.ndarray:
            one = np.ones(z - a)
            return np.concatenate([
                np.stack([stats.correct[a:z], nll_finite[a:z], self.nll_inf[a:z].astype(np.float64),
                          stats.brier[a:z], top[a:z]], 1),
                _onehot_features(ew[a:z], b, [one, stats.conf[a:z], stats.correct[a:z]]),
                _onehot_features(em[a:z], m, [one, stats.conf[a:z], stats.correct[a:z]])], axis=1)

        if units is None:
            feats = features(0, n)
            self.base = feats.sum(axis=0)                               # exact float64 centre
        else:
            # summed per group in slices of rows, so the (N, F) matrix never exists
            grouped = torch.zeros((int(units.max()) + 1, 5 + 3 * b + 3 * m), dtype=torch.float64)
            for a in range(0, n, _FEATURE_ROWS):
                tick()
                z = min(n, a + _FEATURE_ROWS)
                grouped.index_add_(0, units[a:z].cpu(), torch.from_numpy(features(a, z)))
            feats = grouped.numpy()
            self.base = feats.sum(axis=0)
        self.feats = torch.from_numpy(feats).to(device=device, dtype=torch.float32)
        del feats
        tick()
        self.cw_dtype = classwise.dtype
        self.cw_dense = classwise.dense
        self.cw_cells, self.cw_sparse_t = classwise.sparse_t()
        base = torch.from_numpy(stats.classwise_sums).to(device)
        self.cw_base0 = base[:, 0].float()                                    # (K,)
        # A higher-bin cell without entries is zero in every resample: only the non-empty cells are carried.
        self.cw_base_cells = base.reshape(-1)[self.cw_cells].float()
        self._values: dict[str, list[np.ndarray]] = {}
        self._helpers: dict = {}         # the smoothing estimators' binning matrices of these samples

    def release(self) -> None:
        """Free the per-sample helpers once every block has been added (they are rebuilt if needed)."""
        self._helpers.clear()

    def update(self, block: ResampleBlock, tick=None) -> None:
        """Add the metrics of a block of resamples; ``tick()`` (a cancel check) is called between its parts,
        which take up to a second each on millions of samples."""
        tick = tick or (lambda: None)
        b, m = self.n_bins, self.n_mass
        n = block.totals                                                             # (R_b,) resample sizes
        sums = (block.fluct @ self.feats).double().cpu().numpy() + self.base        # (R_b, F)
        out: dict[str, np.ndarray] = {}
        out["accuracy"] = sums[:, 0] / n
        out["nll"] = np.where(sums[:, 2] > 0.5, np.inf, sums[:, 1] / n)
        out["brier"] = sums[:, 3] / n
        out["brier_top"] = sums[:, 4] / n
        w = sums[:, 5:5 + 3 * b]
        out["ece"], out["rmsce"], out["mce"] = ece_from_sums(w[:, :b], w[:, b:2 * b], w[:, 2 * b:], n)
        q = sums[:, 5 + 3 * b:]
        out["ace"], _, _ = ece_from_sums(q[:, :m], q[:, m:2 * m], q[:, 2 * m:], n)
        out["debiased_ece"] = debiased_from_sums(q[:, :m], q[:, m:2 * m], q[:, 2 * m:], n)
        # Class-wise ECE = mean_k sum_b |S_kb| / N: exact centre + dense first-bin fluctuation + sparse
        # fluctuation of the non-empty higher-bin cells (float32 is ample: the sums are O(N), errors O(1e-7 N)).
        first = self.cw_base0 + (block.fluct_as(self.cw_dtype) @ self.cw_dense).float()      # (R_b, K)
        total = first.abs().sum(dim=1)
        if self.cw_cells.numel():
            if self.device.type == "cpu":
                fl = torch.cat([torch.sparse.mm(self.cw_sparse_t, p) for p in block.unit_panels()], dim=1)
            else:
                fl = torch.sparse.mm(self.cw_sparse_t, block.fluct_t)
            cells = self.cw_base_cells[:, None] + fl                                     # (cells, R_b)
            total += cells.abs().sum(dim=0)
        out["classwise_ece"] = total.double().cpu().numpy() / (n * self.stats.k)
        tick()
        panels = block.panels()
        out["smece"] = smoothing.smece_resampled(self.stats.conf, self.stats.correct, panels=panels,
                                                 store=self._helpers).numpy()
        tick()
        cal, tot = smoothing.cal_resampled(self.stats.conf, self.stats.correct, self.stats.brier,
                                           bandwidth=self.bandwidth, kernel=self.kernel, panels=panels,
                                           totals=n, store=self._helpers)
        out["cal"], out["tot"] = cal.cpu().numpy(), tot.cpu().numpy()
        out["sharpness_gap"] = out["tot"] - out["cal"]
        for name, v in out.items():
            self._values.setdefault(name, []).append(np.asarray(v, dtype=np.float64))

    def intervals(self, level: float = 0.95) -> dict[str, Interval]:
        """Percentile intervals (``level`` in (0, 1)); empty when no resamples were drawn."""
        alpha = (1.0 - level) / 2.0
        result = {}
        for name, chunks in self._values.items():
            v = np.concatenate(chunks)
            if np.isinf(v).any():
                # np.percentile interpolates inf - inf into NaN: order statistics instead.
                v = np.sort(v)
                lo = v[int(np.floor(alpha * (len(v) - 1)))]
                hi = v[int(np.ceil((1 - alpha) * (len(v) - 1)))]
            else:
                lo, hi = np.percentile(v, [100 * alpha, 100 * (1 - alpha)])
            result[name] = Interval(float(lo), float(hi))
        return result


def run_bootstrap(boots: list[MetricBootstrap], resampler: Resampler, *, progress=None,
                  cancel: Optional[threading.Event] = None) -> None:
    """Feed every block of resamples to every calibrator's accumulator.

    Blocks outer (each block is drawn once) for samples; calibrators outer for groups of a large split, where
    drawing a block is cheap (O(groups)) and one calibrator's helpers at a time (O(N) sparse binning matrices)
    keep the memory down. The same seed gives the same resamples either way, so comparisons stay paired."""
    total = max(1, len(resampler))
    if resampler.units is None:
        for i, block in enumerate(resampler.blocks()):
            check_cancel(cancel)
            for boot in boots:
                check_cancel(cancel)
                boot.update(block, lambda: check_cancel(cancel))
            del block                   # before the next block is drawn, not after
            _report_block(progress, resampler, (i + 1) / total, i)
        for boot in boots:
            boot.release()
        return
    for j, boot in enumerate(boots):
        for i, block in enumerate(resampler.blocks()):
            check_cancel(cancel)
            boot.update(block, lambda: check_cancel(cancel))
            del block
            trim_heap()
            _report_block(progress, resampler, (j + (i + 1) / total) / len(boots), i,
                          f" (calibrator {j + 1} of {len(boots)})")
        boot.release()


def _report_block(progress, resampler: Resampler, fraction: float, i: int, what: str = "") -> None:
    if progress is not None:
        progress(fraction, f"bootstrap {min((i + 1) * resampler.block, resampler.n_boot)}/{resampler.n_boot}{what}")
