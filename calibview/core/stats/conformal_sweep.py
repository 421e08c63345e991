"""Conformal sets at any alpha from cached scores: what the window's alpha slider reads.

For one (calibrator, score), :class:`SetSweep` holds the calibration split's label scores sorted, and, for the
evaluation split, each row's class scores in ascending order and its label's score. A set is a top-m set (every
score is nondecreasing along the classes sorted by probability; :mod:`calibview.core.stats.conformal`), so at a
level alpha only the quantile qhat changes: the set size of a row is the count of its sorted scores at most qhat
(a batched binary search, O(N log K)) and its label is covered when its label's score is at most qhat, O(N).
Nothing is re-read, re-ranked or re-scored when alpha moves. The sets are those of :func:`conformal.set_stats`
with the same scores and qhat (ties included), non-randomised or randomised alike (the uniforms are in the
cached scores).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from calibview.core.stats import conformal as cf

__all__ = ["SetSweep", "SweepPoint"]


@dataclass(frozen=True)
class SweepPoint:
    """The sets at one ``alpha``: ``qhat`` (+inf: every set holds all K classes), ``coverage`` and ``mean_size``
    over the evaluation split, ``class_coverage`` (K,) float64 (NaN for a class absent from it) with
    ``class_n`` (K,) int64 its samples per class, ``size_fraction`` (K + 1,) the fraction of rows per set size
    0..K, ``empty_frac`` and ``full_frac``, and ``worst_class`` the lowest coverage of a present class."""

    alpha: float
    qhat: float
    coverage: float
    mean_size: float
    class_coverage: np.ndarray
    class_n: np.ndarray
    size_fraction: np.ndarray
    empty_frac: float
    full_frac: float
    worst_class: float


class SetSweep:
    """The cached scores of one (calibrator, score): ``calibration`` (n,) sorted label scores of the calibration
    split; ``ranked`` (N, K) float64 class scores of each evaluation row in ascending order; ``label_scores``
    (N,) the score of each row's label; ``labels`` (N,) int64. ``at(alpha)`` is O(N log K)."""

    def __init__(self, calibration: np.ndarray, ranked: np.ndarray, label_scores: np.ndarray,
                 labels: np.ndarray) -> None:
        self.calibration = np.sort(np.asarray(calibration, dtype=np.float64).reshape(-1))
        self.ranked = torch.from_numpy(np.ascontiguousarray(ranked, dtype=np.float64))
        self.label_scores = np.asarray(label_scores, dtype=np.float64).reshape(-1)
        self.labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        self.k = int(self.ranked.shape[1])
        self.class_n = np.bincount(self.labels, minlength=self.k).astype(np.int64)

    @property
    def nbytes(self) -> int:
        """The memory the cached scores take, in bytes."""
        return int(self.ranked.numel() * 8 + self.calibration.nbytes + self.label_scores.nbytes
                   + self.labels.nbytes)

    @staticmethod
    def rows(probs: np.ndarray, labels: np.ndarray, score: str, *, lam: float = cf.RAPS_LAMBDA,
             kreg: int = cf.RAPS_KREG, u: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
        """((n, K) ascending class scores, (n,) label scores) of a chunk of evaluation rows: ``probs`` (n, K)
        float64, ``labels`` (n,), ``u`` (n,) the randomised scores' uniforms (None: non-randomised)."""
        r = cf.rank(np.asarray(probs, dtype=np.float64))
        return (cf.ranked_scores(r, score, lam=lam, kreg=kreg, u=u),
                cf.true_scores(probs, labels, score, lam=lam, kreg=kreg, u=u, ranked=r))

    def qhat(self, alpha: float) -> float:
        """The conformal quantile at ``alpha`` (:func:`conformal.quantile_index`), +inf when n is too small."""
        i = cf.quantile_index(self.calibration.shape[0], alpha)
        return float("inf") if i > self.calibration.shape[0] else float(self.calibration[i - 1])

    def at(self, alpha: float) -> SweepPoint:
        """The :class:`SweepPoint` at ``alpha`` in (0, 1)."""
        q = self.qhat(alpha)
        n = self.labels.shape[0]
        thr = torch.full((n, 1), q, dtype=torch.float64)
        sizes = torch.searchsorted(self.ranked, thr, right=True).reshape(-1).numpy()
        covered = self.label_scores <= q
        hits = np.bincount(self.labels, weights=covered, minlength=self.k)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_class = np.where(self.class_n > 0, hits / np.maximum(self.class_n, 1), np.nan)
        frac = np.bincount(sizes, minlength=self.k + 1)[: self.k + 1] / max(n, 1)
        present = per_class[self.class_n > 0]
        return SweepPoint(alpha=float(alpha), qhat=q, coverage=float(covered.mean()) if n else float("nan"),
                          mean_size=float(sizes.mean()) if n else float("nan"), class_coverage=per_class,
                          class_n=self.class_n, size_fraction=frac, empty_frac=float(frac[0]),
                          full_frac=float(frac[self.k]),
                          worst_class=float(present.min()) if present.size else float("nan"))
