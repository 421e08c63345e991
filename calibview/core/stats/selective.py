"""Selective prediction: the risk-coverage curve, AURC and E-AURC, accuracy at coverage, coverage at accuracy, the
AUROC of confidence for correctness, the high-confidence audit and per-class thresholds.

Definitions (also in docs/DEFINITIONS.md and, one line each, in METRIC_HELP):

- Sort by confidence descending; samples with equal confidence enter together (a *tie group*). The selective risk
  r(k) = errors among the first k / k is evaluated at the end of each tie group and held across it.
  AURC = (1/N) sum_{k=1..N} r(k). AURC* uses the same N and error count with every correct sample first:
  r*(k) = max(0, k - C)/k, C = number correct. E-AURC = AURC - AURC*.
- Accuracy at coverage q: selective accuracy over the first ceil(qN) samples, the tie group that crosses that
  position included whole. Coverage at accuracy a: the largest k/N at a tie-group end whose selective accuracy is
  >= a (0 if none).
- AUROC of confidence for correctness: P(conf of a correct sample > conf of a wrong one), ties count 1/2.
- Per-class threshold for class c and target precision P: the smallest t (among the confidences of the samples
  predicted c) such that the samples predicted c with confidence >= t have precision >= P; None when none does.

Weighted versions (bootstrap resamples, weight = how often a sample was drawn) count k in resampled units: the
samples are sorted once, and all resamples of a block come from cumulative sums of their (R, N) weights in that
order, read at the tie-group ends: O(R N) per block. Comparisons with a target (accuracy >= a, precision >= P)
allow 1e-12 of rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch
from scipy.special import ndtri

#: coverages and accuracies of the metric columns acc_at_cov80 ... and cov_at_acc95 ...
COVERAGES = {"acc_at_cov80": 0.80, "acc_at_cov90": 0.90, "acc_at_cov95": 0.95}
ACCURACIES = {"cov_at_acc95": 0.95, "cov_at_acc99": 0.99}
SELECTIVE_METRICS = ("aurc", "e_aurc", *COVERAGES, *ACCURACIES, "auroc_correct")
#: slack when a rate is compared with a target
TOL = 1e-12
#: (rows x N) weights handled at a time when resamples are cumulated (8 MB in float64). Measured 2026-12-01 on
#: the 2-core VM, 500 resamples of 50,000 samples, ns per entry for 2^17 / 2^18 / 2^20 / 2^21 entries: 22.9 /
#: 15.7 / 14.0 / 13.1 with torch's two threads sleeping between operations (OMP_WAIT_POLICY=PASSIVE, as the
#: programs set it), 12.6 / 18.7 / 14.9 / 15.8 with one thread: small blocks pay a thread wake-up per operation,
#: large ones leave the cache
_ROW_ENTRIES = 1 << 20


@dataclass(frozen=True)
class RankOrder:
    """The samples sorted once by confidence, descending (stable), and their tie groups."""

    order: np.ndarray       # (N,) sample at each sorted position
    ends: np.ndarray        # (G,) last sorted position of each tie group
    conf: np.ndarray        # (N,) sorted confidences
    err: np.ndarray         # (N,) float64 1 - correct, sorted

    @property
    def n(self) -> int:
        """The number of samples N."""
        return int(self.order.shape[0])


def rank_order(conf: np.ndarray, correct: np.ndarray, ascending: Optional[np.ndarray] = None) -> RankOrder:
    """Sort the samples once: conf (N,) confidences in [0, 1], correct (N,) 0/1; see :class:`RankOrder`.
    ``ascending``: their stable ascending order when known (:attr:`SampleStats.conf_order`), turned around
    instead of sorting again."""
    conf = np.asarray(conf, dtype=np.float64)
    order = np.argsort(-conf, kind="stable") if ascending is None else descending(conf, ascending)
    sc = conf[order]
    ends = np.flatnonzero(np.r_[sc[1:] != sc[:-1], True]) if sc.size else np.zeros(0, np.int64)
    return RankOrder(order, ends, sc, 1.0 - np.asarray(correct, dtype=np.float64)[order])


def descending(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """(N,) the stable descending order of (N,) ``values`` (``np.argsort(-values, kind="stable")``) from their
    stable ascending order: that order reversed, with each run of equal values put back in ascending position."""
    rev = ascending[::-1]
    v = values[rev]
    tie = v[1:] == v[:-1]
    if not tie.any():
        return np.ascontiguousarray(rev)
    new = np.r_[True, ~tie]
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], v.size]
    run = np.cumsum(new) - 1
    out = np.empty_like(rev)
    out[starts[run] + ends[run] - 1 - np.arange(v.size)] = rev    # a run of equal values, reversed back
    return out


def _at_ends(ro: RankOrder, w: torch.Tensor, err: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, ...]:
    """(K, E, dK, dE) (R, G): cumulative weight and weighted errors at each tie-group end, and the group's own
    weight and errors, in ``w``'s dtype; ``w`` (R, N) in sorted order, ``err`` (N,) the sorted errors in that
    dtype and on that device (default ``ro.err``)."""
    we = w * (torch.from_numpy(ro.err) if err is None else err)
    k, e = torch.cumsum(w, dim=1), torch.cumsum(we, dim=1)
    if ro.ends.shape[0] == ro.n:                       # no ties: every sample is its own group
        return k, e, w, we
    ends = torch.from_numpy(ro.ends).to(w.device)
    k, e = k.index_select(1, ends), e.index_select(1, ends)
    return k, e, _diff(k), _diff(e)


def _diff(x: torch.Tensor) -> torch.Tensor:
    return torch.diff(x, dim=1, prepend=torch.zeros_like(x[:, :1]))


def _rowdot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(R,) sum_g a[r, g] b[r, g] without an (R, G) temporary (2x faster than (a * b).sum(1) here)."""
    return torch.linalg.vecdot(a, b)


