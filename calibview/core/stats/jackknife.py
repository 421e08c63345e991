"""Leave-one-out (jackknife) values of the binned calibration errors, for BCa's acceleration
(:func:`calibview.core.stats.intervals.acceleration`).

Each metric is a function of per-bin sums, and leaving sample i out changes only the sums of the bins it is in,
so every leave-one-out value comes from the full split's sums in O(1) per sample (top-label metrics) or O(K) per
sample (class-wise ECE), never by recomputing the metric N times. The bins stay those of the full split, as in the
bootstrap (docs/DEFINITIONS.md): equal-width bins by each sample's own confidence; equal-mass groups (ACE) as
the full split's sort decided them.

Class-wise ECE needs each left-out sample's whole probability row, which a streamed split does not keep, so it is
jackknifed on a seeded random subsample of :data:`JACKKNIFE_ROWS` rows (the acceleration is then scaled as
:func:`~calibview.core.stats.intervals.acceleration` says).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from calibview.core.stats.metrics import equal_mass_order, equal_width_bin
from calibview.core.stats.rowwise import nonzero_2d

#: rows of the class-wise jackknife subsample
JACKKNIFE_ROWS = 2000


def _loo_sums(bins: np.ndarray, conf: np.ndarray, correct: np.ndarray, n_bins: int):
    """Per-bin count and gap (sum correct - sum conf), and each sample's bin."""
    count = np.bincount(bins, minlength=n_bins).astype(np.float64)
    gap = np.bincount(bins, weights=correct - conf, minlength=n_bins)
    return count, gap


def _ece_family_loo(bins: np.ndarray, conf: np.ndarray, correct: np.ndarray, n_bins: int) -> dict[str, np.ndarray]:
    """(N,) ECE, RMSCE and MCE of the split without sample i, for bins ``bins`` (N,) of ``n_bins``."""
    n = conf.shape[0]
    count, gap = _loo_sums(bins, conf, correct, n_bins)
    c, g = count[bins], gap[bins]
    g_new = g - (correct - conf)
    c_new = c - 1.0
    keep = c_new > 0
    safe = np.where(keep, c_new, 1.0)
    nonempty = count > 0
    sq = np.where(nonempty, gap * gap / np.where(nonempty, count, 1.0), 0.0)
    per = np.where(nonempty, np.abs(gap) / np.where(nonempty, count, 1.0), 0.0)
    ece = (np.abs(gap).sum() - np.abs(g) + np.abs(g_new)) / (n - 1)
    rms = np.sqrt(np.maximum(sq.sum() - sq[bins] + np.where(keep, g_new * g_new / safe, 0.0), 0.0) / (n - 1))
    # MCE: the largest per-bin gap among the other bins (the best, or the second best where i's bin is the best)
    order = np.argsort(per)
    top1, top2 = order[-1], (order[-2] if per.size > 1 else order[-1])
    others = np.where(bins == top1, per[top2] if per.size > 1 else 0.0, per[top1])
    mce = np.maximum(others, np.where(keep, np.abs(g_new) / safe, 0.0))
    return {"ece": ece, "rmsce": rms, "mce": mce}


def binned_loo(conf: np.ndarray, correct: np.ndarray, n_bins: int, order: Optional[np.ndarray] = None
               ) -> dict[str, np.ndarray]:
    """metric -> (N,) leave-one-out values of ECE, RMSCE, MCE (equal-width bins) and ACE (the split's equal-mass
    groups) of top-label ``conf`` (N,) in [0, 1] and ``correct`` (N,) 0/1 (``order``: the stable ascending order
    of ``conf``, if known); needs N >= 2."""
    conf = np.asarray(conf, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    out = _ece_family_loo(equal_width_bin(conf, n_bins), conf, correct, n_bins)
    order, group = equal_mass_order(conf, n_bins, order)
    em = np.empty_like(group)
    em[order] = group
    m = int(group[-1]) + 1 if group.size else 0
    out["ace"] = _ece_family_loo(em, conf, correct, m)["ece"]
    return out


def classwise_loo(p: np.ndarray, y: np.ndarray, sums: np.ndarray, n: int) -> np.ndarray:
    """(m,) class-wise ECE of the split without row i, for m rows of it: ``p`` (m, K) their class probabilities,
    ``y`` (m,) their labels, ``sums`` (K, B) the full split's per-class, per-bin sums of p - y
    (:meth:`~calibview.core.stats.metrics.StatsAccumulator.classwise_sums`), ``n`` the split's rows.

    Without row i, each of its entries leaves the sum s of its class's bin: the ECE's numerator changes by
    |s - d| - |s|, d = p - 1[y = k]. Nearly every entry is a non-label in its class's first bin (p <= 1/B), and
    there the change is -p where s >= p and +p where s <= 0: for every class whose first-bin sum is not in
    (0, 1/B), one matrix-vector product over the rows gives it (one pass, where the change entry by entry took
    eight). The rest, the labels, the entries above the first edge and every entry of a class whose first-bin
    sum lies in (0, 1/B), are recomputed exactly and their share replaced."""
    import torch

    p = np.ascontiguousarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    m = p.shape[0]
    k, b = sums.shape
    edge = np.linspace(0.0, 1.0, b + 1)[1]          # equal_width_bin's first edge, as when scoring
    s0 = sums[:, 0]
    sign = np.where(s0 > 0, -1.0, 1.0)
    # torch's product, on the engine's own threads (numpy's BLAS keeps a second pool that contends with them)
    change = torch.mv(torch.from_numpy(p), torch.from_numpy(sign)).numpy()
    fix = p > edge
    fix[:, (s0 > 0) & (s0 < edge)] = True
    fix[np.arange(m), y] = True
    r, c = nonzero_2d(fix)
    if r.size:
        v = p[r, c]
        d = v - (y[r] == c)
        s = sums[c, equal_width_bin(v, b)]
        exact = np.abs(s - d) - np.abs(s)
        change += np.bincount(r, weights=exact - sign[c] * v, minlength=m)
    return (np.abs(sums).sum() + change) / ((n - 1) * k)


def subsample_rows(n: int, seed: int) -> np.ndarray:
    """The sorted rows (at most :data:`JACKKNIFE_ROWS`) of the class-wise jackknife, seeded by the request's
    seed so a run's intervals are reproducible."""
    if n <= JACKKNIFE_ROWS:
        return np.arange(n)
    rng = np.random.default_rng(seed * 7_919 + 104_729)
    return np.sort(rng.choice(n, JACKKNIFE_ROWS, replace=False))


def add_chunk(out: dict, rows: np.ndarray, sums: dict, start: int, p, y, n: int) -> None:
    """Append to ``out[B]`` the leave-one-out class-wise ECE (:func:`classwise_loo`) of the subsample ``rows``
    (sorted split rows) that fall in one chunk: ``p`` (rows, K) float64 torch probabilities from split row
    ``start``, ``y`` (rows,) their labels, ``sums`` B -> (K, B) the split's class-wise sums, ``n`` its rows."""
    import torch

    sub = rows[np.searchsorted(rows, start):np.searchsorted(rows, start + p.shape[0])] - start
    idx = torch.from_numpy(sub).to(p.device)
    p_sub, y_sub = p[idx].cpu().numpy(), y[idx].cpu().numpy()
    for b, s in sums.items():
        out.setdefault(b, []).append(classwise_loo(p_sub, y_sub, s, n))
