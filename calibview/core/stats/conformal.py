"""Split conformal prediction sets on arrays of probabilities: the scores, the finite-sample quantile, the sets.

Scores (the non-conformity of label ``k`` for a sample with probabilities ``p``, (K,) float64):

- ``lac``: ``1 - p_k``;
- ``aps``: the probability mass of every class at least as probable as ``k``, ``k`` included:
  ``sum_{j: p_j >= p_k} p_j``. Tied classes count together, so tied classes share a score and enter a set together
  (the score does not depend on how the classes are numbered);
- ``raps``: ``aps + lam * max(0, o_k - kreg)``, ``o_k`` the 1-based rank of ``k``'s tie group's last member.

Randomised (``u``, one uniform per sample): the mass strictly above ``k``'s tie group plus ``u`` times the group's
mass (for ``raps``, plus the same penalty); ``u = 1`` is the non-randomised score up to rounding.

The quantile ``qhat`` of n calibration scores at level ``alpha`` is the ``ceil((n + 1)(1 - alpha))``-th smallest
score, computed exactly (alpha read as the decimal it prints as, so 0.1 is 1/10), and ``+inf`` when that index
exceeds n. A class is in a set when its score is at most ``qhat`` (ties included). Mondrian quantiles are the
same quantile within each group of the calibration samples (their class, or a metadata value).

Every score is nondecreasing along the classes sorted by probability, so a set is a top-m set (``lac``, ``aps``
and ``raps`` alike) and :func:`set_stats` can find m from the top ``WINDOW`` classes of each row (``torch.topk``),
sorting a whole row only where the set may reach past them; for up to FULL_SORT_K classes a whole-row sort
(numpy's argsort) costs less than the window (about 17 ms against 24 ms for 2,048 x 1,000 here) and is used
directly. Prefix sums are taken over the descending sorted
probabilities in float64, left to right, so a window and a full sort give the same bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

import numpy as np
import torch

from calibview.core.errors import ParameterError

SCORES = ("lac", "aps", "raps")
#: RAPS's defaults (Angelopoulos et al. 2021 use lambda 0.01 and kreg 5 for ImageNet)
RAPS_LAMBDA, RAPS_KREG = 0.01, 5
#: classes ranked per row before a full sort is needed
WINDOW = 32
#: up to this many classes a full sort of every row is cheaper than the top-WINDOW window and its fall-backs
FULL_SORT_K = 4096


def check_alpha(alpha) -> float:
    """``alpha`` as a float, or ParameterError unless it lies strictly between 0 and 1."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise ParameterError(f"alpha must be a number in (0, 1), not {alpha!r}.", "alpha") from None
    if not 0.0 < a < 1.0:
        raise ParameterError(f"alpha must lie strictly between 0 and 1, not {alpha!r}.", "alpha")
    return a


def check_score(score: str) -> str:
    """``score`` if it is one of SCORES, else ParameterError naming them."""
    if score not in SCORES:
        raise ParameterError(f"score={score!r} is not among the conformal scores ({', '.join(SCORES)}).", "score")
    return score


def quantile_index(n: int, alpha: float) -> int:
    """The 1-based order statistic of the conformal quantile: ``ceil((n + 1)(1 - alpha))``, in exact rational
    arithmetic (``alpha`` read as its shortest decimal). Exceeds ``n`` exactly when ``n < 1/alpha - 1``."""
    a = Fraction(repr(check_alpha(alpha)))
    return int(math.ceil((int(n) + 1) * (1 - a)))


def min_calibration(alpha: float) -> int:
    """The fewest calibration scores with a finite quantile at ``alpha``: the least n with index <= n."""
    a = Fraction(repr(check_alpha(alpha)))
    return max(1, int(math.ceil(1 / a - 1)))


def conformal_quantile(scores: np.ndarray, alpha: float) -> float:
    """qhat of (n,) calibration scores: the :func:`quantile_index`-th smallest, +inf when it exceeds n (a set of
    every class)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    i = quantile_index(s.shape[0], alpha)
    if i > s.shape[0]:
        return float("inf")
    return float(np.partition(s, i - 1)[i - 1])


def group_quantiles(scores: np.ndarray, groups: np.ndarray, n_groups: int, alpha: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Mondrian quantiles: ((G,) qhat of each group's calibration scores, +inf for a group too small; (G,) int64
    calibration samples per group). ``groups``: (n,) int64 in [0, G)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    g = np.asarray(groups, dtype=np.int64).reshape(-1)
    order = np.argsort(g, kind="stable")
    bounds = np.searchsorted(g[order], np.arange(int(n_groups) + 1), side="left")
    q = np.array([conformal_quantile(s[order[bounds[i]:bounds[i + 1]]], alpha) for i in range(int(n_groups))],
                 dtype=np.float64)
    return q, np.diff(bounds).astype(np.int64)


def uniforms(seed: int, n: int, stream: int) -> np.ndarray:
    """(n,) float64 uniforms of the randomised scores, one per sample, from ``seed`` and a ``stream`` number (0:
    the calibration split, 1: the evaluation split), independent of how the rows are chunked."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(stream)])).random(int(n))


