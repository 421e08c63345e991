"""``calibview.conformal``: split conformal prediction sets on arrays in memory, as ``calibview conformal`` computes
them from a file.

The arrays become an in-memory run (:mod:`calibview.core.io.arrays`) with the splits ``calib``, ``test`` and, when
a calibrator is asked for, ``fit``; :func:`~calibview.core.evaluation.conformal.evaluate_conformal` then reads them
as it reads a file, so ``conformal(...).rows`` are exactly the records of ``calibview conformal --json
--calib-split calib --eval-split test [--fit-split fit]`` on the same arrays written to an HDF5 file.

The module is not called ``conformal``: importing it would set ``calibview.api.conformal`` to the module, hiding the
function.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence, Union

from calibview.api.evaluation import _Progress, _binary, _names, _numpy, _pair
from calibview.core.errors import ParameterError
from calibview.core.evaluation import defaults
from calibview.core.io import arrays

__all__ = ["conformal", "ConformalResult"]

LABEL = "calibview.conformal"
CALIB, TEST, FIT = "calib", "test", "fit"


class ConformalResult:
    """What :func:`conformal` returns: ``rows`` (the records of ``calibview conformal --json``: per calibrator, score
    and alpha, group ``all`` then ``class=<c>``, ``size=<s>`` and ``<column>=<value>``; non-finite values None),
    ``worst`` ((calibrator, score, alpha) -> the lowest coverage of a class), ``notes`` (warnings), and helpers."""

    def __init__(self, evaluation) -> None:
        self.evaluation = evaluation
        self.rows = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
                     for r in evaluation.records]
        self.worst = dict(evaluation.worst)
        self.notes = tuple(evaluation.notes)

    def overall(self, score: str, alpha: float, calibrator: str = "none") -> dict:
        """The ``group == "all"`` record of (``calibrator``, ``score``, ``alpha``): coverage, mean set size, their
        intervals, qhat, the empty and full fractions."""
        for r in self.rows:
            if (r["group"] == "all" and r["score"] == score and r["calibrator"] == calibrator
                    and math.isclose(r["alpha"], float(alpha))):
                return r
        raise KeyError(f"no record for calibrator={calibrator!r}, score={score!r}, alpha={alpha!r}; the result has "
                       f"{sorted({(r['calibrator'], r['score'], r['alpha']) for r in self.rows})}.")

    def to_pandas(self):
        """``rows`` as a pandas DataFrame (pandas is imported only here)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(self.rows[0]) if self.rows else None)

    def plot(self, path) -> None:
        """Write the ``conformal.png`` of ``calibview conformal --out``: coverage by class around 1 - alpha and the
        set-size histogram (needs PySide6 and pyqtgraph)."""
        from calibview.plot.conformal import conformal_png

        conformal_png(list(self.evaluation.records), path)

    def __repr__(self) -> str:
        n = sum(1 for r in self.rows if r["group"] == "all")
        return f"<calibview.ConformalResult: {n} overall records, {len(self.rows)} in all>"


def _items(value, what: str) -> list:
    items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else [value]
    items = [i.strip() if isinstance(i, str) else i for i in items]
    if not items or any(i == "" for i in items):
        raise ParameterError(f"{what} is empty or has an empty item; give one value or a list.", what)
    return list(dict.fromkeys(items))


