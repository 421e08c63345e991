"""The per-sample statistics the release, the acceptance check and drift need: the true-class slices (per-class
ECE), the high-confidence audit, the risk-coverage curve and the thresholds for a target precision.

Each is a small function of one calibrator's per-sample vectors (:class:`calibview.core.metrics.SampleStats`) so
that :mod:`calibview.core.release` does not care where it comes from: :mod:`calibview.core.slices` and
:mod:`calibview.core.selective` are used when they are installed, and the minimal versions here (same definitions,
issue 10) stand in until then. Swap a function here, nothing else changes.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from scipy.stats import norm

from .bootstrap import percentile_interval
from .metrics import SampleStats, binned_metrics, equal_width_bin, wilson_interval

#: the high-confidence thresholds audited by default (issue 10, "Selective prediction and thresholds")
DEFAULT_AUDIT = (0.9, 0.95, 0.99)


def class_slices(stats: SampleStats, counts, units, bins: int, level: float, min_slice: int,
                 class_names: Optional[Sequence[str]] = None) -> list[dict]:
    """One record per true class c (``--by class``): the top-label ECE of the samples whose label is c, with the
    paired bootstrap interval of the split's resamples restricted to them; see :func:`group_slices`."""
    names = [str(class_names[c]) if class_names is not None else str(c) for c in range(stats.k)]
    out = group_slices(stats, stats.labels, names, counts, units, bins, level, min_slice)
    for c, rec in enumerate(out):
        rec["class_index"] = c
    return out


def group_slices(stats: SampleStats, codes: np.ndarray, names: Sequence[str], counts, units, bins: int,
                 level: float, min_slice: int) -> list[dict]:
    """One record per group g (``codes == g``): ``{"slice", "n", "accuracy", "ece", "ece_lo", "ece_hi",
    "below_min"}``. ``counts``: the split's (n_boot, units) uint8 resample counts or None; ``units``: (N,) unit of
    each sample or None (a unit is a sample). Groups below ``min_slice`` samples keep their n and no numbers."""
    out = []
    for g, name in enumerate(names):
        idx = np.flatnonzero(codes == g)
        rec = {"slice": str(name), "n": int(idx.size), "below_min": bool(idx.size < min_slice),
               "accuracy": float("nan"), "ece": float("nan"), "ece_lo": float("nan"), "ece_hi": float("nan")}
        if idx.size and not rec["below_min"]:
            conf, correct = stats.conf[idx], stats.correct[idx]
            rec["accuracy"] = float(correct.mean())
            rec["ece"] = float(binned_metrics(conf, correct, bins)["ece"])
            if counts is not None:
                cols = idx if units is None else np.asarray(units)[idx]
                w = np.asarray(counts[:, cols], dtype=np.float64)          # (n_boot, n_g): the paired weights
                dist = _weighted_ece(w, conf, correct, bins)
                if np.isfinite(dist).any():
                    iv = percentile_interval(dist[np.isfinite(dist)], level)
                    rec["ece_lo"], rec["ece_hi"] = iv.lo, iv.hi
        out.append(rec)
    return out


def meta_codes(file: str, split_path: str, column: str, n: int, slice_bins: int = 4
               ) -> tuple[np.ndarray, list[str]]:
    """(group code per sample, group names) of the metadata column ``<split>/meta/<column>``: integers and strings
    are categories, floats ``slice_bins`` quantile groups."""
    import h5py

    from .errors import CalibviewError

    with h5py.File(file, "r") as f:
        path = f"{split_path}/meta/{column}"
        if path not in f:
            raise CalibviewError(f"{file}: there is no metadata column {column!r} ({path}); list the columns with "
                                 f"calibview runs.")
        values = f[path][()]
    if values.shape != (n,):
        raise CalibviewError(f"{file}: {path} has shape {values.shape} but the split has {n} samples.")
    if values.dtype.kind == "f":
        edges = np.unique(np.quantile(values, np.linspace(0, 1, slice_bins + 1)))
        codes = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
        return codes, [f"[{edges[i]:.4g}, {edges[i + 1]:.4g}]" for i in range(len(edges) - 1)]
    if values.dtype.kind in "OSU":
        values = np.array([v.decode() if isinstance(v, bytes) else str(v) for v in values])
    cats, codes = np.unique(values, return_inverse=True)
    return codes, [str(c) for c in cats]


def _weighted_ece(w: np.ndarray, conf: np.ndarray, correct: np.ndarray, bins: int) -> np.ndarray:
    """(R,) equal-width ECE of each resample given as per-sample weights (R, n)."""
    onehot = np.zeros((conf.size, bins))
    onehot[np.arange(conf.size), equal_width_bin(conf, bins)] = 1.0
    total = w.sum(axis=1)
    gap = w @ (onehot * conf[:, None]) - w @ (onehot * correct[:, None])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.abs(gap).sum(axis=1) / total


