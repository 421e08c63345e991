"""The acceptance check (``calibview check``): the deployment checklist, re-computed on a split with the shipped
calibrator and the config's settings.

Criteria (value with interval, limit, pass/fail; the point estimate is compared unless ``use_bound="upper"``):
ECE; the worst per-class ECE (ECE of each true-class slice, classes below ``min_slice`` excluded); the gap between
mean confidence and accuracy of the high-confidence bin (confidence >= ``high_conf``, Wilson interval); the
calibrator was fitted on another split (name and data) than the one checked; thresholds exist only on calibrated
scores; ``config_sha256`` matches; the calibrator's fit has no warnings; the fit split's hash matches the file when the file holds it. A tampered config
or fit-data mismatch is a :class:`CalibviewError` (bad input) before any criterion is computed.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from calibview.core.io import schema
from calibview.core.release import config as rel
from calibview.core.release import stats as rs
from calibview.core.release.limits import Limits
from calibview.core.evaluation.defaults import MIN_SLICE
from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.request import EvalRequest
from calibview.core.evaluation.results import CalibratorResult, Evaluation
from calibview.core.stats.metrics import SampleStats


@dataclass(frozen=True)
class Criterion:
    """One line of the checklist: its value with interval (``lo``, ``hi``; None for the integrity criteria),
    the limit and whether it passed."""

    criterion: str
    value: Any                        # a number, or a word for the integrity criteria
    lo: Optional[float]
    hi: Optional[float]
    limit: Any
    passed: bool
    note: str = ""

    def record(self) -> dict:
        """The JSON record: criterion, value, lo, hi, limit, passed (non-finite numbers as null)."""
        return {"criterion": self.criterion, "value": _num(self.value), "lo": _num(self.lo), "hi": _num(self.hi),
                "limit": self.limit, "passed": self.passed}


@dataclass(frozen=True)
class Checked:
    """The shipped calibrator evaluated on one split."""

    evaluation: Evaluation
    name: str                                  # the calibrator's name in the evaluation
    stats: SampleStats
    class_slices: list
    split: str
    split_sha256: str
    fit_hash: Optional[bool] = None            # True: FILE holds the fit split and it matches; None: not held
    rows: Optional[dict] = None                # the eval_rows entry when a half of the split was checked

    @property
    def result(self) -> CalibratorResult:
        """The shipped calibrator's result in the evaluation."""
        return self.evaluation.result(self.name)


def _num(x: Any) -> Any:
    if isinstance(x, (float, np.floating)):
        return float(x) if np.isfinite(x) else None
    return x


def request_for(config: Mapping[str, Any], info: schema.RunInfo, split: str, *, n_boot: Optional[int] = None,
                device: str = "auto", calibrators: tuple = ()) -> EvalRequest:
    """The request that re-computes the config's numbers on ``split`` of ``info``'s file with its settings."""
    s = config["settings"]
    return EvalRequest(file=info.file, run=info.name, eval_split=split,
                       fit_split=config["provenance"].get("fit_split") or "val",
                       calibrators=calibrators or (config["calibrator"]["method"],), bins=int(s["bins"]),
                       n_boot=int(s["n_boot"] if n_boot is None else n_boot), seed=int(s["seed"]),
                       level=float(s["level"]), bandwidth=float(s["bandwidth"]), kernel=str(s["kernel"]),
                       device=device)


def evaluate_config(engine: Engine, config: Mapping[str, Any], file: str, split: str, *, run: Optional[str] = None,
                    min_slice: int = MIN_SLICE, n_boot: Optional[int] = None, device: str = "auto",
                    calibrators: tuple = (), path: str = "the config", whole: bool = False,
                    per_class: bool = True, progress=None, cancel: Optional[threading.Event] = None) -> Checked:
    """Verify the config against ``file`` (run, class count, fit-data hash), then evaluate its calibrator on
    ``split`` with its settings. A config refitted on half of a split (``provenance.eval_rows``) is checked on its
    verify half of that split unless ``whole``; ``per_class=False`` skips the true-class slices. Raises
    CalibviewError (one sentence) for bad input."""
    info = rel.matching_run(config, file, path, run)
    info.split(split)
    fit_hash = rel.check_fit_hash(config, info, path)
    prov = config["provenance"]
    spec = prov.get("eval_rows") if split == prov.get("eval_split") and not whole else None
    if spec and int(spec["of"]) != info.split(split).n:
        spec = None                              # another split of that name: checked whole
    if not spec:
        return _evaluate(engine, config, info, split, None, min_slice if per_class else None, n_boot, device,
                         calibrators, fit_hash, progress, cancel)
    with tempfile.TemporaryDirectory(prefix="calibview-check-") as tmp:
        sub = rel.write_subset(info, {split: rel.rows_of(spec)}, tmp, split)
        return _evaluate(engine, config, sub, split, (info, spec), min_slice if per_class else None, n_boot,
                         device, calibrators, fit_hash, progress, cancel)


