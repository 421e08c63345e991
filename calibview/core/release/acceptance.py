"""The acceptance check (``calibview check``): the deployment checklist, re-computed on a split with the shipped
calibrator and the config's settings.

Criteria (value with interval, limit, outcome): ECE; the worst per-class ECE (ECE of each true-class slice, classes
below ``min_slice`` excluded); the gap between mean confidence and accuracy of the high-confidence bin (confidence
>= ``high_conf``, Wilson interval); the calibrator was fitted on another split (name and data) than the one checked;
thresholds exist only on calibrated scores; ``config_sha256`` matches; the calibrator's fit has no warnings; the
fit split's hash matches the file when the file holds it (a config of a fitted calibrator without ``fit_sha256``
fails it); the stored metrics equal those recomputed from the file (when the checked data are the release's eval
data, by their hash); the thresholds equal those decided again on the file's fit split (with a target precision,
when the file holds the fit split). Nothing the config stores is reported as a result: every number of the
checklist is computed from the file. A tampered config or fit-data mismatch is a :class:`CalibviewError` (bad
input) before any criterion is computed.

A statistical criterion is decided by its interval (:func:`decide`, ``Limits.decide_on="interval"``): it passes
when the whole interval is within the limit, fails when the whole interval is beyond it, and is inconclusive
otherwise: the data are too few to tell. Without an interval (``n_boot`` 0) it is decided on the point estimate,
and says so. ``decide_on="point"`` compares the point estimate, ``use_bound="upper"`` the upper bound.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional

import numpy as np

from calibview.core.io import schema
from calibview.core.release import config as rel
from calibview.core.release import stats as rs
from calibview.core.release.limits import DECIDE_ON, Limits
from calibview.core.evaluation.defaults import MIN_SLICE
from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.request import EvalRequest
from calibview.core.evaluation.results import CalibratorResult, Evaluation
from calibview.core.errors import ParameterError
from calibview.core.stats.metrics import SampleStats


#: the outcomes of a criterion, from best to worst
OUTCOMES = ("pass", "inconclusive", "fail")


@dataclass(frozen=True)
class Criterion:
    """One line of the checklist: its value with interval (``lo``, ``hi``; None for the integrity criteria), the
    limit, its outcome (``"pass"``, ``"fail"`` or ``"inconclusive"``; a bool is read as pass or fail) and what
    decided it (``decided_on``: ``"interval"``, ``"point"`` or ``"upper"``; None for the integrity criteria)."""

    criterion: str
    value: Any                        # a number, or a word for the integrity criteria
    lo: Optional[float]
    hi: Optional[float]
    limit: Any
    outcome: str
    note: str = ""
    decided_on: Optional[str] = None

    def __post_init__(self) -> None:
        if isinstance(self.outcome, (bool, np.bool_)):
            object.__setattr__(self, "outcome", "pass" if self.outcome else "fail")
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {self.outcome!r}")

    @property
    def passed(self) -> bool:
        """True when the criterion passes (an inconclusive one does not)."""
        return self.outcome == "pass"

    def record(self) -> dict:
        """The JSON record: criterion, value, lo, hi, limit, passed, outcome, decided_on, note (non-finite numbers
        as null)."""
        return {"criterion": self.criterion, "value": _num(self.value), "lo": _num(self.lo), "hi": _num(self.hi),
                "limit": self.limit, "passed": self.passed, "outcome": self.outcome, "decided_on": self.decided_on,
                "note": self.note}


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
    thresholds: Optional[dict] = None          # decided again on FILE's fit split; None: not recomputed

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
    thresholds = recompute_thresholds(engine, config, info, device) if fit_hash else None
    prov = config["provenance"]
    spec = prov.get("eval_rows") if split == prov.get("eval_split") and not whole else None
    if spec and int(spec["of"]) != info.split(split).n:
        spec = None                              # another split of that name: checked whole
    if not spec:
        return replace(_evaluate(engine, config, info, split, None, min_slice if per_class else None, n_boot,
                                 device, calibrators, fit_hash, progress, cancel), thresholds=thresholds)
    with tempfile.TemporaryDirectory(prefix="calibview-check-") as tmp:
        sub = rel.write_subset(info, {split: rel.rows_of(spec)}, tmp, split)
        return replace(_evaluate(engine, config, sub, split, (info, spec), min_slice if per_class else None, n_boot,
                                 device, calibrators, fit_hash, progress, cancel), thresholds=thresholds)


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
    """The checklist rows (see the module docstring), each statistical one decided by ``limits.rule``."""
    rule = limits.rule
    if rule not in DECIDE_ON + ("upper",):
        raise ParameterError(f"decide_on must be one of {', '.join(DECIDE_ON)}, not {limits.decide_on!r}.",
                             "decide_on")
    why = "n_boot 0" if checked.evaluation.request.n_boot == 0 else "no interval"
    r = checked.result
    out = []
    ece = r.metrics["ece"]
    out.append(_bounded(f"ECE on {checked.split} ({checked.evaluation.n_bins} bins)", ece.value, ece.lo, ece.hi,
                        limits.max_ece, rule, why))
    out.append(_worst_class(checked.class_slices, limits, rule, why))
    out += _p_values(checked, limits)
    a = rs.audit(checked.stats.conf, checked.stats.correct, [limits.high_conf], float(config["settings"]["level"]))[0]
    label = f"high-confidence gap |conf - acc| at conf >= {limits.high_conf:g} (n={a['n']})"
    if a["n"]:
        ends = (a["mean_conf"] - a["acc_hi"], a["mean_conf"] - a["acc_lo"])
        lo = 0.0 if ends[0] <= 0.0 <= ends[1] else min(abs(ends[0]), abs(ends[1]))
        out.append(_bounded(label, abs(a["gap"]), lo, max(abs(ends[0]), abs(ends[1])), limits.max_high_conf_gap,
                            rule, "no interval",
                            note=f"mean confidence {a['mean_conf']:.4f}, accuracy {a['accuracy']:.4f}"))
    else:
        out.append(Criterion(label, None, None, None, limits.max_high_conf_gap, "pass",
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
    if method != "none" and not prov.get("fit_sha256"):
        out.append(Criterion("fit split's hash matches FILE", "no fit_sha256 in the config", None, None, "match",
                             False, note="the config does not say which data its calibrator was fitted on"))
    else:
        out.append(Criterion("fit split's hash matches FILE", "match" if checked.fit_hash else "not in FILE",
                             None, None, "match", True))
    out.append(_metrics_row(config, checked))
    out.append(_thresholds_row(config, checked))
    return out


#: how far a stored number may lie from the one recomputed (float64 sums in another order, another device)
TOLERANCE = 1e-6


def _same(stored: Any, computed: Any) -> bool:
    """Whether a stored number (null for a non-finite one) equals the recomputed one within TOLERANCE."""
    finite = computed is not None and bool(np.isfinite(computed))
    if stored is None or not finite:
        return stored is None and not finite
    return abs(float(stored) - float(computed)) <= TOLERANCE * max(1.0, abs(float(computed)))


def _metrics_row(config: Mapping[str, Any], checked: Checked) -> Criterion:
    """The stored point estimates against those recomputed on the checked data, when these are the release's
    eval data (same hash); the intervals and the calibration tests' p-values are resampled on each run (device,
    n_boot) and are not compared."""
    name = "stored metrics match those recomputed from FILE"
    if checked.split_sha256 != config["provenance"].get("eval_sha256"):
        return Criterion(name, "not compared", None, None, "match", True,
                         note="the checked data are not the release's eval data")
    from calibview.core.evaluation.toplabel.absent import absent_metrics

    absent = absent_metrics(checked.evaluation.run)     # stored as null: a top-label run has no full vector
    from calibview.core.stats.corp.parts import TEST_METRICS

    got = {m: v for m, v in checked.result.metrics.items() if m not in absent and m not in TEST_METRICS}
    stored = config["metrics"]
    known = {key for m in checked.result.metrics for key in (m, f"{m}_lo", f"{m}_hi")}
    bad = sorted(k for k in stored if k not in known)
    bad += sorted(k for m in absent for k in (m, f"{m}_lo", f"{m}_hi") if stored.get(k) is not None)
    bad += [m for m in got if m in stored and not _same(stored[m], got[m].value)]
    if not bad:
        return Criterion(name, "match", None, None, "match", True)
    shown = ", ".join(f"{m} stored {stored[m]!r}" + (f", computed {got[m].value:.6g}" if m in got else "")
                      for m in bad[:3])
    return Criterion(name, f"{len(bad)} differ", None, None, "match", False,
                     note=f"{shown}: the config's metrics were edited or belong to other data")


def _thresholds_row(config: Mapping[str, Any], checked: Checked) -> Criterion:
    """The shipped thresholds of a target precision against those decided again on FILE's fit split."""
    name = "thresholds match those decided on FILE's fit split"
    t = config["thresholds"]
    if t.get("target_precision") is None:
        fixed = t.get("global") is not None
        return Criterion(name, "a fixed threshold" if fixed else "no thresholds", None, None, "match", True,
                         note="a fixed threshold is chosen, not decided on data" if fixed else "")
    again = checked.thresholds
    if again is None:
        return Criterion(name, "not recomputed", None, None, "match", True, note="FILE does not hold the fit split")
    per, per_again = t.get("per_class") or [], again.get("per_class") or []
    bad = ([f"global {t.get('global')!r} vs {again.get('global')!r}"]
           if not _same(t.get("global"), again.get("global")) else [])
    names = config["class_names"]
    bad += [f"class {names[c]} {per[c]!r} vs {per_again[c]!r}" for c in range(len(per_again))
            if c >= len(per) or not _same(per[c], per_again[c])]
    if not bad:
        return Criterion(name, "match", None, None, "match", True)
    return Criterion(name, f"{len(bad)} differ", None, None, "match", False,
                     note="; ".join(bad[:3]) + ": the config's thresholds were edited")


