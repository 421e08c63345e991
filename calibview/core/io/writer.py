"""Writing the HDF5 logits format (docs/FORMAT.md): one split (:func:`write_run`) or several splits of one run
(:func:`write_splits`), with class names, string attributes and metadata columns.

Every array is validated by the reading rules (:mod:`calibview.core.io.checks`) before anything is written, and
the file is written to a temporary copy that replaces the destination only when complete
(:func:`calibview.core.io.safe_io.atomic_hdf5`).
"""

from __future__ import annotations

import os
from typing import Mapping, Optional, Sequence

import h5py
import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io import meta as md
from calibview.core.io import safe_io
from calibview.core.io.checks import validate_arrays
from calibview.core.io.schema import CHUNK_BYTES, SCORE_KINDS, PathLike, abspath, join, oneline

WRITE_CHUNK_BYTES = 1 << 20  # HDF5 chunk size written by write_run


def write_run(path: PathLike, model: str, dataset: str, split: str, logits=None, labels=None, *, probs=None,
              class_names: Optional[Sequence[str]] = None, attrs: Optional[Mapping[str, str]] = None,
              compression: Optional[str] = "gzip", overwrite: bool = False,
              meta: Optional[Mapping[str, object]] = None) -> None:
    """Write one split, ``logits`` (N, K) float (or ``probs``) and ``labels`` (N,) int, to
    ``/<model>/<dataset>/<split>`` of ``path``, with metadata columns ``meta={column: (N,) values}``; see
    :func:`write_splits` for the rules."""
    file = abspath(path)
    if (logits is None) == (probs is None) or labels is None:
        raise CalibviewError(f"{file}: writing split '{split}' of run '{model}/{dataset}' needs labels and "
                             f"exactly one of logits or probs.")
    kind, scores = ("logits", logits) if logits is not None else ("probs", probs)
    write_splits(file, model, dataset, {split: (kind, scores, labels)}, class_names=class_names, attrs=attrs,
                 compression=compression, overwrite=overwrite, meta={split: meta} if meta else None)


def write_splits(path: PathLike, model: str, dataset: str, splits: Mapping[str, tuple[str, object, object]], *,
                 class_names: Optional[Sequence[str]] = None, attrs: Optional[Mapping[str, str]] = None,
                 compression: Optional[str] = "gzip", overwrite: bool = False,
                 meta: Optional[Mapping[str, Mapping[str, object]]] = None) -> None:
    """Write several splits ``{name: (kind, scores (N, K), labels (N,))}`` of one run, all validated first;
    ``meta={split: {column: (N,) values}}`` adds metadata columns (integers or strings: categories; floats).

    The file is written to a temporary name (a copy of an existing file, which is appended to) and moved into place
    only when complete (calibview.core.io.safe_io.atomic_hdf5); an existing split is replaced only with
    ``overwrite=True``. ``compression`` is "gzip" (with shuffle), "lzf" or None. ``class_names`` (K strings) and
    ``attrs`` (strings) go on the run group."""
    file = abspath(path)
    run_path = _run_path(file, model, dataset, list(splits))
    checked = {name: (kind, *validate_arrays(file, join(join(run_path, name), kind),
                                             join(join(run_path, name), "labels"), kind, scores, labels))
               for name, (kind, scores, labels) in splits.items()}
    columns = checked_meta(file, run_path, checked, meta or {})
    ks = sorted({scores.shape[1] for _, scores, _ in checked.values()})
    if len(ks) != 1:
        raise CalibviewError(f"{file}: the splits written to {run_path} have different class counts K = {ks}.")
    names = None if class_names is None else tuple(str(c) for c in class_names)
    if names is not None and len(names) != ks[0]:
        raise CalibviewError(f"{file}: {len(names)} class names were given for {run_path} but the scores have "
                             f"K = {ks[0]} columns.")
    if attrs and "class_names" in attrs:
        raise CalibviewError(f"{file}: pass class names for {run_path} as class_names, not as an attribute.")
    exists = os.path.exists(file)
    if exists and not h5py.is_hdf5(file):
        raise CalibviewError(f"{file}: the output exists and is not an HDF5 file; refusing to overwrite it.")
    try:           # an existing file is appended to in a copy, renamed into place only when complete
        with safe_io.atomic_hdf5(file, reserve=_upper_bound(checked, columns), init=_create) as tmp:
            with h5py.File(tmp, "r+", track_order=True) as f:
                if exists:
                    _check_existing(f, file, run_path, checked, names, ks[0], overwrite)
                _write_into(f, run_path, checked, names, attrs, compression, columns)
            _read_back(tmp, file)
    except OSError as e:
        raise CalibviewError(f"{file}: could not write {run_path} ({oneline(e)}).") from None


def _create(tmp: str) -> None:
    """A new, empty HDF5 file (the root group in creation order), created before the disk space is reserved."""
    h5py.File(tmp, "w", track_order=True).close()


def _upper_bound(checked: dict, columns: Mapping) -> int:
    """Bytes the new splits can take on disk at most: their uncompressed arrays (labels as int64), the strings of
    their metadata columns, and the HDF5 structure around them."""
    total = 1 << 20
    for _, scores, labels in checked.values():
        total += scores.nbytes + 8 * labels.shape[0]
    for split in columns.values():
        for values in split.values():
            total += (sum(len(str(v).encode("utf-8")) + 16 for v in values) if values.dtype == object
                      else values.nbytes)
    return int(total * 1.05)


