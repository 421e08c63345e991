"""Finding the regression runs of an HDF5 file: :func:`list_regression_runs` walks the groups and
:func:`find_regression_run` picks one by name. Metadata only (shapes, dtypes, the ``levels`` attribute); the
values are checked when a split is read (:mod:`.read`)."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Optional, Sequence

import h5py

from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io.limits import walk
from calibview.core.io.regression.checks import check_layout
from calibview.core.io.regression.schema import BASE, FORMS, RegRunInfo, RegSplitInfo
from calibview.core.io.schema import SCORE_KINDS, PathLike, abspath, open_file


def list_regression_runs(path: PathLike) -> list[RegRunInfo]:
    """The regression runs of the file at ``path``, in file order ([] when it has none); CalibviewError for a
    malformed regression split (see :func:`calibview.core.io.regression.checks.check_layout`)."""
    file = abspath(path)
    with open_file(file) as f:
        return discover_regression(f, file)


def discover_regression(f: h5py.File, file: str) -> list[RegRunInfo]:
    """The regression runs of the open file ``f`` (whose path is ``file``); see :func:`list_regression_runs`."""
    found: dict[str, list[RegSplitInfo]] = {}
    splits: set = set()                     # split groups: never walked into

    # iteratively, with the depth limit and one sentence for a damaged group, as the classification runs are found
    for group in walk.groups(f, file, lambda g, name: g.name in splits):
        try:
            split = _split_info(group, file)
        except walk.H5_ERRORS as e:
            raise walk.damaged(file, group.name, e) from None
        if split is not None:
            splits.add(group.name)
            found.setdefault(group.name.rsplit("/", 1)[0] or "/", []).append(split)
    return [_run_info(f, file, p, s) for p, s in found.items()]


def _split_info(group: h5py.Group, file: str) -> Optional[RegSplitInfo]:
    """The regression split this group is (``mean`` and ``targets`` and no classification scores), or None."""
    present = {k: guard.child(group, k, file) for k in BASE + FORMS}
    if not all(isinstance(present[k], h5py.Dataset) for k in BASE):
        return None
    if any(isinstance(guard.child(group, k, file), h5py.Dataset) for k in SCORE_KINDS):
        return None                      # a classification split that happens to carry a "mean" column
    datasets = {k: d for k, d in present.items() if isinstance(d, h5py.Dataset)}
    for d in datasets.values():
        guard.check_dataset(d, file)
    shapes = {k: (tuple(d.shape), d.dtype) for k, d in datasets.items()}
    q = datasets.get("quantiles")
    levels = q.attrs["levels"] if q is not None and "levels" in q.attrs else None
    lv = check_layout(file, group.name, shapes, levels)
    form = next(k for k in FORMS if k in datasets)
    width = 1 if form == "var" else int(shapes[form][0][1])
    name = "all" if group.name == "/" else group.name.rsplit("/", 1)[1]
    return RegSplitInfo(name=name, path=group.name, n=int(shapes["targets"][0][0]), form=form, width=width,
                        levels=lv)


def _run_info(f: h5py.File, file: str, path: str, splits: list[RegSplitInfo]) -> RegRunInfo:
    if path == "/":
        model, dataset, name = Path(file).stem, "", Path(file).stem
    else:
        model, _, dataset = path.lstrip("/").partition("/")
        name = path.lstrip("/")
    forms = {(s.form, s.levels) for s in splits}
    if len(forms) > 1:
        detail = ", ".join(f"{s.name}: {s.form}" for s in splits)
        raise CalibviewError(f"{file}: the splits of regression run {path} have different predictive forms or "
                             f"levels ({detail}); give every split the same form.")
    attrs = {}
    for key, value in f[path].attrs.items() if path != "/" else ():
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str):
            attrs[key] = value
    return RegRunInfo(file=file, name=name, model=model, dataset=dataset, path=path, form=splits[0].form,
                      splits=tuple(splits), attrs=MappingProxyType(attrs))


def find_regression_run(runs: Sequence[RegRunInfo], name: str) -> Optional[RegRunInfo]:
    """The run of ``runs`` called ``name`` (its full name, group path, a unique model name or a unique trailing
    part, as :func:`calibview.core.io.discovery.find_run` matches), or None when none matches."""
    key = name.strip("/") or name
    for match in ([r for r in runs if r.name == key], [r for r in runs if r.model == key],
                  [r for r in runs if r.name.endswith("/" + key)]):
        if len(match) == 1:
            return match[0]
        if len(match) > 1:
            raise CalibviewError(f"{runs[0].file}: regression run '{name}' is ambiguous, it matches "
                                 f"{', '.join(r.name for r in match)}; give the full model/dataset name.")
    return None
