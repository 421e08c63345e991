"""The CORP reliability curves of an evaluation's calibrators (calibview.core.stats.corp.curves) from the engine's
per-sample vectors, their columns of curves.csv, and the points of the MCB-DSC plot.

CORP has no bandwidth: a :class:`CorpSet` is keyed by :func:`corp_key`, the request without its bandwidth, kernel,
bins and interval settings, so a slider move or another interval level reuses it. ``COUNTERS`` counts what was
computed (tests assert on it, never on time).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping, Optional, Sequence

import numpy as np

from calibview.core.evaluation import defaults
from calibview.core.stats.corp.curves import DEFAULT_RESAMPLES, CorpCurve, corp_curve, forecast_outcome

__all__ = ["CorpSet", "corp_key", "corp_set", "corp_sets", "corp_cells", "CORP_COLUMNS", "mcb_dsc_points",
           "COUNTERS", "DEFAULT_RESAMPLES"]

#: curves.csv's CORP columns: the step function, its consistency band, its bootstrap band
CORP_COLUMNS = ("corp", "corp_cons_lo", "corp_cons_hi", "corp_lo", "corp_hi")
#: what was computed: "curves" (one per calibrator fitted), "bands" (one per calibrator's bands)
COUNTERS: Counter = Counter()


def corp_key(request, target=None):
    """What the CORP curves of ``request`` (an EvalRequest) depend on: the fits, the evaluation split, the bands'
    resamples and seed, and what they are of: ``target`` None the top label, else the class index of a
    one-vs-rest curve (the positive class of a binary run is class 1); not the bandwidth, kernel, bins or level."""
    return (replace(request, bandwidth=defaults.BANDWIDTH, kernel=defaults.KERNEL, level=defaults.LEVEL,
                    interval=defaults.INTERVAL, bins=defaults.BINS), None if target is None else int(target))


def resamples_of(request) -> int:
    """The bands' resamples: the request's n_boot, or DEFAULT_RESAMPLES when it has none."""
    return int(request.n_boot) if request.n_boot else DEFAULT_RESAMPLES


@dataclass(frozen=True, eq=False)
class CorpSet:
    """The CORP curves of one evaluation: ``key`` (:func:`corp_key`), ``curves`` calibrator name -> CorpCurve,
    ``bands`` whether their bands were computed."""

    key: object
    curves: Mapping[str, CorpCurve]
    bands: bool

    def of(self, name: str) -> Optional[CorpCurve]:
        """The curve of calibrator ``name`` (None when it was not evaluated)."""
        return self.curves.get(name)


def corp_set(engine, evaluation, *, bands: bool = True, positive: bool = False,
             cancel: Optional[threading.Event] = None, scored: Optional[dict] = None) -> CorpSet:
    """The CORP curves of every calibrator of ``evaluation`` (an Evaluation) from ``engine.scored`` (a cache hit
    after its evaluation; or ``scored``, those vectors), on the grid of its kernel curves, with bands
    (``resamples_of(request)`` resamples, the request's seed) unless ``bands`` is False; ``positive``: of the
    positive class (a binary run). Cancelled between calibrators and bands."""
    req = evaluation.request
    scored = engine.scored(req, cancel=cancel) if scored is None else scored
    curves = {}
    for r in evaluation.results:
        if cancel is not None and cancel.is_set():
            from calibview.core.errors import Cancelled
            raise Cancelled()
        f, a = forecast_outcome(scored[r.name].stats, positive)
        curves[r.name] = corp_curve(f, a, r.stats.grid, bands=bands, n_resamples=resamples_of(req), seed=req.seed,
                                    cancel=cancel)
        COUNTERS["curves"] += 1
        COUNTERS["bands"] += bool(bands)
    return CorpSet(corp_key(req, 1 if positive else None), MappingProxyType(curves), bool(bands))


def corp_sets(engine, evaluations: Sequence, *, bands: Optional[bool] = None) -> dict:
    """(run file, run name, eval split) -> CorpSet of the first evaluation of each (curves.csv's keys). ``bands``
    None: bands where the evaluation has resamples (a report with --n-boot 0 asks for no interval, and the bands
    are one: their resamples cost about 0.6 s per calibrator at N = 10,000)."""
    out = {}
    for ev in evaluations:
        key = (ev.run.file, ev.run.name, ev.request.eval_split)
        if key not in out:
            out[key] = corp_set(engine, ev, bands=bool(ev.request.n_boot) if bands is None else bands)
    return out


def corp_cells(curve: Optional[CorpCurve], x: np.ndarray) -> dict[str, np.ndarray]:
    """CORP_COLUMNS -> (G,) values at the grid ``x`` (the curve's own grid; NaN where undefined or not
    computed)."""
    nan = np.full(np.shape(x), np.nan)
    if curve is None:
        return {c: nan for c in CORP_COLUMNS}
    same = curve.grid.shape == np.shape(x) and np.array_equal(curve.grid, x)

    def read(v):
        if v is None:
            return nan
        return v if same else np.interp(x, curve.grid, v, left=np.nan, right=np.nan)

    return {"corp": curve.at(x), "corp_cons_lo": read(curve.cons_lo), "corp_cons_hi": read(curve.cons_hi),
            "corp_lo": read(curve.boot_lo), "corp_hi": read(curve.boot_hi)}


def mcb_dsc_points(evaluations: Sequence, corp: Mapping = MappingProxyType({})) -> list[dict]:
    """One point per evaluation and calibrator: {"label", "run", "split", "calibrator", "mcb", "dsc", "unc",
    "score"} of the top-label Brier score (score = mcb - dsc + unc). The metric rows' ``corp_mcb``,
    ``corp_dsc`` and ``corp_unc`` where the evaluation carries them, else the decomposition of the CorpSet
    ``corp[(run file, run name, eval split)]``; a calibrator with neither is left out. The label names the run
    and split too where ``evaluations`` holds more than one run or split."""
    runs = {(ev.run.file, ev.run.name) for ev in evaluations}
    splits = {ev.request.eval_split for ev in evaluations}
    out = []
    for ev in evaluations:
        cs = corp.get((ev.run.file, ev.run.name, ev.request.eval_split))
        for r in ev.results:
            m = r.metrics
            if all(k in m for k in ("corp_mcb", "corp_dsc", "corp_unc")):
                mcb, dsc, unc = (float(m[k].value) for k in ("corp_mcb", "corp_dsc", "corp_unc"))
            elif cs is not None and cs.of(r.name) is not None:
                d = cs.of(r.name).decomposition
                mcb, dsc, unc = d["mcb"], d["dsc"], d["unc"]
            else:
                continue
            head = ([ev.run.name] if len(runs) > 1 else []) + ([ev.request.eval_split] if len(splits) > 1 else [])
            out.append({"label": " · ".join(head + [r.label]), "run": ev.run.name, "split": ev.request.eval_split,
                        "calibrator": r.name, "mcb": mcb, "dsc": dsc, "unc": unc, "score": mcb - dsc + unc})
    return out
