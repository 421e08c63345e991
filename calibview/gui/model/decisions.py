"""What the Decisions view shows, built on the worker thread from Engine.scored (Qt-free, numpy only).

Per calibrator: the risk-coverage curve (downsampled to exact tie-group ends) and the confidences sorted once with
prefix sums, so that the threshold slider's lookup is O(log N) on the GUI thread and nothing else is computed
there. The numbers are :mod:`calibview.core.stats.selective`'s (the same as selective.csv and audit.csv).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

import numpy as np

from calibview.core.stats.selective import RiskCoverage, SortedConfidence

#: points drawn per risk-coverage curve (exact tie-group ends, evenly spaced in coverage)
CURVE_POINTS = 1000


@dataclass(frozen=True)
class CalibratorDecisions:
    """One calibrator's risk-coverage curve (coverage and selective risk, fractions, downsampled) and its sorted
    confidences for the threshold lookup."""
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
