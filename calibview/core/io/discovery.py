"""Finding the runs of an HDF5 logits file: :func:`list_runs` walks the file's groups and :func:`find_run` picks
one run by name. Only metadata is read here (shapes, dtypes, attributes), never the arrays; every split found is
checked (:mod:`calibview.core.io.checks`) so that a malformed file fails here, before anything is computed.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from types import MappingProxyType
from typing import Optional, Sequence, Union

import h5py
import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io import meta as md
from calibview.core.io.checks import check_shapes, check_stored
from calibview.core.io.limits import walk
from calibview.core.io.members import format as mf
from calibview.core.io.schema import SCORE_KINDS, PathLike, RunInfo, SplitInfo, abspath, join, open_file
from calibview.core.io.toplabel import format as toplabel_format

_MAX_ATTR_CHARS = 10_000
#: attributes read per group (the rest are ignored; a run's attribution and source need a handful)
MAX_ATTRS = 256


def list_runs(path: PathLike) -> list[RunInfo]:
    """All runs in the file, in file order. Reads metadata only (shapes, dtypes, attributes), never the arrays.

    Raises CalibviewError if the file is not HDF5, holds no runs, or any split's shapes or dtypes are invalid."""
    file = abspath(path)
    with open_file(file) as f:
        return discover(f, file)


#: files whose runs are remembered (see :func:`discover`)
CACHED_FILES = 16
#: a file changed less than this long ago (ns) is not remembered: file times tick by the kernel's coarse clock
#: (milliseconds), so a rewrite of the same size within one tick would keep its identity
SETTLED_NS = 2_000_000_000
_cache: "OrderedDict[tuple, tuple[RunInfo, ...]]" = OrderedDict()
_cache_lock = threading.Lock()
#: how many times a file's groups were walked (tests count them)
walks = 0


def _identity(f: h5py.File, file: str) -> Optional[tuple]:
    """The identity of the file ``f`` has open: its device, inode, size and modification and change times in ns,
    from the descriptor HDF5 reads through (not the path, which may name another file by now); None where the
    driver has no descriptor."""
    try:
        st = os.fstat(f.id.get_vfd_handle())
    except (OSError, TypeError, ValueError, AttributeError, RuntimeError):
        return None
    return file, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def discover(f: h5py.File, file: str) -> list[RunInfo]:
    """The runs of the open file ``f`` (whose path is ``file``), in file order; see :func:`list_runs`.

    Groups are walked iteratively with a depth limit (:mod:`calibview.core.io.limits.walk`); whatever HDF5 raises
    on a damaged file, and running out of memory, become one sentence naming the file and the group.

    An evaluation looks at its file several times (the run, then each split it reads), and walking and checking
    every group took about 3 ms each time for a small file: the runs of the last CACHED_FILES files are kept,
    keyed by the open file's identity (:func:`_identity`), so a file that was rewritten, replaced or touched is
    walked again. Only successful listings are kept; a malformed file is checked, and refused, every time. A file
    changed within the last SETTLED_NS is walked every time, as git treats a "racily clean" file: any later
    change then gives it another time."""
    global walks
    key = _identity(f, file)
    if key is not None:
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                return list(hit)
    try:
        walks += 1
        runs = _discover(f, file)
    except MemoryError:
        raise CalibviewError(f"{file}: ran out of memory while listing its runs; the file is not a plain logits "
                             f"file.") from None
    except RecursionError:
        raise CalibviewError(f"{file}: its links or groups nest too deep to list; store the runs as "
                             f"/<model>/<dataset>/<split>.") from None
    if key is not None and time.time_ns() - max(key[-2:]) > SETTLED_NS:
        with _cache_lock:
            _cache[key] = tuple(runs)
            while len(_cache) > CACHED_FILES:
                _cache.popitem(last=False)
    return runs