def _evaluate(engine, config, info, split, rows, min_slice, n_boot, device, calibrators, fit_hash, progress,
              cancel) -> Checked:
    """The config's calibrator on ``split`` of ``info`` (``rows``: (original run, rows spec) when ``info`` is a
    subset of that run's split, for the hash)."""
    fitted = rel.calibrator_of(config)
    name = fitted.method
    req = request_for(config, info, split, n_boot=n_boot, device=device, calibrators=calibrators or (name,))
    given = {name: fitted}
    ev = engine.evaluate(req, progress=progress, cancel=cancel, given=given)
    stats = engine.scored(req, given=given)[name].stats
    slices = [] if min_slice is None else rs.class_slices(engine, req, name, min_slice, config["class_names"], given)
    sha = (rel.split_sha256(info.file, info, split) if rows is None else
           rel.split_sha256(rows[0].file, rows[0], split, rel.rows_of(rows[1])))
    return Checked(evaluation=ev, name=name, stats=stats, class_slices=slices, split=split, split_sha256=sha,
                   fit_hash=fit_hash, rows=None if rows is None else dict(rows[1]))


def criteria(config: Mapping[str, Any], checked: Checked, limits: Limits = Limits()) -> list[Criterion]:
    """The checklist rows (see the module docstring)."""
    upper = limits.use_bound == "upper"
    r = checked.result
    out = []
    ece = r.metrics["ece"]
    out.append(_bounded(f"ECE on {checked.split} ({checked.evaluation.n_bins} bins)", ece.value, ece.lo, ece.hi,
                        limits.max_ece, upper))
    ok = [s for s in checked.class_slices if not s["below_min"] and np.isfinite(s["ece"])]
    if ok:
        key = (lambda s: s["ece_hi"] if np.isfinite(s["ece_hi"]) else s["ece"]) if upper else (lambda s: s["ece"])
        worst = max(ok, key=key)
        left_out = len(checked.class_slices) - len(ok)
        out.append(_bounded(f"worst per-class ECE (class {worst['slice']}, n={worst['n']})", worst["ece"],
                            worst["ece_lo"], worst["ece_hi"], limits.max_class_ece, upper,
                            note=f"{left_out} class(es) below {limits.min_slice} samples left out" if left_out
                            else ""))
    else:
        out.append(Criterion("worst per-class ECE", None, None, None, limits.max_class_ece, True,
                             note=f"no class has {limits.min_slice} samples"))
    a = rs.audit(checked.stats.conf, checked.stats.correct, [limits.high_conf], float(config["settings"]["level"]))[0]
    label = f"high-confidence gap |conf - acc| at conf >= {limits.high_conf:g} (n={a['n']})"
    if a["n"]:
        ends = (a["mean_conf"] - a["acc_hi"], a["mean_conf"] - a["acc_lo"])
        lo = 0.0 if ends[0] <= 0.0 <= ends[1] else min(abs(ends[0]), abs(ends[1]))
        out.append(_bounded(label, abs(a["gap"]), lo, max(abs(ends[0]), abs(ends[1])), limits.max_high_conf_gap,
                            upper, note=f"mean confidence {a['mean_conf']:.4f}, accuracy {a['accuracy']:.4f}"))
    else:
        out.append(Criterion(label, None, None, None, limits.max_high_conf_gap, True,
                             note=f"no sample at or above {limits.high_conf:g}"))
    prov = config["provenance"]
    fit_split = prov.get("fit_split")
    method = config["calibrator"]["method"]
    other_half = rel.disjoint_halves(prov.get("fit_rows"), checked.rows)
    same = method != "none" and (checked.split_sha256 == prov.get("fit_sha256") or
                                 (fit_split == checked.split and not other_half))
    half = " (other half)" if other_half else ""
    out.append(Criterion("calibrator fitted on another split than the one checked",
                         f"fit {fit_split or '-'}, checked {checked.split}{half}", None, None, "different", not same,
                         note="the checked data are the fit data: in-sample numbers" if same else ""))
    bad = rel.has_thresholds(config) and method == "none"
    out.append(Criterion("thresholds only on calibrated scores",
                         f"{'thresholds' if rel.has_thresholds(config) else 'no thresholds'}, calibrator {method}",
                         None, None, "calibrated", not bad))
    out.append(Criterion("config_sha256 matches the config", "match", None, None, "match", True))
    warned = list(config["calibrator"].get("warnings") or [])
    out.append(Criterion("calibrator fitted without warnings", f"{len(warned)} warning(s)" if warned else "none",
                         None, None, "none", not warned, note="; ".join(warned)))
    out.append(Criterion("fit split's hash matches FILE", "match" if checked.fit_hash else "not in FILE",
                         None, None, "match", True))
    return out


def _bounded(name: str, value: float, lo: float, hi: float, limit: float, upper: bool, note: str = ""
             ) -> Criterion:
    compared = hi if upper and np.isfinite(hi) else value
    return Criterion(name, float(value), _num(lo), _num(hi), float(limit),
                     bool(np.isfinite(compared) and compared <= limit), note)


def verdict(ece: float) -> str:
    """The ECE and its reading (:func:`calibview.core.release.config.ece_reading`) as one line."""
    reading = rel.ece_reading(ece)
    return (f"ECE {100 * ece:.2f}%: {reading} (below 1% near-perfect, 1-5% acceptable, 5-10% watch, above 10% "
            f"must be recalibrated)")
