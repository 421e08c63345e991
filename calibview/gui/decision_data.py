"""What the Decisions view shows, built on the worker thread from Engine.scored (Qt-free, numpy only).

Per calibrator: the risk-coverage curve (downsampled to exact tie-group ends) and the confidences sorted once with
prefix sums, so that the threshold slider's lookup is O(log N) on the GUI thread and nothing else is computed
there. Uses :mod:`calibview.core.selective` when present; until it lands, a minimal local equivalent with the same
interface (SortedConfidence.at and RiskCoverage.coverage / risk / downsampled / aurc).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

import numpy as np

try:                                     # the core's version once core/selective.py is merged
    from calibview.core.selective import RiskCoverage, SortedConfidence
except ImportError:                      # pragma: no cover - exercised until then
    from scipy.special import ndtri

    from calibview.core.metrics import wilson_interval

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
            return self.n > 0 and not (self.lo <= self.mean_conf <= self.hi)

    class SortedConfidence:
        """Confidences sorted once with prefix sums from the top: :meth:`at` is one bisection."""

        def __init__(self, conf, correct, level: float = 0.95) -> None:
            conf = np.asarray(conf, dtype=np.float64)
            order = np.argsort(conf, kind="stable")
            self.asc = conf[order]
            self.n_total = int(conf.shape[0])
            self.level = level
            self._z = float(ndtri(0.5 + level / 2.0))
            self._hits = np.r_[0.0, np.cumsum(np.asarray(correct, np.float64)[order][::-1])]
            self._conf = np.r_[0.0, np.cumsum(self.asc[::-1])]
            self._list = self.asc.tolist()

        def at(self, t: float) -> AtThreshold:
            j = self.n_total - bisect_left(self._list, float(t))
            if j == 0:
                return AtThreshold(float(t), 0, 0.0, math.nan, math.nan, math.nan, math.nan)
            hits = float(self._hits[j])
            lo, hi = wilson_interval(np.array([hits]), np.array([float(j)]), z=self._z)
            return AtThreshold(float(t), j, j / self.n_total, hits / j, float(self._conf[j]) / j, float(lo[0]),
                               float(hi[0]))

    class RiskCoverage:
        """Selective risk at the end of each tie group of confidences (descending)."""

        def __init__(self, conf, correct) -> None:
            conf = np.asarray(conf, np.float64)
            order = np.argsort(-conf, kind="stable")
            c = conf[order]
            err = np.cumsum(1.0 - np.asarray(correct, np.float64)[order])
            ends = np.r_[np.flatnonzero(np.diff(c) != 0), c.shape[0] - 1] if c.size else np.zeros(0, int)
            self.n = float(c.shape[0])
            self.count = ends + 1.0
            self.errors = err[ends]
            sizes = np.diff(np.r_[0.0, self.count])
            self.aurc = float(np.sum(sizes * self.errors / self.count) / self.n) if c.size else math.nan

        @property
        def coverage(self) -> np.ndarray:
            return self.count / self.n

        @property
        def risk(self) -> np.ndarray:
            return self.errors / self.count

        def downsampled(self, max_points: int = 1000) -> np.ndarray:
            g = self.count.shape[0]
            if g <= max_points:
                return np.arange(g)
            target = np.linspace(self.count[0], self.count[-1], max_points)
            return np.unique(np.r_[np.searchsorted(self.count, target, side="left"), g - 1])

#: points drawn per risk-coverage curve (exact tie-group ends, evenly spaced in coverage)
CURVE_POINTS = 1000


@dataclass(frozen=True)
class CalibratorDecisions:
    name: str
    label: str
    coverage: np.ndarray = field(repr=False)     # (<= CURVE_POINTS,) at tie-group ends
    risk: np.ndarray = field(repr=False)
    aurc: float = float("nan")
    sorted: SortedConfidence = field(default=None, repr=False)   # .at(t): n, coverage, accuracy, Wilson lo/hi


@dataclass(frozen=True)
class Decisions:
    """The decision data of one evaluation request (one eval split), calibrators in the request's order."""

    run: str
    eval_split: str
    fit_split: str | None
    n: int
    level: float
    calibrators: Mapping[str, CalibratorDecisions]


def build_decisions(request, scored: Mapping, labels: Mapping[str, str]) -> Decisions:
    """From ``Engine.scored(request)`` (name -> Scored): O(N log N) per calibrator, on the worker thread."""
    out = {}
    n = 0
    for name in request.calibrators:
        sc = scored.get(name)
        if sc is None:
            continue
        conf, correct = sc.stats.conf, sc.stats.correct
        n = int(conf.shape[0])
        rc = RiskCoverage(conf, correct)
        idx = rc.downsampled(CURVE_POINTS)
        cov, risk = np.asarray(rc.coverage)[idx], np.asarray(rc.risk)[idx]
        for a in (cov, risk):
            a.setflags(write=False)
        out[name] = CalibratorDecisions(name=name, label=labels.get(name, name), coverage=cov, risk=risk,
                                        aurc=float(rc.aurc), sorted=SortedConfidence(conf, correct, request.level))
    return Decisions(run=request.run, eval_split=request.eval_split, fit_split=request.fit_split, n=n,
                     level=request.level, calibrators=MappingProxyType(out))
