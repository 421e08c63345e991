"""``calibview drift``: the shipped calibrator on new labelled data (shadow traffic), every metric compared with
the config's archived value, and optionally a refit on a seeded half of the new data.

The difference of a metric is ``new - archived`` and its interval is the new estimate's bootstrap interval shifted
by the archived value (the archived number is treated as fixed: it is what was shipped). Drift is flagged when the
ECE increase passes the limit. A refit splits the new split into seeded fit and verify halves
(:func:`calibview.core.release.config.halves`, seeded with the config's seed), refits the same method on the fit half,
recomputes the thresholds the config had (a target precision is decided again, a fixed threshold is kept), reports
the verify half's metrics and builds a new config whose ``parent`` is the old ``config_sha256``.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional

from calibview.core.release import config as rel
from calibview.core.release.acceptance import Checked, evaluate_config, request_for
from calibview.core.release.limits import MAX_ECE_INCREASE
from calibview.core.evaluation.engine import Engine
from calibview.core.errors import CalibviewError
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
          cancel: Optional[threading.Event] = None) -> Drift:
    """Evaluate the shipped calibrator of ``config`` on ``split`` of ``file``, compare every metric with the
    archived value, flag drift when the ECE increase exceeds ``max_ece_increase``, and with ``refit`` refit the
    same method on a seeded half of the split (see the module notes)."""
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
        out = replace(out, refit=_refit(engine, config, file, split, run, n_boot, device, cancel))
    return out


def _refit(engine: Engine, config: Mapping[str, Any], file: str, split: str, run: Optional[str],
           n_boot: Optional[int], device: str, cancel) -> Refit:
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
        if old.get("target_precision") is not None:
            fs = engine.scored(replace(req, eval_split="fit", n_boot=0), cancel=cancel)[method].stats
            thresholds = rel.decide_thresholds(fs.conf, fs.pred, fs.correct, info.k,
                                               target_precision=float(old["target_precision"]))
    rows = metrics_rows([ev])
    for row in rows:
        row.update(split=f"{split}", fit_split=f"{split}[fit half]", eval_split=f"{split}[verify half]")
    halves_spec = {"seed": seed, "of": n}
    provenance = {"file": info.file, "fit_split": split,
                  "fit_sha256": rel.split_sha256(info.file, info, split, fit_rows), "n_fit": int(fit_rows.size),
                  "eval_split": split, "eval_sha256": rel.split_sha256(info.file, info, split, verify_rows),
                  "n_eval": int(verify_rows.size), "fit_rows": {"part": "fit", **halves_spec},
                  "eval_rows": {"part": "verify", **halves_spec}}
    new = rel.build_config(info, ev.result(method).fitted, thresholds=thresholds, provenance=provenance,
                           settings={**config["settings"], "n_boot": req.n_boot}, metrics=rel.metrics_of(rows[0]),
                           parent=config["config_sha256"])
    return Refit(config=new, evaluation=ev, rows=rows, shipped=shipped)
