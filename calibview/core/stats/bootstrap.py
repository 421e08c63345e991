"""Percentile bootstrap intervals for every metric, computed as matrix products.

A resample is a vector of counts ``w`` (sample i drawn ``w_i`` times, ``sum w = N``). Every metric here is a
function of sums ``sum_i w_i x_i`` of per-sample features ``x_i``, so a block of resamples ``W`` (R, N) turns into
all metrics at once through ``W @ F`` for a feature matrix ``F``. We split ``W = 1 + (W - 1)``: the ``1`` part is
the exact float64 sum of the evaluation split, and only the fluctuation ``(W - 1) @ F`` is computed in float32
(the class-wise matrix too), so rounding touches the spread of the interval, never its centre.

The same resamples (same seed) are used for every calibrator of an evaluation, so differences between
calibrators are paired comparisons.

Conventions (docs/DEFINITIONS.md says why):
- equal-width bins are re-decided per resample only through the counts (a sample's bin depends on its own
  confidence, so this is exact);
- equal-mass bins (ACE, debiased ECE) keep the evaluation split's quantile groups in every resample, rather than
  re-sorting each resample; the groups stay nearly equal-mass;
- SmoothECE per resample comes from :mod:`calibview.core.stats.smooth_ece`, CAL/TOT from
  :mod:`calibview.core.stats.smoothing`;
- the selective-prediction metrics (AURC, ..., :mod:`calibview.core.stats.selective`) sort the samples once and read
  cumulative sums of each resample's counts in that order at the tie-group ends: O(R N) per block.

Large splits are resampled in groups of samples (*units*, :func:`calibview.core.stats.resampling.bootstrap_units`):
every per-sample feature is then summed per group once. The resamples themselves (seeded blocks of draw counts)
and the percentile intervals come from :mod:`calibview.core.stats.resampling`.
"""

from __future__ import annotations

import warnings
from typing import Optional

import numpy as np
import torch

from calibview.core.stats import selective, smooth_ece, smoothing
from calibview.core.stats.metrics import (SampleStats, StatsAccumulator, debiased_from_sums, ece_from_sums,
                                          equal_mass_count, equal_mass_order, equal_width_bin)
from calibview.core.stats.resampling import ResampleBlock


def mixed_classes(stats: SampleStats, n_bins: int) -> np.ndarray:
    """The classes whose first class-wise bin (p_k <= 1/B) holds one of their own samples: the only ones whose
    first-bin sum ``sum_i w_i (p_ik - y_ik)`` can change sign between resamples. Every other class has only
    entries p_ik >= 0 there, so its |sum| is the sum itself, linear in the resample counts (see
    :class:`ClasswiseBootstrap`)."""
    edge = np.linspace(0.0, 1.0, n_bins + 1)[1]
    p_label = np.exp(-stats.nll)                  # the same float64 value StatsAccumulator binned
    return np.unique(stats.labels[~(p_label > edge)])


