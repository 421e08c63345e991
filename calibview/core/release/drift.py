"""``calibview drift``: the shipped calibrator on new labelled data (shadow traffic), every metric compared with
the config's archived value, and optionally a refit on a seeded half of the new data.

The difference of a metric is ``new - archived`` and its interval is the new estimate's bootstrap interval shifted
by the archived value (the archived number is treated as fixed: it is what was shipped). Drift is flagged when the
ECE increase passes the limit. A refit splits the new split into seeded fit and verify halves
(:func:`calibview.core.release.config.halves`, seeded with the config's seed), refits the same method on the fit half,
recomputes the thresholds the config had (a target precision is decided again, a fixed threshold is kept), reports
the verify half's metrics and builds a new config whose ``parent`` is the old ``config_sha256``.

The refit is then held against the shipped calibrator on the same verify half (:func:`refit_problems`): it is
*worse* when, on a measured criterion of the acceptance checklist (ECE, worst per-class ECE, high-confidence gap;
the default limits, point estimates against them), it fails where the shipped one passes, or both fail and the
refit's value lies above the shipped one's interval (its value without resamples): a difference within the
shipped estimate's own uncertainty, such as the worst of 100 classes of 30 samples each, does not count. It
cannot be verified when no class of the verify half has the checklist's ``min_slice`` samples (the per-class ECE
cannot be computed, and ``check`` refuses such a config), or when a target precision is reached for none of the
classes on the fit half (its per-class thresholds cannot be computed). Each problem is a clause in
``Refit.worse``; the caller writes the config only without one, unless forced: ``force=True`` records them in the
config's ``provenance.forced``.
"""

from __future__ import annotations

import logging
import math
import tempfile
import threading
from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional

import numpy as np

from calibview.core.release import config as rel
from calibview.core.release import stats as rs
from calibview.core.release.acceptance import Checked, Criterion, criteria, evaluate_config, request_for
from calibview.core.release.limits import MAX_ECE_INCREASE, Limits
from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.toplabel.absent import class_count as toplabel_k
from calibview.core.errors import CalibviewError, ParameterError
from calibview.core.evaluation.results import Evaluation
from calibview.core.stats.metrics import METRIC_NAMES
from calibview.core.evaluation.records import metrics_rows


@dataclass(frozen=True)
class Refit:
    """A refit on the fit half of the new data: the new config, its evaluation and rows on the verify half, and
    the shipped calibrator on the same half."""

    config: dict
    evaluation: Evaluation            # fitted on the fit half, evaluated on the verify half
    rows: list                        # metrics.csv rows of the verify half
    shipped: Evaluation               # the shipped calibrator on the same verify half (for comparison)
    worse: tuple = ()                 # why it must not replace the shipped config (empty: it may)


@dataclass(frozen=True)
class Drift:
    """The shipped calibrator on new data: per metric the archived value, the new estimate and their difference;
    whether the ECE increase passes the limit; the check behind it and the refit, when one was asked for."""

    rows: list                        # per metric: archived, value, lo, hi, delta, delta_lo, delta_hi
    ece_increase: float
    max_ece_increase: float
    drifted: bool
    checked: Checked
    refit: Optional[Refit] = None