def cumulative_auc(cneg: torch.Tensor, dpos: torch.Tensor, dneg: torch.Tensor, ties: bool = True) -> torch.Tensor:
    """(R,) AUC from per-group weights of positives ``dpos`` and negatives ``dneg`` and the cumulative negatives
    ``cneg`` (R, G), groups in *descending* score order: sum_g P_g (negatives in later groups + N_g / 2) / (P N)
    = 1 - (sum_g P_g cN_g - sum_g P_g N_g / 2) / (P N); NaN without positives or negatives."""
    ptot, ntot = dpos.sum(dim=1), cneg[:, -1]
    s = ptot * ntot - _rowdot(dpos, cneg)
    if ties:                                           # else no group holds both a positive and a negative
        s = s + 0.5 * _rowdot(dpos, dneg)
    return torch.where((ptot > 0) & (ntot > 0), s / (ptot * ntot), torch.full_like(s, float("nan")))


def _metrics(k, e, dk, de, n: torch.Tensor, tied: bool = True) -> dict[str, torch.Tensor]:
    """Every selective metric (R,) from the cumulative weights ``k`` and errors ``e`` at the tie-group ends, the
    groups' weights ``dk`` and errors ``de`` (R, G), and the totals ``n`` (R,); ``tied=False`` when every group
    is one sample (a group is then all correct or all wrong)."""
    risk = e / k.clamp(min=1e-300)                      # k = 0 only before any weight, where e = 0 too
    aurc = _rowdot(dk, risk) / n
    c = n - e[:, -1]
    harmonic = (lambda x: torch.special.digamma(x + 1.0) + np.euler_gamma)
    star = ((n - c) - c * (harmonic(n) - harmonic(c))) / n
    out = {"aurc": aurc, "aurc_star": star, "e_aurc": aurc - star}
    for name, q in COVERAGES.items():
        need = torch.clamp(torch.ceil(torch.round(q * n, decimals=9)), min=1.0)
        g = torch.searchsorted(k, need[:, None].contiguous(), side="left")      # first end reaching ceil(qN)
        out[name] = 1.0 - risk.gather(1, g)[:, 0]
    # k grows along g, so the largest qualifying k is at the last qualifying end: a boolean argmax from the end
    # (numpy's is a byte scan; a masked row-wise max costs 10x more)
    risk_rev, rows = risk.numpy()[:, ::-1], np.arange(k.shape[0])
    for name, a in ACCURACIES.items():
        ok = risk_rev <= 1.0 - a + TOL
        j = ok.argmax(axis=1)
        last = k.shape[1] - 1 - j
        out[name] = torch.from_numpy(np.where(ok[rows, j], k.numpy()[rows, last], 0.0)) / n
    out["auroc_correct"] = cumulative_auc(e, dk - de, de, ties=tied)
    return out