def recompute_thresholds(engine: Engine, config: Mapping[str, Any], info: schema.RunInfo,
                         device: str = "auto") -> Optional[dict]:
    """The thresholds of the config's target precision decided again (:func:`calibview.core.release.config.
    decide_thresholds`) on the calibrated scores of ``info``'s fit split (its ``fit_rows`` half where the config
    has one), whose hash the caller checked; the config's own thresholds when it has no target precision."""
    t = config["thresholds"]
    if t.get("target_precision") is None:
        return dict(t)
    prov = config["provenance"]
    split = prov["fit_split"]
    fitted = rel.calibrator_of(config)
    name = fitted.method

    def decide(run_info: schema.RunInfo) -> dict:
        req = request_for(config, run_info, split, n_boot=0, device=device, calibrators=(name,))
        s = engine.scored(req, given={name: fitted})[name].stats
        return rel.decide_thresholds(s.conf, s.pred, s.correct, len(config["class_names"]),
                                     target_precision=float(t["target_precision"]))

    spec = prov.get("fit_rows")
    if not spec:
        return decide(info)
    with tempfile.TemporaryDirectory(prefix="calibview-check-") as tmp:
        return decide(rel.write_subset(info, {split: rel.rows_of(spec)}, tmp, split))


def decide(value: float, lo: Optional[float], hi: Optional[float], limit: float, rule: str = "interval"
           ) -> tuple[str, str]:
    """(outcome, decided_on) of "value <= limit" under ``rule``. ``"interval"``: pass when the whole interval
    [lo, hi] is <= limit, fail when the whole interval is > limit, inconclusive otherwise; the interval is taken
    together with the estimate (an interval that excludes its estimate does not decide against it). Without a
    finite interval, and under ``"point"``, the point estimate decides; ``"upper"`` compares ``hi`` (pass or
    fail). A non-finite value fails. All in the metric's unit (a fraction for the ECE)."""
    if value is None or not np.isfinite(value):
        return "fail", "point"
    has = lo is not None and hi is not None and bool(np.isfinite(lo) and np.isfinite(hi))
    if rule == "upper" and has:
        return ("pass" if hi <= limit else "fail"), "upper"
    if rule != "interval" or not has:
        return ("pass" if value <= limit else "fail"), "point"
    low, high = min(lo, value), max(hi, value)
    if high <= limit:
        return "pass", "interval"
    if low > limit:
        return "fail", "interval"
    return "inconclusive", "interval"


