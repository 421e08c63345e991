"""The top-label split: its dataset names, how discovery recognises it, where K comes from, and its checks.

A group holding a ``confidence`` and a ``predictions`` dataset (and no ``logits``, ``probs`` or ``members``) is
a top-label split: ``confidence`` (N,) float in [0, 1], ``predictions`` and ``labels`` (N,) integers. K is the
integer ``num_classes`` attribute of the run group (or of the split group), else the length of the run's
``class_names``, else unknown (``k`` 0): then predictions and labels need only be >= 0. Every failure is one
sentence naming the file and the dataset (or, for arrays in memory, the source and the arrays as the caller
spells them: ``names``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

import h5py
import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io.limits import cost
from calibview.core.io.schema import RunInfo, SplitInfo, join

#: the split kind of a top-label split (SplitInfo.kind), as ``calibview runs`` prints it
KIND = "top-label"
CONFIDENCE, PREDICTIONS, LABELS = "confidence", "predictions", "labels"
#: the attribute that gives K
NUM_CLASSES = "num_classes"


@dataclass(frozen=True)
class TopLabelData:
    """The validated vectors of one top-label split, all (N,) and read-only: ``confidence`` float64 in [0, 1],
    ``predictions`` and ``labels`` int64 class indices; ``k`` is K (0 when the file does not say)."""

    confidence: np.ndarray
    predictions: np.ndarray
    labels: np.ndarray
    k: int
    info: SplitInfo
    run: RunInfo


def _shown(path: str, names: Optional[Mapping[str, str]]) -> dict:
    """How messages name the three datasets: ``names`` (arrays in memory), else their HDF5 paths under ``path``."""
    return dict(names) if names else {n: join(path, n) for n in (CONFIDENCE, PREDICTIONS, LABELS)}


def is_toplabel(run_or_split) -> bool:
    """Whether a RunInfo or SplitInfo is of the top-label form."""
    splits = getattr(run_or_split, "splits", None)
    if splits is not None:
        return bool(splits) and all(s.kind == KIND for s in splits)
    return getattr(run_or_split, "kind", None) == KIND


def num_classes(group: h5py.Group, file: str) -> int:
    """K of the top-label split ``group``: ``num_classes`` of its run group (its parent) or of itself, else the
    length of the run's ``class_names``; 0 when unknown. A ``num_classes`` that is not an integer >= 2 is refused."""
    run = group.parent if group.name != "/" else group
    for holder in (run, group):
        if NUM_CLASSES in holder.attrs:
            raw = np.asarray(holder.attrs[NUM_CLASSES])
            if raw.ndim != 0 or raw.dtype.kind not in "iu" or int(raw) < 2:
                raise CalibviewError(f"{file}: the num_classes attribute of {holder.name} must be one integer >= 2 "
                                     f"(the number of classes K) but is {raw.tolist()!r}.")
            return int(raw)
    if "class_names" in run.attrs:
        return int(np.asarray(run.attrs["class_names"]).reshape(-1).shape[0])
    return 0


def _check_dataset(ds, file: str, path: str) -> h5py.Dataset:
    if not isinstance(ds, h5py.Dataset):
        raise CalibviewError(f"{file}: {path} is missing; a top-label split needs 'confidence', 'predictions' and "
                             f"'labels' datasets of one value per sample.")
    guard.check_dataset(ds, file)
    cost.check_read_cost(ds, file, kept=(int(ds.shape[0]) if ds.shape else 1) * 8)
    return ds