def drift(engine: Engine, config: Mapping[str, Any], file: str, split: str, *, run: Optional[str] = None,
          max_ece_increase: float = MAX_ECE_INCREASE, refit: bool = False, n_boot: Optional[int] = None,
          device: str = "auto", path: str = "the config", progress=None,
          cancel: Optional[threading.Event] = None, force: bool = False) -> Drift:
    """Evaluate the shipped calibrator of ``config`` on ``split`` of ``file``, compare every metric with the
    archived value, flag drift when the ECE increase exceeds ``max_ece_increase``, and with ``refit`` refit the
    same method on a seeded half of the split and hold it against the shipped one (see the module notes;
    ``force``: a refit with problems is built with them in ``provenance.forced``)."""
    if run is not None and run.strip("/") != rel.run_name(config):
        raise CalibviewError(f"{path} was released for run {rel.run_name(config)}, not {run}; give the run "
                                 f"of the same model with --run.")
    checked = evaluate_config(engine, config, file, split, run=run, n_boot=n_boot, device=device, path=path,
                              whole=True, per_class=False, progress=progress, cancel=cancel)
    archived = config["metrics"]
    rows = []
    for m in METRIC_NAMES:
        est = checked.result.metrics[m]
        old = archived.get(m)
        delta = None if old is None else est.value - old
        rows.append({"metric": m, "archived": old, "value": est.value, "lo": est.lo, "hi": est.hi, "delta": delta,
                     "delta_lo": None if old is None else est.lo - old,
                     "delta_hi": None if old is None else est.hi - old})
    increase = next(r["delta"] for r in rows if r["metric"] == "ece")
    increase = float("nan") if increase is None else float(increase)
    out = Drift(rows=rows, ece_increase=increase, max_ece_increase=max_ece_increase,
                drifted=bool(increase > max_ece_increase), checked=checked)
    if refit:
        out = replace(out, refit=_refit(engine, config, file, split, run, n_boot, device, cancel, force))
    return out


def _refit(engine: Engine, config: Mapping[str, Any], file: str, split: str, run: Optional[str],
           n_boot: Optional[int], device: str, cancel, force: bool = False) -> Refit:
    info = rel.matching_run(config, file, run=run)
    seed = int(config["settings"]["seed"])
    n = info.split(split).n
    fit_rows, verify_rows = rel.halves(n, seed)
    method = config["calibrator"]["method"]
    with tempfile.TemporaryDirectory(prefix="calibview-drift-") as tmp:
        hinfo = rel.write_subset(info, {"fit": fit_rows, "verify": verify_rows}, tmp, split)
        req = replace(request_for(config, hinfo, "verify", n_boot=n_boot, device=device), fit_split="fit",
                      calibrators=(method,))
        ev = engine.evaluate(req, cancel=cancel)
        shipped = engine.evaluate(req, cancel=cancel, given={method: rel.calibrator_of(config)})
        old = config["thresholds"]
        thresholds = {"global": old.get("global"), "per_class": None, "target_precision": None}
        # a top-label run that does not know K keeps the released classes, and any new ones the data show
        k = toplabel_k(info.k, len(config["class_names"]), engine.scored(req, cancel=cancel)[method].stats.k)
        if old.get("target_precision") is not None:
            fs = engine.scored(replace(req, eval_split="fit", n_boot=0), cancel=cancel)[method].stats
            k = toplabel_k(info.k, k, fs.k)
            thresholds = rel.decide_thresholds(fs.conf, fs.pred, fs.correct, k,
                                               target_precision=float(old["target_precision"]))
        worse = refit_problems(engine, config, req, method, ev, shipped, thresholds, int(fit_rows.size))
    rows = metrics_rows([ev])
    for row in rows:
        row.update(split=f"{split}", fit_split=f"{split}[fit half]", eval_split=f"{split}[verify half]")
    halves_spec = {"seed": seed, "of": n}
    provenance = {"file": info.file, "fit_split": split,
                  "fit_sha256": rel.split_sha256(info.file, info, split, fit_rows), "n_fit": int(fit_rows.size),
                  "eval_split": split, "eval_sha256": rel.split_sha256(info.file, info, split, verify_rows),
                  "n_eval": int(verify_rows.size), "fit_rows": {"part": "fit", **halves_spec},
                  "eval_rows": {"part": "verify", **halves_spec}}
    if force and worse:                   # the lineage says that this config replaced a better one on purpose
        provenance["forced"] = list(worse)
    new = rel.build_config(info, ev.result(method).fitted, thresholds=thresholds, provenance=provenance,
                           settings={**config["settings"], "n_boot": req.n_boot}, metrics=rel.metrics_of(rows[0]),
                           parent=config["config_sha256"], weights=config.get("weights"), k=k)
    return Refit(config=new, evaluation=ev, rows=rows, shipped=shipped, worse=tuple(worse))