class ClasswiseBootstrap:
    """The bootstrap distribution of class-wise ECE of one calibrator for several bin counts, accumulated while
    the evaluation split is scored, so the (N, K) matrix of ``p - y`` never exists.

    Class-wise ECE of resample r is ``sum_{k,b} |S_rkb| / (n_r K)`` with ``S_rkb = sum_i w_ri (p_ik - y_ik)`` over
    the entries in bin b of class k. The entries above 1/B (fewer than B per row) are kept sparse by
    :class:`StatsAccumulator`; everything else sits in the first bin, whose per-class sums need the dense product
    of the resample counts with ``p - y``: (R, N) @ (N, K) over chunks of rows, O(R K) memory. ``columns``
    restricts that product to the classes that need it (:func:`mixed_classes`); the first-bin sums of all other
    classes are non-negative in every resample, so their total is one extra column. With ``units`` the rows are
    summed per group as they arrive ((units, K) memory) and multiplied at the end.

    counts : (R, units) uint8 resample counts (:meth:`calibview.core.stats.resampling.Resampler.counts_matrix`).
    segments : the split rows where a shard starts (0 first), or None. With them (samples as units), each shard's
        float32 sums are folded into a float64 total at its end, and the row blocks restart at each shard: the
        totals are then those of :meth:`partial` sums of the shards added in order, bit for bit (what an engine
        scoring shards apart, calibview.core.distributed, merges).
    merged : (total, rest), the :meth:`partial` sums of every shard merged: the accumulator of the whole split,
        with nothing left to add (no buffers are allocated).
    """

    def __init__(self, counts: torch.Tensor, k: int, *, units: Optional[torch.Tensor] = None,
                 columns: Optional[np.ndarray] = None, device: torch.device | str = "cpu",
                 segments: Optional[list[int]] = None, merged: Optional[tuple] = None) -> None:
        self.device = torch.device(device)
        self.counts, self.k, self.units = counts, k, units
        self.r = counts.shape[0]
        self.columns = None if columns is None else torch.from_numpy(np.asarray(columns, np.int64)).to(self.device)
        width = k if columns is None else len(columns)
        rows = self.r if units is None else counts.shape[1]
        self._first: Optional[tuple] = None
        self._total: Optional[torch.Tensor] = None          # (R, width) float64 sum of the finished shards
        self.segments, self._seg_end, self._buf, self._buf_start, self._buf_fill = None, None, None, 0, 0
        if merged is not None:
            if units is None:           # sums over samples: already the resamples' fluctuation sums
                self._first, self._acc, self._rest = merged, None, None
            else:                       # per-unit sums: multiplied by the counts when first asked for
                self._acc, self._rest = merged
            return
        self._acc = torch.zeros((rows, width), dtype=torch.float32, device=self.device)
        self._rest = torch.zeros(rows, dtype=torch.float64, device=self.device)
        # Rows are multiplied in fixed blocks of the split (not the caller's chunks), so the float32 sums do not
        # depend on how the split was read, and the products are wide enough to be efficient at large K.
        self.block_rows = max(64, min(4096, _BLOCK_BYTES // (4 * max(width, 1))))
        self._buf = None if units is not None else torch.empty((self.block_rows, width), dtype=torch.float32,
                                                                device=self.device)
        self.segments = None if segments is None or units is not None else np.asarray(segments, np.int64)
        self._seg_end = None if self.segments is None else self._segment_end(0)

    @staticmethod
    def nbytes(r: int, units: int, k: int, n_units: bool) -> int:
        """Memory of the accumulator: (R, K) float32, or (units, K) float32 with units."""
        return 4 * k * (units if n_units else r)

    def add(self, start: int, lp: torch.Tensor, p: torch.Tensor, y: torch.Tensor) -> None:
        """One chunk's probabilities ``p`` (rows, K) float64 (overwritten) and labels; the signature of
        ``StatsAccumulator.add``'s on_chunk."""
        stop = start + p.shape[0]
        p[torch.arange(p.shape[0], device=p.device), y] -= 1.0                      # p - y
        if self.columns is None:
            dense, rest = p.to(torch.float32), None
        else:
            part = p[:, self.columns]
            rest = p.sum(dim=1) - part.sum(dim=1)
            dense = part.to(torch.float32)
        if self.units is None:
            if rest is not None:
                f = self.counts[:, start:stop].to(device=self.device, dtype=torch.float64) - 1.0
                self._rest += f @ rest
            at = start
            while at < stop:
                if self._seg_end is not None and at >= self._seg_end:
                    self._fold()
                    self._seg_end = self._segment_end(at)
                origin = 0 if self.segments is None else self._seg_start
                if self._buf_fill == 0:
                    self._buf_start = at
                take = min(stop - at, self.block_rows - self._buf_fill,
                           origin + ((at - origin) // self.block_rows + 1) * self.block_rows - at)
                if self._seg_end is not None:
                    take = min(take, self._seg_end - at)
                self._buf[self._buf_fill:self._buf_fill + take] = dense[at - start:at - start + take]
                self._buf_fill += take
                at += take
                if (at - origin) % self.block_rows == 0 or at == self._seg_end:
                    self._flush()
        else:
            u = self.units[start:stop].to(self.device)
            self._acc.index_add_(0, u, dense)
            if rest is not None:
                self._rest.index_add_(0, u, rest)

    def _flush(self) -> None:
        if self._buf_fill:
            a, m = self._buf_start, self._buf_fill
            f = self.counts[:, a:a + m].to(device=self.device, dtype=torch.float32) - 1.0
            self._acc.addmm_(f, self._buf[:m])
            self._buf_fill = 0

    def _segment_end(self, row: int) -> int:
        """The end of the shard holding split row ``row`` (and remember where it starts)."""
        i = int(np.searchsorted(self.segments, row, side="right")) - 1
        self._seg_start = int(self.segments[max(i, 0)])
        return int(self.segments[i + 1]) if i + 1 < len(self.segments) else np.iinfo(np.int64).max

    def _fold(self, last: bool = False) -> None:
        """Add the finished shard's float32 sums to the float64 total and, unless it is the ``last``, start the
        next shard at zero."""
        self._flush()
        part = self._acc.double()
        self._total = part if self._total is None else self._total + part
        if not last:
            self._acc.zero_()

    def partial(self) -> tuple[torch.Tensor, torch.Tensor]:
        """((R, width) float64 dense sums, (R,) float64 rest) of the rows seen, for samples as units; or, with
        units, ((units, width) float32, (units,) float64) per-unit sums. A shard's partial sums: merged in shard
        order, they make the split's (the ``merged`` argument). Call it once, after the last row."""
        if self.units is not None:
            return self._acc, self._rest
        self._fold(last=True)
        return self._total, self._rest

    def _first_fluct(self, tick) -> tuple[torch.Tensor, torch.Tensor]:
        """((R, width) float32 or, with shards, float64, (R,) float64) fluctuations of the dense columns and of
        the rest; ``tick()`` (a cancel check) between panels of resamples."""
        if self._first is None:
            if self.units is None:
                if self.segments is not None:
                    self._first = self.partial()
                else:
                    self._flush()
                    self._first = (self._acc, self._rest)
            else:               # in panels of resamples: a whole (R, units) float64 copy was 131 MB at 2 M rows
                r = self.counts.shape[0]
                first = torch.empty((r, self._acc.shape[1]), dtype=torch.float32, device=self.device)
                rest = torch.empty(r, dtype=torch.float64, device=self.device)
                for a in range(0, r, _COUNT_PANEL):
                    tick()
                    f = self.counts[a:a + _COUNT_PANEL].to(device=self.device, dtype=torch.float32) - 1.0
                    first[a:a + f.shape[0]] = f @ self._acc
                    rest[a:a + f.shape[0]] = f.double() @ self._rest
                self._first = (first, rest)
            self._acc = self._rest = None
        return self._first

    def distribution(self, acc: StatsAccumulator, n_bins: int, totals: np.ndarray, tick=None) -> np.ndarray:
        """(R,) class-wise ECE of every resample for ``n_bins`` equal-width bins; ``totals`` (R,) resample sizes;
        ``tick()`` is called between steps (a cancel check: at millions of rows this takes seconds)."""
        k, b, dev = self.k, n_bins, self.device
        tick = tick or (lambda: None)
        base = torch.from_numpy(acc.classwise_sums(b)).to(dev)                       # (K, B) float64, exact
        first, rest = self._first_fluct(tick)
        dense_cols = (torch.arange(k, device=dev) if self.columns is None else self.columns)
        slot = torch.full((k,), -1, dtype=torch.int64, device=dev)       # class -> column of the dense part
        slot[dense_cols] = torch.arange(dense_cols.numel(), device=dev)
        fl_cells, cells = self._sparse_cells(acc, b, slot, tick)                                     # (cells, R)
        is_first = (cells == k * b) | (cells % b == 0)
        # dense first-bin columns: exact base + dense fluctuation + sparse corrections
        f_dense = base[dense_cols, 0][None, :].float() + first
        fc = cells[is_first & (cells != k * b)]
        if fc.numel():
            f_dense[:, slot[fc // b]] += fl_cells[is_first & (cells != k * b)].T
        total = f_dense.abs().sum(dim=1).double()
        if self.columns is not None:
            rest_cols = torch.ones(k, dtype=torch.bool, device=dev)
            rest_cols[dense_cols] = False
            rest_total = base[rest_cols, 0].sum() + rest
            if (cells == k * b).any():
                rest_total = rest_total + fl_cells[cells == k * b][0].double()
            total += rest_total
        higher = ~is_first
        if higher.any():
            hb = base.reshape(-1)[cells[higher]].float()
            total += (hb[:, None] + fl_cells[higher]).abs().sum(dim=0).double()
        return total.cpu().numpy() / (np.asarray(totals, dtype=np.float64) * k)

    def _sparse_cells(self, acc: StatsAccumulator, b: int, slot: torch.Tensor, tick
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """((cells, R) float32 fluctuation sums, (cells,) ascending cell ids) of the entries above 1/B: each
        entry's higher-bin cell (+v, id ``class * B + bin``) and its first-bin correction (-v, into its class's
        dense column ``class * B``, or the single "rest" cell ``K * B`` of the non-negative classes).

        The entries are taken in ranges of classes of about ENTRY_BLOCK entries each, so the temporaries of
        building a range's sparse matrix (a dozen vectors of twice its entries) stay O(ENTRY_BLOCK): at
        2,000,000 x 1,000 they took 430 MB at once for the whole split. A cell's row of the product depends only
        on its own entries, in row order either way."""
        k, dev = self.k, self.device
        rows, cols, p, is_label = acc.entries()
        edges = torch.from_numpy(np.linspace(0.0, 1.0, b + 1)).to(p.device)
        big = p > edges[1]
        per_class = torch.bincount(cols[big].long(), minlength=k).cpu().numpy()
        cuts = np.searchsorted(np.cumsum(per_class), np.arange(ENTRY_BLOCK, int(per_class.sum()), ENTRY_BLOCK),
                               side="left") + 1
        bounds = np.unique(np.r_[0, np.minimum(cuts, k), k])
        n_units = self.counts.shape[1]
        mats = []
        for c0, c1 in zip(bounds[:-1], bounds[1:]):
            tick()
            # a mask per range, not one sort by class: the sort's indices would cost 8 bytes per entry
            sel = big & (cols >= int(c0)) & (cols < int(c1)) if len(bounds) > 2 else big
            r_, c_, p_ = rows[sel].to(dev), cols[sel].to(dev).long(), p[sel]
            vals = (p_ - is_label[sel].to(torch.float64)).to(dev)
            bins = (torch.searchsorted(edges, p_, side="left") - 1).clamp_(1, b - 1).to(dev)
            unit = r_ if self.units is None else self.units.to(dev)[r_]
            first_cell = torch.where(slot[c_] >= 0, c_ * b, torch.full_like(c_, k * b))
            cell_ids = torch.cat([c_ * b + bins, first_cell])
            del r_, p_, bins, first_cell, sel
            mats.append(_cell_matrix(cell_ids, torch.cat([unit, unit]), torch.cat([vals, -vals]).to(torch.float32),
                                     n_units, dev))
            del cell_ids, unit, vals
        cells = torch.cat([c for c, _ in mats]) if mats else torch.zeros(0, dtype=torch.int64, device=dev)
        out = torch.empty((cells.numel(), self.r), dtype=torch.float32, device=dev)
        for a in range(0, self.r, 32):
            tick()
            panel = (self.counts[a:a + 32].to(device=dev, dtype=torch.float32) - 1.0).T.contiguous()
            at = 0
            for c, mat in mats:
                out[at:at + c.numel(), a:a + 32] = torch.sparse.mm(mat, panel)
                at += c.numel()
        is_rest = cells == k * b
        if int(is_rest.sum()) > 1:      # the rest cell of each range of classes: one row, their sum, at the end
            total = out[is_rest].sum(dim=0, keepdim=True)
            out, cells = torch.cat([out[~is_rest], total]), torch.cat([cells[~is_rest], cells[is_rest][:1]])
        return out, cells

    def release(self) -> None:
        """Free the accumulated class-wise sums and buffers (the object is not used after this)."""
        self._acc = self._rest = self._first = self._buf = None


#: bytes of the row buffer of a class-wise accumulator
_BLOCK_BYTES = 32 << 20
#: resamples per panel of the per-unit class-wise product
_COUNT_PANEL = 128
#: sparse class-wise entries (above 1/B) made into one sparse matrix at a time: ~250 bytes of temporaries each
ENTRY_BLOCK = 1 << 18


def _cell_matrix(cell_ids: torch.Tensor, units: torch.Tensor, vals: torch.Tensor, n_units: int,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """((cells,) ascending cell ids, (cells, units) float32 sparse CSR matrix of ``sum v`` per cell and unit):
    the values ``vals`` (E,) of entries in cells ``cell_ids`` (E,) and units ``units`` (E,), duplicates summed in
    their order."""
    cells, local = torch.unique(cell_ids, return_inverse=True)
    key, where = torch.unique(local * n_units + units, return_inverse=True)    # sum duplicates
    del local
    summed = torch.zeros(key.numel(), dtype=torch.float32, device=device).index_add_(0, where, vals)
    del where
    local, col = key // n_units, key % n_units
    crow = torch.zeros(cells.numel() + 1, dtype=torch.int64, device=device)
    crow[1:] = torch.cumsum(torch.bincount(local, minlength=cells.numel()), 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)          # "sparse CSR support is in beta"
        mat = torch.sparse_csr_tensor(crow, col, summed, size=(cells.numel(), n_units), check_invariants=False)
    return cells, mat


def _onehot_features(index: np.ndarray, n_cols: int, columns: list[np.ndarray]) -> np.ndarray:
    """(N, len(columns) * n_cols): for each feature vector x, x placed in the column of each sample's bin."""
    n = index.shape[0]
    out = np.zeros((n, len(columns) * n_cols), dtype=np.float64)
    rows = np.arange(n)
    for j, x in enumerate(columns):
        out[rows, j * n_cols + index] = x
    return out


#: rows per step when features are summed into groups
_FEATURE_ROWS = 1 << 16

COMMON_METRICS = ("accuracy", "nll", "brier", "brier_top", "smece") + selective.SELECTIVE_METRICS
BINNED_METRICS = ("ece", "rmsce", "mce", "ace", "debiased_ece")
KERNEL_METRICS = ("cal", "tot", "sharpness_gap")


class SampleBootstrap:
    """The bootstrap distributions of every metric but class-wise ECE, from one calibrator's per-sample vectors.

    Three independent parts, so a change of settings recomputes only its own: :meth:`common` (means and
    SmoothECE: no setting), :meth:`binned` (equal-width and equal-mass bin metrics: the bin count),
    :meth:`kernel` (CAL, TOT and the sharpness gap: bandwidth and kernel). Each takes a :class:`ResampleBlock`
    and returns (R_b,) arrays; features are built once per part (per group with ``units``).
    """

    def __init__(self, stats: SampleStats, *, device: torch.device | str = "cpu",
                 units: Optional[torch.Tensor] = None, tick=None, refinement=None) -> None:
        self.stats, self.units, self.device = stats, units, torch.device(device)
        #: the score stage's refinement result (calibview.core.stats.corp.refinement), resampled with CORP
        self.refinement = refinement
        self.tick = tick or (lambda: None)
        nll = stats.nll
        self.nll_inf = ~np.isfinite(nll)
        self.nll_finite = np.where(self.nll_inf, 0.0, nll)
        self._feats: dict = {}
        self._helpers: dict = {}        # the smoothing estimators' binning matrices of these samples

    def _features(self, key, width: int, build) -> tuple[torch.Tensor, np.ndarray]:
        """((rows, F) float32 on the device, (F,) exact float64 column sums) of ``build(a, z)`` (samples a..z)."""
        if key not in self._feats:
            n, units = self.stats.n, self.units
            if units is None:
                feats = build(0, n)
            else:
                # summed per group in slices of rows, so the (N, F) matrix never exists
                grouped = torch.zeros((int(units.max()) + 1, width), dtype=torch.float64)
                for a in range(0, n, _FEATURE_ROWS):
                    self.tick()
                    z = min(n, a + _FEATURE_ROWS)
                    grouped.index_add_(0, units[a:z].cpu(), torch.from_numpy(build(a, z)))
                feats = grouped.numpy()
            self._feats[key] = (torch.from_numpy(feats).to(device=self.device, dtype=torch.float32),
                                feats.sum(axis=0))
        return self._feats[key]

    def _sums(self, block: ResampleBlock, key, width: int, build) -> np.ndarray:
        feats, base = self._features(key, width, build)
        return (block.fluct @ feats).double().cpu().numpy() + base                   # (R_b, F)

    def common(self, block: ResampleBlock, smooth: bool = True) -> dict[str, np.ndarray]:
        """``smooth=False`` leaves out SmoothECE, whose cost per resample is a grid's, whatever the sample count
        (what many small slices cannot afford)."""
        s = self.stats
        top = (s.conf - s.correct) ** 2

        def build(a: int, z: int) -> np.ndarray:
            return np.stack([s.correct[a:z], self.nll_finite[a:z], self.nll_inf[a:z].astype(np.float64),
                             s.brier[a:z], top[a:z]], 1)

        sums = self._sums(block, "common", 5, build)
        n = block.totals
        out = {"accuracy": sums[:, 0] / n, "nll": np.where(sums[:, 2] > 0.5, np.inf, sums[:, 1] / n),
               "brier": sums[:, 3] / n, "brier_top": sums[:, 4] / n}
        if smooth:
            self.tick()
            panels = block.panels()
            self.tick()             # panels, then the binning and the fits: 1 s together at 2 M rows
            out["smece"] = smooth_ece.smece_resampled(s.conf, s.correct, panels=panels, store=self._helpers).numpy()
        self.tick()
        if "rank_order" not in self._helpers:          # sorted once; every block is cumulative sums in that order
            self._helpers["rank_order"] = selective.rank_order(s.conf, s.correct, s.conf_order)
            self.tick()
        out.update(selective.resampled_metrics(self._helpers["rank_order"], block.counts, block.units,
                                               block.totals, store=self._helpers))
        return out

    def binned(self, block: ResampleBlock, n_bins: int) -> dict[str, np.ndarray]:
        """(R_b,) ECE, RMSCE, MCE (equal-width bins), ACE and debiased ECE (equal-mass bins) of the block's
        resamples, with ``n_bins`` bins."""
        s, b = self.stats, n_bins
        m = equal_mass_count(s.n, b)
        bins: dict = {}

        def build(a: int, z: int) -> np.ndarray:
            # the bin of every sample, once per bin count: the features are built once and cached, and a sort of
            # the N confidences per block of resamples was most of this part's time on a large split
            if not bins:
                order, group = equal_mass_order(s.conf, b, s.conf_order)
                bins["ew"], bins["em"] = equal_width_bin(s.conf, b), np.empty_like(group)
                bins["em"][order] = group
            ew, em = bins["ew"], bins["em"]
            one = np.ones(z - a)
            return np.concatenate([_onehot_features(ew[a:z], b, [one, s.conf[a:z], s.correct[a:z]]),
                                   _onehot_features(em[a:z], m, [one, s.conf[a:z], s.correct[a:z]])], axis=1)

        sums = self._sums(block, ("binned", b), 3 * b + 3 * m, build)
        n = block.totals
        w, q = sums[:, :3 * b], sums[:, 3 * b:]
        out = {}
        out["ece"], out["rmsce"], out["mce"] = ece_from_sums(w[:, :b], w[:, b:2 * b], w[:, 2 * b:], n)
        out["ace"], _, _ = ece_from_sums(q[:, :m], q[:, m:2 * m], q[:, 2 * m:], n)
        out["debiased_ece"] = debiased_from_sums(q[:, :m], q[:, m:2 * m], q[:, 2 * m:], n)
        return out

    def kernel(self, block: ResampleBlock, bandwidth: float, kernel: str, curve: bool = False
               ) -> dict[str, np.ndarray]:
        """(R_b,) CAL, TOT and sharpness gap (TOT - CAL) of the block's resamples at ``bandwidth`` (in units of
        confidence) with ``kernel``; with ``curve``, also ``curve``: (R_b, 257) float32, their kernel curves at
        :data:`~calibview.core.stats.smoothing.CURVE_BAND_X` (the confidence band's material)."""
        s = self.stats
        curves: Optional[list] = [] if curve else None
        cal, tot = smoothing.cal_resampled(s.conf, s.correct, s.brier, bandwidth=bandwidth, kernel=kernel,
                                           panels=block.panels(), totals=block.totals, store=self._helpers,
                                           curves=curves)
        cal, tot = cal.cpu().numpy(), tot.cpu().numpy()
        out = {"cal": cal, "tot": tot, "sharpness_gap": tot - cal}
        if curves is not None:
            out["curve"] = np.concatenate(curves)
        return out

    def release(self) -> None:
        """Free the features and the per-sample helpers (rebuilt if needed)."""
        self._feats.clear()
        self._helpers.clear()