def _read_back(tmp: str, file: str) -> None:
    """Read the written copy as every later command will (``calibview.core.io.discovery``, whose checks include
    the compression-bomb rule) before it replaces ``file``: a refusal then leaves ``file`` as it was."""
    from calibview.core.io.discovery import list_runs

    try:
        list_runs(tmp)
    except CalibviewError as e:
        text = str(e).replace(tmp, file).rstrip(".")
        raise CalibviewError(f"{text}; nothing was written to {file}.") from None


def _run_path(file: str, model: str, dataset: str, split_names: list[str]) -> str:
    parts = [model] + (dataset.split("/") if dataset else [])
    if not isinstance(model, str) or not model or "/" in model or any(p in ("", ".", "..") for p in parts):
        raise CalibviewError(f"{file}: model '{model}' / dataset '{dataset}' is not a valid run name (the model must "
                             f"be non-empty without '/', the dataset may be '' or 'a/b').")
    for name in split_names:
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name:
            raise CalibviewError(f"{file}: split name '{name}' is not valid (non-empty, no '/').")
    return "/" + "/".join(parts)



def _check_existing(f: h5py.File, file: str, run_path: str, checked: dict, names: Optional[tuple[str, ...]],
                    k: int, overwrite: bool) -> None:
    group = guard.resolve(f, run_path, file)
    if group is None:
        return
    if not isinstance(group, h5py.Group):
        raise CalibviewError(f"{file}: {run_path} exists and is not a group; choose another model or dataset name.")
    for name in group:
        child = guard.child(group, name, file)       # the output may be an untrusted file too
        if name in checked and not overwrite:
            raise CalibviewError(f"{file}: {child.name} already exists; pass overwrite=True (--overwrite on the "
                                 f"command line) to replace it.")
        scores = next((d for d in (guard.child(child, s, file) for s in SCORE_KINDS if isinstance(child, h5py.Group))
                       if isinstance(d, h5py.Dataset)), None)
        if scores is not None and name not in checked and scores.ndim == 2 and scores.shape[1] != k:
            raise CalibviewError(f"{file}: {scores.name} has K = {scores.shape[1]} but the new splits of "
                                 f"{run_path} have K = {k}; a run's splits must share their classes.")
    if names is not None and "class_names" in group.attrs and not overwrite:
        old = tuple(v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(group.attrs["class_names"]))
        if old != names:
            raise CalibviewError(f"{file}: {run_path} already has different class_names; pass overwrite=True to "
                                 f"replace them.")


def checked_meta(file: str, run_path: str, checked: dict, meta: Mapping) -> dict:
    """{split: {column: validated (N,) array}}, every column checked before anything is written; ``checked`` maps
    each split written to a tuple whose second item has the split's N rows."""
    out = {}
    for split, columns in meta.items():
        if split not in checked:
            raise CalibviewError(f"{file}: metadata was given for split '{split}' of {run_path}, which is not among "
                                 f"the splits written ({', '.join(checked)}).")
        n = checked[split][1].shape[0]
        where = join(join(run_path, split), md.META_GROUP)
        for column, values in (columns or {}).items():
            md.check_name(file, where, column)
            out.setdefault(split, {})[column] = md.validate(file, join(where, column), values, n)
    return out


def write_meta(split: h5py.Group, columns: Mapping[str, np.ndarray], compression: Optional[str]) -> None:
    """The split group's ``meta`` group holding ``columns`` (validated by :func:`checked_meta`)."""
    group = split.create_group(md.META_GROUP, track_order=True)
    for column, values in columns.items():
        if values.dtype == object:                 # strings, stored as variable-length UTF-8
            group.create_dataset(column, data=values.astype(str).tolist(), dtype=h5py.string_dtype(),
                                 track_times=False)
        else:
            _write_dataset(group, column, values, compression)


def _write_into(f: h5py.File, run_path: str, checked: dict, names, attrs, compression,
                columns: Optional[Mapping] = None) -> None:
    group = f
    for part in run_path.strip("/").split("/"):
        exists = group.get(part, getlink=True) is not None         # a link's existence, without following it
        group = group[part] if exists else group.create_group(part, track_order=True)
    if names is not None:
        group.attrs["class_names"] = np.array(names, dtype=h5py.string_dtype())
    for key, value in (attrs or {}).items():
        group.attrs[str(key)] = str(value)
    for name, (kind, scores, labels) in checked.items():
        if group.get(name, getlink=True) is not None:
            del group[name]
        split = group.create_group(name, track_order=True)
        _write_dataset(split, kind, scores, compression)
        _write_dataset(split, "labels", labels, compression, dtype=np.dtype(np.int64))
        if (columns or {}).get(name):
            write_meta(split, columns[name], compression)


def _write_dataset(group: h5py.Group, name: str, data: np.ndarray, compression: Optional[str],
                   dtype: Optional[np.dtype] = None) -> None:
    dtype = (dtype or data.dtype).newbyteorder("=")
    row_bytes = dtype.itemsize * (data.shape[1] if data.ndim == 2 else 1)
    n = data.shape[0]
    rows = int(min(n, max(1, WRITE_CHUNK_BYTES // row_bytes)))
    options = {"compression": compression, "shuffle": True, "chunks": (rows,) + data.shape[1:]} if compression else {}
    ds = group.create_dataset(name, shape=data.shape, dtype=dtype, track_times=False, **options)
    step = max(rows, CHUNK_BYTES // row_bytes // rows * rows)
    for start in range(0, n, step):
        ds[start:start + step] = np.asarray(data[start:start + step], dtype=dtype)