@dataclass(frozen=True)
class Ranked:
    """The top L classes of each of n rows: ``values`` (n, L) descending probabilities, ``classes`` (n, L) int64
    (None where only the values were sorted: :func:`rank` with ``with_classes=False``),
    ``prefix`` (n, L) their running sums, ``first`` / ``last`` (n, L) int64 0-based rank of the first / last member
    of each entry's tie group, ``open`` (n,) whether a tie group runs past the window (L < K only), ``tied``
    (T,) int64 the rows that hold a tie group (elsewhere ``first`` = ``last`` = the entry's own rank)."""

    values: np.ndarray
    classes: Optional[np.ndarray]
    prefix: np.ndarray
    first: np.ndarray
    last: np.ndarray
    open: np.ndarray
    tied: np.ndarray


def rank(probs: np.ndarray, width: Optional[int] = None, *, with_classes: bool = True) -> Ranked:
    """The :class:`Ranked` top ``width`` classes (all K when None or >= K) of (n, K) float64 probabilities;
    ``with_classes`` False (a full ranking only) sorts the values alone, when no caller needs to know which class
    sits where (the label's place then comes from :func:`label_ranks` on the probabilities)."""
    p = np.ascontiguousarray(probs, dtype=np.float64)
    n, k = p.shape
    if width is None or width >= k:
        # numpy's sorts (SIMD quicksorts) of the negated rows: argsort 3-4x faster than torch.sort on a CPU and a
        # sort of the values alone 3x faster again; the order within a tie group does not matter (tied classes
        # share their group's score), so the values come out the same either way
        is_open = np.zeros(n, dtype=bool)
        if with_classes:
            classes = np.argsort(-p, axis=1)
            values = np.take_along_axis(p, classes, axis=1)
        else:               # ascending, then reversed into a contiguous copy: cheaper than negating twice
            classes, values = None, np.ascontiguousarray(np.sort(p, axis=1)[:, ::-1])
    else:
        v, idx = torch.topk(torch.from_numpy(p), width + 1, dim=1, largest=True, sorted=True)
        v, idx = v.numpy(), idx.numpy()
        is_open = v[:, width - 1] == v[:, width]
        values, classes = np.ascontiguousarray(v[:, :width]), np.ascontiguousarray(idx[:, :width])
    width = values.shape[1]
    # torch's CPU cumsum adds along each row in order in float64, as numpy's does (the same bits), on every core
    prefix = torch.cumsum(torch.from_numpy(values), dim=1).numpy()
    pos = np.broadcast_to(np.arange(width, dtype=np.int64), values.shape)
    tied_next = np.zeros(values.shape, dtype=bool)
    tied_next[:, :-1] = values[:, 1:] == values[:, :-1]
    tied = np.flatnonzero(tied_next.any(axis=1))
    last = first = pos                   # a read-only view: the rows without ties, nearly all, need no copy
    if tied.size:
        last, first = np.array(pos), np.array(pos)
        # float32 logits of many classes collide now and then (a few rows in a hundred at K = 1000): only those
        # rows pay for the group bounds
        t_next, t_pos = tied_next[tied], pos[:tied.size]
        ends = np.where(t_next, width - 1, t_pos)
        last[tied] = np.minimum.accumulate(ends[:, ::-1], axis=1)[:, ::-1]
        starts = np.where(np.concatenate([np.zeros((tied.size, 1), bool), t_next[:, :-1]], axis=1), 0, t_pos)
        first[tied] = np.maximum.accumulate(starts, axis=1)
    return Ranked(values, classes, prefix, first, last, is_open, tied)


def _group_mass(r: Ranked, before: bool) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """((n, L) the prefix sum up to each entry's tie group's last member, (n, L) the sum strictly above its group
    or None unless ``before``): the prefix itself, shifted by one for ``before``, except in the tied rows."""
    upto, above = r.prefix, None
    if before:
        above = np.zeros_like(r.prefix)
        above[:, 1:] = r.prefix[:, :-1]
    t = r.tied
    if t.size:
        pt = r.prefix[t]
        upto = r.prefix.copy()
        upto[t] = np.take_along_axis(pt, r.last[t], axis=1)
        if before:
            ft = r.first[t]
            above[t] = np.where(ft > 0, np.take_along_axis(pt, np.maximum(ft - 1, 0), axis=1), 0.0)
    return upto, above


