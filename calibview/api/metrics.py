"""One-off metric functions on arrays, with the numbers of the command line (``calibview metrics``, metrics.csv).

Every function takes ``(probs, labels)`` or ``(labels=..., logits=...)``:

- ``probs``: (N, K) class probabilities (rows non-negative, summing to 1 within 1e-6 for float64 and 1e-3 for
  narrower dtypes), or (N,) probabilities of class 1 of a binary problem;
- ``logits``: (N, K) logits (or log-probabilities), or (N,) logits of class 1 against class 0, instead of probs;
- ``labels``: (N,) integer class indices 0..K-1 (booleans for a binary problem);

as numpy arrays or torch tensors (any device; the metrics are computed on the CPU in float64). Bad input raises
:class:`calibview.CalibviewError` with one sentence.

Values are plain fractions (ECE 0.05 is the table's 5.00 %), NLL in nats. The calibration errors are *top-label*
errors, as in the CLI: the confidence of a sample is max_k p_k and its correctness 1[arg-max = label], also for
a binary problem (``relplot.smECE(p1, y)`` on the probability of class 1 is another quantity). Definitions:
docs/DEFINITIONS.md and :data:`calibview.core.stats.metrics.METRIC_HELP`.

The arrays go through the engine's own functions (:mod:`calibview.core.stats.points`): probabilities become
float64 log-probabilities, logits are log-softmaxed in float64 chunk by chunk, and the per-sample vectors feed
the same estimators, so the numbers equal the engine's for the ``none`` calibrator on the same arrays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from calibview.api.metric_inputs import ArrayLike, labels_tensor, scores_of
from calibview.core.calibrators.temperature import log_probabilities
from calibview.core.errors import CalibviewError
from calibview.core.stats import auroc as _auroc
from calibview.core.stats import smooth_ece, smoothing
from calibview.core.stats.metrics import (SampleStats, binned_metrics, chunk_rows, equal_mass_table,
                                          equal_width_table, resolve_bins, sample_stats, wilson_interval)
from calibview.core.stats.selective import selective_metrics

STRATEGIES = ("uniform", "quantile")


def _inputs(probs, labels, logits) -> tuple[torch.Tensor, torch.Tensor]:
    scores = scores_of(probs, logits).cpu()
    return scores, labels_tensor(labels, int(scores.shape[0]), int(scores.shape[1]))


def _bins(bins, n: int) -> int:
    if isinstance(bins, bool):
        raise CalibviewError(f"bins must be a positive integer or 'auto', not {bins!r}.")
    try:
        return resolve_bins(bins, n)
    except (ValueError, TypeError):
        raise CalibviewError(f"bins must be a positive integer or 'auto', not {bins!r}.") from None


def _strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise CalibviewError(f"Unknown strategy {strategy!r}; choose uniform (equal-width bins) or quantile "
                             f"(equal-mass bins).")
    return strategy


def _stats(probs, labels, logits, bins=15) -> SampleStats:
    """The engine's per-sample vectors (confidence, arg-max, correctness, NLL, Brier, each (N,) float64) with
    the class-wise sums of ``bins`` bins, computed as the engine scores the ``none`` calibrator."""
    scores, y = _inputs(probs, labels, logits)
    n, k = scores.shape
    b = _bins(bins, n)
    with torch.inference_mode():
        return sample_stats(scores, y, n_bins=b, transform=log_probabilities, chunk_rows=chunk_rows(k))


def accuracy(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None) -> float:
    """Fraction of the N samples whose arg-max class is the label (a fraction in [0, 1], not percent)."""
    return float(_stats(probs, labels, logits).correct.mean())


def nll(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None) -> float:
    """Mean negative log-likelihood -log p_y in nats, from float64 log-probabilities, never clipped: ``inf``
    when a probability of a label is exactly 0 (scikit-learn's ``log_loss`` clips instead)."""
    return float(_stats(probs, labels, logits).nll.mean())


def brier(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None) -> float:
    """Full-vector Brier score, mean over samples of sum_k (p_k - 1[y = k])^2, in [0, 2] (a binary problem:
    twice scikit-learn's ``brier_score_loss`` of p_1)."""
    return float(_stats(probs, labels, logits).brier.mean())


def _binned(probs, labels, logits, bins) -> tuple[SampleStats, int]:
    s = _stats(probs, labels, logits, bins)
    return s, s.classwise_bins


def ece(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None, bins=15,
        strategy: str = "uniform") -> float:
    """Top-label expected calibration error: sum over bins of (bin mass) x |accuracy - mean confidence|, a
    fraction. ``bins``: a positive integer or ``"auto"`` (N < 10k: 10, up to 100k: 15, above: 20);
    ``strategy``: ``"uniform"`` (equal-width bins lo < conf <= hi, the CLI's ``ece``) or ``"quantile"``
    (equal-mass bins of the sorted confidences, the CLI's ``ace``)."""
    _strategy(strategy)
    s, b = _binned(probs, labels, logits, bins)
    return binned_metrics(s.conf, s.correct, b)["ece" if strategy == "uniform" else "ace"]


def mce(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None, bins=15) -> float:
    """Maximum calibration error: the largest |accuracy - mean confidence| over the non-empty equal-width bins,
    a fraction; ``bins`` as :func:`ece`."""
    s, b = _binned(probs, labels, logits, bins)
    return binned_metrics(s.conf, s.correct, b)["mce"]


def rmsce(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None, bins=15) -> float:
    """Root-mean-square calibration error: the square root of the bin-mass-weighted mean squared gap over
    equal-width bins, a fraction; ``bins`` as :func:`ece`."""
    s, b = _binned(probs, labels, logits, bins)
    return binned_metrics(s.conf, s.correct, b)["rmsce"]


def ace(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None, bins=15) -> float:
    """Adaptive calibration error: the top-label ECE over equal-mass bins (the sorted confidences split into
    ``bins`` nearly equal groups), a fraction; the same as ``ece(..., strategy="quantile")``."""
    s, b = _binned(probs, labels, logits, bins)
    return binned_metrics(s.conf, s.correct, b)["ace"]


def debiased_ece(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None,
                 bins=15) -> float:
    """Debiased L2 calibration error of Kumar et al. (2019) over equal-mass bins, clipped at 0 and
    square-rooted, a fraction; ``bins`` as :func:`ece`."""
    s, b = _binned(probs, labels, logits, bins)
    return binned_metrics(s.conf, s.correct, b)["debiased_ece"]


def classwise_ece(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None, bins=15,
                  per_class: bool = False):
    """Class-wise ECE (Kull et al. 2019): the mean over the K classes of the equal-width ECE of p_k against
    1[y = k], a fraction; ``per_class=True`` returns ``(mean, (K,) float64 per-class ECE)`` instead."""
    s, b = _binned(probs, labels, logits, bins)
    values = np.abs(s.classwise_sums).sum(axis=1) / s.n
    return (float(values.mean()), values) if per_class else float(values.mean())


def smece(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None,
          return_width: bool = False):
    """SmoothECE of the top-label confidence, as ``relplot.smECE(conf, correct)`` of relplot 1.0.3 (reflected
    Gaussian kernel, fixed-point bandwidth), a fraction; ``return_width=True`` returns ``(smECE, sigma)``."""
    s = _stats(probs, labels, logits)
    value, sigma = smooth_ece.smece(s.conf, s.correct)
    return (float(value), float(sigma)) if return_width else float(value)


class CalTot(NamedTuple):
    """CAL and TOT of the calibration-sharpness estimator (Chidambaram & Ge 2025), plain fractions (the tables
    show them x 100): ``cal`` the kernel calibration error mean (c_hat(conf) - conf)^2, ``tot`` the mean
    full-vector Brier score; ``sharpness_gap`` = TOT - CAL (lower is sharper)."""

    cal: float
    tot: float

    @property
    def sharpness_gap(self) -> float:
        """TOT - CAL."""
        return self.tot - self.cal


def cal_tot(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None,
            bandwidth: float = 0.05, kernel: str = "gaussian") -> CalTot:
    """``(cal, tot)`` (:class:`CalTot`) at the kernel ``bandwidth`` (on the confidence axis [0, 1]) with the
    ``"gaussian"`` or ``"epanechnikov"`` kernel, as the CLI's ``cal``, ``tot`` and ``sharpness_gap``."""
    s = _stats(probs, labels, logits)
    cal, tot = smoothing.cal_tot(s.conf, s.correct, s.brier, bandwidth, kernel)
    return CalTot(float(cal), float(tot))


def aurc(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None) -> float:
    """Area under the risk-coverage curve of the top-label confidence, a fraction (the tables show it x 100):
    samples sorted by confidence descending, tie groups entering together, AURC = (1/N) sum_k r(k) with r(k)
    the error rate among the first k (see ``METRIC_HELP["aurc"]``)."""
    s = _stats(probs, labels, logits)
    return float(selective_metrics(s.conf, s.correct)["aurc"])


def auroc(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None) -> float:
    """Macro one-vs-rest ROC AUC of the class probabilities, in [0, 1], over the classes with both positives and
    negatives (K = 2: the AUC of p_1); ties count 1/2. Equal to scikit-learn's ``roc_auc_score(y, P,
    multi_class="ovr", average="macro")`` when every class is present; NaN when no class has both."""
    scores, y = _inputs(probs, labels, logits)
    n, k = scores.shape
    p = np.empty((n, k), dtype=np.float64)
    rows = chunk_rows(k)
    with torch.inference_mode():
        for start in range(0, n, rows):                  # the engine's chunks: the same bits of every p
            p[start:start + rows] = log_probabilities(scores[start:start + rows]).exp().numpy()
    return float(_auroc.auroc(p, y.numpy()))


@dataclass(frozen=True)
class ReliabilityTable:
    """The binned reliability table of the top-label confidence; arrays (B,) float64 unless said otherwise.

    bin_lo, bin_hi : each bin's edges (uniform: ``linspace(0, 1, B + 1)``, lo < conf <= hi; quantile: the smallest
    and largest confidence in the bin). count : (B,) int64 samples per bin. confidence : mean confidence, accuracy :
    fraction correct (both NaN for an empty bin). wilson_lo, wilson_hi : the Wilson score 95 % interval of the
    accuracy (NaN for an empty bin). All fractions in [0, 1], as the CLI's reliability diagram and the window."""

    bin_lo: np.ndarray
    bin_hi: np.ndarray
    count: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    wilson_lo: np.ndarray
    wilson_hi: np.ndarray
    strategy: str

    @property
    def edges(self) -> np.ndarray:
        """(B + 1,) bin edges: ``bin_lo[0]`` then every ``bin_hi`` (uniform: exactly ``linspace(0, 1, B + 1)``)."""
        return np.concatenate([self.bin_lo[:1], self.bin_hi])

    @property
    def n(self) -> int:
        """The number of samples N."""
        return int(self.count.sum())

    def to_dict(self) -> dict[str, np.ndarray]:
        """The columns by name (bin_lo, bin_hi, count, confidence, accuracy, wilson_lo, wilson_hi), each (B,)."""
        return {name: getattr(self, name) for name in ("bin_lo", "bin_hi", "count", "confidence", "accuracy",
                                                      "wilson_lo", "wilson_hi")}

    def to_pandas(self):
        """The table as a pandas DataFrame, one row per bin (needs pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("ReliabilityTable.to_pandas needs pandas, which is not installed; use to_dict() or "
                              "pip install pandas.") from None
        return pd.DataFrame(self.to_dict())


def reliability(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None, bins=15,
                strategy: str = "uniform") -> ReliabilityTable:
    """The binned reliability table (:class:`ReliabilityTable`) of ``bins`` equal-width (``"uniform"``, the
    table of the CLI's reliability diagram) or equal-mass (``"quantile"``) bins; ``bins`` as :func:`ece`."""
    _strategy(strategy)
    s, b = _binned(probs, labels, logits, bins)
    table = (equal_width_table if strategy == "uniform" else equal_mass_table)(s.conf, s.correct, b)
    lo, hi = wilson_interval(table.sum_correct, table.count)
    return ReliabilityTable(bin_lo=np.asarray(table.lo, np.float64), bin_hi=np.asarray(table.hi, np.float64),
                            count=table.count.astype(np.int64), confidence=table.confidence,
                            accuracy=table.accuracy, wilson_lo=lo, wilson_hi=hi, strategy=strategy)


def sharpness_curve(probs: ArrayLike = None, labels: ArrayLike = None, *, logits: ArrayLike = None,
                    bandwidth: float = 0.05, kernel: str = "gaussian") -> smoothing.SharpnessCurve:
    """The calibration-sharpness diagram's curves on the 4,096-point grid linspace(0, 1, 4096), as curves.csv
    holds them: a :class:`calibview.core.stats.smoothing.SharpnessCurve` with ``x``, ``curve`` (the kernel
    estimate of the accuracy at confidence x), ``band_lo`` / ``band_hi`` (the sharpness band), ``density``
    (scaled to a maximum of 1) and ``density_raw``, each (4096,) float64 fractions, and ``valid``; curve and band
    are NaN where ``valid`` is False (no data within reach of the kernel; empty cells in curves.csv).
    curves.csv leaves out the points below 1/K (no top-label confidence lies there)."""
    s = _stats(probs, labels, logits)
    return smoothing.sharpness_curve(smoothing.bin_stats(s.conf, s.correct, s.brier), bandwidth, kernel)


__all__ = ["accuracy", "nll", "brier", "ece", "mce", "rmsce", "ace", "classwise_ece", "debiased_ece", "smece",
           "cal_tot", "CalTot", "aurc", "auroc", "reliability", "ReliabilityTable", "sharpness_curve"]
