"""A split written batch by batch (docs/FORMAT.md, "Collecting logits from a model"): the rows collected so far
live in a hidden HDF5 file beside the destination (:class:`PartialSplit`), appended to as batches arrive and
flushed after each, so that an interrupted collection keeps every complete batch and memory stays one batch.
When the last batch is in, :func:`commit` copies the split into the destination in one safe write
(:func:`calibview.core.io.safe_io.atomic_hdf5`: a copy of the destination, renamed into place when complete) and
removes the hidden file. The destination therefore only ever holds complete splits.

No torch here: the model side is :mod:`calibview.core.io.collect.collector`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Mapping, Optional, Sequence

import h5py
import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io import meta as md
from calibview.core.io import safe_io
from calibview.core.io.checks import ScoreCheck, check_labels
from calibview.core.io.schema import SCORE_KINDS, is_locked, join, oneline
from calibview.core.io.writer import WRITE_CHUNK_BYTES

#: the attribute of a collected split that says how it was collected (a JSON object, docs/FORMAT.md)
COLLECTED_WITH = "collected_with"
_GZIP = {"compression": "gzip", "shuffle": True}


def partial_path(file: str, run_path: str, split: str) -> str:
    """The hidden file beside ``file`` that holds the batches of ``run_path``/``split`` collected so far."""
    directory, base = os.path.split(os.path.realpath(file))
    key = hashlib.sha1(join(run_path, split).encode("utf-8")).hexdigest()[:12]
    return os.path.join(directory, f".{base}.collect-{key}.h5")


def finished_split(file: str, run_path: str, split: str) -> bool:
    """Whether ``file`` already holds the split ``run_path/split`` (a group with scores): it is not collected
    twice. An existing file that is not HDF5 is refused."""
    if not os.path.exists(file):
        return False
    if not h5py.is_hdf5(file):
        raise CalibviewError(f"{file}: the output exists and is not an HDF5 file; refusing to overwrite it.")
    try:
        with h5py.File(file, "r") as f:
            group = guard.resolve(f, join(run_path, split), file)
            return isinstance(group, h5py.Group) and any(
                isinstance(guard.child(group, kind, file), h5py.Dataset) for kind in SCORE_KINDS)
    except OSError as e:
        raise CalibviewError(f"{file}: could not be opened as an HDF5 file ({oneline(e)}).") from None


def _rows_per_chunk(row_bytes: int) -> int:
    return max(1, WRITE_CHUNK_BYTES // max(1, row_bytes))


class PartialSplit:
    """The batches of one split collected so far, in the hidden file :func:`partial_path` (opened for writing;
    use it as a context manager). ``batches`` and ``rows`` count the complete batches and their rows; datasets
    are created by the first batch: ``logits`` (rows, K) float32, ``labels`` (rows,) int64, ``members``
    (M, rows, K) float32 when ``members`` is M, and ``meta/<column>`` (rows,)."""

    def __init__(self, file: str, run_path: str, split: str, members: Optional[int]) -> None:
        self.file, self.run_path, self.split, self.members = file, run_path, split, members
        self.path = partial_path(file, run_path, split)
        self.where = join(run_path, split)
        self.h5 = self._open()
        self._check_matches()
        self.batches = int(self.h5.attrs.get("batches", 0))
        self.rows = int(self.h5.attrs.get("rows", 0))
        self.complete = bool(self.h5.attrs.get("complete", False))
        for ds in self._datasets():                 # rows of a batch that was being written when it stopped
            if ds.shape[-2 if ds.ndim == 3 else 0] != self.rows:
                ds.resize(self.rows, axis=1 if ds.ndim == 3 else 0)

    def _open(self) -> h5py.File:
        if os.path.exists(self.path):
            try:
                return h5py.File(self.path, "r+")
            except OSError as e:
                if is_locked(e):        # another process is collecting this split right now: leave its file be
                    raise CalibviewError(f"{self.path}: another process is collecting {self.where} into "
                                         f"{self.file} (HDF5 locks the file meanwhile); wait until it ends.") from None
                # killed while HDF5 wrote its metadata: the file cannot be trusted
                logging.getLogger("calibview").warning(
                    f"warning: {self.path} (an earlier collection of {self.where}) could not be opened "
                    f"({oneline(e)}); collecting from the first batch.")
                os.unlink(self.path)
        try:
            h5 = h5py.File(self.path, "w", track_order=True)
        except OSError as e:
            raise CalibviewError(f"{self.path}: could not be created ({oneline(e)}); check that the folder of "
                                 f"{self.file} is writable.") from None
        h5.attrs.update({"run_path": self.run_path, "split": self.split, "members": self.members or 0,
                         "batches": 0, "rows": 0, "complete": False})
        return h5

    def _check_matches(self) -> None:
        attrs = self.h5.attrs
        stored = int(attrs.get("members", 0)) or None
        if attrs.get("run_path") != self.run_path or attrs.get("split") != self.split:
            self.h5.close()
            raise CalibviewError(f"{self.path} does not hold the collection of {self.where}; delete it and run "
                                 f"again.")
        if stored != self.members:
            self.h5.close()
            raise CalibviewError(f"{self.path}: the collection of {self.where} that is being resumed was started "
                                 f"with members={stored}; pass the same, or delete that file to start again.")

    def _datasets(self) -> list[h5py.Dataset]:
        out = [self.h5[n] for n in ("logits", "labels", "members") if n in self.h5]
        if md.META_GROUP in self.h5:
            out += list(self.h5[md.META_GROUP].values())
        return out

    def __enter__(self) -> "PartialSplit":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the hidden file (what was flushed stays for the next run)."""
        if self.h5.id.valid:
            self.h5.close()

    @property
    def k(self) -> Optional[int]:
        """The class count of the batches so far (None before the first)."""
        return int(self.h5["logits"].shape[1]) if "logits" in self.h5 else None

    def labels(self, start: int, stop: int) -> np.ndarray:
        """The stored labels of rows ``start .. stop`` (fewer when fewer were stored), to check a resumed loader."""
        return self.h5["labels"][start:min(stop, self.rows)] if "labels" in self.h5 else np.empty(0, np.int64)

    def append(self, logits: np.ndarray, labels: np.ndarray, members: Optional[np.ndarray] = None,
               meta: Optional[Mapping[str, np.ndarray]] = None) -> None:
        """Validate and append one batch, ``logits`` (B, K) float32, ``labels`` (B,) int64, ``members``
        (M, B, K) float32 and ``meta`` {column: (B,) values}, then flush it: from then on it counts as complete."""
        b, k = logits.shape
        scope = f" (rows {self.rows}-{self.rows + b - 1})"
        if self.k is not None and k != self.k:
            raise CalibviewError(f"{self.file}: batch {self.batches} of {self.where} has K = {k} logit columns "
                                 f"but the earlier batches have K = {self.k}; every batch must have the same classes.")
        if k < 2:
            raise CalibviewError(f"{self.file}: the model gives K = {k} logit columns for {self.where} but a "
                                 f"classifier needs at least 2 class columns.")
        check_labels(self.file, join(self.where, "labels"), labels, k, self.rows, scope)
        for name, block in (("logits", logits),) + ((("members", members.reshape(-1, k)),) if members is not None
                                                     else ()):
            checker = ScoreCheck(self.file, join(self.where, name), "logits", block.dtype)
            checker.update(block, self.rows)
            checker.raise_if_bad(block.shape[0], scope)
        columns = self._checked_meta(meta or {}, b)
        if self.k is None:
            self._create(k, columns)
        self._put(self.h5["logits"], logits, 0)
        self._put(self.h5["labels"], labels, 0)
        if members is not None:
            self._put(self.h5["members"], members, 1)
        for column, values in columns.items():
            self._put(self.h5[md.META_GROUP][column], values, 0)
        self.rows += b
        self.batches += 1
        self.h5.attrs["rows"], self.h5.attrs["batches"] = self.rows, self.batches
        self.h5.flush()

    def _checked_meta(self, meta: Mapping, b: int) -> dict:
        where = join(self.where, md.META_GROUP)
        columns = {}
        for column, values in meta.items():
            md.check_name(self.file, where, column)
            columns[column] = md.validate(self.file, join(where, column), values, b)
        known = set(self.h5[md.META_GROUP]) if md.META_GROUP in self.h5 else set()
        if self.k is not None and set(columns) != known:
            raise CalibviewError(f"{self.file}: batch {self.batches} of {self.where} has the metadata columns "
                                 f"[{', '.join(sorted(columns))}] but the earlier batches had "
                                 f"[{', '.join(sorted(known))}]; every batch must give the same columns.")
        for column, values in columns.items():
            if column in known and (values.dtype == object) != (self.h5[md.META_GROUP][column].dtype.kind == "O"):
                raise CalibviewError(f"{self.file}: metadata column {join(where, column)} changes between strings "
                                     f"and numbers at batch {self.batches}; give one type per column.")
        return columns

    def _create(self, k: int, columns: Mapping[str, np.ndarray]) -> None:
        rows = _rows_per_chunk(4 * k)
        self.h5.create_dataset("logits", shape=(0, k), maxshape=(None, k), dtype=np.float32, chunks=(rows, k),
                               track_times=False, **_GZIP)
        self.h5.create_dataset("labels", shape=(0,), maxshape=(None,), dtype=np.int64,
                               chunks=(_rows_per_chunk(8),), track_times=False, **_GZIP)
        if self.members:
            m = self.members
            self.h5.create_dataset("members", shape=(m, 0, k), maxshape=(m, None, k), dtype=np.float32,
                                   chunks=(1, rows, k), track_times=False, **_GZIP)
            self.h5["members"].attrs["kind"] = "mc-dropout"
        if columns:
            group = self.h5.create_group(md.META_GROUP, track_order=True)
            for column, values in columns.items():
                dtype = h5py.string_dtype() if values.dtype == object else values.dtype
                group.create_dataset(column, shape=(0,), maxshape=(None,), dtype=dtype,
                                     chunks=(_rows_per_chunk(8),), track_times=False, **_GZIP)

    def _put(self, ds: h5py.Dataset, values: np.ndarray, axis: int) -> None:
        start = self.rows
        ds.resize(start + values.shape[axis], axis=axis)
        if ds.dtype.kind == "O":
            values = values.astype(str).tolist()
        if axis == 0:
            ds[start:] = values
        else:
            ds[:, start:] = values

    def finish(self) -> None:
        """Mark the collection complete (the loader is exhausted): a later run commits it without the loader."""
        if self.rows == 0:
            raise CalibviewError(f"The loader yielded no batches for {self.where}; nothing was written to "
                                 f"{self.file}.")
        self.complete = True
        self.h5.attrs["complete"] = True
        self.h5.flush()


