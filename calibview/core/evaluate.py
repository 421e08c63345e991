"""The one slow call: ``evaluate(request, *, progress, cancel) -> Evaluation``.

One run, a fit split, an evaluation split and a list of calibrators in; immutable results out. The CLI calls it
directly, the GUI calls it on a worker thread. It reports progress, checks ``cancel`` between steps and uses CUDA
when available (``device="auto"``) with the same float64 accumulation as on the CPU.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from . import calibrators as calib
from . import logits as lg
from . import shards
from . import smoothing
from . import stream
from .bootstrap import (ClasswiseFeatures, Interval, MetricBootstrap, Resampler, bootstrap_units,
                        run_bootstrap)
from .errors import CalibviewError, check_cancel, report
from .metrics import (METRIC_NAMES, BinTable, binned_metrics, classwise_ece, equal_width_table,
                      StatsAccumulator, chunk_rows, per_class_accuracy, resolve_bins, wilson_interval)

KERNELS = ("gaussian", "epanechnikov")


@dataclass(frozen=True)
class EvalRequest:
    """What to evaluate. ``fit_split`` may be None when only ``none`` is requested."""

    file: str
    run: str
    eval_split: str = "test"
    fit_split: Optional[str] = "val"
    calibrators: tuple[str, ...] = ("none", "ts")
    bins: Union[int, str] = 15
    n_boot: int = 1000
    seed: int = 0
    level: float = 0.95
    bandwidth: float = 0.05
    kernel: str = "gaussian"
    device: str = "auto"
    chunk_rows: Optional[int] = None
    #: bytes a split may take in memory (None: stream.DEFAULT_MAX_MEMORY); larger splits are streamed from disk
    max_memory: Optional[int] = None
    #: per-calibrator constructor options, e.g. (("hb", (("bins", 20),)),): nested tuples keep the request
    #: hashable and immutable; see calibrators.configured
    options: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()

    def options_for(self, name: str) -> dict:
        return {k: v for n, opts in self.options if n == name for k, v in opts}


@dataclass(frozen=True)
class Estimate:
    value: float
    lo: float
    hi: float


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

    def curve(self, bandwidth: float, kernel: str = "gaussian") -> smoothing.SharpnessCurve:
        """The calibration-sharpness curve at any bandwidth: O(grid), never touches the samples again."""
        return smoothing.sharpness_curve(self.stats, bandwidth, kernel)



@dataclass(frozen=True)
class Evaluation:
    request: EvalRequest
    run: lg.RunInfo
    n_eval: int
    n_fit: int
    k: int
    n_bins: int
    device: str
    results: tuple[CalibratorResult, ...]
    elapsed_s: float
    timings: Mapping[str, float] = field(default_factory=dict)

    def result(self, name: str) -> CalibratorResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA when torch sees a GPU, else the CPU; ``cuda`` without a GPU is a user error."""
    device = (device or "auto").lower()
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise CalibviewError("--device cuda was requested but torch sees no CUDA GPU on this machine; "
                             "use --device cpu or auto.")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise CalibviewError(f"Unknown device {device!r}; use cpu, cuda or auto.")
    return torch.device(device)