def conformal(scores=None, labels=None, *, calib=None, fit=None, probs: bool = False,
              alpha: Union[float, Sequence[float]] = defaults.ALPHA,
              score: Union[str, Sequence[str]] = defaults.CONFORMAL_SCORES,
              calibrator: Union[str, Sequence[str]] = "none", mondrian: Optional[str] = None,
              randomized: bool = False, seed: int = defaults.SEED, raps_lambda: float = defaults.RAPS_LAMBDA,
              raps_kreg: int = defaults.RAPS_KREG, n_boot: int = defaults.N_BOOT, level: float = defaults.LEVEL,
              device: str = "auto", progress: bool = False, class_names: Optional[Sequence[str]] = None,
              meta: Optional[Mapping[str, Any]] = None, calib_meta: Optional[Mapping[str, Any]] = None,
              model: str = "model", dataset: str = "data") -> ConformalResult:
    """Conformal prediction sets for ``scores``: the quantile from ``calib``, coverage and set size on the test
    arrays, overall and by class, set size and metadata value, with bootstrap intervals.

    scores : (N, K) logits, or probabilities with ``probs=True`` (numpy or torch; a binary model's (N,) or (N, 1)
        scores of class 1 as in :func:`calibview.evaluate`). labels : (N,) class indices 0..K-1.
    calib : the (scores (N_cal, K), labels (N_cal,)) pair the quantile qhat is taken on.
    fit : a (scores, labels) pair the calibrators other than ``none`` are fitted on; required for them.
    alpha : miscoverage level(s) in (0, 1). score : among ``lac``, ``aps``, ``raps`` (``raps_lambda``,
        ``raps_kreg``: RAPS's penalty). calibrator : applied before scoring (``none``, ``ts``, ...).
    mondrian : None, ``"class"`` (a quantile per class), or a column of both ``meta`` (the test samples) and
        ``calib_meta`` (the calibration samples): a quantile per value.
    randomized, seed : randomised aps / raps, one seeded uniform per sample (the seed is also the bootstrap's).
    n_boot, level : resamples of the test arrays for the intervals (0: none), the intervals' level.

    Bad input raises :class:`calibview.CalibviewError` with the sentence ``calibview conformal`` gives."""
    if calib is None:
        raise ParameterError("calib=(scores, labels) is missing: the held-out arrays the conformal quantile is taken "
                             "on.", "calib")
    names = _names(calibrator)
    kind = "probs" if probs else "logits"
    splits, pretty = {}, {}
    cs, cl = _pair(calib, "calib")
    splits[CALIB] = (kind, _binary(kind, _numpy(cs, "calib[0]", LABEL)), _numpy(cl, "calib[1]", LABEL))
    pretty[CALIB] = ("calib[0]", "calib[1]")
    if fit is not None:
        fs, fl = _pair(fit, "fit")
        splits[FIT] = (kind, _binary(kind, _numpy(fs, "fit[0]", LABEL)), _numpy(fl, "fit[1]", LABEL))
        pretty[FIT] = ("fit[0]", "fit[1]")
    splits[TEST] = (kind, _binary(kind, _numpy(scores, "scores", LABEL)), _numpy(labels, "labels", LABEL))
    pretty[TEST] = ("scores", "labels")
    needing = [c for c in names if c != "none"]
    if needing and fit is None:
        raise ParameterError(f"Calibrators other than 'none' ({', '.join(needing)}) need fit=(scores, labels), the "
                             f"held-out arrays they are fitted on (not the calibration arrays).", "fit")
    columns = {}
    if meta:
        columns[TEST] = meta
    if calib_meta:
        columns[CALIB] = calib_meta
    if mondrian not in (None, "class") and not (meta and calib_meta and mondrian in meta and mondrian in calib_meta):
        raise ParameterError(f"mondrian={mondrian!r} needs that column in both meta (the test samples) and "
                             f"calib_meta (the calibration samples).", "mondrian")
    run = arrays.register(model, dataset, splits, label=LABEL, names=pretty, class_names=class_names,
                          meta=columns or None)
    alphas = [float(a) if not isinstance(a, bool) else a for a in _items(alpha, "alpha")]
    from calibview.core.evaluation.conformal import evaluate_conformal
    from calibview.core.evaluation.engine import Engine

    bar = _Progress() if progress else None
    try:
        ev = evaluate_conformal(Engine(), run.path, run.info.name, calib_split=CALIB, eval_split=TEST,
                                alphas=alphas, scores=_items(score, "score"), calibrators=names,
                                fit_split=FIT if fit is not None else None, mondrian=mondrian,
                                randomized=bool(randomized), seed=seed, lam=raps_lambda, kreg=raps_kreg,
                                n_boot=n_boot, level=level, device=device, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    return ConformalResult(ev)