def commit(part: PartialSplit, *, class_names: Optional[Sequence[str]], meta: Optional[Mapping[str, object]],
           collected_with: Mapping[str, object]) -> None:
    """Copy the complete ``part`` into its destination as ``/<run>/<split>`` (with ``meta`` {column: (N,) values}
    for the whole split, ``class_names`` on the run group and the ``collected_with`` JSON attribute on the split
    group), in one safe write, then remove the hidden file. Everything is validated before the destination is
    touched; an existing run must have the same K and class names."""
    file, run_path, k, n = part.file, part.run_path, part.k, part.rows
    where = join(part.where, md.META_GROUP)
    columns = {}
    for column, values in (meta or {}).items():
        md.check_name(file, where, column)
        if md.META_GROUP in part.h5 and column in part.h5[md.META_GROUP]:
            raise CalibviewError(f"{file}: metadata column '{column}' of {part.where} was given both by the loader "
                                 f"and as meta=; give it once.")
        columns[column] = md.validate(file, join(where, column), values, n)
    names = None if class_names is None else tuple(str(c) for c in class_names)
    if names is not None and len(names) != k:
        raise CalibviewError(f"{file}: {len(names)} class names were given for {run_path} but the model gives "
                             f"K = {k} logit columns.")
    exists = os.path.exists(file)
    try:
        with safe_io.atomic_hdf5(file) as tmp, h5py.File(tmp, "r+" if exists else "w", track_order=True) as f:
            run = _run_group(f, file, run_path, k, names)
            split = run.create_group(part.split, track_order=True)
            for name in ("logits", "labels", "members"):
                if name in part.h5:
                    split.copy(part.h5[name], split, name=name)      # chunk by chunk, inside HDF5
            if md.META_GROUP in part.h5 or columns:
                group = split.require_group(md.META_GROUP)
                for name in (part.h5[md.META_GROUP] if md.META_GROUP in part.h5 else ()):
                    group.copy(part.h5[md.META_GROUP][name], group, name=name)
                for column, values in columns.items():
                    data = values.astype(str).tolist() if values.dtype == object else values
                    group.create_dataset(column, data=data, track_times=False,
                                         dtype=h5py.string_dtype() if values.dtype == object else values.dtype)
            split.attrs[COLLECTED_WITH] = json.dumps(dict(collected_with), sort_keys=True)
    except OSError as e:
        raise CalibviewError(f"{file}: could not write {part.where} ({oneline(e)}).") from None
    part.close()
    os.unlink(part.path)