def _p_values(checked: Checked, limits: Limits) -> list[Criterion]:
    """The calibration tests' criteria that ``limits`` asks for (``min_p_ece``, ``min_p_skce``): pass when the
    p-value is at least the limit, fail below it (the test rejects calibration at that level) or without a
    p-value (no resamples). Decided on the p-value itself: never inconclusive."""
    out = []
    r, n_boot = checked.result, checked.evaluation.request.n_boot
    for metric, limit, label in (("p_ece", limits.min_p_ece, f"ECE calibration test p-value "
                                  f"({checked.evaluation.n_bins} bins, {n_boot} redraws)"),
                                 ("p_skce", limits.min_p_skce, "SKCE calibration test p-value")):
        if limit is None:
            continue
        p = r.metrics[metric].value
        if metric == "p_skce" and r.tests.get("p_skce_method"):
            label += f" ({r.tests['p_skce_method']} estimator)"
        if p is None or not np.isfinite(p):
            out.append(Criterion(label, None, None, None, float(limit), "fail", decided_on="point",
                                 note="no p-value: the tests draw --n-boot outcomes, and n_boot is 0"))
            continue
        note = (f"the test rejects calibration at the {limit:g} level" if p < limit else "")
        if metric == "p_ece" and p <= 1.0 / (n_boot + 1):
            note = "; ".join(x for x in (note, f"p < 1/(n_boot + 1) = {1.0 / (n_boot + 1):.2g}: the resolution "
                                                 f"of {n_boot} redraws") if x)
        out.append(Criterion(label, float(p), None, None, float(limit), "pass" if p >= limit else "fail", note,
                             "point"))
    return out