def ranked_scores(r: Ranked, score: str, *, lam: float = RAPS_LAMBDA, kreg: int = RAPS_KREG,
                  u: Optional[np.ndarray] = None) -> np.ndarray:
    """(n, L) scores of the ranked classes, nondecreasing along each row; ``u`` (n,) randomises aps / raps."""
    check_score(score)
    if score == "lac":
        return 1.0 - r.values
    upto, before = _group_mass(r, u is not None)
    if u is None:
        s = upto.copy() if score == "raps" else upto       # (upto may be the ranking's own prefix)
    else:
        # before + u (upto - before), in place in one (n, L) array (the same bits: + and * commute)
        s = np.subtract(upto, before)
        s *= np.asarray(u, dtype=np.float64)[:, None]
        s += before
    return add_raps_penalty(r, s, lam, kreg) if score == "raps" else s


def add_raps_penalty(r: Ranked, s: np.ndarray, lam: float = RAPS_LAMBDA, kreg: int = RAPS_KREG) -> np.ndarray:
    """``s`` (n, L) aps scores of the ranking ``r`` turned into raps scores in place (returned): plus lam times
    the ranks past ``kreg``. The penalty depends on the rank alone, one (L,) row, except in the rows holding a tie
    group (each member has its group's last rank)."""
    t = r.tied
    base = s[t]                                 # a copy (fancy index): the tied rows before their penalty
    s += _penalty(np.arange(s.shape[1]), lam, kreg)
    if t.size:
        s[t] = base + _penalty(r.last[t], lam, kreg)
    return s


def _penalty(last: np.ndarray, lam: float, kreg: int) -> np.ndarray:
    """raps's penalty of entries whose tie group ends at 0-based rank ``last``: lam per rank past ``kreg``."""
    return float(lam) * np.maximum(0, last + 1 - int(kreg))


def class_scores(probs: np.ndarray, score: str, *, lam: float = RAPS_LAMBDA, kreg: int = RAPS_KREG,
                 u: Optional[np.ndarray] = None) -> np.ndarray:
    """(n, K) float64 score of every class of every row (classes in their own order; a full sort per row)."""
    p = np.asarray(probs, dtype=np.float64)
    if check_score(score) == "lac":
        return 1.0 - p
    r = rank(p)
    out = np.empty_like(p)
    np.put_along_axis(out, r.classes, ranked_scores(r, score, lam=lam, kreg=kreg, u=u), axis=1)
    return out


def true_scores(probs: np.ndarray, labels: np.ndarray, score: str, *, lam: float = RAPS_LAMBDA,
                kreg: int = RAPS_KREG, u: Optional[np.ndarray] = None, width: int = WINDOW,
                ranked: Optional[Ranked] = None) -> np.ndarray:
    """(n,) float64 score of each row's label: what the calibration quantile is taken over (the same bits as the
    label's entry of :func:`class_scores`). ``ranked``: :func:`rank` of ``probs`` already computed (any width)."""
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64).reshape(-1)
    if check_score(score) == "lac":
        return 1.0 - p[np.arange(p.shape[0]), y]
    r = ranked if ranked is not None else rank(p, width)
    if r.classes is None:                     # a full ranking of the values: the label's place from its value
        return _label_scores(r, label_ranks(r, y, p), score, lam, kreg, u)
    s = ranked_scores(r, score, lam=lam, kreg=kreg, u=u)
    hit = r.classes == y[:, None]
    found = hit.any(axis=1) & ~r.open
    out = np.take_along_axis(s, hit.argmax(axis=1)[:, None], axis=1)[:, 0]
    rest = np.flatnonzero(~found)
    if rest.size:
        out[rest] = true_scores(p[rest], y[rest], score, lam=lam, kreg=kreg,
                                u=None if u is None else np.asarray(u)[rest], width=p.shape[1])
    return out


def _label_scores(r: Ranked, at: np.ndarray, score: str, lam: float, kreg: int, u) -> np.ndarray:
    """(n,) the entries ``at`` (n,) int64, one column per row, of :func:`ranked_scores` (aps / raps), computed for
    those entries alone with the same operations, so the same bits, without the (n, L) score matrix."""
    rows = np.arange(at.shape[0])
    last = r.last[rows, at]
    upto = r.prefix[rows, last]
    if u is None:
        s = upto
    else:
        first = r.first[rows, at]
        before = np.where(first > 0, r.prefix[rows, np.maximum(first - 1, 0)], 0.0)
        s = np.subtract(upto, before)
        s *= np.asarray(u, dtype=np.float64)
        s += before
    if score == "raps":
        s = s + _penalty(last, lam, kreg)
    return s