def audit(conf: np.ndarray, correct: np.ndarray, thresholds: Sequence[float] = DEFAULT_AUDIT,
          level: float = 0.95) -> list[dict]:
    """Per threshold t: n and coverage of samples with confidence >= t, their mean confidence, accuracy with a
    Wilson interval at ``level``, the gap (mean confidence - accuracy) and ``flagged`` when the interval excludes
    the mean confidence (the seed's 0.95 auto-approve bin that was right 70 % of the time)."""
    z = float(norm.ppf(0.5 + level / 2))
    out = []
    for t in thresholds:
        keep = conf >= t
        n = int(keep.sum())
        rec = {"threshold": float(t), "n": n, "coverage": n / max(conf.size, 1), "mean_conf": float("nan"),
               "accuracy": float("nan"), "acc_lo": float("nan"), "acc_hi": float("nan"), "gap": float("nan"),
               "flagged": False}
        if n:
            lo, hi = wilson_interval(np.array([correct[keep].sum()]), np.array([n]), z=z)
            rec.update(mean_conf=float(conf[keep].mean()), accuracy=float(correct[keep].mean()),
                       acc_lo=float(lo[0]), acc_hi=float(hi[0]))
            rec["gap"] = rec["mean_conf"] - rec["accuracy"]
            rec["flagged"] = bool(not rec["acc_lo"] <= rec["mean_conf"] <= rec["acc_hi"])
        out.append(rec)
    return out


def _tie_group_ends(conf: np.ndarray, correct: np.ndarray):
    """(order, k at each tie-group end (1-based), cumulative correct there) for confidences sorted descending."""
    order = np.argsort(-conf, kind="stable")
    c = conf[order]
    ends = np.flatnonzero(np.r_[c[1:] != c[:-1], True]) + 1
    return order, ends, np.cumsum(correct[order])[ends - 1]


def risk_coverage(conf: np.ndarray, correct: np.ndarray) -> dict:
    """The risk-coverage curve at the ends of tie groups (``coverage``, ``risk`` arrays), ``aurc`` and ``e_aurc``
    as issue 10 defines them (r(k) held across a tie group; AURC* with every correct sample first)."""
    n = conf.size
    order, ends, hits = _tie_group_ends(conf, correct)
    risk_at_end = 1.0 - hits / ends
    sizes = np.diff(np.r_[0, ends])
    k = np.arange(1, n + 1)
    # r(k) inside a group is the group's end value: sum over k of r(k) = sum over groups of size * r(end)
    aurc = float((sizes * risk_at_end).sum() / n)
    c_total = float(correct.sum())
    aurc_star = float((np.maximum(0.0, k - c_total) / k).sum() / n)
    return {"coverage": ends / n, "risk": risk_at_end, "aurc": aurc, "e_aurc": aurc - aurc_star}


def global_threshold(conf: np.ndarray, correct: np.ndarray, target_precision: float) -> Optional[float]:
    """The smallest confidence t such that the samples with confidence >= t have accuracy >= the target (None when
    no t reaches it)."""
    if conf.size == 0:
        return None
    order, ends, hits = _tie_group_ends(conf, correct)
    ok = hits / ends >= target_precision
    if not ok.any():
        return None
    return float(conf[order][ends[ok][-1] - 1])


def per_class_thresholds(conf: np.ndarray, pred: np.ndarray, correct: np.ndarray, k: int,
                         target_precision: float) -> list[Optional[float]]:
    """Per class c: the smallest t such that samples whose arg-max is c and whose calibrated p(c) (= their
    confidence) is >= t have precision >= the target, on the split given (the fit split); None when none does."""
    out: list[Optional[float]] = []
    for c in range(k):
        m = pred == c
        out.append(global_threshold(conf[m], correct[m], target_precision))
    return out


def threshold_outcome(conf: np.ndarray, pred: np.ndarray, correct: np.ndarray, k: int,
                      per_class: Sequence[Optional[float]]) -> list[dict]:
    """Per class: the achieved precision and coverage of its threshold on another split (the eval split):
    ``n_pred`` samples predicted c, ``n_kept`` of them at or above the threshold, precision among those kept and
    coverage = n_kept / n_pred."""
    out = []
    for c in range(k):
        t = per_class[c] if c < len(per_class) else None
        m = pred == c
        kept = m & (conf >= t) if t is not None else np.zeros_like(m)
        n_pred, n_kept = int(m.sum()), int(kept.sum())
        out.append({"threshold": t, "n_pred": n_pred, "n_kept": n_kept,
                    "precision": float(correct[kept].mean()) if n_kept else float("nan"),
                    "coverage": n_kept / n_pred if n_pred else float("nan")})
    return out
