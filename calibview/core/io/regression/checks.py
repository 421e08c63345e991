"""The validation rules of regression splits, each refusal one sentence (CalibviewError): the shapes at
discovery (:func:`check_layout`), the values when read (:func:`check_values`)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from calibview.core.errors import CalibviewError


def check_layout(file: str, path: str, shapes: dict, levels) -> Optional[tuple[float, ...]]:
    """Check the datasets of the regression split at group ``path``: ``shapes`` maps each dataset present
    ("mean", "targets", "var", "quantiles", "samples") to (shape, dtype); ``levels`` is the raw ``levels``
    attribute of ``quantiles`` (None when absent). Returns the levels as a tuple (quantile splits) or None."""
    forms = [f for f in ("var", "quantiles", "samples") if f in shapes]
    if len(forms) > 1:
        raise CalibviewError(f"{file}: regression split {path} holds both {' and '.join(forms)}; keep exactly one "
                             "predictive form (var, quantiles or samples).")
    if not forms:
        raise CalibviewError(f"{file}: regression split {path} has mean and targets but no predictive form; add "
                             "var (N,), quantiles (N, Q) with a levels attribute, or samples (N, S).")
    for name, (shape, dtype) in shapes.items():
        if np.dtype(dtype).kind not in "fiu":
            raise CalibviewError(f"{file}: {path}/{name} must hold real numbers but has dtype {dtype}.")
    n = shapes["targets"][0]
    if len(n) != 1:
        raise CalibviewError(f"{file}: {path}/targets must be one-dimensional (N,) but has shape {n}.")
    if shapes["mean"][0] != n:
        raise CalibviewError(f"{file}: {path}/mean has shape {shapes['mean'][0]} but targets has {n}; mean must be "
                             "(N,) like targets.")
    form = forms[0]
    shape = shapes[form][0]
    if form == "var":
        if shape != n:
            raise CalibviewError(f"{file}: {path}/var has shape {shape} but targets has {n}; var must be (N,).")
        return None
    if len(shape) != 2 or shape[0] != n[0] or shape[1] < (1 if form == "quantiles" else 2):
        what = "(N, Q) with Q >= 1" if form == "quantiles" else "(N, S) with S >= 2"
        raise CalibviewError(f"{file}: {path}/{form} has shape {shape}; it must be {what}, N = {n[0]}.")
    if form == "samples":
        return None
    return check_levels(file, f"{path}/quantiles", levels, shape[1])


def check_levels(file: str, where: str, levels, q: int) -> tuple[float, ...]:
    """The ``levels`` of the (N, Q) quantiles at ``where`` as a tuple: Q strictly increasing values in (0, 1)."""
    if levels is None:
        raise CalibviewError(f"{file}: {where} has no levels attribute; give the Q quantile levels in (0, 1).")
    lv = np.asarray(levels)
    if lv.dtype.kind not in "fiu" or lv.shape != (q,):
        raise CalibviewError(f"{file}: the levels attribute of {where} must be {q} numbers (one per column) but has "
                             f"shape {lv.shape} and dtype {lv.dtype}.")
    lv = lv.astype(np.float64)
    if not np.all((lv > 0) & (lv < 1)):
        raise CalibviewError(f"{file}: the levels of {where} must lie strictly between 0 and 1; "
                             f"{int(np.sum(~((lv > 0) & (lv < 1))))} of them do not.")
    if q > 1 and not np.all(np.diff(lv) > 0):
        raise CalibviewError(f"{file}: the levels of {where} must be strictly increasing; they are not "
                             f"({', '.join(f'{v:g}' for v in lv)}).")
    return tuple(float(v) for v in lv)


def check_values(file: str, path: str, mean: np.ndarray, targets: np.ndarray, form: str, values: np.ndarray,
                 allow_crossing: bool = False) -> tuple[np.ndarray, int]:
    """Check the values of a regression split (float64 arrays; ``values`` is its var, quantiles or samples) and
    return (values, rows sorted): finite means, targets and forms, var > 0, quantiles non-decreasing along Q in
    every row; with ``allow_crossing`` crossing rows are sorted instead of refused."""
    bad = int(np.sum(np.isnan(targets)))
    if bad:
        raise CalibviewError(f"{file}: {path}/targets has {bad} NaN value(s); drop those samples or give their "
                             "targets.")
    for name, arr in (("targets", targets), ("mean", mean), (form, values)):
        bad = int(np.sum(~np.isfinite(arr)))
        if bad:
            raise CalibviewError(f"{file}: {path}/{name} has {bad} value(s) that are NaN or infinite; every value "
                                 "must be finite.")
    if form == "var":
        bad = int(np.sum(values <= 0))
        if bad:
            raise CalibviewError(f"{file}: {path}/var has {bad} value(s) that are zero or negative; a predictive "
                                 "variance must be > 0.")
        return values, 0
    if form == "quantiles" and values.shape[1] > 1:
        crossing = np.any(np.diff(values, axis=1) < 0, axis=1)
        rows = int(crossing.sum())
        if rows and not allow_crossing:
            raise CalibviewError(f"{file}: {path}/quantiles cross (decrease along Q) in {rows} of {values.shape[0]} "
                                 "rows; fix the model's quantiles or pass --allow-crossing to sort each row.")
        if rows:
            values = np.sort(values, axis=1)
        return values, rows
    return values, 0