def _discover(f: h5py.File, file: str) -> list[RunInfo]:
    found: dict[str, list[SplitInfo]] = {}  # run path -> splits, both in file order
    split_groups: set = set()                # the groups that are splits: their meta group is never walked

    def skip(group: h5py.Group, name: str) -> bool:
        return name == md.META_GROUP and group.name in split_groups

    for group in walk.groups(f, file, skip):
        try:
            split = _split_info(group, file)
        except walk.H5_ERRORS as e:
            raise walk.damaged(file, group.name, e) from None
        if split is not None:
            split_groups.add(group.name)
            found.setdefault(_parent(group.name), []).append(split)
    if not found and _has_regression(f, file):
        return []                # regression runs only: calibview.core.io.regression lists them
    if not found:
        raise CalibviewError(
            f"{file}: no runs found in / (no group holds a 'logits' or 'probs' dataset, or 'confidence' and "
            f"'predictions' datasets, next to a 'labels' dataset, nor 'mean' and 'targets' datasets); see "
            f"docs/FORMAT.md for the layout."
        )
    try:
        root_attrs = _string_attrs(f)
        return [_run_info(f, file, path, splits, root_attrs) for path, splits in found.items()]
    except walk.H5_ERRORS as e:
        raise walk.damaged(file, "the attributes of its runs", e) from None


def _has_regression(f: h5py.File, file: str) -> bool:
    from calibview.core.io.regression.discovery import discover_regression

    return bool(discover_regression(f, file))


def _parent(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


def _split_info(group: h5py.Group, file: str) -> Optional[SplitInfo]:
    """The split this group is, or None if it holds no scores; CalibviewError if its datasets are malformed."""
    found = {k: guard.child(group, k, file) for k in SCORE_KINDS + (mf.MEMBERS,)}  # never follows a foreign link
    kind = next((k for k in SCORE_KINDS if isinstance(found.get(k), h5py.Dataset)), None)
    members = found[mf.MEMBERS] if isinstance(found.get(mf.MEMBERS), h5py.Dataset) else None
    if kind is None and members is None:     # the top-label form (confidence, predictions, labels), or no split
        name = "all" if group.name == "/" else group.name.rsplit("/", 1)[1]
        return toplabel_format.split_info(group, file, name, _meta_names(group))
    scores = found[kind] if kind else members
    spath = join(group.name, kind or mf.MEMBERS)
    lpath = join(group.name, "labels")
    labels = guard.child(group, "labels", file)
    if not isinstance(labels, h5py.Dataset):
        raise CalibviewError(
            f"{file}: {spath} has no labels dataset next to it ({lpath} is missing); "
            f"add the (N,) integer class labels."
        )
    m, mkind = mf.check_members(file, members, labels, scores if kind else None) if members is not None else (0, "")
    name = "all" if group.name == "/" else group.name.rsplit("/", 1)[1]
    if kind is None:            # members only: the run's scores are their ensemble
        _, n, k = members.shape
        return SplitInfo(name=name, path=group.name, n=int(n), k=int(k), kind=mf.MEMBERS, dtype=str(members.dtype),
                         meta=_meta_names(group), members=m, members_kind=mkind)
    check_stored(file, scores, labels)
    check_shapes(file, spath, scores.shape, scores.dtype, lpath, labels.shape, labels.dtype, kind)
    n, k = scores.shape
    return SplitInfo(name=name, path=group.name, n=int(n), k=int(k), kind=kind, dtype=str(scores.dtype),
                     meta=_meta_names(group), members=m, members_kind=mkind)



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
    for key in _attr_names(obj):
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


def _attr_names(obj: h5py.HLObject) -> list[str]:
    """The names of the object's attributes, or of :data:`MAX_ATTRS` of them where it has more (iteration stopped
    there): listing all of an object's 100,000 attributes on every look at the file made a report take minutes."""
    names: list[str] = []

    def take(name) -> Optional[int]:
        names.append(name.decode("utf-8", "replace") if isinstance(name, bytes) else name)
        return 1 if len(names) >= MAX_ATTRS else None     # not None: HDF5 stops iterating

    count = len(obj.attrs)                                   # the object header's count: nothing is listed
    if count <= MAX_ATTRS:
        return list(obj.attrs)
    # in storage order, which HDF5 walks without first sorting every name (10 times faster at 20,000)
    h5py.h5a.iterate(obj.id, take, index_type=h5py.h5.INDEX_NAME, order=h5py.h5.ITER_NATIVE)
    return names


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