def _run_group(f: h5py.File, file: str, run_path: str, k: int, names: Optional[tuple[str, ...]]) -> h5py.Group:
    """The run group in the destination (created where missing), checked against the new split."""
    group = f
    for part in run_path.strip("/").split("/"):
        link = group.get(part, getlink=True)
        if link is not None and not isinstance(link, h5py.HardLink):
            raise CalibviewError(f"{file}: {join(group.name, part)} is a link; choose another model or dataset name.")
        group = group[part] if link is not None else group.create_group(part, track_order=True)
        if not isinstance(group, h5py.Group):
            raise CalibviewError(f"{file}: {group.name} exists and is not a group; choose another model or dataset "
                                 f"name.")
    for name in group:
        child = guard.child(group, name, file)
        scores = next((d for d in (guard.child(child, s, file) for s in SCORE_KINDS if isinstance(child, h5py.Group))
                       if isinstance(d, h5py.Dataset)), None)
        if scores is not None and scores.ndim == 2 and scores.shape[1] != k:
            raise CalibviewError(f"{file}: {scores.name} has K = {scores.shape[1]} but the model gives K = {k} "
                                 f"logit columns; a run's splits must share their classes.")
    if names is not None:
        if "class_names" in group.attrs:
            old = tuple(v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(group.attrs["class_names"]))
            if old != names:
                raise CalibviewError(f"{file}: {run_path} already has different class_names; give the same names "
                                     f"or collect into another run.")
        else:
            group.attrs["class_names"] = np.array(names, dtype=h5py.string_dtype())
    return group