class RiskCoverage:
    """The risk-coverage curve of one (optionally weighted) sample at its tie-group ends, and its summaries.

    weights : (N,) non-negative draw counts (a bootstrap resample); coverage is counted in those units."""

    def __init__(self, conf, correct, weights: Optional[np.ndarray] = None, order: Optional[RankOrder] = None):
        ro = order or rank_order(conf, correct)
        w = np.ones((1, ro.n)) if weights is None else np.asarray(weights, np.float64)[ro.order][None, :]
        k, e, dk, de = _at_ends(ro, torch.from_numpy(w))
        keep = dk[0] > 0                                 # groups the weights left empty are not ends
        self.n = float(w.sum())
        k, e, dk, de = k[:, keep], e[:, keep], dk[:, keep], de[:, keep]
        self.count = k[0].numpy()                        # (G,) samples accepted at each end
        self.errors = e[0].numpy()
        self.threshold = ro.conf[ro.ends][keep.numpy()]  # (G,) confidence of the group: accept conf >= threshold
        n = torch.tensor([self.n], dtype=torch.float64)
        self._m = {m: v.numpy() for m, v in _metrics(k, e, dk, de, n).items()}

    @property
    def coverage(self) -> np.ndarray:
        """(G,) fraction of the samples accepted at each tie-group end, in (0, 1]."""
        return self.count / self.n

    @property
    def risk(self) -> np.ndarray:
        """(G,) selective risk (error rate among the accepted samples) at each tie-group end, in [0, 1]."""
        return self.errors / self.count

    @property
    def metrics(self) -> dict[str, float]:
        """aurc, aurc_star, e_aurc, acc_at_cov80/90/95, cov_at_acc95/99, auroc_correct."""
        return {m: float(v[0]) for m, v in self._m.items()}

    @property
    def aurc(self) -> float:
        """Area under the risk-coverage curve."""
        return float(self._m["aurc"][0])

    @property
    def aurc_star(self) -> float:
        """AURC of an oracle that accepts every correct sample first (same N and error count)."""
        return float(self._m["aurc_star"][0])

    @property
    def e_aurc(self) -> float:
        """Excess AURC: AURC - AURC*."""
        return float(self._m["e_aurc"][0])

    @property
    def auroc_correct(self) -> float:
        """AUROC of confidence for correctness (ties count 1/2)."""
        return float(self._m["auroc_correct"][0])

    def acc_at_coverage(self, q: float) -> float:
        """Selective accuracy over the first ceil(q N) samples (coverage ``q`` in (0, 1]), the tie group that
        crosses that position included whole."""
        need = max(math.ceil(round(q * self.n, 9)), 1)
        g = int(np.searchsorted(self.count, need, side="left"))
        return 1.0 - float(self.errors[g] / self.count[g])

    def coverage_at_accuracy(self, a: float) -> float:
        """The largest coverage at a tie-group end whose selective accuracy is >= ``a`` (0 if none)."""
        ok = self.errors / self.count <= 1.0 - a + TOL          # as in the metric columns
        return float(self.count[ok].max() / self.n) if ok.any() else 0.0

    def downsampled(self, max_points: int = 1000) -> np.ndarray:
        """Indices of at most ~``max_points`` tie-group ends, evenly spaced in coverage, the last one included:
        every point kept is an exact point of the curve (no interpolation)."""
        g = self.count.shape[0]
        if g <= max_points:
            return np.arange(g)
        target = np.linspace(self.count[0], self.count[-1], max_points)
        return np.unique(np.r_[np.searchsorted(self.count, target, side="left"), g - 1])