def check_layout(file: str, path: str, shapes: dict, dtypes: dict, names: Optional[Mapping[str, str]] = None) -> int:
    """N of a top-label split at group ``path`` whose datasets have ``shapes`` and ``dtypes`` (name -> value, for
    confidence, predictions and labels): each 1-D, confidence floating point, the others integers, one length.
    ``names`` (dataset name -> how the message names it) replaces the HDF5 paths for arrays in memory."""
    shown = _shown(path, names)
    for name in (CONFIDENCE, PREDICTIONS, LABELS):
        if len(shapes[name]) != 1:
            raise CalibviewError(f"{file}: {shown[name]} has shape {tuple(shapes[name])} but {name} must be "
                                 f"1-D (one value per sample).")
    if np.dtype(dtypes[CONFIDENCE]).kind != "f":
        raise CalibviewError(f"{file}: {shown[CONFIDENCE]} has dtype {np.dtype(dtypes[CONFIDENCE])} but the "
                             f"confidence must be floating point in [0, 1].")
    for name in (PREDICTIONS, LABELS):
        if np.dtype(dtypes[name]).kind not in "iu":
            raise CalibviewError(f"{file}: {shown[name]} has dtype {np.dtype(dtypes[name])} but {name} must be "
                                 f"integer class indices (store them as int64).")
    lengths = {name: int(shapes[name][0]) for name in (CONFIDENCE, PREDICTIONS, LABELS)}
    if len(set(lengths.values())) > 1:
        which = (f"{shown[CONFIDENCE]}, {shown[PREDICTIONS]} and {shown[LABELS]}" if names
                 else f"the datasets of {path}")
        raise CalibviewError(f"{file}: {which} have different lengths (confidence "
                             f"{lengths[CONFIDENCE]}, predictions {lengths[PREDICTIONS]}, labels {lengths[LABELS]}); "
                             f"a top-label split needs one confidence, prediction and label per sample.")
    n = lengths[CONFIDENCE]
    if n == 0:
        raise CalibviewError(f"{file}: {shown[CONFIDENCE]} is empty (N = 0); a split needs at least one sample.")
    return n


def split_info(group: h5py.Group, file: str, name: str, meta: tuple[str, ...]) -> Optional[SplitInfo]:
    """The SplitInfo of ``group`` if it is a top-label split (kind :data:`KIND`, ``k`` 0 when K is unknown), else
    None; CalibviewError when its datasets are malformed. Metadata only: no values are read."""
    conf = guard.child(group, CONFIDENCE, file)
    if not isinstance(conf, h5py.Dataset):
        return None
    ds = {CONFIDENCE: conf}
    for other in (PREDICTIONS, LABELS):
        ds[other] = _check_dataset(guard.child(group, other, file), file, join(group.name, other))
    _check_dataset(conf, file, join(group.name, CONFIDENCE))
    n = check_layout(file, group.name, {k: v.shape for k, v in ds.items()}, {k: v.dtype for k, v in ds.items()})
    return SplitInfo(name=name, path=group.name, n=n, k=num_classes(group, file), kind=KIND, dtype=str(conf.dtype),
                     meta=meta)


def check_values(file: str, path: str, conf: np.ndarray, pred: np.ndarray, labels: np.ndarray, k: int,
                 offset: int = 0, names: Optional[Mapping[str, str]] = None) -> None:
    """CalibviewError unless every confidence is in [0, 1] (no NaN) and every prediction and label is a class
    index: >= 0, and < ``k`` when K is known (``k`` > 0). conf, pred, labels : (rows,) rows ``offset ..`` of the
    split at group ``path``; ``names`` as in :func:`check_layout`."""
    shown = _shown(path, names)
    bad = ~((conf >= 0.0) & (conf <= 1.0))
    count = int(np.count_nonzero(bad))
    if count:
        first = int(np.argmax(bad))
        raise CalibviewError(f"{file}: {count} of {len(conf)} confidences in {shown[CONFIDENCE]} are NaN or "
                             f"outside [0, 1] (for example {float(conf[first])!r} at row {offset + first}); the "
                             f"confidence is the probability of the predicted class.")
    for name, values in ((PREDICTIONS, pred), (LABELS, labels)):
        bad = (values < 0) | (values >= k) if k else values < 0
        count = int(np.count_nonzero(bad))
        if count:
            first = int(np.argmax(bad))
            where = f"[0, {k})" if k else "[0, inf)"
            raise CalibviewError(f"{file}: {count} of {len(values)} {name} in {shown[name]} are outside {where} "
                                 f"(for example {int(values[first])} at row {offset + first}); they must be class "
                                 f"indices 0..K-1.")