def _fallback(rule: str, decided_on: str, why: str) -> str:
    """The note of a criterion the rule wanted decided by its interval but that had none."""
    return f"{why}: decided on the point estimate" if rule != "point" and decided_on == "point" else ""


def _bounded(name: str, value: float, lo: float, hi: float, limit: float, rule: str, why: str, note: str = ""
             ) -> Criterion:
    outcome, on = decide(value, lo, hi, limit, rule)
    note = "; ".join(n for n in (note, _fallback(rule, on, why)) if n)
    return Criterion(name, float(value), _num(lo), _num(hi), float(limit), outcome, note, on)


def _worst_class(slices: list, limits: Limits, rule: str, why: str) -> Criterion:
    """The per-class criterion: every class slice with at least ``min_slice`` samples decided on its own; the row
    shows the class with the worst outcome (fail, then inconclusive), the largest ECE among those (the largest
    upper bound under ``"upper"``)."""
    ok = [s for s in slices if not s["below_min"] and np.isfinite(s["ece"])]
    if not ok:
        return Criterion("worst per-class ECE", None, None, None, limits.max_class_ece, "pass",
                         note=f"no class has {limits.min_slice} samples")
    decided = [(s,) + decide(s["ece"], s["ece_lo"], s["ece_hi"], limits.max_class_ece, rule) for s in ok]
    severity = {o: i for i, o in enumerate(OUTCOMES)}
    upper = rule == "upper"
    worst, outcome, on = max(decided, key=lambda d: (severity[d[1]], d[0]["ece_hi"] if upper and
                                                     np.isfinite(d[0]["ece_hi"]) else d[0]["ece"]))
    left_out = len(slices) - len(ok)
    counts = {o: sum(d[1] == o for d in decided) for o in ("fail", "inconclusive")}
    notes = [f"{left_out} class(es) below {limits.min_slice} samples left out" if left_out else "",
             ", ".join(f"{n} of {len(ok)} classes {'fail' if o == 'fail' else o}" for o, n in counts.items() if n)
             if rule == "interval" else "",
             _fallback(rule, "point" if any(d[2] == "point" for d in decided) else on, why)]
    return Criterion(f"worst per-class ECE (class {worst['slice']}, n={worst['n']})", float(worst["ece"]),
                     _num(worst["ece_lo"]), _num(worst["ece_hi"]), float(limits.max_class_ece), outcome,
                     "; ".join(n for n in notes if n), on)


def verdict(ece: float, lo: Optional[float] = None, hi: Optional[float] = None) -> str:
    """The ECE (a fraction), its interval when given and its reading
    (:func:`calibview.core.release.config.ece_reading`) as one line; an interval that reaches into another reading
    says so."""
    reading = rel.ece_reading(ece)
    shown = ""
    if lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi) and np.isfinite(ece):
        shown = f" [{100 * lo:.2f}%, {100 * hi:.2f}%]"
        ends = rel.ece_reading(min(lo, ece)), rel.ece_reading(max(hi, ece))
        if ends[0] != ends[1]:
            reading += f", its interval from {ends[0]} to {ends[1]}"
    return (f"ECE {100 * ece:.2f}%{shown}: {reading} (below 1% near-perfect, 1-5% acceptable, 5-10% watch, above "
            f"10% must be recalibrated)")


def outcome_of(rows) -> str:
    """The checklist's outcome: ``"fail"`` when a criterion fails, else ``"inconclusive"`` when one is, else
    ``"pass"``."""
    outcomes = {c.outcome for c in rows}
    return "fail" if "fail" in outcomes else "inconclusive" if "inconclusive" in outcomes else "pass"


def summary(rows, n: int) -> str:
    """The checklist's last line, naming the criteria that fail and those that are inconclusive on ``n``
    samples."""
    failed = [c for c in rows if c.outcome == "fail"]
    unsure = [c for c in rows if c.outcome == "inconclusive"]
    if not failed and not unsure:
        return "PASS: every criterion passes."
    parts = []
    if failed:
        parts.append(f"FAIL: {len(failed)} of {len(rows)} criteria fail: " + "; ".join(c.criterion for c in failed))
    if unsure:
        parts.append(f"{'INCONCLUSIVE: ' if not failed else ''}{len(unsure)} of {len(rows)} criteria inconclusive "
                     f"(N={n} too small to decide, the interval straddles the limit): "
                     + "; ".join(f"{c.criterion} [{c.lo:.4f}, {c.hi:.4f}] vs {c.limit:.4f}" for c in unsure))
    return ". ".join(parts) + "."
