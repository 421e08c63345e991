"""Bootstrap resamples: seeded multinomial (or Poisson) draw counts, served in blocks, and percentile intervals.

A resample is a vector of counts ``w`` (unit i drawn ``w_i`` times, ``sum w`` = the number of units).
:class:`Resampler` draws them from a seeded stream in blocks of rows, so memory stays O(block x units) and the same
seed gives the same resamples on every device; :class:`ResampleBlock` holds one block with the operands its
consumers share (the fluctuation ``W - 1``, its transpose, float32 panels), and :func:`for_each` hands a block to
several consumers (calibrators) side by side, one thread each; :func:`percentile_interval` reads an
:class:`Interval` off a bootstrap distribution. The metrics' bootstrap distributions are computed from these
blocks in :mod:`calibview.core.stats.bootstrap`.

Large splits (N > ``UNIT_LIMIT``) are resampled in *units*: a seeded random assignment splits the samples into G
groups of nearly equal size (G between 4,096 and 65,536, fewer for many classes), and a resample draws G groups
with replacement. Every per-sample feature is summed per group once, so a resample costs O(G) instead of O(N) and
memory stays O(G K) instead of O(N K), which is what lets a split larger than memory get intervals at all. The
groups are random, not contiguous rows, so file order does not matter; for a sum the group bootstrap has the
variance of the sample bootstrap, and metrics are normalised by each resample's own size (sum of its groups'
sizes). tests/core/io/test_streaming.py checks the intervals against the sample bootstrap.

## The Poisson bootstrap (:class:`PoissonScheme`)

Resample weights that can be drawn shard by shard, so that partial sums add up.

The multinomial bootstrap (:class:`Resampler`'s default) draws N samples with
replacement: every sample's count depends on every other's, so it cannot be drawn where only one shard of the
split is at hand. Here each resampling unit's weight in each resample is an independent Poisson(1) count (the
limit of the multinomial's Binomial(N, 1/N) marginals), drawn from a generator seeded by (seed, shard index,
row block), where a row block is 65,536 consecutive rows of one shard (:data:`BLOCK_ROWS`). So:

- a worker holding shard s draws exactly the weights of its own rows, with no exchange;
- the weights do not depend on how the split is read (chunks, ``--max-memory``, Dask or not), only on the seed
  and the shards' sizes;
- the class-wise and other accumulators of the shards add up to those of the whole split.

A resample's size is no longer N but the sum of its weights (about N, with standard deviation sqrt(N)); every
metric is normalised by its resample's own size, as the multinomial group bootstrap already does. The two
schemes' intervals agree in distribution, not in value.

Units: up to :data:`UNIT_LIMIT` samples, a unit is a sample. Above it, as in the
multinomial case, samples are resampled in random groups, here groups *inside each row block* (a seeded random
assignment of the block's rows to ``g`` groups whose sizes differ by at most one), so a group never spans two
shards. The number of groups of a block is its share of the same total the multinomial scheme uses.

Each draw is one 32-bit uniform of a PCG64 stream, mapped through Poisson(1)'s inverse CDF, so the draws of
resamples [a, b) are reached by advancing the stream, not by drawing those before them.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterator, Optional, Sequence, TypeVar

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

    ``units`` (from :func:`bootstrap_units`): resample those groups instead of the N samples. ``poisson`` (a
    :class:`PoissonScheme`): Poisson(1) weights instead, with its own units (then
    ``units`` must be the scheme's), so a resample's size varies around N."""

    def __init__(self, n: int, n_boot: int = 1000, seed: int = 0, *, device: torch.device | str = "cpu",
                 block: Optional[int] = None, units: Optional[torch.Tensor] = None, poisson=None) -> None:
        if n_boot < 0:
            raise ValueError("the number of bootstrap resamples must be >= 0")
        self.n, self.n_boot, self.seed = int(n), int(n_boot), int(seed)
        self.device = torch.device(device)
        self.units, self.poisson = units, poisson
        self.n_units = self.n if units is None else int(units.max()) + 1
        if poisson is not None and poisson.n_units != self.n_units:
            raise ValueError("the units of a Poisson resampler must be its scheme's")
        self.sizes = None if units is None else torch.bincount(units, minlength=self.n_units).double()
        # BLOCK_ENTRIES counts per block: big enough for efficient matrix products, small enough that a block
        # and its derived operands (fluctuation, float32 copy, panels) stay well below the logits' size.
        self.block = block or max(1, min(self.n_boot, BLOCK_ENTRIES // max(self.n_units, 1),
                                         PANEL_ENTRIES // max(self.n, 1)))

    def __len__(self) -> int:
        return (self.n_boot + self.block - 1) // self.block if self.n_boot else 0

    def _generated(self) -> Iterator[torch.Tensor]:
        """(rows, units) float32 counts of consecutive blocks, drawn from the seeded stream."""
        m = self.n_units
        for i, start in enumerate(range(0, self.n_boot, self.block)):
            rows = min(self.block, self.n_boot - start)
            if self.poisson is not None:
                yield self.poisson.counts(start, start + rows).to(torch.float32)
                continue
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
        if self.poisson is not None:        # uint8 already, in blocks: the draws' temporaries stay O(block)
            for start in range(0, self.n_boot, self.block):
                out[start:start + self.block] = self.poisson.counts(start, min(self.n_boot, start + self.block))
            return out
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
            totals = resample_sizes(counts, self.sizes, None if self.poisson is not None else self.n)
            block = ResampleBlock(counts.to(self.device), self.units, totals)
            del counts
            yield block
            del block                   # the generator's frame must not keep the last block alive


class ResampleBlock:
    """One block of resamples, with the derived operands every consumer needs computed once per block (under a
    lock: the calibrators of a block may be resampled side by side, see :func:`for_each`)."""

    def __init__(self, counts: torch.Tensor, units: Optional[torch.Tensor] = None,
                 totals: Optional[np.ndarray] = None) -> None:
        self.counts = counts                    # (R_b, units) float32 draw counts, rows sum to the number of units
        self.units = units                      # (N,) group of each sample, or None: the units are the samples
        # (R_b,) float64 samples in each resample (N when the units are the samples)
        self.totals = np.full(counts.shape[0], float(counts.shape[1])) if totals is None else totals
        self._cache: dict[str, torch.Tensor] = {}
        self._lock = threading.RLock()          # re-entrant: panels() builds fluct inside its own build

    def __len__(self) -> int:
        return self.counts.shape[0]

    @property
    def fluct(self) -> torch.Tensor:
        """(R_b, units) float32 counts - 1."""
        with self._lock:
            if "fluct" not in self._cache:
                self._cache["fluct"] = self.counts - 1.0
            return self._cache["fluct"]

    @property
    def fluct_t(self) -> torch.Tensor:
        """(units, R_b) contiguous: sparse @ dense is several times faster with a contiguous dense operand."""
        with self._lock:
            if "fluct_t" not in self._cache:
                self._cache["fluct_t"] = self.fluct.T.contiguous()
            return self._cache["fluct_t"]

    def unit_panels(self, width: int = 32) -> list[torch.Tensor]:
        """The fluctuation as (units, width) contiguous float32 CPU panels, the layout sparse @ dense is fastest
        with (see calibview.core.stats.grid); built once per block, shared by every calibrator."""
        key = f"unit_panels{width}"
        with self._lock:
            if key not in self._cache:
                f = self.fluct.cpu()
                self._cache[key] = [f[p:p + width].T.contiguous() for p in range(0, f.shape[0], width)]
            return self._cache[key]

    def panels(self, width: int = 32) -> list[torch.Tensor]:
        """Like :meth:`unit_panels`, per sample: (N, width) panels, each sample carrying its group's count."""
        if self.units is None:
            return self.unit_panels(width)
        key = f"panels{width}"
        with self._lock:
            if key not in self._cache:
                f = self.fluct.cpu()
                self._cache[key] = [f[p:p + width].T[self.units].contiguous() for p in range(0, f.shape[0], width)]
            return self._cache[key]

    def fluct_as(self, dtype: torch.dtype) -> torch.Tensor:
        """:attr:`fluct` (R_b, units) in ``dtype``, converted once per block."""
        key = f"fluct_{dtype}"
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self.fluct.to(dtype)
            return self._cache[key]


#: the largest split (rows x classes) whose calibrators the engine resamples side by side with :func:`for_each`.
#: A second thread holds its own temporaries and keeps its own malloc arena: at 50,000 x 1,000 the none+ts
#: report (1000 resamples) peaked 130-150 MB higher side by side, 1.7-1.8x its float32 logits against 1.35-1.45x
#: one calibrator at a time (the target is 1.5x), and 2,000,000 x 1,000 would pass its 1.5 GB. Below this size
#: (the CIFAR-100 demo is 1,000,000) the engine's fixed footprint dominates and the threads buy the time.
PARALLEL_MAX_ENTRIES = 10_000_000
_POOL: list = []
_PREFIX = "calibview-resample"
T = TypeVar("T")


def for_each(fn: Callable[[T], None], items: Sequence[T], parallel: bool = True) -> None:
    """``fn(item)`` for each of ``items``: one thread per item (up to the CPU count) when ``parallel`` and there
    are several, else in turn. Every call has returned before this does, and the first error (a cancel included)
    is raised then, so no thread outlives the call. Much of a calibrator's resampling runs on one core (the
    SmoothECE grids, the isotonic fits, the sorts); side by side, the 1000 resamples of a 2 x 50,000 x 1,000
    none+ts report took 4.1-4.4 s against 4.2-5.6 s (medians 4.2 and 4.7, four interleaved pairs), and those of
    the 7 calibrators of the CIFAR-100 demo 4.5-5.9 s against 5.0-7.5 s, on the 2-core VM (2026-12-06)."""
    # serially inside a pool thread: a nested call would wait for workers that are all waiting for it
    if (not parallel or len(items) < 2 or (os.cpu_count() or 1) < 2
            or threading.current_thread().name.startswith(_PREFIX)):
        for item in items:
            fn(item)
        return
    if not _POOL:
        _POOL.append(concurrent.futures.ThreadPoolExecutor(os.cpu_count(), thread_name_prefix=_PREFIX))
    futures = [_POOL[0].submit(fn, item) for item in items]
    concurrent.futures.wait(futures)
    for f in futures:
        f.result()              # raises the first failure, in the items' order


def resample_sizes(counts: torch.Tensor, sizes: Optional[torch.Tensor], n: Optional[int] = None) -> np.ndarray:
    """(R,) float64 samples in each resample of ``counts`` (R, units): ``n`` when given and ``sizes`` is None (a
    multinomial resample of the samples always holds N), else the counts weighted by the units' ``sizes`` (None:
    one sample each), summed exactly in float64 in steps of 64 resamples."""
    if n is not None and sizes is None:
        return np.full(counts.shape[0], float(n))
    out = []
    for a in range(0, counts.shape[0], 64):
        c = counts[a:a + 64].cpu().double()
        out.append(c.sum(dim=1) if sizes is None else c @ sizes.cpu())
    return torch.cat(out).numpy() if out else np.zeros(0)


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


# --- the Poisson bootstrap ----------------------------------------------------------------------------------------

#: rows of a shard per generator: fixed, so draws do not depend on chunking or on the memory budget
BLOCK_ROWS = 1 << 16
#: Poisson(1)'s CDF at 0, 1, ..., 24 (the probability of a count above 24 is below 1e-25)
_CDF = np.cumsum([math.exp(-1.0) / math.factorial(j) for j in range(25)])
#: the CDF as uint32 thresholds: a draw u counts j when _THRESHOLDS[j - 1] <= u < _THRESHOLDS[j]
_THRESHOLDS = np.minimum(np.floor(_CDF * 2.0 ** 32), 2.0 ** 32 - 1).astype(np.uint32)
_DRAWS, _GROUPS = 0x5EED_D7A, 0x6E0_0F5   # stream tags: the weights and the group assignment never share a stream


def _generator(seed: int, shard: int, block: int, tag: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, shard, block, tag])))


