"""Bootstrap resamples: seeded multinomial draw counts, served in blocks, and percentile intervals.

A resample is a vector of counts ``w`` (unit i drawn ``w_i`` times, ``sum w`` = the number of units).
:class:`Resampler` draws them from a seeded stream in blocks of rows, so memory stays O(block x units) and the same
seed gives the same resamples on every device; :class:`ResampleBlock` holds one block with the operands its
consumers share (the fluctuation ``W - 1``, its transpose, float32 panels); :func:`percentile_interval` reads an
:class:`Interval` off a bootstrap distribution. The metrics' bootstrap distributions are computed from these
blocks in :mod:`calibview.core.stats.bootstrap`.

Large splits (N > ``UNIT_LIMIT``) are resampled in *units*: a seeded random assignment splits the samples into G
groups of nearly equal size (G between 4,096 and 65,536, fewer for many classes), and a resample draws G groups
with replacement. Every per-sample feature is summed per group once, so a resample costs O(G) instead of O(N) and
memory stays O(G K) instead of O(N K), which is what lets a split larger than memory get intervals at all. The
groups are random, not contiguous rows, so file order does not matter; for a sum the group bootstrap has the
variance of the sample bootstrap, and metrics are normalised by each resample's own size (sum of its groups'
sizes). tests/core/io/test_streaming.py checks the intervals against the sample bootstrap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import torch


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval: its lower and upper ends, in the units of the metric (NaN when there is none)."""

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

    def _generated(self) -> Iterator[torch.Tensor]:
        """(rows, units) float32 counts of consecutive blocks, drawn from the seeded stream."""
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
            yield counts
            del counts

    def counts_matrix(self) -> torch.Tensor:
        """All resamples at once as an (n_boot, units) uint8 CPU tensor (a draw count above 255 has probability
        ~1e-300 even for millions of units; it is checked). The evaluation keeps this matrix while it scores, so
        per-chunk consumers see every resample's counts of the chunk's rows."""
        out = torch.empty((self.n_boot, self.n_units), dtype=torch.uint8)
        for start, counts in zip(range(0, self.n_boot, self.block), self._generated()):
            if counts.numel() and float(counts.max()) > 255:
                raise RuntimeError("a bootstrap draw count exceeded 255")
            out[start:start + counts.shape[0]] = counts.to(torch.uint8)
        return out

    def blocks(self, matrix: Optional[torch.Tensor] = None) -> Iterator["ResampleBlock"]:
        """Yield blocks of resamples; the same seed gives the same resamples on every device. ``matrix`` (from
        :meth:`counts_matrix`) serves the blocks from memory instead of drawing them again."""
        if matrix is None:
            source = self._generated()
        else:
            source = (matrix[a:a + self.block].to(torch.float32) for a in range(0, self.n_boot, self.block))
        for counts in source:
            totals = (np.full(counts.shape[0], float(self.n)) if self.sizes is None else
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
        with (see calibview.core.stats.grid); built once per block, shared by every calibrator."""
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
        """:attr:`fluct` (R_b, units) in ``dtype``, converted once per block."""
        key = f"fluct_{dtype}"
        if key not in self._cache:
            self._cache[key] = self.fluct.to(dtype)
        return self._cache[key]


def percentile_interval(values: np.ndarray, level: float = 0.95) -> Interval:
    """Percentile interval of a bootstrap distribution (``level`` in (0, 1))."""
    alpha = (1.0 - level) / 2.0
    v = np.asarray(values, dtype=np.float64)
    if np.isinf(v).any():
        # np.percentile interpolates inf - inf into NaN: order statistics instead.
        v = np.sort(v)
        return Interval(float(v[int(np.floor(alpha * (len(v) - 1)))]),
                        float(v[int(np.ceil((1 - alpha) * (len(v) - 1)))]))
    lo, hi = np.percentile(v, [100 * alpha, 100 * (1 - alpha)])
    return Interval(float(lo), float(hi))
