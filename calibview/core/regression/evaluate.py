"""The evaluation of one regression run: every recalibrator fitted on the fit split, every metric of
:mod:`.metrics` on the evaluation split with a bootstrap interval (the same resamples for every recalibrator),
and the interval-coverage curve with its bootstrap band (:func:`evaluate_regression`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping, Optional

import numpy as np

from calibview.core.errors import CalibviewError, check_cancel
from calibview.core.io.regression.read import read_regression_split
from calibview.core.io.regression.schema import RegRunInfo, RegSplitData
from calibview.core.regression import recalibrators as recal
from calibview.core.regression.forms import Predictive
from calibview.core.regression.kernel import silverman
from calibview.core.regression.metrics import REG_METRIC_NAMES, Terms, expected_proportions

_BLOCK = 50            # resamples per block: (block, N) weights at a time


@dataclass(frozen=True)
class RegRequest:
    """What to evaluate: run ``run`` (a RegRunInfo), recalibrators fitted on ``fit_split`` (None: ``none``
    only), metrics on ``eval_split``; ``bins`` ENCE bins, ``bandwidth`` of cal in target units (None:
    Silverman's rule on the evaluation split's means), ``n_boot`` resamples with ``seed``, intervals at
    ``level`` by ``interval`` ("percentile", "basic", or "auto": basic for the biased calibration errors, see
    :func:`reg_method`; "bca" reads as percentile)."""

    run: RegRunInfo
    eval_split: str
    fit_split: Optional[str] = None
    calibrators: tuple[str, ...] = ("none",)
    bins: int = 15
    bandwidth: Optional[float] = None
    n_boot: int = 1000
    seed: int = 0
    level: float = 0.95
    interval: str = "auto"
    allow_crossing: bool = False


@dataclass(frozen=True)
class RegEstimate:
    """A metric's value and bootstrap interval (``lo``, ``hi``: NaN without one; ``method`` "" then)."""

    value: float
    lo: float
    hi: float
    method: str = ""


@dataclass(frozen=True)
class RegResult:
    """One recalibrator on the evaluation split: the fitted recalibrator, the metrics, the recalibrated
    predictive and targets (read-only), and the interval-coverage curve (``nominal`` (P,), ``observed``,
    ``observed_lo``, ``observed_hi``: the band at the request's level, NaN without resamples)."""

    name: str
    fitted: recal.RegFitted
    metrics: Mapping[str, RegEstimate]
    predictive: Predictive
    targets: np.ndarray
    nominal: np.ndarray
    observed: np.ndarray
    observed_lo: np.ndarray
    observed_hi: np.ndarray


@dataclass(frozen=True)
class RegEvaluation:
    """The evaluation of a regression run: the request, N, the bandwidth used, the results (one per
    recalibrator, in request order) and notes (sorted rows, skipped recalibrators)."""

    run: RegRunInfo
    request: RegRequest
    n_eval: int
    bandwidth: float
    results: tuple[RegResult, ...]
    notes: tuple[str, ...] = ()
    settings: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}), hash=False)


def check_regression_request(req: RegRequest) -> None:
    """Refuse, before any work, a request that cannot work (one sentence, CalibviewError)."""
    if not isinstance(req.bins, int) or req.bins < 1:
        raise CalibviewError(f"--bins {req.bins} cannot bin regression runs for ence; give a whole number >= 1.")
    if req.bandwidth is not None and not (np.isfinite(req.bandwidth) and req.bandwidth > 0):
        raise CalibviewError(f"--reg-bandwidth {req.bandwidth:g} must be a positive number in the target's units.")
    if req.n_boot < 0:
        raise CalibviewError(f"--n-boot {req.n_boot} must be 0 or more.")
    if not 0 < req.level < 1:
        hint = f" (for {req.level:g} %, give {req.level / 100:g})" if 1 < req.level < 100 else ""
        raise CalibviewError(f"--level {req.level:g} must lie strictly between 0 and 1{hint}.")
    for name in req.calibrators:
        if name not in recal.REG_CALIBRATORS:
            raise CalibviewError(f"Unknown regression calibrator {name!r}; choose from "
                                 f"{', '.join(recal.REG_CALIBRATORS)}.")
    req.run.split(req.eval_split)
    if req.fit_split is not None:
        req.run.split(req.fit_split)


