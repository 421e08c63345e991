"""``auroc``: the macro one-vs-rest ROC AUC of the class probabilities, over the classes that have both positives
and negatives in the split (for K = 2 the plain AUC of p_1). Equal to scikit-learn's
``roc_auc_score(y, P, multi_class="ovr", average="macro")`` when every class is present; ties count 1/2.

It needs every probability, not the per-sample vectors the other metrics reduce to, so it is counted over the
(N, K) calibrated probabilities in chunks, never holding them:

- the positives of class c (samples labelled c, score p_c) are collected while the split is scored
  (:func:`positives`), sorted per class and padded into (B, P_max) batches of classes of similar size
  (+inf padding, at most ``PAD_ENTRIES`` per batch);
- a second pass over the chunks counts, for every entry p_jc, the positives of class c below and equal to it
  with one batched ``torch.searchsorted`` per batch: O(N K log P) time, O(N) memory besides one chunk;
- S_c = P_c N - GT_c - EQ_c/2 - P_c^2/2 (all pairs minus those with the positive above, half the ties, and the
  positive-positive pairs), AUC_c = S_c / (P_c (N - P_c)).

Measured (2026-11-30, 2-core VM, one thread, two calibrators none+ts, generated logits, n_boot 1000, user CPU
of ``calibview metrics``, before -> after the selective and AUROC columns): 10,000 x 100: 2.6 -> 3.0 s;
10,000 x 1,000: 3.5 -> 4.6 s, of which the counting pass is about 0.6 s per calibrator (two searches of
10M entries; applying the calibrator again is 0.1 s). Keeping the (N, K) probabilities instead would save only
that application and cost N K float64 of memory.

A resample's AUROC is not a function of sums over samples: each class needs its column sorted and the resample
weights cumulated in that order, O(n_boot N K) in all. The interval is computed only when that work is within
``AUROC_BOOT_WORK``; above, the point estimate comes with a note (see :func:`boot_note`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from calibview.core.stats.selective import cumulative_auc

#: n_boot x N x K above which auroc gets no bootstrap interval: about 1 s of CPU at the limit (measured: 2.0 s
#: for 100 resamples of 10,000 x 100, i.e. 2e-8 s per unit of work, 2026-11-30 on the 2-core VM)
AUROC_BOOT_WORK = 50_000_000
#: padded positives per batch of classes (float64: 32 MB)
PAD_ENTRIES = 1 << 22
_ROW_ENTRIES = 1 << 17


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

    labels : (N,) int64 numpy; pos : (N,) float64 tensor, the probability of each sample's label."""

    def __init__(self, labels: np.ndarray, pos: torch.Tensor, k: int) -> None:
        self.n, self.k = int(labels.shape[0]), k
        self.classes = scored_classes(labels, k)
        self.count = np.bincount(labels, minlength=k)
        dev = pos.device
        lab = torch.from_numpy(np.asarray(labels, np.int64)).to(dev)
        key = torch.argsort(pos, stable=True)
        key = key[torch.argsort(lab[key], stable=True)]          # by class, then value
        sorted_vals = pos[key]
        start = np.r_[0, np.cumsum(self.count)]
        self.batches: list[tuple[torch.Tensor, torch.Tensor]] = []
        by_size = self.classes[np.argsort(self.count[self.classes], kind="stable")]
        i = 0
        while i < len(by_size):
            j = i + 1
            while j < len(by_size) and (j + 1 - i) * self.count[by_size[j]] <= PAD_ENTRIES:
                j += 1
            cls = np.sort(by_size[i:j])           # class order within a batch: all K classes are arange(K)
            width = int(self.count[cls].max())
            pad = torch.full((len(cls), width), float("inf"), dtype=torch.float64, device=dev)
            for r, c in enumerate(cls):
                pad[r, :self.count[c]] = sorted_vals[start[c]:start[c + 1]]
            self.batches.append((torch.from_numpy(cls).to(dev), pad))
            i = j
        self.gt = torch.zeros(k, dtype=torch.int64, device=dev)
        self.eq = torch.zeros(k, dtype=torch.int64, device=dev)

    def add(self, p: torch.Tensor) -> None:
        """One chunk of rows of the (N, K) float64 probabilities (chunks in any order)."""
        pt = p.T.contiguous()                      # (K, rows): a class's entries contiguous (3x faster than a
        for cls, pad in self.batches:              # column gather per batch)
            vals = pt if cls.shape[0] == self.k else pt.index_select(0, cls)           # (B, rows)
            lt = torch.searchsorted(pad, vals, side="left")                  # positives strictly below
            le = torch.searchsorted(pad, vals, side="right")
            self.gt.index_add_(0, cls, lt.sum(dim=1))
            self.eq.index_add_(0, cls, (le - lt).sum(dim=1))

    def per_class(self) -> np.ndarray:
        """(K,) AUC of each class against the rest (NaN where undefined, and for class 0 when K = 2)."""
        out = np.full(self.k, np.nan)
        c = self.classes
        pc, n = self.count[c].astype(np.float64), float(self.n)
        gt, eq = self.gt.cpu().numpy()[c].astype(np.float64), self.eq.cpu().numpy()[c].astype(np.float64)
        out[c] = (pc * n - gt - 0.5 * eq - 0.5 * pc * pc) / (pc * (n - pc))
        return out

    def value(self) -> float:
        """The macro AUROC: the mean of :meth:`per_class` over the classes it is defined for (NaN if none)."""
        v = self.per_class()[self.classes]
        return float(v.mean()) if v.size else float("nan")


def auroc(probs: np.ndarray, labels: np.ndarray) -> float:
    """The macro AUROC of an in-memory (N, K) probability matrix (the counting pass in one chunk)."""
    p = torch.as_tensor(np.asarray(probs, np.float64))
    y = torch.as_tensor(np.asarray(labels, np.int64))
    counter = AurocCounter(np.asarray(labels, np.int64), positives(p, y), p.shape[1])
    counter.add(p)
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
