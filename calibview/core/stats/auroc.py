"""``auroc``: the macro one-vs-rest ROC AUC of the class probabilities, over the classes that have both positives
and negatives in the split (for K = 2 the plain AUC of p_1). Equal to scikit-learn's
``roc_auc_score(y, P, multi_class="ovr", average="macro")`` when every class is present; ties count 1/2.

It needs every probability, not the per-sample vectors the other metrics reduce to, and it needs the positives
(the samples labelled c, score p_c) before it can count anything: a rank statistic of a whole column. So the
engine collects the positives while it scores the split (:func:`positives`) and counts the (N, K) calibrated
probabilities chunk by chunk in a second pass (:class:`AurocCounter`), never holding them. For class c with P_c
positives, GT_c = sum over the entries p_jc of column c of the positives strictly below p_jc and EQ_c of those
equal to it; then S_c = P_c N - GT_c - EQ_c/2 - P_c^2/2 (all pairs minus those with the positive above, half the
ties, and the positive-positive pairs), AUC_c = S_c / (P_c (N - P_c)).

The counting is exact and costs a few elementwise passes per entry instead of a binary search: every
probability is put into a bucket by the leading bits of its float32 rounding (rounding is monotone, so a bucket
order never contradicts the value order), and a (K, buckets) table holds, per class and bucket, the number of
that class's positives in lower buckets. An entry in a bucket without positives reads its count from the table;
only entries that share a bucket with a positive (typically well under 1 %) are compared with those positives in
float64. Measured 2026-12-01 on the 2-core VM, one thread, 20,000 x 1,000 probabilities: 0.59 s against 0.80 s
for the batched ``torch.searchsorted`` it replaced (two searches per entry), with the same integer counts. With
many positives per class (hundreds of thousands of samples) the table widens, up to 64 MB, instead of falling back
to those searches: 200,000 x 500 counted in 1.1 s instead of 5.1 s (2026-12-06, same VM), and 2,000,000 x 1,000
(2,000 positives per class, 6.7 buckets per positive) at 15-21 ns per probability instead of 55. The searches
remain where the widest table has fewer than SEARCH_ABOVE buckets per positive (a few million samples).

The positives themselves always share a bucket with a positive (their own). So when a chunk comes with its labels
and first row, each positive's own count (its class's positives below and equal to it, known once they are sorted)
is read by row instead of compared: at 1,000,000 x 10, where every tenth entry is a positive, the counting of
none+ts took 1.2-1.4 s instead of 3.2-3.4 s (2026-12-07, same VM).

A resample's AUROC is not a function of sums over samples: each class needs its column sorted and the resample
weights cumulated in that order, O(n_boot N K) in all. The interval is computed only when that work is within
``AUROC_BOOT_WORK``; above, the point estimate comes with a note (see :func:`boot_note`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from calibview.core.stats.rowwise import nonzero_2d
from calibview.core.stats.selective import cumulative_auc

#: n_boot x N x K above which auroc gets no bootstrap interval: about 1 s of CPU at the limit (measured: 2.0 s
#: for 100 resamples of 10,000 x 100, i.e. 2e-8 s per unit of work, 2026-11-30 on the 2-core VM)
AUROC_BOOT_WORK = 50_000_000
#: entries of the (K, buckets) table of an AurocCounter (int32: 4 MB), so it stays in the CPU cache
TABLE_ENTRIES = 1 << 20
#: with many positives, the table grows to this many buckets per positive (the fewer share a bucket with an
#: entry, the fewer exact comparisons), up to WIDE_TABLE_ENTRIES (int32: 64 MB)
WIDE_PER_POSITIVE = 32
WIDE_TABLE_ENTRIES = 1 << 24
#: the fewest buckets per class when the table is narrowed for few positives
CLASS_BUCKETS = 4096
#: the bucket table is used while it has at least this many buckets per positive, else binary searches. Measured
#: 2026-12-06 on the 2-core VM (counting ns per probability, table vs search): 2,000,000 x 1,000 (6.7 buckets per
#: positive, the widest table) 15-21 vs 55; 2,000,000 x 100 (4.5) 23 vs 69; 4,000,000 x 100 (2.3) 46 vs 78;
#: 8,000,000 x 10 (1.9) 577 vs 147. At 4 the table wins wherever it was measured with margin to spare.
SEARCH_ABOVE = 4
#: positives a multi-valued bucket keeps for direct comparison (more: ranked by binary searches)
MULTI_WIDTH = 8
#: padded positives per batch of classes of the search path (float64: 32 MB)
PAD_ENTRIES = 1 << 22
#: probabilities counted at a time (float64: 2 MB)
_BLOCK_ENTRIES = 1 << 18
_ROW_ENTRIES = 1 << 17
#: the scored classes' columns are gathered before counting when they are at most this fraction of K
COLUMNS_GATHERED = 0.5


def scored_classes(labels: np.ndarray, k: int) -> np.ndarray:
    """The classes whose AUC is defined (both positives and negatives); only class 1 for K = 2."""
    count = np.bincount(labels, minlength=k)
    ok = (count > 0) & (count < labels.shape[0])
    if k == 2:
        ok[0] = False
    return np.flatnonzero(ok)


def positives(p: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(rows,) the probability of each row's label, read from the very matrix that is counted (same bits)."""
    return p.gather(1, y[:, None])[:, 0]


