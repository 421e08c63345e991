"""``calibview apply`` on a regression run: a regression recalibrator of a report's calibrators.json (or one
record of it) applied to a split, written as a regression run of OUT. var-scaling writes the mean and the
scaled variance (a var run; scaled samples for a sample run); isotonic-pit writes the recalibrated quantiles at
the levels it was fitted with (the run's own for a quantile run, 0.01 ... 0.99 otherwise), a quantiles run. A
classification calibrator given for a regression run is refused in one sentence (and the reverse is refused by
:func:`calibview.core.calibrators.file.choose`)."""

from __future__ import annotations

import logging
import math
from typing import Any, Optional

from calibview.core.errors import CalibviewError

_log = logging.getLogger("calibview")


def regression_target(file: str, name: str):
    """The regression run of ``file`` that ``name`` names, or None when it names none or names a classification
    run (which then takes precedence, as it did before regression runs existed)."""
    from calibview.core.io import discovery, shards
    from calibview.core.io.regression.discovery import find_regression_run, list_regression_runs

    if shards.is_pattern(file):
        return None
    runs = list_regression_runs(file)
    match = find_regression_run(runs, name) if runs else None
    if match is None:
        return None
    try:
        discovery.find_run(file, name)
    except CalibviewError:
        return match
    return None


def choose(path: str, obj: Any, run, use: Optional[str], allow_other_run: bool = False) -> dict:
    """The regression record of ``obj`` (a calibrators.json list, or one record) to apply to ``run`` (a
    RegRunInfo): fitted on that run (``allow_other_run``: on one other run, with a warning), picked by ``use``
    (the calibrator's name) or as the only one that is not "none", of a method and form the run takes."""
    from calibview.core.calibrators import file as calibrator_file
    from calibview.core.regression.recalibrators import REG_CALIBRATORS, applies

    where = f"run {run.name} in {run.file}"
    if isinstance(obj, dict) and "schema" in obj and obj["schema"] != calibrator_file.SCHEMA:
        raise CalibviewError(f"{path} is an inference config of calibview release, which holds a classification "
                             f"calibrator, and {where} is a regression run; give the calibrators.json of a report on "
                             "the regression run.")
    records, single = calibrator_file.records_of(path, obj)
    warnings = calibrator_file.schema_warnings(path, records)        # printed once the record is accepted
    reg = [r for r in records if r.get("kind") == calibrator_file.REGRESSION]
    if not reg:
        methods = ", ".join(dict.fromkeys(str(r.get("method")) for r in records))
        raise CalibviewError(f"{path} holds only calibrators fitted on classification runs ({methods}), and {where} "
                             f"is a regression run; apply a regression recalibrator ({', '.join(REG_CALIBRATORS)}) "
                             "from the calibrators.json of a report on a regression run.")
    for_run = [r for r in reg if r.get("run") == run.name]
    if not for_run:
        runs = sorted({str(r["run"]) for r in reg if "run" in r})
        if single and not runs:
            for_run = reg
        elif len(runs) == 1 and allow_other_run:
            warnings.append(f"{path} was fitted on run {runs[0]}, not {run.name}; applied anyway "
                            "(--allow-other-run)")
            for_run = reg
        else:
            hint = ("; pass --allow-other-run to apply it to this run" if len(runs) == 1 else "")
            raise CalibviewError(f"{path} has no recalibrator fitted on regression run {run.name} (it has runs: "
                                 f"{', '.join(runs) or 'none'}){hint}.")
    record = calibrator_file.pick(path, for_run, use)
    method = record.get("method")
    if method not in REG_CALIBRATORS:
        raise CalibviewError(f"{path}: the regression recalibrator {method!r} is not one of "
                             f"{', '.join(REG_CALIBRATORS)}; re-run the report.")
    form = record.get("form")
    if form is not None and form != run.form:
        raise CalibviewError(f"The recalibrator in {path} ({method}) was fitted on a {form} run, and {where} is a "
                             f"{run.form} run; apply it to a run of the form it was fitted on.")
    reason = applies(method, run.form)
    if reason:
        raise CalibviewError(f"{path}: {reason}, and {where} is a quantile run; apply isotonic-pit to it.")
    _check_params(path, method, record.get("params"))
    for w in warnings:
        _log.warning(f"warning: {w}")
    return record


def _check_params(path: str, method: str, params: Any) -> None:
    """One sentence for a record whose parameters the recalibrator cannot use (an edited or damaged file)."""
    def bad(what: str) -> CalibviewError:
        return CalibviewError(f"{path}: the {method} record's params {what}; re-run the report.")

    if method == "none":
        return
    if not isinstance(params, dict):
        raise bad("are missing")
    if method == "var-scaling":
        s = params.get("s")
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not (math.isfinite(s) and s > 0):
            raise bad(f"have s = {s!r}, not a positive number")
        return
    lists = {k: params.get(k) for k in ("knots_t", "knots_u", "levels")}
    for key, value in lists.items():
        if not (isinstance(value, list) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                           and math.isfinite(v) for v in value)):
            raise bad(f"have no list of finite numbers {key}")
    t, u, lv = lists["knots_t"], lists["knots_u"], lists["levels"]
    if len(t) != len(u) or len(t) < 2 or any(b < a for a, b in zip(t, t[1:])) or any(b < a for a, b in zip(u, u[1:])):
        raise bad("have knots that are not two non-decreasing lists of one length")
    if any(not 0 < v < 1 for v in lv) or any(b <= a for a, b in zip(lv, lv[1:])):
        raise bad("have levels that are not strictly increasing in (0, 1)")


def run(args, info) -> int:
    """Apply the chosen recalibrator to split ``args.split`` of the regression run ``info`` and write the
    recalibrated split (float64) as run MODEL/DATASET of ``args.out``; the input is only read."""
    from calibview.core.calibrators import file as calibrator_file
    from calibview.core.io.regression.read import read_regression_split
    from calibview.core.io.regression.write import write_regression
    from calibview.core.regression import recalibrators as recal
    from calibview.core.regression.forms import Predictive

    obj = calibrator_file.load_json(args.calibrator, "a calibrators JSON",
                                    "give the calibrators.json of calibview report on the regression run")
    record = choose(args.calibrator, obj, info, args.use, args.allow_other_run)
    fitted = recal.from_json(record)
    data = read_regression_split(info, args.split, allow_crossing=args.allow_crossing)
    if data.sorted_rows:
        _log.warning(f"note: {data.sorted_rows} rows of crossing quantiles sorted (--allow-crossing).")
    pred = fitted.apply(Predictive.of(data))
    split = {"mean": pred.mean, "targets": data.targets, pred.form: getattr(pred, pred.form)}
    if pred.form == "quantiles":
        split["levels"] = pred.levels
    model = args.model or f"{info.model}+{fitted.name}"
    dataset = info.dataset or "data"
    attrs = {"calibrated_from": f"{args.file}:{info.split(args.split).path}", "calibrator": fitted.name}
    out = write_regression(args.out, model, dataset, {args.split: split}, attrs=attrs, overwrite=args.overwrite)
    print(f"{args.out}: {model}/{dataset}/{args.split} (N={data.n}, regression: {out.describe()}, {fitted.name})")
    return 0
