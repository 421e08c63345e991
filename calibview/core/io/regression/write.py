"""Writing regression splits (:func:`write_regression`): each split's ``mean``, ``targets`` and one predictive form
(``var``, ``quantiles`` with its ``levels`` attribute, or ``samples``) as float64 datasets of
``/<model>/<dataset>/<split>``, checked first by the reading rules (:mod:`.checks`) and written into a temporary
copy that replaces the destination only once it reads back as a valid file
(:func:`calibview.core.io.safe_io.atomic_hdf5`). No creation times are stored, so the same arrays give the same
bytes."""

from __future__ import annotations

import os
from typing import Mapping, Optional

import h5py
import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import safe_io
from calibview.core.io.regression.checks import check_layout, check_values
from calibview.core.io.regression.discovery import list_regression_runs
from calibview.core.io.regression.schema import BASE, FORMS, RegRunInfo
from calibview.core.io.schema import PathLike, abspath, join, oneline
from calibview.core.io.toplabel.write import run_group, run_path, set_run_attrs


def checked_splits(file: str, rpath: str, splits: Mapping[str, Mapping[str, object]],
                   crossing: str = "refuse") -> dict[str, dict[str, np.ndarray]]:
    """{split: {"mean", "targets", form (, "levels")}} as float64 arrays, each split checked by the reading
    rules (layout, then values); quantile rows that cross are refused (``crossing`` "refuse"), sorted ("sort") or
    kept as given ("keep": the readers then refuse or sort them, as ``--allow-crossing`` says)."""
    out = {}
    for name, parts in splits.items():
        where = join(rpath, name)
        unknown = sorted(set(parts) - set(BASE + FORMS + ("levels",)))
        if unknown:
            raise CalibviewError(f"{file}: regression split {where} was given {', '.join(unknown)}; a regression "
                                 "split holds mean, targets and one of var, quantiles or samples (with levels).")
        for k in BASE:
            if k not in parts:
                raise CalibviewError(f"{file}: regression split {where} has no {k}; give mean and targets (N,).")
        arrays = {k: np.asarray(v) for k, v in parts.items() if k != "levels"}
        shapes = {k: (a.shape, a.dtype) for k, a in arrays.items()}
        levels = check_layout(file, where, shapes, parts.get("levels"))
        form = next(k for k in FORMS if k in arrays)
        f64 = {k: a.astype(np.float64) for k, a in arrays.items()}
        values, _ = check_values(file, where, f64["mean"], f64["targets"], form, f64[form], crossing != "refuse")
        if crossing == "sort":
            f64[form] = values
        if levels is not None:
            f64["levels"] = np.asarray(levels, dtype=np.float64)
        out[name] = f64
    return out


def write_regression(path: PathLike, model: str, dataset: str, splits: Mapping[str, Mapping[str, object]], *,
                     attrs: Optional[Mapping[str, str]] = None, compression: Optional[str] = "gzip",
                     overwrite: bool = False, crossing: str = "refuse") -> RegRunInfo:
    """Write ``splits`` ({name: {"mean": (N,), "targets": (N,), and "var": (N,) > 0, or "quantiles": (N, Q) with
    "levels": (Q,) in (0, 1), or "samples": (N, S)}}, in the target's units, var squared) as run
    ``/<model>/<dataset>`` of ``path``, appended to an existing file (an existing split is replaced only with
    ``overwrite``); ``attrs`` (strings) go on the run group; ``crossing`` as :func:`checked_splits` takes it.
    Returns the run as it reads back from ``path``."""
    file = abspath(path)
    rpath = run_path(file, model, dataset)
    checked = checked_splits(file, rpath, splits, crossing)
    exists = os.path.exists(file)
    if exists and not h5py.is_hdf5(file):
        raise CalibviewError(f"{file}: the output exists and is not an HDF5 file; refusing to overwrite it.")
    reserve = (1 << 20) + sum(a.nbytes for parts in checked.values() for a in parts.values())
    try:
        with safe_io.atomic_hdf5(file, reserve=reserve, init=_create) as tmp:
            with h5py.File(tmp, "r+", track_order=True) as f:
                group = run_group(f, file, rpath)
                set_run_attrs(group, None, None, attrs)
                for name, parts in checked.items():
                    _write_split(group, file, rpath, name, parts, compression, overwrite)
            runs = _read_back(tmp, file, rpath)
    except OSError as e:
        raise CalibviewError(f"{file}: could not write {rpath} ({oneline(e)}).") from None
    return RegRunInfo(**{**runs.__dict__, "file": file})


def _create(tmp: str) -> None:
    h5py.File(tmp, "w", track_order=True).close()


def _write_split(group: h5py.Group, file: str, rpath: str, name: str, parts: dict, compression: Optional[str],
                 overwrite: bool) -> None:
    if group.get(name, getlink=True) is not None:
        if not overwrite:
            raise CalibviewError(f"{file}: {join(rpath, name)} already exists; pass overwrite=True (--overwrite on "
                                 "the command line) to replace it.")
        del group[name]
    split = group.create_group(name, track_order=True)
    options = {"compression": compression, "shuffle": True} if compression else {}
    for key, data in parts.items():
        if key != "levels":
            split.create_dataset(key, data=data, track_times=False, **options)
    if "quantiles" in parts:
        split["quantiles"].attrs["levels"] = parts["levels"]


def _read_back(tmp: str, file: str, rpath: str) -> RegRunInfo:
    """The written run, read as every later command reads the file (both kinds of runs) before the copy replaces
    ``file``: a refusal (say a split whose form differs from the run's other splits) leaves ``file`` as it was."""
    from calibview.core.io.discovery import list_runs

    try:
        list_runs(tmp)
        return next(r for r in list_regression_runs(tmp) if r.path == rpath)
    except CalibviewError as e:
        text = str(e).replace(tmp, file).rstrip(".")
        raise CalibviewError(f"{text}; nothing was written to {file}.") from None
