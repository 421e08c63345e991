"""Reading a top-label split: :func:`read_toplabel` gives its confidence, predictions and labels as read-only
(N,) vectors, read in chunks, each chunk validated (:func:`calibview.core.io.toplabel.format.check_values`)
before the next, so a bad value is reported with its row and nothing is computed from it. The pseudo-path of an
in-memory run (:mod:`calibview.core.io.arrays`, validated when registered) is answered from its arrays."""

from __future__ import annotations

import threading
from typing import Optional, Union

import h5py
import numpy as np

from calibview.core.errors import CalibviewError, Progress, check_cancel, report
from calibview.core.io import arrays, guard
from calibview.core.io.discovery import discover, find_run
from calibview.core.io.limits import blocks
from calibview.core.io.schema import PathLike, RunInfo, SplitInfo, abspath, join, oneline, open_file
from calibview.core.io.toplabel import format as tf
from calibview.core.io.toplabel.format import TopLabelData

__all__ = ["TopLabelData", "read_toplabel"]

#: rows read and checked at a time (three (rows,) vectors of 8 bytes: 24 MB)
CHUNK_ROWS = 1 << 20


def _resolve(file: str, run: Union[str, RunInfo], split: str) -> tuple[RunInfo, SplitInfo]:
    with open_file(file) as f:
        runs = discover(f, file)
    name = run.name if isinstance(run, RunInfo) else run
    match = [r for r in runs if isinstance(run, RunInfo) and r.path == run.path]
    info = match[0] if match else find_run(runs, name)
    return info, info.split(split)


def _read(ds: h5py.Dataset, out: np.ndarray, start: int, stop: int, file: str) -> None:
    try:
        blocks.read_direct(ds, out, start, stop, start)
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as e:
        raise CalibviewError(f"{file}: could not read rows {start}-{stop - 1} of {ds.name} ({oneline(e)}); the file "
                             f"may be truncated or corrupt.") from None


def read_toplabel(path: Optional[PathLike], run: Union[str, RunInfo], split: str, *,
                  chunk_rows: Optional[int] = None, progress: Optional[Progress] = None,
                  cancel: Optional[threading.Event] = None) -> TopLabelData:
    """Read and validate the top-label split ``split`` of ``run`` (a name or a RunInfo; ``path`` may then be None).
    A split that is not of the top-label form is a CalibviewError."""
    if arrays.is_memory(path if path is not None else getattr(run, "file", None)):
        return arrays.read_toplabel(path, run, split, progress=progress, cancel=cancel)
    file = abspath(path if path is not None else run.file)  # type: ignore[union-attr]
    run_info, info = _resolve(file, run, split)
    if info.kind != tf.KIND:
        raise CalibviewError(f"{file}: split {info.path} stores {info.kind}, not the top-label form "
                             f"(confidence, predictions, labels).")
    n, k = info.n, info.k
    rows = max(1, int(chunk_rows or CHUNK_ROWS))
    conf, pred, labels = np.empty(n, np.float64), np.empty(n, np.int64), np.empty(n, np.int64)
    with open_file(file) as f:
        group = guard.resolve(f, info.path, file)
        ds = {name: guard.child(group, name, file) if isinstance(group, h5py.Group) else None
              for name in (tf.CONFIDENCE, tf.PREDICTIONS, tf.LABELS)}
        if not all(isinstance(d, h5py.Dataset) for d in ds.values()):
            raise CalibviewError(f"{file}: the datasets of {info.path} are no longer there; the file changed while "
                                 f"it was read.")
        for d in ds.values():
            guard.check_dataset(d, file)
        if tf.check_layout(file, info.path, {a: d.shape for a, d in ds.items()},
                           {a: d.dtype for a, d in ds.items()}) != n:
            raise CalibviewError(f"{file}: {info.path} changed length while it was read.")
        report(progress, 0.0, f"Reading {join(info.path, tf.CONFIDENCE)} (N = {n})")
        for start in range(0, n, rows):
            check_cancel(cancel)
            stop = min(n, start + rows)
            for name, out in ((tf.CONFIDENCE, conf), (tf.PREDICTIONS, pred), (tf.LABELS, labels)):
                _read(ds[name], out, start, stop, file)
            tf.check_values(file, info.path, conf[start:stop], pred[start:stop], labels[start:stop], k, start)
            report(progress, stop / n, f"Read {stop} of {n} rows of {info.path}")
    for a in (conf, pred, labels):
        a.flags.writeable = False
    return TopLabelData(confidence=conf, predictions=pred, labels=labels, k=k, info=info, run=run_info)
