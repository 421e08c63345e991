"""One-vs-rest CORP for a chosen class: the PAV reliability curve of p_c, each calibrator's predicted probability
of class c, against the outcome 1[y = c], with its bands and the decomposition of the one-vs-rest Brier score
(p_c - 1[y = c])^2, for ``calibview report --corp-class`` and the window's Class CORP tab.

The engine keeps per-sample vectors of the top label only (confidence, arg-max, label), so p_c of a class that is
not the arg-max is not among them. A binary run needs nothing more: p_1 is the confidence or its complement.
Above two classes the evaluation split is read once for the chosen class (:func:`class_forecasts`): every
calibrator is applied to each chunk, and only column c of its probabilities is kept, (N,) float64 per
calibrator. The result is cached in the engine's cache beside the stages' entries (keyed on the score key and the
class, so a bandwidth move or another class shown before reuses it); ``COUNTERS["passes"]`` counts the reads
(tests assert on it).

A top-label run (confidence, prediction, label) has no class probabilities: it is refused in one sentence.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Optional, Sequence

import numpy as np
import torch

from calibview.core.errors import CalibviewError, check_cancel
from calibview.core.evaluation.job import Job
from calibview.core.evaluation.request import settings_of
from calibview.core.io import stream
from calibview.core.io.toplabel.format import is_toplabel
from calibview.core.reports.corp import CORP_COLUMNS, CorpSet, corp_cells, corp_key, resamples_of
from calibview.core.reports.tables import table_csv
from calibview.core.stats import smoothing
from calibview.core.stats.corp.curves import corp_curve
from calibview.core.stats.metrics import chunk_rows
from calibview.core.stats.positive_class import PositiveClass, binary_forecast, class_diagram

__all__ = ["ClassForecasts", "class_index", "class_label", "class_forecasts", "class_corp_set", "class_diagrams",
           "class_tables", "CLASS_CURVE_COLUMNS", "CLASS_SCORE_COLUMNS", "COUNTERS"]

#: "passes": reads of an evaluation split for a class's probabilities; "curves": one-vs-rest curves computed
COUNTERS: Counter = Counter()


@dataclass(frozen=True, eq=False)
class ClassForecasts:
    """Class ``cls`` (named ``name``) of one evaluation: ``outcome`` (N,) float64 1[y = cls] and ``forecasts``
    calibrator name -> (N,) float64 p_cls in [0, 1], in the evaluation split's row order."""

    cls: int
    name: str
    outcome: np.ndarray
    forecasts: Mapping[str, np.ndarray]


def class_label(run_info, cls: int) -> str:
    """The display name of class ``cls``: its name in the file, else its index."""
    names = getattr(run_info, "class_names", None)
    return str(names[cls]) if names else str(cls)


def class_index(run_info, text) -> int:
    """The class index (0 .. K-1) that ``text`` names: an index, or a class name of the file; one sentence when
    it names none."""
    names = [str(c) for c in (getattr(run_info, "class_names", None) or ())]
    s = str(text).strip()
    if s in names:
        return names.index(s)
    try:
        c = int(s)
    except ValueError:
        c = None
    if c is not None and 0 <= c < int(run_info.k):
        return c
    hint = f" or a class name ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})" if names else ""
    raise CalibviewError(f"{run_info.name} has no class {s!r}: name a class by its index, 0 to {run_info.k - 1}"
                         f"{hint}.")


def class_forecasts(engine, evaluation, cls: int, *, cancel: Optional[threading.Event] = None) -> ClassForecasts:
    """:class:`ClassForecasts` of class ``cls`` for every calibrator of ``evaluation`` (an Evaluation of
    ``engine``): from the cached per-sample vectors for a binary run, else from one read of the evaluation split
    (cached; none when every calibrator's column is cached already). Cancelled between chunks."""
    req = evaluation.request
    info = evaluation.run
    if is_toplabel(info):
        raise CalibviewError(f"{info.name} is a top-label run (confidence, prediction, label): it has no class "
                             "probabilities, so it has no one-vs-rest CORP curve.")
    k = int(evaluation.k)
    if not 0 <= int(cls) < k:
        raise CalibviewError(f"{info.name} has {k} classes: class {cls} is not one of them.")
    cls = int(cls)
    names = [r.name for r in evaluation.results]
    if k == 2:
        scored = engine.scored(req, cancel=cancel)
        pairs = {nm: binary_forecast(scored[nm].stats, cls) for nm in names}
        out = {nm: pq[0] for nm, pq in pairs.items()}
        y = pairs[names[0]][1]
        return ClassForecasts(cls, class_label(info, cls), y, MappingProxyType(out))
    job = Job(engine.cache, req, settings_of(req), None, cancel)
    keys = {nm: ("class",) + job.score_key(nm)[1:] + (cls,) for nm in names}
    have = {nm: engine.cache.get(keys[nm]) for nm in names}
    todo = [nm for nm in names if have[nm] is None]
    if todo:
        fitted = engine.fitted(req, cancel=cancel)
        got = _read_column(job, fitted, todo, cls, cancel)
        for nm in todo:
            have[nm] = engine.cache.put(keys[nm], got[nm])
    first = have[names[0]]
    return ClassForecasts(cls, class_label(info, cls), first[1].astype(np.float64),
                          MappingProxyType({nm: have[nm][0] for nm in names}))


