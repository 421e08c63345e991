"""The ensemble's calibration curve split by epistemic tercile: one kernel curve per third of the samples ranked
by the mutual information between the members (low, mid, high), for the diagram (window and report).

The terciles are :func:`calibview.core.evaluation.members.uncertainty.terciles` (the same samples as ``calibview
slices --by epistemic``); each tercile's curve is the calibrator's own kernel curve
(:func:`calibview.core.stats.smoothing.sharpness_curve`) on that tercile's samples, binned once from the
per-sample vectors the engine already holds (``Engine.scored``), so that any bandwidth afterwards costs
O(grid) and never touches the samples again. Qt-free.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Optional

import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.stats import smoothing

#: the terciles' names, lowest mutual information first
TERCILE_NAMES = ("low", "mid", "high")
#: what the three curves are, for a legend
HEADING = "epistemic (MI terciles)"

_EMPTY = MappingProxyType({})


@dataclass(frozen=True, eq=False)
class TercileCurve:
    """One tercile of one calibrator: ``rows`` (n,) int64 increasing row indices into the evaluation split,
    ``stats`` the binned sums of its samples' confidence, correctness and Brier loss. Drawn like a calibrator's
    result (``name`` its colour key, ``label`` its legend text, ``metrics`` empty, ``legend_text`` its n)."""

    calibrator: str
    tercile: int                    # 0 low, 1 mid, 2 high mutual information
    rows: np.ndarray
    stats: smoothing.BinnedStats
    _curves: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def n(self) -> int:
        """The number of samples in the tercile."""
        return int(self.rows.shape[0])

    @property
    def name(self) -> str:
        """The colour key of the curve ("MI low"): never a calibrator's name."""
        return f"MI {TERCILE_NAMES[self.tercile]}"

    @property
    def label(self) -> str:
        """"low epistemic (MI terciles)"."""
        return f"{TERCILE_NAMES[self.tercile]} {HEADING}"

    @property
    def legend_text(self) -> str:
        """The legend's number of the curve: its n ("n=1,000")."""
        return f"n={self.n:,}"

    @property
    def metrics(self) -> Mapping:
        """No metrics of its own (the Slices tab has the tercile's numbers)."""
        return _EMPTY

    def curve(self, bandwidth: float, kernel: str = "gaussian") -> smoothing.SharpnessCurve:
        """The tercile's kernel curve at ``bandwidth`` (confidence units) and ``kernel``: O(grid), cached per
        (bandwidth, kernel)."""
        key = (float(bandwidth), str(kernel).lower())
        sc = self._curves.get(key)
        if sc is None:
            if len(self._curves) >= 64:             # a dragged slider visits many bandwidths: keep the latest
                self._curves.pop(next(iter(self._curves)))
            sc = self._curves[key] = smoothing.sharpness_curve(self.stats, *key)
        return sc


def split_curves(calibrator: str, conf, correct, brier, codes) -> tuple[TercileCurve, ...]:
    """The three :class:`TercileCurve` of one calibrator from its per-sample vectors ``conf``, ``correct`` and
    ``brier`` ((N,) float, as ``SampleStats``) and ``codes`` ((N,) tercile of each sample, 0/1/2); a tercile
    without samples is left out."""
    codes = np.asarray(codes)
    conf, correct, brier = (np.asarray(a, np.float64) for a in (conf, correct, brier))
    if not conf.shape == correct.shape == brier.shape == codes.shape:
        raise CalibviewError(f"The tercile codes ({codes.shape[0]} samples) do not match the scores "
                             f"({conf.shape[0]} samples) of {calibrator}.")
    out = []
    for t in range(len(TERCILE_NAMES)):
        rows = np.flatnonzero(codes == t).astype(np.int64)
        if rows.size:
            rows.flags.writeable = False
            out.append(TercileCurve(calibrator, t, rows, smoothing.bin_stats(conf[rows], correct[rows], brier[rows])))
    return tuple(out)


@dataclass(frozen=True)
class TercileSplit:
    """The tercile curves of every calibrator of one request: ``curves`` calibrator name -> its (up to three)
    TercileCurve; ``codes`` (N,) int8 tercile of each sample of the evaluation split."""

    request: object                 # tercile_key of the EvalRequest split
    codes: np.ndarray
    curves: Mapping[str, tuple]

    def of(self, calibrator: str) -> tuple:
        """The tercile curves of ``calibrator`` (() when it was not evaluated)."""
        return self.curves.get(calibrator, ())


def tercile_split(engine, request, run, cancel: Optional[threading.Event] = None) -> TercileSplit:
    """The tercile curves of every calibrator of ``request`` (an EvalRequest of ``run``, a RunInfo): the scores
    are ``engine.scored(request)`` (a cache hit after its evaluation), the terciles the mutual information of
    the evaluation split's members (read member by member: O(N) memory besides a few chunks). CalibviewError
    for a split without members."""
    from calibview.core.evaluation.members.uncertainty import of_split, terciles

    d = of_split(request.file, run, request.eval_split, cancel)
    if d is None:
        raise CalibviewError(f"Run {run.name} has no members in split {request.eval_split}, so its curve cannot be "
                             f"split by epistemic tercile (that needs an ensemble or MC-dropout members).")
    codes = terciles(d)
    scored = engine.scored(request, cancel=cancel)
    curves = {name: split_curves(name, sc.stats.conf, sc.stats.correct, sc.stats.brier, codes)
              for name, sc in scored.items()}
    return TercileSplit(tercile_key(request), codes, MappingProxyType(curves))


def default_calibrator(names) -> Optional[str]:
    """The calibrator whose curve is split when none is chosen: the first calibrated one, else "none"."""
    names = list(names)
    return next((n for n in names if n != "none"), names[0] if names else None)


def tercile_key(request):
    """What the tercile curves of ``request`` depend on: the request without its bandwidth, kernel, interval
    settings, bins and resamples (a slider move or a new interval level splits the same samples again)."""
    from dataclasses import replace

    from calibview.core.evaluation import defaults

    return replace(request, bandwidth=defaults.BANDWIDTH, kernel=defaults.KERNEL, level=defaults.LEVEL,
                   interval=defaults.INTERVAL, bins=defaults.BINS, n_boot=0, seed=defaults.SEED)