#: the measured criteria of the checklist, in the order :func:`calibview.core.release.acceptance.criteria` gives them
MEASURED = ("ECE", "worst per-class ECE", "high-confidence gap")


def refit_problems(engine: Engine, config: Mapping[str, Any], req, method: str, refitted: Evaluation,
                   shipped: Evaluation, thresholds: Mapping[str, Any], n_fit: int,
                   limits: Limits = Limits()) -> list[str]:
    """Why the refitted calibrator (``refitted``, fitted on the fit half) must not replace the shipped one
    (``shipped``, the config's calibrator), both evaluated by ``req`` on the verify half: each a clause such as
    "ECE 0.0307 shipped -> 0.0783 refitted on the verify half". Empty when it is no worse (see the module notes)."""
    given = {method: rel.calibrator_of(config)}
    old = _measured(engine, config, req, method, shipped, given, limits)
    new = _measured(engine, config, req, method, refitted, None, limits)
    out = []
    for label, a, b in zip(MEASURED, old, new):
        if b is None or _passes(b):
            continue
        if a is None or _passes(a) or b.value > _upper(a):
            was = "-" if a is None else f"{a.value:.4f}"
            if a is not None and _upper(a) != a.value:
                was += f" [{a.lo:.4f}, {a.hi:.4f}]"
            out.append(f"{label} {was} shipped -> {b.value:.4f} refitted on the verify half, limit {b.limit:g}")
    labels = engine.scored(req, given=given)[method].stats.labels
    n_most = int(np.bincount(np.asarray(labels, dtype=np.int64), minlength=len(config["class_names"])).max())
    if n_most < limits.min_slice:
        out.append(f"its per-class ECE cannot be computed: no class of the verify half (N={labels.size}) has "
                   f"{limits.min_slice} samples (the largest has {n_most}), so check would refuse its config")
    target = thresholds.get("target_precision")
    if target is not None and not any(t is not None for t in thresholds.get("per_class") or []):
        out.append(f"its per-class thresholds cannot be computed: the target precision {target:g} is reached for "
                   f"none of the {len(config['class_names'])} classes on the fit half (N={n_fit})")
    return out


def _passes(c: Criterion) -> bool:
    return c.value is not None and math.isfinite(c.value) and c.value <= c.limit


def _upper(c: Criterion) -> float:
    """The upper end of a criterion's interval, its value without one."""
    return c.hi if c.hi is not None and c.lo is not None and math.isfinite(c.hi) else c.value


class _Hush(logging.Filter):
    """Drops the warnings of the ``calibview`` logger (while the comparison's class slices are computed)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.WARNING


def _measured(engine: Engine, config, req, method: str, ev: Evaluation, given, limits: Limits
              ) -> list[Optional[Criterion]]:
    """The measured criteria (:data:`MEASURED`) of calibrator ``method`` of ``ev`` on the verify half, None where
    one has no value (no class with ``limits.min_slice`` samples, no sample above the high confidence)."""
    stats = engine.scored(req, given=given)[method].stats
    log = logging.getLogger("calibview")
    hush = _Hush()       # the slices' warnings about small classes: check of the refitted config gives its own
    log.addFilter(hush)
    try:
        slices = rs.class_slices(engine, req, method, limits.min_slice, config["class_names"], given)
    except ParameterError:              # no class has min_slice samples: refit_problems says so
        slices = []
    finally:
        log.removeFilter(hush)
    checked = Checked(evaluation=ev, name=method, stats=stats, class_slices=slices, split=req.eval_split,
                      split_sha256="")
    rows = [c for c in criteria(config, checked, limits) if isinstance(c.limit, float)][:len(MEASURED)]
    return [c if c.value is not None and math.isfinite(c.value) else None for c in rows]