def _freeze(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def _check_request(req: EvalRequest) -> None:
    if req.kernel not in KERNELS:
        raise CalibviewError(f"Unknown kernel {req.kernel!r}; use gaussian or epanechnikov.")
    if not (req.bandwidth > 0 and np.isfinite(req.bandwidth)):
        raise CalibviewError(f"The bandwidth must be a positive number, not {req.bandwidth!r}.")
    if not 0 < req.level < 1:
        hint = f" (for {req.level:g} %, give {req.level / 100:g})" if 1 < req.level < 100 else ""
        raise CalibviewError(f"The interval level must lie in (0, 1), not {req.level!r}{hint}.")
    if req.max_memory is not None and not req.max_memory > 0:
        raise CalibviewError(f"The memory allowed for a split must be positive, not {req.max_memory!r}.")
    if req.n_boot < 0:
        raise CalibviewError("The number of bootstrap resamples must be 0 or more.")
    if not req.calibrators:
        raise CalibviewError("No calibrators were requested; give at least 'none'.")
    for name in req.calibrators:
        calib.configured(name, req.options_for(name))        # unknown names and bad options fail early
    if any(c != "none" for c in req.calibrators) and not req.fit_split:
        raise CalibviewError("Calibrators other than 'none' need a fit split (--fit-split).")


def evaluate(req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None) -> Evaluation:
    """Fit every requested calibrator on the fit split and score it on the evaluation split.

    A split that would take more than ``req.max_memory`` bytes in memory is streamed from disk instead of loaded
    (see :mod:`calibview.core.stream`); the numbers are the same either way."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    _check_request(req)
    device = resolve_device(req.device)

    def prog(lo: float, hi: float):
        if progress is None:
            return None
        return lambda f, msg: progress(lo + (hi - lo) * f, msg)

    source = shards if shards.is_pattern(req.file) else lg      # several files as one run, or one file
    run = lg.find_run(source.list_runs(req.file), req.run)
    needs_fit = any(c != "none" for c in req.calibrators)
    run.split(req.eval_split)
    if needs_fit:
        run.split(req.fit_split)
    budget = req.max_memory or stream.DEFAULT_MAX_MEMORY
    opened: list[stream.StreamedSplit] = []

    def open_split(name: str, span: tuple[float, float]):
        info = run.split(name)
        if stream.memory_bytes(info) > budget:
            split = stream.StreamedSplit(req.file, run, name, device=device, chunk_rows=req.chunk_rows)
            opened.append(split)
            return split, split.labels
        data = source.read_split(req.file, run, name, chunk_rows=req.chunk_rows, progress=prog(*span),
                                 cancel=cancel)
        return scores_tensor(data, device), torch.from_numpy(data.labels).to(device)

    try:
        with torch.inference_mode():
            # Fit everything first, on the fit split alone: it leaves memory before the evaluation split is read,
            # so only one split is ever held at a time.
            fit_scores = fit_labels = None
            if needs_fit:
                fit_scores, fit_labels = open_split(req.fit_split, (0.0, 0.1))
            timings["read"] = time.perf_counter() - t0
            n, k = run.split(req.eval_split).n, run.k
            n_fit = 0 if fit_scores is None else int(fit_scores.shape[0])
            n_bins = resolve_bins(req.bins, n)
            fitted_all = []
            n_cal = len(req.calibrators)
            for i, name in enumerate(req.calibrators):
                check_cancel(cancel)
                t1 = time.perf_counter()
                span = (0.15 + 0.2 * i / n_cal, 0.15 + 0.2 * (i + 1) / n_cal)
                if name == "none":
                    fitted = calib.Fitted(method="none", k=k, params={})
                else:
                    fitted = calib.fit(name, fit_scores, fit_labels, options=req.options_for(name),
                                       progress=prog(span[0], span[1]), cancel=cancel,
                                       fit_info={"file": str(req.file), "run": run.name, "split": req.fit_split,
                                                 "n": n_fit})
                fitted_all.append(fitted)
                timings[f"fit:{name}"] = time.perf_counter() - t1
            if req.fit_split == req.eval_split:
                ev_scores, ev_labels = fit_scores, fit_labels
            fit_scores = fit_labels = None         # noqa: F841  (frees the fit split)
            if req.fit_split != req.eval_split or not needs_fit:
                t1 = time.perf_counter()
                ev_scores, ev_labels = open_split(req.eval_split, (0.35, 0.4))
                timings["read"] += time.perf_counter() - t1

            t1 = time.perf_counter()
            partial, boots = _score(req, ev_scores, ev_labels, fitted_all, n_bins, device,
                                    prog(0.4, 0.6), cancel, timings)
            timings["metrics"] = time.perf_counter() - t1
            ev_scores = None                       # noqa: F841  (only the per-sample statistics are needed now)
            stream.trim_heap()

            t1 = time.perf_counter()
            if req.n_boot:
                run_bootstrap(boots, Resampler(n, req.n_boot, req.seed, device=device, units=boots[0].units),
                              progress=prog(0.6, 0.99), cancel=cancel)
            timings["bootstrap"] = time.perf_counter() - t1
    finally:
        for split in opened:
            split.close()

    results = []
    for j, (name, fitted, stats, point, changed) in enumerate(partial):
        intervals = boots[j].intervals(req.level) if req.n_boot else {}
        results.append(_assemble(name, fitted, stats, point, intervals, n_bins, changed))
    if progress is not None:
        progress(1.0, "done")
    return Evaluation(request=req, run=run, n_eval=n, n_fit=n_fit,
                      k=k, n_bins=n_bins, device=str(device), results=tuple(results),
                      elapsed_s=time.perf_counter() - t0, timings=MappingProxyType(timings))


def _score(req: EvalRequest, scores, labels: torch.Tensor, fitted_all: list, n_bins: int, device: torch.device,
           progress, cancel, timings: dict) -> tuple[list[tuple], list[MetricBootstrap]]:
    """One pass over the evaluation split (in memory or streamed from disk) for all calibrators at once: per-sample
    statistics, class-wise sums and bootstrap features; then the point metrics of each calibrator."""
    n, k = scores.shape
    units = bootstrap_units(n, k, req.seed) if req.n_boot else None
    accs = [StatsAccumulator(n, k, n_bins, device) for _ in fitted_all]
    cws = [ClasswiseFeatures(n, k, n_bins, device, units) if req.n_boot else None for _ in fitted_all]
    base_pred = torch.empty(n, dtype=torch.int64, device=device)
    chunks = (scores.chunks() if stream.is_streamed(scores) else
              stream.tensor_chunks(scores, labels, chunk_rows(k)))
    for start, z, y in chunks:
        check_cancel(cancel)
        base_pred[start:start + z.shape[0]] = z.argmax(dim=1)
        for fitted, acc, cw in zip(fitted_all, accs, cws):
            acc.add(start, fitted.apply(z), y, cw.add if cw is not None else None)
        stop = start + z.shape[0]
        report(progress, stop / n, f"scored {stop:,} of {n:,} rows")
    base_pred = base_pred.cpu().numpy()
    partial, boots = [], []
    for fitted, acc, cw in zip(fitted_all, accs, cws):
        check_cancel(cancel)
        t1 = time.perf_counter()
        stats = acc.result(labels)
        point = _point_metrics(stats, n_bins, req)
        check_cancel(cancel)
        if req.n_boot:
            report(progress, 1.0, f"preparing the bootstrap of {fitted.label}")
            boots.append(MetricBootstrap(stats, cw, n_bins=n_bins, bandwidth=req.bandwidth, kernel=req.kernel,
                                         device=device, units=units, tick=lambda: check_cancel(cancel)))
        partial.append((fitted.method, fitted, stats, point, float((stats.pred != base_pred).mean())))
        timings[f"metrics:{fitted.method}"] = time.perf_counter() - t1
    return partial, boots


def default_splits(run: lg.RunInfo, eval_split: Optional[str] = None) -> tuple[Optional[str], str]:
    """(fit split, evaluation split) when the user names none: evaluate on "test" (else the last split), fit on
    "val" (else the first other split, else None: nothing to fit on)."""
    names = [s.name for s in run.splits]
    eval_split = eval_split or ("test" if "test" in names else names[-1])
    others = [n for n in names if n != eval_split]
    return ("val" if "val" in others else (others[0] if others else None)), eval_split


def scores_tensor(data: lg.SplitData, device: torch.device | str = "cpu") -> torch.Tensor:
    """Logits as stored; probabilities become log-probabilities (log 0 = -inf), so calibrators see one kind."""
    with warnings.catch_warnings():
        # The arrays are read-only on purpose; torch warns about that, but nothing here writes to them.
        warnings.simplefilter("ignore", UserWarning)
        t = torch.from_numpy(np.asarray(data.scores))
    if data.kind == "probs":
        t = torch.log(t.to(torch.float64))
    return t.to(device)


def _point_metrics(stats, n_bins: int, req: EvalRequest) -> dict:
    out = {
        "accuracy": float(stats.correct.mean()),
        "nll": float(stats.nll.mean()),
        "brier": float(stats.brier.mean()),
        "brier_top": float(((stats.conf - stats.correct) ** 2).mean()),
    }
    out.update(binned_metrics(stats.conf, stats.correct, n_bins))
    out["classwise_ece"], per_class = classwise_ece(stats)
    out["smece"], sigma = smoothing.smece(stats.conf, stats.correct)
    out["cal"], out["tot"] = smoothing.cal_tot(stats.conf, stats.correct, stats.brier, req.bandwidth, req.kernel)
    out["sharpness_gap"] = out["tot"] - out["cal"]
    return {"values": out, "per_class_ece": per_class, "sigma": float(sigma),
            "binned": smoothing.bin_stats(stats.conf, stats.correct, stats.brier)}


def _assemble(name, fitted, stats, point, intervals: Mapping[str, Interval], n_bins,
              argmax_changed: float) -> CalibratorResult:
    values = point["values"]
    metrics = {}
    for m in METRIC_NAMES:
        iv = intervals.get(m)
        v = values[m]
        metrics[m] = Estimate(v, iv.lo if iv else float("nan"), iv.hi if iv else float("nan"))
    table = equal_width_table(stats.conf, stats.correct, n_bins)
    lo, hi = wilson_interval(table.sum_correct, table.count)
    acc, count = per_class_accuracy(stats)
    warnings = list(fitted.warnings)
    if not np.isfinite(values["nll"]):
        n_zero = int((~np.isfinite(stats.nll)).sum())
        warnings.append(f"NLL is infinite: {fitted.label} gives probability 0 to the true class of "
                        f"{n_zero} sample(s).")
    return CalibratorResult(
        name=name, label=fitted.label, fitted=fitted, metrics=MappingProxyType(metrics), bins=table,
        bin_acc_lo=_freeze(lo), bin_acc_hi=_freeze(hi), stats=point["binned"],
        per_class_ece=_freeze(point["per_class_ece"]), per_class_accuracy=_freeze(acc),
        per_class_count=_freeze(count), smece_sigma=point["sigma"], argmax_changed=argmax_changed,
        warnings=tuple(warnings))


def quick_request(file: str, run: str, calibrators: Sequence[str] = ("none", "ts"), **kw) -> EvalRequest:
    return EvalRequest(file=str(file), run=run, calibrators=tuple(calibrators), **kw)
