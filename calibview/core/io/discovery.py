"""Finding the runs of an HDF5 logits file: :func:`list_runs` walks the file's groups and :func:`find_run` picks
one run by name. Only metadata is read here (shapes, dtypes, attributes), never the arrays; every split found is
checked (:mod:`calibview.core.io.checks`) so that a malformed file fails here, before anything is computed.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import MappingProxyType
from typing import Optional, Sequence, Union

import h5py
import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io import meta as md
from calibview.core.io.checks import check_shapes, check_stored
from calibview.core.io.schema import SCORE_KINDS, PathLike, RunInfo, SplitInfo, abspath, join, open_file

_MAX_ATTR_CHARS = 10_000


def list_runs(path: PathLike) -> list[RunInfo]:
    """All runs in the file, in file order. Reads metadata only (shapes, dtypes, attributes), never the arrays.

    Raises CalibviewError if the file is not HDF5, holds no runs, or any split's shapes or dtypes are invalid."""
    file = abspath(path)
    with open_file(file) as f:
        return discover(f, file)


def discover(f: h5py.File, file: str) -> list[RunInfo]:
    """The runs of the open file ``f`` (whose path is ``file``), in file order; see :func:`list_runs`."""
    found: dict[str, list[SplitInfo]] = {}  # run path -> splits, both in file order
    seen: set = set()

    def walk(group: h5py.Group) -> None:
        if group.id in seen:  # the same group reached by two hard links
            return
        seen.add(group.id)
        split = _split_info(group, file)
        if split is not None:
            found.setdefault(_parent(group.name), []).append(split)
        for name in group:
            if split is not None and name == md.META_GROUP:   # a split's metadata columns, never a split
                continue
            if isinstance(group.get(name, getlink=True), h5py.HardLink):
                child = group.get(name)
                if isinstance(child, h5py.Group):
                    walk(child)

    walk(f)
    if not found and _has_regression(f, file):
        return []                # regression runs only: calibview.core.io.regression lists them
    if not found:
        raise CalibviewError(
            f"{file}: no runs found in / (no group holds a 'logits' or 'probs' dataset next to a 'labels' "
            f"dataset, nor 'mean' and 'targets' datasets); see docs/FORMAT.md for the layout."
        )
    root_attrs = _string_attrs(f)
    return [_run_info(f, file, path, splits, root_attrs) for path, splits in found.items()]


def _has_regression(f: h5py.File, file: str) -> bool:
    from calibview.core.io.regression.discovery import discover_regression

    return bool(discover_regression(f, file))


def _parent(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


def _split_info(group: h5py.Group, file: str) -> Optional[SplitInfo]:
    """The split this group is, or None if it holds no scores; CalibviewError if its datasets are malformed."""
    found = {k: guard.child(group, k, file) for k in SCORE_KINDS}  # never follows a foreign link
    kind = next((k for k in SCORE_KINDS if isinstance(found.get(k), h5py.Dataset)), None)
    if kind is None:
        return None
    scores = found[kind]
    spath = join(group.name, kind)
    lpath = join(group.name, "labels")
    labels = guard.child(group, "labels", file)
    if not isinstance(labels, h5py.Dataset):
        raise CalibviewError(
            f"{file}: {spath} has no labels dataset next to it ({lpath} is missing); "
            f"add the (N,) integer class labels."
        )
    check_stored(file, scores, labels)
    check_shapes(file, spath, scores.shape, scores.dtype, lpath, labels.shape, labels.dtype, kind)
    name = "all" if group.name == "/" else group.name.rsplit("/", 1)[1]
    n, k = scores.shape
    return SplitInfo(name=name, path=group.name, n=int(n), k=int(k), kind=kind, dtype=str(scores.dtype),
                     meta=_meta_names(group))



def _meta_names(group: h5py.Group) -> tuple[str, ...]:
    """The datasets of the split's ``meta`` group (hard links only); validated when read (:func:`read_meta`)."""
    if not isinstance(group.get(md.META_GROUP, getlink=True), h5py.HardLink):
        return ()
    sub = group[md.META_GROUP]
    if not isinstance(sub, h5py.Group):
        return ()
    return tuple(name for name in sub if isinstance(sub.get(name, getlink=True), h5py.HardLink)
                 and isinstance(sub.get(name), h5py.Dataset))



def _run_info(f: h5py.File, file: str, path: str, splits: list[SplitInfo], root_attrs: dict) -> RunInfo:
    if path == "/":
        model, dataset, name = Path(file).stem, "", Path(file).stem
    else:
        model, _, dataset = path.lstrip("/").partition("/")
        name = path.lstrip("/")
    ks = {s.k for s in splits}
    if len(ks) > 1:
        detail = ", ".join(f"{s.path} K = {s.k}" for s in splits)
        raise CalibviewError(f"{file}: the splits of run {path} have different class counts ({detail}).")
    k = splits[0].k
    group = f[path]
    class_names = _class_names(group, file, k)
    attrs = {**root_attrs, **_string_attrs(group)} if path != "/" else dict(root_attrs)
    return RunInfo(file=file, name=name, model=model, dataset=dataset, path=path, k=k, splits=tuple(splits),
                   class_names=class_names, attrs=MappingProxyType(attrs))


def _class_names(group: h5py.Group, file: str, k: int) -> Optional[tuple[str, ...]]:
    if "class_names" not in group.attrs:
        return None
    raw = np.asarray(group.attrs["class_names"])
    if raw.ndim != 1 or raw.dtype.kind not in "OSU" or len(raw) != k:
        raise CalibviewError(
            f"{file}: the class_names attribute of {group.name} must be a 1-D array of K = {k} strings "
            f"but has shape {raw.shape} and dtype {raw.dtype}."
        )
    return tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in raw)


def _string_attrs(obj: h5py.HLObject) -> dict[str, str]:
    """Small scalar attributes (attribution, source, ...) as strings; arrays and class_names are skipped."""
    out = {}
    for key in obj.attrs:
        if key == "class_names":
            continue
        try:
            value = obj.attrs[key]
        except (OSError, TypeError, ValueError):  # a type h5py cannot read: not ours to interpret
            continue
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, np.generic):
            value = str(value.item())
        if isinstance(value, (str, int, float, bool)) and len(str(value)) <= _MAX_ATTR_CHARS:
            out[key] = str(value)
    return out


def find_run(path_or_runs: Union[PathLike, Sequence[RunInfo]], name: str) -> RunInfo:
    """The run called ``name`` ("model/dataset", or its group path "/model/dataset"); a unique model name or a
    unique trailing run of whole ``/``-separated components ("cifar100" for "resnet110/cifar100") also matches,
    never part of a component ("ar100")."""
    runs = list_runs(path_or_runs) if isinstance(path_or_runs, (str, os.PathLike)) else list(path_or_runs)
    if not runs:
        raise CalibviewError(f"There are no runs to choose '{name}' from.")
    file = runs[0].file
    key = name.strip("/") or name
    for match in ([r for r in runs if r.name == key], [r for r in runs if r.model == key],
                  [r for r in runs if r.name.endswith("/" + key)]):
        if len(match) == 1:
            return match[0]
        if len(match) > 1:
            raise CalibviewError(
                f"{file}: run '{name}' is ambiguous, it matches {len(match)} runs "
                f"({', '.join(r.name for r in match)}); give the full model/dataset name."
            )
    raise CalibviewError(f"{file}: run '{name}' not found; available runs: {', '.join(r.name for r in runs)}.")
