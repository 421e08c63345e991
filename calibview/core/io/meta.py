"""Metadata columns of a split (``/<model>/<dataset>/<split>/meta/<column>``, docs/FORMAT.md): one value per
sample, used to cut the split into slices (:mod:`calibview.core.evaluation.slices`).

Integers, booleans and strings are categories; floats are a measurement (binned into quantile groups by the
slices), where NaN means "missing". A float column with the attribute ``categorical = True`` holds category codes
(as pandas writes them): NaN is refused there, and the codes are returned as integers.
"""

from __future__ import annotations

import numpy as np

from calibview.core.errors import CalibviewError, ParameterError

#: the group of a split that holds its metadata columns (never a split itself)
META_GROUP = "meta"
#: ``--by class`` means the true label, so no column may take that name
RESERVED = ("class",)


def check_name(file: str, where: str, column) -> None:
    """A column name must be a non-empty string without '/' and not a reserved word."""
    if not isinstance(column, str) or column in ("", ".", "..") or "/" in column:
        raise CalibviewError(f"{file}: metadata column name {column!r} for {where} is not valid (non-empty, no '/').")
    if column in RESERVED:
        raise ParameterError(f"{file}: a metadata column of {where} may not be called {column!r} (by={column} "
                             f"means the true label); rename it.", "by")


def check_layout(file: str, path: str, shape: tuple, n: int) -> None:
    """The shape rule of :func:`validate` from a stored column's declared ``shape``, before any value is read
    (a column declaring 2^31 compressed values is refused by its length, not after inflating it)."""
    shape = tuple(int(s) for s in shape or ())
    if len(shape) != 1:
        raise CalibviewError(f"{file}: metadata column {path} has shape {shape} but must be 1-D with one value "
                             f"per sample (N = {n}).")
    if shape[0] != n:
        raise CalibviewError(f"{file}: metadata column {path} has {shape[0]} values but the split has N = {n} "
                             f"samples; give exactly one value per sample.")


def validate(file: str, path: str, values, n: int, *, categorical: bool = False) -> np.ndarray:
    """The column as a read-only 1-D array of N values: int64, bool, str (object array) or float64.

    ``path`` names the dataset (or source array) in messages; ``categorical`` marks a float column of codes.
    Raises a one-sentence CalibviewError for a wrong shape or length, NaN in a categorical column, infinite
    floats, or values that are neither numbers nor strings."""
    a = np.asarray(values)
    if a.ndim != 1:
        raise CalibviewError(f"{file}: metadata column {path} has shape {a.shape} but must be 1-D with one value "
                             f"per sample (N = {n}).")
    if a.shape[0] != n:
        raise CalibviewError(f"{file}: metadata column {path} has {a.shape[0]} values but the split has N = {n} "
                             f"samples; give exactly one value per sample.")
    kind = a.dtype.kind
    if kind in "iu":
        out = a.astype(np.int64)
    elif kind == "b":
        out = a.astype(bool)
    elif kind in "SU" or kind == "O":
        out = _strings(file, path, a)
    elif kind == "f":
        out = a.astype(np.float64)
        nan = np.isnan(out)
        if categorical and nan.any():
            raise CalibviewError(f"{file}: {int(nan.sum())} of {n} values of the categorical metadata column {path} "
                                 f"are NaN (first at row {int(np.argmax(nan))}); give missing values a category "
                                 f"of their own.")
        bad = np.isinf(out)
        if bad.any():
            raise CalibviewError(f"{file}: {int(bad.sum())} of {n} values of metadata column {path} are infinite "
                                 f"(first at row {int(np.argmax(bad))}); use NaN for a missing value.")
        if categorical:
            out = out.astype(np.int64) if np.array_equal(out, np.round(out)) else _strings(file, path, out)
    else:
        raise CalibviewError(f"{file}: metadata column {path} has dtype {a.dtype}; store integers or strings "
                             f"(categories) or floats (binned into quantile groups).")
    out = np.ascontiguousarray(out)
    out.flags.writeable = False
    return out


def _strings(file: str, path: str, a: np.ndarray) -> np.ndarray:
    """Strings (bytes decoded as UTF-8) as an object array; None or NaN in an object array is a missing category."""
    out = np.empty(a.shape[0], dtype=object)
    missing = []
    for i, v in enumerate(a.tolist()):
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif v is None or (isinstance(v, float) and np.isnan(v)):
            missing.append(i)
            continue
        elif not isinstance(v, (str, int, float, np.generic)):
            raise CalibviewError(f"{file}: metadata column {path} holds a {type(v).__name__} at row {i}; store "
                                 f"strings or numbers.")
        out[i] = str(v)
    if missing:
        raise CalibviewError(f"{file}: {len(missing)} of {a.shape[0]} values of the categorical metadata column "
                             f"{path} are NaN or None (first at row {missing[0]}); give missing values a "
                             f"category of their own.")
    return out


def is_numeric_measure(values: np.ndarray) -> bool:
    """True for a float column (quantile groups), False for categories."""
    return np.asarray(values).dtype.kind == "f"