def evaluate_regression(req: RegRequest, data: Optional[dict] = None, *,
                        progress: Optional[Callable[[float, str], None]] = None,
                        cancel: Optional[threading.Event] = None) -> RegEvaluation:
    """Evaluate ``req`` (see :class:`RegRequest`); ``data`` maps split names to already read RegSplitData.
    ``progress(fraction, message)`` hears how far it got, and ``cancel`` (checked between bootstrap blocks)
    stops it with :class:`calibview.core.errors.Cancelled`, as the classification engine does."""
    check_regression_request(req)
    data = dict(data or {})
    say = progress or (lambda fraction, message: None)
    say(0.0, f"Reading {req.run.name} ({req.eval_split})…")

    def split(name: str) -> RegSplitData:
        if name not in data:
            data[name] = read_regression_split(req.run, name, allow_crossing=req.allow_crossing)
        return data[name]

    ev = split(req.eval_split)
    notes = [f"{req.run.name} {name}: {split(name).sorted_rows} rows of crossing quantiles sorted (--allow-crossing)"
             for name in dict.fromkeys([req.eval_split] + ([req.fit_split] if req.fit_split else []))
             if split(name).sorted_rows]
    h = float(req.bandwidth) if req.bandwidth is not None else silverman(ev.mean)
    weights = _resample_blocks(ev.n, req.n_boot, req.seed)
    results = []
    todo = [n for n in req.calibrators if not recal.applies(n, req.run.form)]
    for name in req.calibrators:
        check_cancel(cancel)
        reason = recal.applies(name, req.run.form)
        if reason:
            notes.append(f"{req.run.name}: skipping {name} ({reason}).")
            continue
        if name != "none" and req.fit_split is None:
            notes.append(f"{req.run.name}: skipping {name} (the run has no fit split).")
            continue
        done = len(results) / max(1, len(todo))
        say(done, f"{name}: fitting and scoring ({req.n_boot:,} resamples)…")
        fitted = recal.fit(name, Predictive.of(split(req.fit_split)), split(req.fit_split).targets) \
            if name != "none" else recal.RegFitted("none", {}, 0)

        def step(fraction: float, name=name, done=done) -> None:
            check_cancel(cancel)
            say(done + fraction / max(1, len(todo)), f"{name}: bootstrap {100 * fraction:.0f} %")

        results.append(_score(name, fitted, fitted.apply(Predictive.of(ev)), ev.targets, req, h, weights, step))
    say(1.0, "done")
    settings = {"bins": req.bins, "bandwidth": h, "n_boot": req.n_boot, "seed": req.seed, "level": req.level}
    return RegEvaluation(req.run, req, ev.n, h, tuple(results), tuple(notes), MappingProxyType(settings))


def _resample_blocks(n: int, n_boot: int, seed: int) -> list[np.ndarray]:
    """The bootstrap's (block, N) resample counts, ``n_boot`` in all, from numpy's PCG64 at ``seed``."""
    rng = np.random.default_rng(seed)
    blocks, left = [], n_boot
    while left > 0:
        b = min(_BLOCK, left)
        idx = rng.integers(0, n, size=(b, n))
        w = np.zeros((b, n))
        for i in range(b):
            w[i] = np.bincount(idx[i], minlength=n)
        blocks.append(w)
        left -= b
    return blocks


def _score(name: str, fitted, pred: Predictive, y: np.ndarray, req: RegRequest, h: float, blocks,
           step: Callable[[float], None] = lambda fraction: None) -> RegResult:
    terms = Terms.build(pred, y, req.bins, h)
    point = {k: float(v[0]) for k, v in terms.metrics(np.ones((1, y.size))).items()}
    nominal = expected_proportions()
    observed = terms.inside.mean(axis=0)
    dists = {k: [] for k in REG_METRIC_NAMES}
    curves = []
    for i, w in enumerate(blocks):
        step(i / len(blocks))
        for k, v in terms.metrics(w).items():
            dists[k].append(v)
        curves.append((w @ terms.inside) / w.sum(axis=1)[:, None])
    metrics = {}
    for k in REG_METRIC_NAMES:
        if blocks and np.isfinite(point[k]):
            method = reg_method(k, req.interval)
            lo, hi = interval(np.concatenate(dists[k]), point[k], req.level, method)
            if method == "basic" and k in BIASED_REG_METRICS:
                lo = max(lo, 0.0)                 # an error is never negative
            metrics[k] = RegEstimate(point[k], lo, hi, method)
        else:
            metrics[k] = RegEstimate(point[k], float("nan"), float("nan"))
    if curves:
        c = np.concatenate(curves)
        a = (1 - req.level) / 2
        band_lo, band_hi = np.percentile(c, 100 * a, axis=0), np.percentile(c, 100 * (1 - a), axis=0)
    else:
        band_lo = band_hi = np.full(nominal.shape, np.nan)
    arrays = [nominal, observed, band_lo, band_hi, y]
    for a_ in arrays:
        a_.setflags(write=False)
    return RegResult(name, fitted, MappingProxyType(metrics), pred, y, nominal, observed, band_lo, band_hi)


#: the calibration errors whose plug-in estimates are biased upward on resamples (duplicated targets sharpen the
#: empirical coverage steps), so that their resamples lie almost all above the estimate: as for the binned errors
#: of classification (calibview.core.stats.intervals), ``auto`` gives them the basic interval, clipped at 0
BIASED_REG_METRICS = frozenset({"miscalibration_area", "rms_calibration_error", "ma_calibration_error", "ence"})


def reg_method(metric: str, choice: str) -> str:
    """The interval method of ``metric`` for ``--interval`` ``choice``: "basic" asked or (under "auto") for
    BIASED_REG_METRICS, else "percentile" ("bca" reads as percentile: there is no jackknife here)."""
    if choice == "basic" or (choice == "auto" and metric in BIASED_REG_METRICS):
        return "basic"
    return "percentile"


def interval(values: np.ndarray, estimate: float, level: float, method: str = "percentile") -> tuple[float, float]:
    """(lo, hi) of the bootstrap ``values`` at ``level``: percentile, or basic (2 estimate - the percentiles);
    NaN resamples dropped, and the interval extended to contain a finite estimate."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan"), float("nan")
    a = (1 - level) / 2
    q_lo, q_hi = (float(x) for x in np.percentile(v, [100 * a, 100 * (1 - a)]))
    lo, hi = (2 * estimate - q_hi, 2 * estimate - q_lo) if method == "basic" else (q_lo, q_hi)
    return min(lo, estimate), max(hi, estimate)