@dataclass(frozen=True)
class PoissonScheme:
    """The Poisson resamples of a split stored as shards of ``segments`` rows each (one file: ``(N,)``).

    ``groups``: None to resample samples, else the number of groups of each row block, shard-major
    (:func:`poisson_scheme` chooses them)."""

    segments: tuple[int, ...]
    seed: int
    groups: Optional[tuple[int, ...]] = None

    @property
    def n(self) -> int:
        """Samples of the split."""
        return int(sum(self.segments))

    @cached_property
    def _blocks(self) -> list[tuple[int, int, int, int, int]]:
        """(shard, block, first split row, rows, first unit) of every row block, in split order."""
        out, row, unit, i = [], 0, 0, 0
        for s, n_s in enumerate(self.segments):
            for j, a in enumerate(range(0, n_s, BLOCK_ROWS)):
                rows = min(BLOCK_ROWS, n_s - a)
                out.append((s, j, row + a, rows, unit))
                unit += rows if self.groups is None else self.groups[i]
                i += 1
            row += n_s
        return out

    @property
    def starts(self) -> list[int]:
        """The split row where each shard starts."""
        return [int(a) for a in np.cumsum((0,) + self.segments[:-1])]

    @property
    def n_units(self) -> int:
        """Resampling units: N, or the number of groups."""
        return self.n if self.groups is None else int(sum(self.groups))

    def _width(self, i: int) -> int:
        return self._blocks[i][3] if self.groups is None else self.groups[i]

    def segment_blocks(self, shard: int) -> list[int]:
        """The indices (in :attr:`_blocks`) of the row blocks of ``shard``."""
        return [i for i, b in enumerate(self._blocks) if b[0] == shard]

    def unit_range(self, shard: int) -> tuple[int, int]:
        """The units [first, end) of ``shard``: contiguous, since groups never span shards."""
        idx = self.segment_blocks(shard)
        if not idx:
            first = sum(self._width(i) for i, b in enumerate(self._blocks) if b[0] < shard)
            return first, first
        return self._blocks[idx[0]][4], self._blocks[idx[-1]][4] + self._width(idx[-1])

    def block_units(self, i: int) -> np.ndarray:
        """(rows,) int64 group of each row of block ``i``, numbered within the block (groups only)."""
        s, j, _, rows, _ = self._blocks[i]
        g = self.groups[i]
        out = np.empty(rows, np.int64)
        out[_generator(self.seed, s, j, _GROUPS).permutation(rows)] = np.arange(rows, dtype=np.int64) % g
        return out

    def units(self, shard: Optional[int] = None) -> Optional[torch.Tensor]:
        """(N,) int64 unit of each sample of the split (or, with ``shard``, of that shard's rows, numbered from
        the shard's first unit); None when the units are the samples."""
        if self.groups is None:
            return None
        idx = range(len(self._blocks)) if shard is None else self.segment_blocks(shard)
        base = 0 if shard is None else self.unit_range(shard)[0]
        parts = [self.block_units(i) + (self._blocks[i][4] - base) for i in idx]
        return torch.from_numpy(np.concatenate(parts) if parts else np.zeros(0, np.int64))

    def counts(self, a: int, b: int, shard: Optional[int] = None) -> torch.Tensor:
        """(b - a, units) uint8 Poisson(1) weights of resamples a..b-1 of every unit (or of ``shard``'s units)."""
        idx = range(len(self._blocks)) if shard is None else self.segment_blocks(shard)
        parts = [self._block_counts(i, a, b) for i in idx]
        if not parts:
            return torch.zeros((b - a, 0), dtype=torch.uint8)
        return torch.from_numpy(np.concatenate(parts, axis=1))

    def _block_counts(self, i: int, a: int, b: int) -> np.ndarray:
        """(b - a, width) uint8 weights of block ``i``. Its stream holds resample 0's draws, then resample 1's,
        ...; draw d is the (d % 2)-th 32-bit half of the stream's 64-bit output d // 2."""
        s, j = self._blocks[i][:2]
        width = self._width(i)
        first, count = a * width, (b - a) * width
        bit = np.random.PCG64(np.random.SeedSequence([self.seed, s, j, _DRAWS]))
        bit.advance(first // 2)                 # resample a's first draw, without drawing those before it
        raw = bit.random_raw((first % 2 + count + 1) // 2)
        u = raw.view(np.uint32)[first % 2:first % 2 + count]
        return _poisson_counts(u).reshape(b - a, width)


def _poisson_counts(u: np.ndarray) -> np.ndarray:
    """uint8 Poisson(1) counts of uniform uint32 draws ``u`` by the inverse CDF (at 2^-32 resolution): four
    comparisons cover 98 % of the mass, a search the rest."""
    c = (u >= _THRESHOLDS[0]).view(np.uint8).copy()
    for t in _THRESHOLDS[1:4]:
        c += (u >= t).view(np.uint8)
    tail = np.flatnonzero(u >= _THRESHOLDS[3])
    c[tail] = np.searchsorted(_THRESHOLDS, u[tail], side="right")
    return c


def poisson_scheme(segments, k: int, seed: int) -> PoissonScheme:
    """The Poisson scheme of a split of shards with ``segments`` rows each and K = ``k`` classes: samples up to
    UNIT_LIMIT rows in all, else groups, each row block getting its share of the multinomial scheme's total
    (between MIN_UNITS and MAX_UNITS groups, fewer for many classes), at least one."""
    segments = tuple(int(n) for n in segments)
    n = sum(segments)
    if n <= UNIT_LIMIT:
        return PoissonScheme(segments, int(seed))
    total = int(min(MAX_UNITS, max(MIN_UNITS, UNIT_ENTRIES // max(k, 1))))
    groups = [max(1, min(rows, round(total * rows / n)))
              for n_s in segments for rows in (min(BLOCK_ROWS, n_s - a) for a in range(0, n_s, BLOCK_ROWS))]
    return PoissonScheme(segments, int(seed), tuple(groups))