def risk_coverage(conf, correct, weights: Optional[np.ndarray] = None) -> RiskCoverage:
    """The risk-coverage curve and its summaries (:class:`RiskCoverage`)."""
    return RiskCoverage(conf, correct, weights)


def selective_metrics(conf: np.ndarray, correct: np.ndarray, ascending: Optional[np.ndarray] = None
                      ) -> dict[str, float]:
    """The point estimates of :data:`SELECTIVE_METRICS` (NaN for an empty sample); ``ascending``: the
    confidences' stable ascending order, if known."""
    if np.asarray(conf).size == 0:
        return {m: float("nan") for m in SELECTIVE_METRICS}
    m = RiskCoverage(conf, correct, order=rank_order(conf, correct, ascending)).metrics
    return {name: m[name] for name in SELECTIVE_METRICS}


def resampled_metrics(ro: RankOrder, counts, units=None, totals: Optional[np.ndarray] = None,
                      store: Optional[dict] = None) -> dict[str, np.ndarray]:
    """(R,) values of :data:`SELECTIVE_METRICS` for a block of resamples: ``counts`` (R, units) torch or numpy
    draw counts, ``units`` (N,) the unit of each sample (None: the units are the samples), ``totals`` (R,) the
    resample sizes. The samples' sorted order ``ro`` is computed once by the caller.

    Samples (no units): exact, O(R N). Units (large splits, see calibview.core.stats.bootstrap): the curve is read at
    ``UNIT_CURVE_POINTS`` tie-group ends evenly spread over the sorted order (neighbouring groups merged, as if
    tied), from a sparse (points, units) matrix of per-unit counts and errors: O(R N) multiply-adds in a sparse
    product instead of a gather and several passes per sample (measured for 1000 resamples of 1M samples in
    16,777 units: 23 s exact, 0.6 s + 0.7 s once this way). The merging moved a resample's AURC by 1.2e-5 and the
    other metrics by at most 7e-5 there (an AURC interval at that size is about 1.3e-3 wide); point estimates
    are always exact. ``store`` caches the matrix between blocks."""
    counts = torch.as_tensor(counts)
    if units is not None:
        return _resampled_units(ro, counts, units, totals, {} if store is None else store)
    return _resampled_samples(ro, counts, totals)


#: samples below which a resample's cumulative counts are exact in float32 (integers below 2^24)
_FLOAT32_EXACT = 1 << 24


