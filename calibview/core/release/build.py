"""``calibview release``: fit the calibrator on one split, evaluate it on the deployment-domain split, decide the
thresholds on calibrated scores of the fit split, and gather what the release material archives (the inference
config, metrics, per-class table, audit, risk-coverage curve, slices and the acceptance checklist).

Nothing here writes a file: :func:`build_release` returns a :class:`Release` and the caller writes it (all files
or none).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Optional, Sequence


from calibview.core.io import discovery
from calibview.core.release import config as rel
from calibview.core.release import stats as rs
from calibview.core.release.acceptance import Checked, Criterion, Limits, criteria, verdict
from calibview.core.evaluation import defaults as d
from calibview.core.evaluation.toplabel.absent import class_count as toplabel_k
from calibview.core.evaluation.engine import Engine
from calibview.core.errors import CalibviewError, ParameterError
from calibview.core.evaluation.request import EvalRequest
from calibview.core.evaluation.results import Evaluation
from calibview.core.evaluation.records import metrics_rows
from calibview.core.reports.selective import DEFAULT_AUDIT
from calibview.core.reports.tables import table_csv


@dataclass(frozen=True)
class Release:
    """Everything the release material archives: the sealed config, the evaluation and its tables, the audit,
    the risk-coverage curve, the slices, the acceptance checklist and the verdict."""

    config: dict
    evaluation: Evaluation                 # "none" (when another calibrator is shipped) and the shipped one
    name: str                              # the shipped calibrator's name in the evaluation
    rows: list                             # metrics.csv rows
    per_class: list                        # per_class.csv rows
    audit: dict                            # calibrator name -> audit records on the eval split
    risk_coverage: dict                    # calibrator name -> risk_coverage(...) of the eval split
    slices: list                           # slice records of --by COLUMN (empty without one)
    slice_column: Optional[str]
    checklist: list                        # acceptance Criterion rows with the default (or given) limits
    verdict: str
    decide_on: str = "interval"            # the rule the checklist was decided by (Limits.rule)


def build_release(engine: Engine, file: str, run: str, calibrator: str, fit_split: str, eval_split: str, *,
                  threshold: Optional[float] = None, target_precision: Optional[float] = None, bins: int = d.BINS,
                  bandwidth: float = d.BANDWIDTH, kernel: str = d.KERNEL, n_boot: int = d.N_BOOT, seed: int = d.SEED,
                  level: float = d.LEVEL, device: str = d.DEVICE, by: Optional[str] = None,
                  slice_bins: int = d.SLICE_BINS, min_slice: int = d.MIN_SLICE,
                  audit_thresholds: Sequence[float] = DEFAULT_AUDIT, limits: Limits = Limits(), progress=None,
                  cancel: Optional[threading.Event] = None, allow_warnings: bool = False,
                  weights: Optional[list] = None) -> Release:
    """Fit ``calibrator`` on ``fit_split`` of ``run`` in ``file``, evaluate it (and ``none``) on ``eval_split``,
    decide the thresholds (a fixed ``threshold`` or a ``target_precision``) on the fit split's calibrated scores
    and gather the release material; nothing is written. A fit with warnings (a diverged or unconverged fit, too
    few samples, exact zeros, ...) is refused unless ``allow_warnings``; the config then carries them.
    ``weights``: the records of the model weights (:func:`calibview.core.release.weights.weights_records`) the
    config ships with."""
    info = discovery.find_run(file, run)
    info.split(eval_split)
    if calibrator != "none":
        info.split(fit_split)
        if fit_split == eval_split:
            raise ParameterError(f"fit_split and eval_split are both {fit_split!r}: a release is evaluated on "
                                 f"data the calibrator was not fitted on; give a held-out eval_split.",
                                 "fit_split", "eval_split")
    if calibrator == "none" and (threshold is not None or target_precision is not None):
        raise ParameterError("Thresholds are decided on calibrated scores only; choose a calibrator other than "
                             "none, or drop threshold and target_precision.", "calibrator", "threshold", "target_precision")
    if isinstance(bins, str):
        raise ParameterError("A release needs a fixed number of bins (the check re-computes with it).", "bins")
    names = ("none",) if calibrator == "none" else ("none", calibrator)
    req = EvalRequest(file=info.file, run=info.name, eval_split=eval_split, fit_split=fit_split, calibrators=names,
                      bins=bins, n_boot=n_boot, seed=seed, level=level, bandwidth=bandwidth, kernel=kernel,
                      device=device)
    ev = engine.evaluate(req, progress=progress, cancel=cancel)
    fitted = ev.result(calibrator).fitted
    if fitted.warnings and not allow_warnings:
        raise ParameterError(refusal(fitted), "allow_warnings")
    scored = engine.scored(req, cancel=cancel)
    stats = scored[calibrator].stats
    # A top-label run may not know K (no num_classes attribute): its classes are then those seen in either split.
    k = toplabel_k(info.k, stats.k)
    thresholds = {"global": None, "per_class": None, "target_precision": None}
    if threshold is not None or target_precision is not None:
        fit_req = replace(req, eval_split=fit_split, calibrators=(calibrator,), n_boot=0)
        fs = engine.scored(fit_req, cancel=cancel)[calibrator].stats
        k = toplabel_k(info.k, k, fs.k)
        thresholds = rel.decide_thresholds(fs.conf, fs.pred, fs.correct, k, threshold=threshold,
                                           target_precision=target_precision)
    rows = metrics_rows([ev])
    row = next(r for r in rows if r["calibrator"] == calibrator)
    eval_sha = rel.split_sha256(info.file, info, eval_split)
    fit_sha = rel.split_sha256(info.file, info, fit_split) if fit_split in info.split_names else None
    provenance = {"file": info.file, "fit_split": fit_split if calibrator != "none" else None,
                  "fit_sha256": fit_sha if calibrator != "none" else None, "n_fit": ev.n_fit,
                  "eval_split": eval_split, "eval_sha256": eval_sha, "n_eval": ev.n_eval}
    settings = {"bins": ev.n_bins, "bandwidth": float(bandwidth), "kernel": kernel, "n_boot": n_boot, "seed": seed,
                "level": float(level)}
    config = rel.build_config(info, fitted, thresholds=thresholds, provenance=provenance, settings=settings,
                              metrics=rel.metrics_of(row), weights=weights, k=k)
    slices = rs.class_slices(engine, req, calibrator, limits.min_slice, config["class_names"])
    checked = Checked(evaluation=ev, name=calibrator, stats=stats, class_slices=slices, split=eval_split,
                      split_sha256=eval_sha, fit_hash=True if fit_sha else None, thresholds=thresholds)
    checklist = criteria(config, checked, limits)
    ece = ev.result(calibrator).metrics["ece"]
    per_class = per_class_rows(ev, calibrator, slices, thresholds, stats, k)
    by_rows = column_slices(engine, req, by, min_slice, slice_bins, calibrator) if by else []
    return Release(config=config, evaluation=ev, name=calibrator, rows=rows, per_class=per_class,
                   audit={nm: rs.audit(sc.stats.conf, sc.stats.correct, audit_thresholds, level)
                          for nm, sc in scored.items()},
                   risk_coverage={nm: rs.risk_coverage(sc.stats.conf, sc.stats.correct) for nm, sc in scored.items()},
                   slices=by_rows, slice_column=by, checklist=checklist,
                   verdict=verdict(ece.value, ece.lo, ece.hi), decide_on=limits.rule)


def refusal(fitted) -> str:
    """The one sentence that refuses to release ``fitted`` (a Fitted with warnings)."""
    first = fitted.warnings[0].rstrip(".")
    more = f" (and {len(fitted.warnings) - 1} more)" if len(fitted.warnings) > 1 else ""
    return (f"The {fitted.label} fit has a warning, so it is not released: {first}{more}; fix the fit split, "
            f"or pass allow_warnings=True to release it anyway.")


def per_class_rows(ev: Evaluation, name: str, slices: list, thresholds: dict, stats,
                   k: Optional[int] = None) -> list[dict]:
    """The rows of per_class.csv for calibrator ``name``: ``slices`` are its per-class slice records, ``stats``
    its SampleStats on the evaluation split, ``k`` the number of classes (default the evaluation's K; a top-label
    run of unknown K passes the classes seen)."""
    r = ev.result(name)
    k = k or ev.k
    outcome = rs.threshold_outcome(stats.conf, stats.pred, stats.correct, k,
                                   thresholds.get("per_class") or [None] * k)
    out = []
    for c, s in enumerate(slices):
        o = outcome[c]
        out.append({"class_index": c, "class_name": s["slice"], "n": s["n"],
                    "accuracy": float(r.per_class_accuracy[c]), "ece": s["ece"], "ece_lo": s["ece_lo"],
                    "ece_hi": s["ece_hi"], "below_min_slice": s["below_min"],
                    "classwise_ece": float(r.per_class_ece[c]), "threshold": o["threshold"],
                    "n_pred": o["n_pred"], "n_kept": o["n_kept"], "precision": o["precision"],
                    "coverage": o["coverage"]})
    return out


PER_CLASS_COLUMNS = ("class_index", "class_name", "n", "accuracy", "ece", "ece_lo", "ece_hi", "below_min_slice",
                     "classwise_ece", "threshold", "n_pred", "n_kept", "precision", "coverage")


def per_class_csv(rows: Sequence[dict]) -> str:
    """per_class.csv: per true class, its count, accuracy (recall), the ECE of its slice with the paired interval,
    the one-vs-rest class-wise ECE, and its threshold with the precision and coverage it achieves on the eval
    split (empty without thresholds)."""
    return table_csv(rows, PER_CLASS_COLUMNS)


def column_slices(engine: Engine, req: EvalRequest, by: str, min_slice: int, slice_bins: int, name: str
                  ) -> list[dict]:
    """The slice records of ``calibview slices --by COLUMN`` for the shipped calibrator (whole split left out),
    each with ``below_min``."""
    from calibview.core.evaluation.slices import evaluate_slices

    res = evaluate_slices(engine, replace(req, calibrators=(name,)), by, slice_bins=slice_bins, min_slice=min_slice)
    return [{**r, "below_min": r["n"] < min_slice} for r in res.records
            if r["calibrator"] == name and r["slice"] is not None]


def criteria_json(rows: Sequence[Criterion]) -> list[dict]:
    """The checklist as JSON records (:meth:`Criterion.record`)."""
    return [c.record() for c in rows]


__all__ = ["Release", "build_release", "per_class_csv", "criteria_json"]
