"""What an evaluation returns: immutable :class:`Evaluation` (one per setting), a :class:`CalibratorResult` per
calibrator with an :class:`Estimate` per metric, the :class:`Counters` of what the request recomputed, and the
score stage's cached :class:`Scored` (per-sample vectors and class-wise statistics)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Optional

import numpy as np

from calibview.core import calibrators as calib
from calibview.core.io import schema
from calibview.core.stats import smoothing
from calibview.core.stats.metrics import BinTable, SampleStats
from calibview.core.evaluation.request import EvalRequest


@dataclass(frozen=True)
class Estimate:
    """A metric's point estimate and its bootstrap interval (``lo``, ``hi``; NaN without one), and the method
    that produced the interval (calibview.core.stats.intervals: ``percentile``, ``basic``, ``bca``, with
    ``-widened`` where it was extended to contain the estimate; "" without an interval)."""

    value: float
    lo: float
    hi: float
    method: str = ""

    def _key(self) -> tuple:
        return tuple(None if isinstance(x, float) and x != x else x for x in (self.value, self.lo, self.hi)) + \
            (self.method,)

    def __eq__(self, other) -> bool:
        """Equal fields, NaN equal to NaN: a missing value or interval (a K > 2 run's binary-only metric, a
        p-value's bounds) is the same absence in both."""
        if not isinstance(other, Estimate):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True)
class CalibratorResult:
    """Everything shown for one calibrator on the evaluation split (arrays are read-only)."""

    name: str
    label: str
    fitted: calib.Fitted
    metrics: Mapping[str, Estimate]
    bins: BinTable                      # equal-width reliability bins of the evaluation split
    bin_acc_lo: np.ndarray              # Wilson 95 % interval of each bin's accuracy
    bin_acc_hi: np.ndarray
    stats: smoothing.BinnedStats        # sufficient statistics for the calibration-sharpness diagram
    per_class_ece: np.ndarray           # (K,)
    per_class_accuracy: np.ndarray      # (K,) accuracy on the samples of each true class
    per_class_count: np.ndarray         # (K,)
    smece_sigma: float
    argmax_changed: float               # fraction of evaluation samples whose arg-max the calibrator moved
    warnings: tuple[str, ...] = ()
    #: the kernel curve's pointwise bootstrap confidence band (calibview.core.evaluation.estimates.CurveBand:
    #: x, lo, hi (257,) on [0, 1], at the setting's bandwidth and kernel and the request's level); None without
    #: resamples. Unlike the sharpness band, this is a confidence interval for the curve.
    curve_band: Optional[tuple] = None
    #: the loss whose smoothed regression gives the sharpness band and TOT, as figures name it: "Brier", or
    #: "top-label Brier" for a top-label run, whose Brier score is (confidence - correct)^2
    loss: str = "Brier"
    #: what the calibration tests say beyond their p-values: ``p_skce_method`` ("quadratic" or "linear"; "" when
    #: not tested), ``skce`` (the estimate); empty before the resample stage
    tests: Mapping = field(default_factory=lambda: MappingProxyType({}))

    def curve(self, bandwidth: float, kernel: str = "gaussian") -> smoothing.SharpnessCurve:
        """The calibration-sharpness curve at any bandwidth: O(grid), never touches the samples again."""
        return smoothing.sharpness_curve(self.stats, bandwidth, kernel)


@dataclass(frozen=True)
class Counters:
    """What one request recomputed: calibrators fitted anew and taken from the cache (``none`` is in neither),
    (calibrator, eval split) pairs scored anew, and bootstrap parts resampled anew ("ts:kernel 0.05 gaussian")."""

    fitted: tuple[str, ...] = ()
    reused: tuple[str, ...] = ()
    scored: tuple[tuple[str, str], ...] = ()
    resampled: tuple[str, ...] = ()


@dataclass(frozen=True)
class Evaluation:
    """One setting of a request evaluated: the run, the sizes of its fit and evaluation splits (``n_fit``,
    ``n_eval`` samples, ``k`` classes), the resolved bin count, the device, one :class:`CalibratorResult` per
    requested calibrator (in the request's order), the wall time and the seconds per stage."""

    request: EvalRequest
    run: schema.RunInfo
    n_eval: int
    n_fit: int
    k: int
    n_bins: int
    device: str
    results: tuple[CalibratorResult, ...]
    elapsed_s: float
    timings: Mapping[str, float] = field(default_factory=dict)
    #: what this request recomputed; None outside the engine
    counters: Optional[Counters] = None
    #: True for a progressive partial result: point estimates and curves, intervals not yet computed (NaN)
    pending: bool = False

    def result(self, name: str) -> CalibratorResult:
        """The result of calibrator ``name``; KeyError when it was not requested."""
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)


@dataclass(frozen=True)
class Scored:
    """A calibrator's scores on an evaluation split (the score stage's cached output): per-sample vectors and
    class-wise statistics, for every bin count in ``bins``."""

    stats: SampleStats
    bins: tuple[int, ...]
    classwise_sums: MappingProxyType           # B -> (K, B) float64
    classwise_dist: MappingProxyType           # B -> (n_boot,) float64, or None (no interval, see notes)
    argmax_changed: float
    notes: tuple[str, ...] = ()
    auroc: float = float("nan")                # macro one-vs-rest AUROC (calibview.core.stats.auroc), counted here
    auroc_dist: Optional[np.ndarray] = None    # (n_boot,) or None (no interval, see notes)
    classwise_loo: Mapping = field(default_factory=lambda: MappingProxyType({}))  # B -> (m,) class-wise ECE without each subsample row
    #: the refinement split's result (calibview.core.stats.corp.refinement.RefinementResult); None without logits
    refinement: Optional[object] = None
