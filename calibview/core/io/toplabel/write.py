"""Writing top-label splits: :func:`write_toplabel` stores each split's confidence, predictions and labels as
``/<model>/<dataset>/<split>/{confidence, predictions, labels}`` (K as the run's ``num_classes`` attribute when
known), validated first by the reading rules, into a temporary copy that replaces the destination only when
complete (:func:`calibview.core.io.safe_io.atomic_hdf5`). :func:`from_scores` derives the three vectors from
an (N, K) matrix of logits or probabilities."""

from __future__ import annotations

import os
from typing import Mapping, Optional, Sequence

import h5py
import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import guard, safe_io, writer
from calibview.core.io.schema import PathLike, abspath, join, oneline
from calibview.core.io.toplabel import format as tf


def from_scores(scores, kind: str = "logits") -> tuple[np.ndarray, np.ndarray]:
    """(confidence (N,) float64, predictions (N,) int64, the first class on ties) of ``scores`` (N, K) logits
    or probabilities (``kind`` "probs"): the confidence is exp(max_k log_softmax(z)_k) in float64, as the engine
    computes the top-label confidence of the uncalibrated run (probabilities enter as their logarithms)."""
    import torch

    z = torch.as_tensor(np.asarray(scores)).to(torch.float64)
    if kind == "probs":
        z = torch.log(z)
    top, pred = torch.log_softmax(z, dim=1).max(dim=1)
    return top.exp().numpy(), pred.numpy().astype(np.int64)


def run_path(file: str, model: str, dataset: str) -> str:
    """``/<model>/<dataset>`` (``/<model>`` without a dataset); a name that is empty or holds a ``/`` is refused."""
    if not model or "/" in model or (dataset and ("/" in dataset or dataset in (".", ".."))) or model in (".", ".."):
        raise CalibviewError(f"{file}: model '{model}' / dataset '{dataset}' is not a valid run name.")
    return "/" + "/".join([model] + ([dataset] if dataset else []))


def run_group(f: h5py.File, file: str, path: str) -> h5py.Group:
    """The group at ``path`` in the open file, created (with its parents) where missing."""
    group = f
    for part in path.strip("/").split("/"):
        child = guard.child(group, part, file) if part in group else None
        group = child if isinstance(child, h5py.Group) else group.create_group(part, track_order=True)
    return group


def set_run_attrs(group: h5py.Group, num_classes: Optional[int], class_names: Optional[Sequence[str]],
                  attrs: Optional[Mapping[str, str]]) -> None:
    """``num_classes``, ``class_names`` and string attributes of a run group (None: left as they are)."""
    if num_classes:
        group.attrs[tf.NUM_CLASSES] = np.int64(num_classes)
    if class_names is not None:
        group.attrs["class_names"] = np.array([str(c) for c in class_names], dtype=h5py.string_dtype())
    for key, value in (attrs or {}).items():
        group.attrs[str(key)] = str(value)


def write_toplabel(path: PathLike, model: str, dataset: str, splits: Mapping[str, tuple], *,
                   num_classes: Optional[int] = None, class_names: Optional[Sequence[str]] = None,
                   attrs: Optional[Mapping[str, str]] = None, compression: Optional[str] = "gzip",
                   overwrite: bool = False, meta: Optional[Mapping[str, Mapping[str, object]]] = None) -> None:
    """Write ``splits`` ({name: (confidence (N,) float in [0, 1], predictions (N,) int, labels (N,) int)}) to
    ``/<model>/<dataset>/<name>`` of ``path``, appending to an existing file; ``num_classes`` K (or None:
    unknown, unless ``class_names`` gives it); ``meta={split: {column: (N,) values}}`` adds metadata columns, stored
    and read as those of a run of logits (:mod:`calibview.core.io.meta`). Every split and column is checked
    first; an existing split is replaced only with ``overwrite``."""
    file = abspath(path)
    rpath = run_path(file, model, dataset)
    k = int(num_classes) if num_classes else (len(class_names) if class_names is not None else 0)
    if num_classes is not None and int(num_classes) < 2:
        raise CalibviewError(f"{file}: num_classes must be at least 2, not {num_classes}.")
    if class_names is not None and num_classes and len(class_names) != int(num_classes):
        raise CalibviewError(f"{file}: {len(class_names)} class names were given for {rpath} but num_classes is "
                             f"{num_classes}.")
    checked = {}
    for name, (conf, pred, labels) in splits.items():
        where = join(rpath, name)
        arrays = {tf.CONFIDENCE: np.asarray(conf), tf.PREDICTIONS: np.asarray(pred), tf.LABELS: np.asarray(labels)}
        tf.check_layout(file, where, {a: v.shape for a, v in arrays.items()}, {a: v.dtype for a, v in arrays.items()})
        c = arrays[tf.CONFIDENCE].astype(np.float64, copy=False)
        p, y = arrays[tf.PREDICTIONS].astype(np.int64), arrays[tf.LABELS].astype(np.int64)
        tf.check_values(file, where, c, p, y, k)
        checked[name] = (arrays[tf.CONFIDENCE], p, y)
    columns = writer.checked_meta(file, rpath, checked, meta or {})
    exists = os.path.exists(file)
    if exists and not h5py.is_hdf5(file):
        raise CalibviewError(f"{file}: the output exists and is not an HDF5 file; refusing to overwrite it.")
    try:
        with safe_io.atomic_hdf5(file) as tmp, h5py.File(tmp, "r+" if exists else "w", track_order=True) as f:
            group = run_group(f, file, rpath)
            set_run_attrs(group, k or None, class_names, attrs)
            for name, (c, p, y) in checked.items():
                if group.get(name, getlink=True) is not None:
                    if not overwrite:
                        raise CalibviewError(f"{file}: {join(rpath, name)} already exists; pass overwrite=True "
                                             f"(--overwrite on the command line) to replace it.")
                    del group[name]
                split = group.create_group(name, track_order=True)
                options = {"compression": compression, "shuffle": True} if compression else {}
                for dname, data in ((tf.CONFIDENCE, c), (tf.PREDICTIONS, p), (tf.LABELS, y)):
                    split.create_dataset(dname, data=np.asarray(data, dtype=data.dtype.newbyteorder("=")),
                                         track_times=False, **options)
                if columns.get(name):
                    writer.write_meta(split, columns[name], compression)
    except OSError as e:
        raise CalibviewError(f"{file}: could not write {rpath} ({oneline(e)}).") from None