class AurocCounter:
    """Counts the pairs of the point estimate over chunks of probabilities (see the module docstring).

    labels : (N,) int64 numpy; pos : (N,) float64 tensor, the probability of each sample's label, read from the
    very matrix that is counted (same bits)."""

    def __init__(self, labels: np.ndarray, pos: torch.Tensor, k: int, tick=None) -> None:
        tick = tick or (lambda: None)           # a cancel check between the sorts (each ~0.5 s at N = 2,000,000)
        labels = np.asarray(labels, np.int64)
        self.n, self.k_all = int(labels.shape[0]), k
        self.classes = scored_classes(labels, k)
        self.count = np.bincount(labels, minlength=k)
        scored = np.zeros(k, dtype=bool)
        scored[self.classes] = True
        keep = scored[labels]
        pv = np.ascontiguousarray(pos.detach().cpu().numpy(), dtype=np.float64)[keep]
        pl = labels[keep]
        # Only the scored classes' columns are counted: with more classes than samples (ImageNet-21k on a test
        # set of 10,000) most classes have no positive, and gathering the others' columns first costs one pass
        # where counting them would cost several. The counts are then over those columns (``cols``), in order.
        self.cols, count, local = None, self.count, None
        if len(self.classes) <= COLUMNS_GATHERED * k:
            self.cols = torch.from_numpy(self.classes).to(pos.device)
            local = np.zeros(k, dtype=np.int64)
            local[self.classes] = np.arange(len(self.classes))
            pl, count, k = local[pl], self.count[self.classes], len(self.classes)
            scored = np.ones(k, dtype=bool)
        self.k = k
        # Buckets: the float32 bits of p shifted right by `shift`, minus `base`, clamped at 0 below the bucket of
        # the smallest nonzero positive; as narrow as the table allows between that positive and 1.
        # (exact zeros, e.g. from histogram binning, have bucket 0 to themselves: a range down to 0 would make
        # every bucket coarse)
        nonzero = pv[pv > 0]
        lo = int(_bucket_bits(nonzero.min() if nonzero.size else 1.0))
        hi = int(_bucket_bits(max(1.0, float(pv.max()) if pv.size else 1.0)))
        self.gt = np.zeros(k, dtype=np.int64)
        self.eq = np.zeros(k, dtype=np.int64)
        # The table is cache-sized (TABLE_ENTRIES) unless the positives are many: then as wide as WIDE_PER_POSITIVE
        # buckets per positive asks, up to WIDE_TABLE_ENTRIES (measured at 200,000 x 500, 400 positives per class:
        # 5.1 s by binary searches, 3.9 s with 5 buckets per positive, 1.3 s with 20, 1.1 s with 80).
        entries = min(WIDE_TABLE_ENTRIES, max(TABLE_ENTRIES, WIDE_PER_POSITIVE * pv.size))
        # Few positives in few classes: WIDE_PER_POSITIVE buckets per positive, at least CLASS_BUCKETS per class, are
        # as fast to count with, and cheaper to build (10,000 x 10: 0.5 ms of cumulative sums over 1M entries)
        entries = min(entries, max(WIDE_PER_POSITIVE * pv.size, CLASS_BUCKETS * k, 2 * k))
        self.shift, self.base, self.nb = _buckets(lo, hi, max(2, entries // max(k, 1)))
        # Beyond the widest table (millions of positives per class) nearly every entry would share a bucket with
        # a positive and need the exact comparison: binary searches among the class's sorted positives are then
        # the cheaper count, and the bucket table is never built.
        self.batches, self._own = None, None
        self._local = None if self.cols is None else local
        if pv.size > self.nb * max(len(self.classes), 1) / SEARCH_ABOVE:
            self.batches = _search_batches(pv, pl, np.flatnonzero(scored), count, pos.device)
            return
        key = pl * self.nb + self._bucket(pv)
        # The buckets that hold positives (``flagged``), from the positives sorted by bucket; the table is built in
        # place in int32 (a 64 MB table has no int64 or second copy beside it): the positives' count per bucket,
        # cumulated along each class's row, less each flagged bucket's own count (the count strictly below).
        # One stable sort by value serves both orders below: by (class, value) it is a stable sort of the classes
        # in that order (radix on int16: 0.03 ms at 10,000 positives), the same permutation as a lexsort of
        # (value, bucket key), which took 1.1 ms, since the bucket is monotone in the value within a class
        tick()
        by_value = np.argsort(pv, kind="stable")
        tick()
        small_cls = pl[by_value].astype(np.int16 if k < (1 << 15) else np.int32)
        order = by_value[np.argsort(small_cls, kind="stable")]   # by class, then value
        ks, vs = key[order], pv[order]
        self._own = _own_counts(pl[order], vs, np.flatnonzero(keep)[order], self.n)
        starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]) if ks.size else np.zeros(0, dtype=np.int64)
        flagged = ks[starts]
        f_count = np.diff(np.r_[starts, ks.size]).astype(np.int64)
        table = np.zeros(k * self.nb, dtype=np.int32)
        table[flagged] = f_count
        rows = table.reshape(k, self.nb)
        np.cumsum(rows, axis=1, dtype=np.int32, out=rows)
        table[flagged] -= f_count.astype(np.int32)
        self.table = table
        lo_f = np.minimum.reduceat(vs, starts) if ks.size else np.zeros(0)
        hi_f = np.maximum.reduceat(vs, starts) if ks.size else np.zeros(0)
        self._f_count, self._f_below = f_count, self.table[flagged].astype(np.int64)
        self.table[flagged] = -1 - np.arange(flagged.size, dtype=np.int32)
        self._f_value, self._f_multi = lo_f, lo_f != hi_f
        # A multi-valued bucket (positives of different values) with at most MULTI_WIDTH positives keeps its values,
        # padded with +inf, in one row of a small table: an entry there is compared with them directly instead of
        # ranked among all positives by binary searches (2.6 us per entry at 2,000,000 x 1,000, where these
        # entries were 0.3 % of all and a third of the counting time).
        small = np.flatnonzero(self._f_multi & (f_count <= MULTI_WIDTH))
        self._small_row = np.full(flagged.size, -1, dtype=np.int32)       # one per flagged bucket: up to N
        self._small_row[small] = np.arange(small.size, dtype=np.int32)
        self._small_vals = np.full((small.size, MULTI_WIDTH), np.inf)
        for o in range(MULTI_WIDTH):
            has = f_count[small] > o
            self._small_vals[has, o] = vs[starts[small[has]] + o]
        self.off = (np.arange(k, dtype=np.int32) * self.nb)[None, :]
        # for multi-valued buckets: positives by (class, rank of value among all positives)
        # (each positive's rank is the start of its value's run in one argsort: searching every positive among
        # the sorted ones took 0.8 s at 2,000,000 x 1,000)
        self._sorted = pv[by_value]
        run_start = np.where(np.r_[True, self._sorted[1:] != self._sorted[:-1]], np.arange(pv.size), 0)
        rank = np.empty(pv.size, dtype=np.int64)
        rank[by_value] = np.maximum.accumulate(run_start) if pv.size else run_start
        # sorted already in ``order``: by class, then value, and the rank grows with the value
        self._keys = (pl * (pv.size + 1) + rank)[order]
        self._start = np.r_[0, np.cumsum(np.where(scored, count, 0))][:-1]

    def _bucket(self, v: np.ndarray) -> np.ndarray:
        """int32 bucket of each value (same shape), in [0, nb)."""
        b = _bucket_bits(v) >> self.shift
        b -= self.base
        return np.clip(b, 0, self.nb - 1, out=b)

    def add(self, p: torch.Tensor, labels: Optional[np.ndarray] = None, start: Optional[int] = None) -> None:
        """One chunk of rows of the (N, K) float64 probabilities (chunks in any order). With the chunk's
        ``labels`` (rows,) int64 and its first row ``start``, the positives' own entries are not compared but
        read from the counts kept when the counter was built (the same integers, fewer comparisons)."""
        if self.batches is not None:
            self._search(p if self.cols is None else p.index_select(1, self.cols))
            return
        own = None
        if labels is not None and start is not None and self._own is not None:
            own = self._own_entries(np.asarray(labels, np.int64), int(start))
        gather = self.cols is not None and p.device.type == "cpu"
        if self.cols is not None and not gather:
            p = p.index_select(1, self.cols)
        p = np.ascontiguousarray(p.detach().cpu().numpy(), dtype=np.float64)
        if gather:
            # numpy's gather of the columns: 0.9 ms against torch's index_select 2.3 ms for 8,000 of 96 x 21,843
            p = np.take(p, self.classes, axis=1)
        step = max(1, _BLOCK_ENTRIES // max(self.k, 1))
        blocks = [(p[a:a + step], None if own is None else _rows_of(own, a, a + step))
                  for a in range(0, p.shape[0], step)]          # small temporaries, in cache
        pool = _pool()
        if pool is None or len(blocks) < 2:
            parts = [self._count(*b) for b in blocks]
        else:                                   # numpy releases the GIL in these loops: one block per core
            parts = list(pool.map(lambda b: self._count(*b), blocks))
        for gt, eq in parts:
            self.gt += gt
            self.eq += eq

    def _search(self, p: torch.Tensor) -> None:
        """The counts of one chunk by batched binary searches (``torch.searchsorted``) among each class's sorted
        positives, padded with +inf into (classes, P_max) batches."""
        pt = p.T.contiguous()                      # (K, rows): a class's entries contiguous
        for cls, pad in self.batches:
            vals = pt if cls.shape[0] == self.k else pt.index_select(0, cls)           # (B, rows)
            lt = torch.searchsorted(pad, vals, side="left")                  # positives strictly below
            le = torch.searchsorted(pad, vals, side="right")
            idx = cls.cpu().numpy()
            self.gt[idx] += lt.sum(dim=1).cpu().numpy()
            self.eq[idx] += (le - lt).sum(dim=1).cpu().numpy()

    def _own_entries(self, labels: np.ndarray, start: int) -> tuple[np.ndarray, ...]:
        """(row in the chunk, column counted, own strictly-below count, own equal count) of the chunk's positives
        of scored classes, rows ascending."""
        lt, eq = self._own
        rows = np.arange(labels.shape[0])
        lt_r = lt[start:start + labels.shape[0]]
        has = lt_r >= 0
        rows, cols = rows[has], labels[has]
        if self._local is not None:
            cols = self._local[cols]
        return rows, cols, lt_r[has], eq[start:start + labels.shape[0]][has]

    def _count(self, p: np.ndarray, own: Optional[tuple] = None) -> tuple[np.ndarray, np.ndarray]:
        """(gt, eq) (K,) int64 counts of one block of rows (no shared state: blocks run in parallel); ``own``:
        its positives from :meth:`_own_entries`, rows relative to the block."""
        gt = np.zeros(self.k, dtype=np.int64)
        eq = np.zeros(self.k, dtype=np.int64)
        idx = self._bucket(p)
        idx += self.off
        t = self.table.take(idx)
        if own is not None:
            # a non-negative table entry counts as that many positives below: the exact own count, never flagged
            rows, cols, lt, e = own
            t[rows, cols] = lt
            eq += np.bincount(cols, weights=e, minlength=self.k).astype(np.int64)
        flag = t < 0
        n_flag = int(np.count_nonzero(flag))
        if not n_flag:
            gt += t.sum(axis=0, dtype=np.int64)
        elif n_flag * 8 < t.size:
            # few entries share a bucket with a positive: compare just those
            gt += np.maximum(t, 0).sum(axis=0, dtype=np.int64)
            rows, cols = nonzero_2d(flag)
            e_lt, e_eq = self._flagged(-1 - t[rows, cols], p[rows, cols], cols)
            # float64 bincounts of integers: exact up to 2^53
            gt += np.bincount(cols, weights=e_lt, minlength=self.k).astype(np.int64)
            eq += np.bincount(cols, weights=e_eq, minlength=self.k).astype(np.int64)
        else:
            # many ties (piecewise-constant calibrators, exact zeros): the same arithmetic on the whole block
            j = np.where(flag, -1 - t, 0)
            e_lt, e_eq = self._flagged(j, p, np.broadcast_to(np.arange(self.k), p.shape), flag)
            gt += np.where(flag, e_lt, t).sum(axis=0, dtype=np.int64)
            eq += np.where(flag, e_eq, 0).sum(axis=0, dtype=np.int64)
        return gt, eq

    def _flagged(self, j: np.ndarray, e: np.ndarray, cols: np.ndarray, where: Optional[np.ndarray] = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """(lt, eq) int64 for values ``e`` in flagged buckets ``j`` of classes ``cols`` (same shapes; ``where``
        marks the entries that are in a flagged bucket, None: all)."""
        u, m = self._f_value[j], self._f_count[j]
        lt = self._f_below[j] + m * (e > u)
        eq = m * (e == u)
        multi = self._f_multi[j] if where is None else self._f_multi[j] & where
        if multi.any():
            jm, em = j[multi], e[multi]
            row = self._small_row[jm]
            small = row >= 0
            lt_m = np.empty(jm.size, dtype=np.int64)
            eq_m = np.empty(jm.size, dtype=np.int64)
            if small.any():
                vals, es = self._small_vals[row[small]], em[small][:, None]
                lt_m[small] = self._f_below[jm[small]] + (vals < es).sum(axis=1)
                eq_m[small] = (vals == es).sum(axis=1)
            if not small.all():
                lt_m[~small], eq_m[~small] = self._multi(cols[multi][~small], em[~small])
            lt[multi], eq[multi] = lt_m, eq_m
        return lt, eq

    def _multi(self, cols: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lt, eq): positives of class ``cols`` strictly below and equal to each value ``e``, by their ranks."""
        base = cols * (self._sorted.size + 1)
        left = np.searchsorted(self._keys, base + np.searchsorted(self._sorted, e, side="left"), side="left")
        right = np.searchsorted(self._keys, base + np.searchsorted(self._sorted, e, side="right"), side="left")
        return left - self._start[cols], right - left

    def per_class(self) -> np.ndarray:
        """(K,) AUC of each class against the rest (NaN where undefined, and for class 0 when K = 2)."""
        out = np.full(self.k_all, np.nan)
        c = self.classes
        at = c if self.cols is None else np.arange(len(c))          # their places in gt and eq
        pc, n = self.count[c].astype(np.float64), float(self.n)
        gt, eq = self.gt[at].astype(np.float64), self.eq[at].astype(np.float64)
        out[c] = (pc * n - gt - 0.5 * eq - 0.5 * pc * pc) / (pc * (n - pc))
        return out

    def value(self) -> float:
        """The macro AUROC: the mean of :meth:`per_class` over the classes it is defined for (NaN if none)."""
        v = self.per_class()[self.classes]
        return float(v.mean()) if v.size else float("nan")


def _search_batches(pv: np.ndarray, pl: np.ndarray, classes: np.ndarray, count: np.ndarray, device
                    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(classes, (B, P_max) sorted positives padded with +inf) batches of classes of similar size, at most
    ``PAD_ENTRIES`` entries each; ``pv``, ``pl`` the positives' values and classes."""
    order = np.lexsort((pv, pl))                      # by class, then value
    sorted_vals = torch.from_numpy(pv[order])
    start = np.r_[0, np.cumsum(np.bincount(pl, minlength=count.shape[0]))]
    batches = []
    by_size = classes[np.argsort(count[classes], kind="stable")]
    i = 0
    while i < len(by_size):
        j = i + 1
        while j < len(by_size) and (j + 1 - i) * count[by_size[j]] <= PAD_ENTRIES:
            j += 1
        cls = np.sort(by_size[i:j])                   # class order within a batch: all K classes are arange(K)
        pad = torch.full((len(cls), int(count[cls].max())), float("inf"), dtype=torch.float64)
        for r, c in enumerate(cls):
            pad[r, :count[c]] = sorted_vals[start[c]:start[c + 1]]
        batches.append((torch.from_numpy(cls).to(device), pad.to(device)))
        i = j
    return batches


def _own_counts(cls: np.ndarray, vals: np.ndarray, rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(N,) int32 pair: for each row whose label is a scored class, the number of that class's positives strictly
    below its own probability and equal to it (itself included); -1 for the other rows. ``cls``, ``vals``,
    ``rows``: the positives' classes, values and rows, sorted by class, then value."""
    lt = np.full(n, -1, dtype=np.int32)
    eq = np.full(n, -1, dtype=np.int32)
    if not cls.size:
        return lt, eq
    at = np.arange(cls.size)
    new_class = np.r_[True, cls[1:] != cls[:-1]]
    new_run = new_class | np.r_[True, vals[1:] != vals[:-1]]
    class_start = np.maximum.accumulate(np.where(new_class, at, 0))
    run_start = np.maximum.accumulate(np.where(new_run, at, 0))
    run_len = np.diff(np.r_[np.flatnonzero(new_run), cls.size])
    lt[rows] = run_start - class_start
    eq[rows] = np.repeat(run_len, run_len)
    return lt, eq


def _rows_of(own: tuple, a: int, b: int) -> tuple:
    """The entries of ``own`` (rows ascending) with rows in [a, b), rows made relative to a."""
    rows = own[0]
    i, j = np.searchsorted(rows, (a, b))
    return (rows[i:j] - a,) + tuple(x[i:j] for x in own[1:])


_POOL: list = []


def _pool():
    """A thread pool of torch's intra-op thread count (None for one thread), made once."""
    if not _POOL:
        import concurrent.futures

        n = torch.get_num_threads()
        _POOL.append(concurrent.futures.ThreadPoolExecutor(n, thread_name_prefix="auroc") if n > 1 else None)
    return _POOL[0]


def _buckets(lo: int, hi: int, width: int) -> tuple[int, int, int]:
    """(shift, base, nb): the float32 bit patterns ``lo`` .. ``hi`` shifted right by ``shift`` fit ``width``
    buckets, bucket 0 below ``lo``'s."""
    shift = 0
    while (hi >> shift) - (lo >> shift) + 2 > width:
        shift += 1
    base = (lo >> shift) - 1
    return shift, base, (hi >> shift) - base + 1


def _bucket_bits(v) -> np.ndarray:
    """The int32 bit pattern of ``v`` rounded to float32: non-decreasing in v for v >= 0."""
    return np.asarray(v, dtype=np.float32).view(np.int32)


def auroc(probs: np.ndarray, labels: np.ndarray) -> float:
    """The macro AUROC of an in-memory (N, K) probability matrix (the counting pass in one chunk)."""
    p = torch.as_tensor(np.asarray(probs, np.float64))
    y = torch.as_tensor(np.asarray(labels, np.int64))
    counter = AurocCounter(np.asarray(labels, np.int64), positives(p, y), p.shape[1])
    counter.add(p, y.numpy(), 0)
    return counter.value()


def boot_work(n_boot: int, n: int, k: int) -> int:
    """The work of an AUROC interval, resamples x samples x classes, compared with :data:`AUROC_BOOT_WORK`."""
    return int(n_boot) * int(n) * int(k)


def boot_note(n_boot: int, n: int, k: int) -> Optional[str]:
    """None when the AUROC interval is affordable, else the note that says why there is none."""
    if boot_work(n_boot, n, k) <= AUROC_BOOT_WORK:
        return None
    return (f"no AUROC interval: {n_boot} resamples x {n:,} samples x {k} classes is above the budget of "
            f"{AUROC_BOOT_WORK:.0e} (calibview.core.stats.auroc.AUROC_BOOT_WORK); the point estimate is exact")


def resampled_auroc(probs: np.ndarray, labels: np.ndarray, counts, units: Optional[torch.Tensor] = None
                    ) -> np.ndarray:
    """(R,) macro AUROC of each resample: ``counts`` (R, units) draw counts (uint8 or float, torch or numpy),
    ``units`` (N,) the unit of each sample or None. Per resample, the mean over the classes that have both
    positives and negatives in it. O(R N K)."""
    probs = np.asarray(probs, np.float64)
    labels = np.asarray(labels, np.int64)
    counts = torch.as_tensor(counts)
    r, (n, k) = counts.shape[0], probs.shape
    step = max(1, _ROW_ENTRIES // max(n, 1))
    total = np.zeros(r)
    present = np.zeros(r)
    for c in scored_classes(labels, k):
        order = np.argsort(-probs[:, c], kind="stable")
        sv = probs[order, c]
        ends = np.flatnonzero(np.r_[sv[1:] != sv[:-1], True])
        is_pos = torch.from_numpy((labels[order] == c).astype(np.float64))
        ends_t = torch.from_numpy(ends)
        idx = torch.from_numpy(order) if units is None else units.cpu()[torch.from_numpy(order)]
        for a in range(0, r, step):
            w = counts[a:a + step].index_select(1, idx.to(counts.device)).cpu().double()
            cum_all = torch.cumsum(w, dim=1).index_select(1, ends_t)
            cum_pos = torch.cumsum(w * is_pos, dim=1).index_select(1, ends_t)
            cneg = cum_all - cum_pos
            dpos = torch.diff(cum_pos, dim=1, prepend=torch.zeros_like(cum_pos[:, :1]))
            auc = cumulative_auc(cneg, dpos, torch.diff(cneg, dim=1, prepend=torch.zeros_like(cneg[:, :1]))).numpy()
            ok = ~np.isnan(auc)
            total[a:a + step] += np.where(ok, auc, 0.0)
            present[a:a + step] += ok
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(present > 0, total / np.maximum(present, 1), np.nan)