def set_stats(probs: np.ndarray, labels: np.ndarray, score: str, *, qhat=None, class_qhat=None,
              lam: float = RAPS_LAMBDA, kreg: int = RAPS_KREG, u: Optional[np.ndarray] = None,
              width: int = WINDOW, ranked: Optional[Ranked] = None, scores: Optional[np.ndarray] = None,
              label_rank: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """((n,) int64 set sizes, (n,) bool whether the label is in its set) of the sets {k: score_k <= threshold}.

    The threshold is ``qhat`` (a float, or (n,) one per row: group-conditional) or ``class_qhat`` ((K,) one per
    class: class-conditional); exactly one of them. ``ranked``: :func:`rank` of ``probs`` already computed (shared
    by the scores and levels of one chunk); with it, ``scores`` ((n, L) its :func:`ranked_scores` for ``score``)
    and ``label_rank`` ((n,) int64 the label's column in it: :func:`label_ranks`) may be given too, computed once
    for every level of a chunk."""
    p = np.asarray(probs, dtype=np.float64)
    n, k = p.shape
    y = np.asarray(labels, dtype=np.int64).reshape(-1)
    if (qhat is None) == (class_qhat is None):
        raise ValueError("give exactly one of qhat and class_qhat")
    row_q = None if qhat is None else np.broadcast_to(np.asarray(qhat, dtype=np.float64), (n,))
    cq = None if class_qhat is None else np.asarray(class_qhat, dtype=np.float64).reshape(k)
    if check_score(score) == "lac":
        inset = (1.0 - p) <= (row_q[:, None] if cq is None else cq[None, :])
        return inset.sum(axis=1).astype(np.int64), inset[np.arange(n), y]
    r = ranked if ranked is not None else rank(p, width)
    s = scores if scores is not None and ranked is not None else ranked_scores(r, score, lam=lam, kreg=kreg, u=u)
    if r.classes is None:
        if cq is not None:
            raise ValueError("class-conditional thresholds need the classes of the ranking (rank(with_classes=True))")
        if label_rank is None:
            label_rank = label_ranks(r, y, p)
    thr = row_q[:, None] if cq is None else cq[r.classes]
    inset = s <= thr
    sizes = inset.sum(axis=1).astype(np.int64)
    if label_rank is not None and s.shape[1] == k:
        covered = inset[np.arange(n), label_rank]
    else:
        covered = (inset & (r.classes == y[:, None])).any(axis=1)
    if s.shape[1] < k:
        # every class past the window scores at least the window's mass (the scores only grow along the ranks)
        reach = row_q if cq is None else np.full(n, cq.max())
        rest = np.flatnonzero(r.open | (r.prefix[:, -1] <= reach))
        if rest.size:
            sub = set_stats(p[rest], y[rest], score, qhat=None if row_q is None else row_q[rest], class_qhat=cq,
                            lam=lam, kreg=kreg, u=None if u is None else np.asarray(u)[rest], width=k)
            sizes[rest], covered[rest] = sub
    return sizes, covered


def label_ranks(r: Ranked, labels: np.ndarray, probs: Optional[np.ndarray] = None) -> np.ndarray:
    """(n,) int64 a column of each row's label in the full ranking ``r`` (every class ranked): its own where ``r``
    has the classes, else the first column of its tie group (every member of a group has the group's score),
    found from ``probs`` (n, K) as the number of classes more probable than the label."""
    y = np.asarray(labels, dtype=np.int64).reshape(-1)
    if r.classes is not None:
        return (r.classes == y[:, None]).argmax(axis=1)
    p = np.asarray(probs, dtype=np.float64)
    return (p > p[np.arange(p.shape[0]), y][:, None]).sum(axis=1)


def prediction_sets(probs: np.ndarray, score: str, *, qhat=None, class_qhat=None, lam: float = RAPS_LAMBDA,
                    kreg: int = RAPS_KREG, u: Optional[np.ndarray] = None) -> np.ndarray:
    """(n, K) bool: class k is in row i's set when its score is at most the threshold (``qhat``: a float or (n,);
    ``class_qhat``: (K,)), ties included."""
    s = class_scores(probs, score, lam=lam, kreg=kreg, u=u)
    if (qhat is None) == (class_qhat is None):
        raise ValueError("give exactly one of qhat and class_qhat")
    if class_qhat is not None:
        return s <= np.asarray(class_qhat, dtype=np.float64)[None, :]
    return s <= np.broadcast_to(np.asarray(qhat, dtype=np.float64), (s.shape[0],))[:, None]