def _resampled_samples(ro: RankOrder, counts: torch.Tensor, totals: Optional[np.ndarray]) -> dict[str, np.ndarray]:
    """:func:`resampled_metrics` over samples. The cumulative counts and errors are integers, so they are summed
    in float32 where that is exact (fewer bytes per pass, and the passes are memory-bound) and turned into
    float64 only for the ratios and the dot products: the same values as a float64 computation."""
    exact = torch.float32 if ro.n < _FLOAT32_EXACT else torch.float64
    idx = torch.from_numpy(ro.order).to(counts.device)
    err = torch.from_numpy(ro.err).to(device=counts.device, dtype=exact)
    tied = ro.ends.shape[0] < ro.n
    r = counts.shape[0]
    step = max(1, _ROW_ENTRIES // max(ro.n, 1))
    parts: dict[str, list] = {}
    for a in range(0, r, step):
        w = counts[a:a + step].index_select(1, idx).to(exact)
        k, e, dk, de = (x.cpu().double() for x in _at_ends(ro, w, err))
        n = k[:, -1] if totals is None else torch.as_tensor(np.asarray(totals, np.float64)[a:a + step])
        for m, v in _metrics(k, e, dk, de, n, tied=tied).items():
            if m in SELECTIVE_METRICS:
                parts.setdefault(m, []).append(v.numpy())
    return {m: np.concatenate(v) for m, v in parts.items()}


#: tie-group ends at which the unit bootstrap reads the risk-coverage curve
UNIT_CURVE_POINTS = 16384


def _unit_matrix(ro: RankOrder, units: torch.Tensor, g: int, device) -> torch.Tensor:
    """(2P, units) float32 CSR: per curve point p (a block of sorted positions ending at a tie-group end) the
    number of samples of each unit in the block (rows 0..P-1) and of wrong ones (rows P..2P-1)."""
    import warnings

    if ro.ends.shape[0] <= UNIT_CURVE_POINTS:
        block_ends = ro.ends                                                # every tie group: exact
    else:
        target = np.linspace(0, ro.n - 1, UNIT_CURVE_POINTS)
        block_ends = np.unique(ro.ends[np.searchsorted(ro.ends, target, side="left")])
    p = block_ends.shape[0]
    block = np.searchsorted(block_ends, np.arange(ro.n), side="left")      # block of each sorted position
    u = units.cpu().numpy()[ro.order]
    key, inv = np.unique(block.astype(np.int64) * g + u, return_inverse=True)
    cnt = np.bincount(inv).astype(np.float32)
    err = np.bincount(inv, weights=ro.err).astype(np.float32)
    # already in CSR order: the unique keys ascend by (point, unit), and every error row comes after every count row
    rows = np.r_[key // g, key // g + p]
    cols = np.r_[key % g, key % g]
    vals = np.r_[cnt, err]
    crow = np.r_[0, np.cumsum(np.bincount(rows, minlength=2 * p))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)          # "sparse CSR support is in beta"
        return torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(cols), torch.from_numpy(vals),
                                       size=(2 * p, g), device=device)


def _resampled_units(ro, counts, units, totals, store) -> dict[str, np.ndarray]:
    g = counts.shape[1]
    if "unit_curve" not in store:
        store["unit_curve"] = _unit_matrix(ro, units, g, counts.device)
    mat = store["unit_curve"]
    p = mat.shape[0] // 2
    parts: dict[str, list] = {}
    for a in range(0, counts.shape[0], 32):
        panel = counts[a:a + 32].to(torch.float32).T.contiguous()                  # (units, R_b)
        sums = torch.sparse.mm(mat, panel).T.double().cpu()                        # (R_b, 2P), exact integers
        dk, de = sums[:, :p].contiguous(), sums[:, p:].contiguous()
        k, e = torch.cumsum(dk, dim=1), torch.cumsum(de, dim=1)
        n = k[:, -1] if totals is None else torch.as_tensor(np.asarray(totals, np.float64)[a:a + 32])
        for m, v in _metrics(k, e, dk, de, n, tied=True).items():
            if m in SELECTIVE_METRICS:
                parts.setdefault(m, []).append(v.numpy())
    return {m: np.concatenate(v) for m, v in parts.items()}


# --- the high-confidence audit and the threshold slider ----------------------------------------------------------

def wilson(successes, n, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval at ``level`` (NaN where n = 0)."""
    from calibview.core.stats.metrics import wilson_interval

    return wilson_interval(successes, n, z=float(ndtri(0.5 + level / 2.0)))


@dataclass(frozen=True)
class AtThreshold:
    """What accepting every sample with confidence >= threshold gives."""

    threshold: float
    n: int
    coverage: float
    accuracy: float         # selective accuracy (NaN when n = 0)
    mean_conf: float
    lo: float               # Wilson interval of the accuracy
    hi: float

    @property
    def flagged(self) -> bool:
        """The accuracy's interval excludes the mean confidence (over- or under-confident above t)."""
        return self.n > 0 and not (self.lo <= self.mean_conf <= self.hi)


class SortedConfidence:
    """Confidences sorted once with prefix sums, so that :meth:`at` costs O(log N) (the threshold slider)."""

    def __init__(self, conf, correct, level: float = 0.95) -> None:
        conf = np.asarray(conf, dtype=np.float64)
        order = np.argsort(conf, kind="stable")
        self.asc = conf[order]
        self.n_total = int(conf.shape[0])
        self.level = level
        # prefix sums from the top: entry j = sum over the j most confident samples
        self._hits = np.r_[0.0, np.cumsum(np.asarray(correct, np.float64)[order][::-1])]
        self._conf = np.r_[0.0, np.cumsum(self.asc[::-1])]

    def at(self, t: float) -> AtThreshold:
        """The samples with confidence >= ``t``: their count, coverage, accuracy (Wilson interval) and mean
        confidence."""
        j = self.n_total - int(np.searchsorted(self.asc, float(t), side="left"))
        if j == 0:
            return AtThreshold(float(t), 0, 0.0, math.nan, math.nan, math.nan, math.nan)
        hits = float(self._hits[j])
        lo, hi = wilson(hits, j, self.level)
        return AtThreshold(float(t), j, j / self.n_total, hits / j, float(self._conf[j]) / j, float(lo), float(hi))


def audit(conf, correct, thresholds: Sequence[float], level: float = 0.95
          ) -> list[AtThreshold]:
    """Per threshold t, the samples with confidence >= t: n, mean confidence, accuracy with a Wilson interval at
    ``level``, flagged when that interval excludes the mean confidence (a "95 % sure" bin that is right 70 % of
    the time). ``thresholds``: the callers' (reports.selective.DEFAULT_AUDIT unless the user gives others)."""
    sc = SortedConfidence(conf, correct, level)
    return [sc.at(t) for t in thresholds]


# --- per-class thresholds -------------------------------------------------------------------------------------

def per_class_thresholds(conf, pred, correct, k: int, target_precision: float) -> list[Optional[float]]:
    """For each class c the smallest threshold t (a confidence of a sample predicted c) such that the samples
    predicted c with confidence >= t have precision >= ``target_precision``; None when no t reaches it (or no
    sample is predicted c)."""
    conf = np.asarray(conf, np.float64)
    pred = np.asarray(pred, np.int64)
    order = np.lexsort((-conf, pred))                   # by class, then confidence descending
    sp, sc = pred[order], conf[order]
    hits = np.asarray(correct, np.float64)[order]
    ends = np.flatnonzero(np.r_[(sp[1:] != sp[:-1]) | (sc[1:] != sc[:-1]), True])
    start = np.searchsorted(sp, sp[ends], side="left")  # first position of each end's class
    cum = np.r_[0.0, np.cumsum(hits)]
    n_acc = ends + 1 - start
    prec = (cum[ends + 1] - cum[start]) / n_acc
    ok = prec >= target_precision - TOL
    last = np.full(k, -1, dtype=np.int64)               # the lowest qualifying end of each class
    np.maximum.at(last, sp[ends[ok]], np.flatnonzero(ok))
    return [None if g < 0 else float(sc[ends[g]]) for g in last]


@dataclass(frozen=True)
class ClassThreshold:
    """What the threshold of class ``cls`` achieves: among the samples predicted ``cls``, those accepted."""

    cls: int
    threshold: Optional[float]
    n_pred: int             # samples predicted c
    n_accepted: int         # ... with confidence >= threshold
    precision: float        # among those accepted (NaN when none)
    coverage: float         # n_accepted / n_pred (NaN when n_pred = 0)


def apply_thresholds(conf, pred, correct, thresholds: Sequence[Optional[float]]) -> list[ClassThreshold]:
    """The precision and coverage that given per-class thresholds achieve on a (usually another) split; a class
    without a threshold accepts nothing."""
    conf, pred = np.asarray(conf, np.float64), np.asarray(pred, np.int64)
    correct = np.asarray(correct, np.float64)
    k = len(thresholds)
    t = np.array([np.inf if x is None else x for x in thresholds])
    accepted = conf >= t[pred]
    n_pred = np.bincount(pred, minlength=k)
    n_acc = np.bincount(pred[accepted], minlength=k)
    hit = np.bincount(pred[accepted], weights=correct[accepted], minlength=k)
    out = []
    for c in range(k):
        out.append(ClassThreshold(c, thresholds[c], int(n_pred[c]), int(n_acc[c]),
                                  float(hit[c] / n_acc[c]) if n_acc[c] else math.nan,
                                  float(n_acc[c] / n_pred[c]) if n_pred[c] else math.nan))
    return out
