"""Writing members: :func:`write_members` stores the (M, N, K) member logits of one or more splits of a run as
``/<model>/<dataset>/<split>/members`` (attribute ``kind``), with the labels and, optionally, the split's own
(deterministic) logits beside them; validated first by the reading rules, written to a temporary copy that
replaces the destination only when complete (:func:`calibview.core.io.safe_io.atomic_hdf5`)."""

from __future__ import annotations

import os
from typing import Mapping, Optional, Sequence

import h5py
import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import guard, safe_io
from calibview.core.io.checks import check_labels, validate_arrays
from calibview.core.io.members import format as mf
from calibview.core.io.schema import PathLike, abspath, join, oneline

#: HDF5 chunk of a members dataset: one member, about this many bytes of rows
CHUNK_BYTES = 1 << 20


def write_members(path: PathLike, model: str, dataset: str, splits: Mapping[str, tuple], *, kind: str = "ensemble",
                  class_names: Optional[Sequence[str]] = None, attrs: Optional[Mapping[str, str]] = None,
                  compression: Optional[str] = "gzip", overwrite: bool = False) -> None:
    """Write ``splits`` ({name: (members (M, N, K) logits or a list of M (N, K) arrays, labels (N,) int)} or
    {name: (members, labels, logits (N, K))} with the deterministic pass) to ``/<model>/<dataset>/<name>`` of
    ``path``; ``kind`` "ensemble" | "mc-dropout". Every split is checked first (M >= 2, the same K and labels
    across members, finite logits, labels in 0..K-1); an existing split is replaced only with ``overwrite``."""
    file = abspath(path)
    if kind not in mf.MEMBER_KINDS:
        raise CalibviewError(f"{file}: the members kind must be 'ensemble' or 'mc-dropout', not {kind!r}.")
    if not model or "/" in model or any(p in ("", ".", "..") for p in ([dataset] if dataset else [])):
        raise CalibviewError(f"{file}: model '{model}' / dataset '{dataset}' is not a valid run name.")
    run_path = "/" + "/".join([model] + ([dataset] if dataset else []))
    checked = {}
    for name, entry in splits.items():
        members, labels = entry[0], entry[1]
        own = entry[2] if len(entry) > 2 else None
        where = join(run_path, name)
        k = None if own is None else int(np.shape(own)[-1])
        a = mf.check_member_arrays(f"{file}: {where}", members, labels, k)
        y = np.asarray(labels)
        if y.dtype.kind not in "iu":
            raise CalibviewError(f"{file}: the labels of {where} have dtype {y.dtype} but must be integer class "
                                 f"indices 0..K-1.")
        y = y.astype(np.int64)
        check_labels(file, join(where, "labels"), y, a.shape[2])
        if own is not None:
            own, _ = validate_arrays(file, join(where, "logits"), join(where, "labels"), "logits", own, y)
        checked[name] = (a, y, own)
    ks = {a.shape[2] for a, _, _ in checked.values()}
    if len(ks) > 1:
        raise CalibviewError(f"{file}: the splits written to {run_path} have different class counts K = "
                             f"{sorted(ks)}.")
    if class_names is not None and len(class_names) != next(iter(ks)):
        raise CalibviewError(f"{file}: {len(class_names)} class names were given for {run_path} but the members "
                             f"have K = {next(iter(ks))} classes.")
    exists = os.path.exists(file)
    if exists and not h5py.is_hdf5(file):
        raise CalibviewError(f"{file}: the output exists and is not an HDF5 file; refusing to overwrite it.")
    try:
        with safe_io.atomic_hdf5(file) as tmp, h5py.File(tmp, "r+" if exists else "w", track_order=True) as f:
            group = f
            for part in run_path.strip("/").split("/"):
                child = guard.child(group, part, file) if part in group else None
                group = child if isinstance(child, h5py.Group) else group.create_group(part, track_order=True)
            if class_names is not None:
                group.attrs["class_names"] = np.array([str(c) for c in class_names], dtype=h5py.string_dtype())
            for key, value in (attrs or {}).items():
                group.attrs[str(key)] = str(value)
            for name, (a, y, own) in checked.items():
                if group.get(name, getlink=True) is not None:
                    if not overwrite:
                        raise CalibviewError(f"{file}: {join(run_path, name)} already exists; pass overwrite=True "
                                             f"(--overwrite on the command line) to replace it.")
                    del group[name]
                split = group.create_group(name, track_order=True)
                _dataset(split, mf.MEMBERS, a, compression).attrs["kind"] = kind
                _dataset(split, "labels", y, compression)
                if own is not None:
                    _dataset(split, "logits", np.asarray(own), compression)
    except OSError as e:
        raise CalibviewError(f"{file}: could not write {run_path} ({oneline(e)}).") from None


def _dataset(group: h5py.Group, name: str, data: np.ndarray, compression: Optional[str]) -> h5py.Dataset:
    """``data`` as dataset ``name``: chunked one member (or one block of rows) at a time, written member by
    member so that a memory-mapped input is never read whole."""
    data = np.asarray(data) if not isinstance(data, np.ndarray) else data
    dtype = data.dtype.newbyteorder("=")
    row = int(np.prod(data.shape[-1:] if data.ndim > 1 else (1,))) * dtype.itemsize
    rows = int(min(data.shape[-2] if data.ndim == 3 else data.shape[0], max(1, CHUNK_BYTES // row)))
    chunks = (1, rows, data.shape[2]) if data.ndim == 3 else (rows,) + data.shape[1:]
    options = {"compression": compression, "shuffle": True, "chunks": chunks} if compression else {}
    ds = group.create_dataset(name, shape=data.shape, dtype=dtype, track_times=False, **options)
    if data.ndim == 3:
        for m in range(data.shape[0]):
            ds[m] = np.asarray(data[m], dtype=dtype)
    else:
        ds[...] = np.asarray(data, dtype=dtype)
    return ds