def _read_column(job: Job, fitted, names: Sequence[str], cls: int, cancel) -> dict:
    """One pass over the evaluation split: calibrator name -> ((N,) float64 p_cls, (N,) bool y == cls)."""
    n = job.n
    cols = {nm: np.empty(n) for nm in names}
    hit = np.empty(n, dtype=bool)
    opened: list = []
    try:
        with torch.inference_mode():
            scores, labels = job.open_split(job.req.eval_split, (0.0, 0.0), opened)
            source = (scores.chunks() if stream.is_streamed(scores) else
                      stream.tensor_chunks(scores, labels, chunk_rows(job.k)))
            for start, z, y in source:
                check_cancel(cancel)
                rows = slice(start, start + z.shape[0])
                hit[rows] = (y == cls).cpu().numpy()
                for nm in names:
                    # the column alone: exp of one (rows,) slice, not of the (rows, K) matrix
                    cols[nm][rows] = fitted[nm].apply(z)[:, cls].exp().cpu().numpy()
    finally:
        for s in opened:
            s.close()
    COUNTERS["passes"] += 1
    return {nm: (np.clip(cols[nm], 0.0, 1.0), hit) for nm in names}


def class_corp_set(engine, evaluation, cls: int, *, bands: bool = True,
                   cancel: Optional[threading.Event] = None, forecasts: Optional[ClassForecasts] = None) -> CorpSet:
    """The one-vs-rest CORP curves of class ``cls`` (calibrator name -> CorpCurve: the PAV fit of 1[y = cls] on
    p_cls, its bands read on the kernel curves' grid, its ``decomposition`` that of the one-vs-rest Brier score
    (p_cls - 1[y = cls])^2), keyed by ``corp_key(request, cls)``; bands from ``resamples_of(request)`` seeded
    resamples unless ``bands`` is False. ``forecasts``: those of :func:`class_forecasts`, when at hand."""
    req = evaluation.request
    fc = forecasts if forecasts is not None else class_forecasts(engine, evaluation, cls, cancel=cancel)
    curves = {}
    for r in evaluation.results:
        check_cancel(cancel)
        curves[r.name] = corp_curve(fc.forecasts[r.name], fc.outcome, r.stats.grid, bands=bands,
                                    n_resamples=resamples_of(req), seed=req.seed, cancel=cancel)
        COUNTERS["curves"] += 1
    return CorpSet(corp_key(req, int(cls)), MappingProxyType(curves), bool(bands))


def class_diagrams(evaluation, forecasts: ClassForecasts) -> list[PositiveClass]:
    """The one-vs-rest diagram of each calibrator of ``evaluation`` (drawable like a CalibratorResult: the kernel
    estimate of P(y = c) against p_c over [0, 1], its loss the two-class Brier score of c against the rest), in the
    results' order."""
    return [class_diagram(r.name, r.label, forecasts.forecasts[r.name], forecasts.outcome) for r in evaluation.results]


#: corp_class.csv: the one-vs-rest diagram's kernel curve (at the evaluation's bandwidth) and CORP columns on
#: its grid, one row per grid point per class and calibrator
CLASS_CURVE_COLUMNS = ("model", "dataset", "split", "class", "class_name", "calibrator", "bandwidth", "kernel", "x",
                       "curve", "band_lo", "band_hi", "density") + CORP_COLUMNS
#: corp_class_scores.csv: per class and calibrator, the one-vs-rest Brier score and its CORP decomposition
CLASS_SCORE_COLUMNS = ("model", "dataset", "split", "class", "class_name", "calibrator", "n", "n_positive",
                       "brier", "corp_mcb", "corp_dsc", "corp_unc")


def class_tables(parts: Sequence[tuple]) -> tuple[str, str]:
    """(corp_class.csv, corp_class_scores.csv) of ``parts``, each (evaluation, ClassForecasts, CorpSet of that
    class): the curve rows on the diagram's grid (CLASS_CURVE_COLUMNS) and the score rows
    (CLASS_SCORE_COLUMNS)."""
    curves, scores = [], []
    for ev, fc, cs in parts:
        h, kern = ev.request.bandwidth, ev.request.kernel
        for r, diagram in zip(ev.results, class_diagrams(ev, fc)):
            ident = {"model": ev.run.model, "dataset": ev.run.dataset, "split": ev.request.eval_split,
                     "class": fc.cls, "class_name": fc.name, "calibrator": r.name}
            curve = cs.of(r.name)
            d = curve.decomposition
            scores.append({**ident, "n": curve.n, "n_positive": int(fc.outcome.sum()), "brier": d["score"],
                           "corp_mcb": d["mcb"], "corp_dsc": d["dsc"], "corp_unc": d["unc"]})
            c = smoothing.sharpness_curve(diagram.stats, h, kern)
            cells = corp_cells(curve, c.x)
            for i in range(c.x.shape[0]):
                ok = bool(c.valid[i])
                curves.append({**ident, "bandwidth": h, "kernel": kern, "x": c.x[i],
                               "curve": c.curve[i] if ok else None, "band_lo": c.band_lo[i] if ok else None,
                               "band_hi": c.band_hi[i] if ok else None, "density": c.density[i],
                               **{k: v[i] for k, v in cells.items()}})
    return (table_csv(curves, CLASS_CURVE_COLUMNS, floats=CLASS_CURVE_COLUMNS[6:7] + CLASS_CURVE_COLUMNS[8:]),
            table_csv(scores, CLASS_SCORE_COLUMNS, floats=CLASS_SCORE_COLUMNS[8:]))
