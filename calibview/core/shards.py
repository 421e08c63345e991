"""Several HDF5 files as one run: the files a glob pattern matches, in sorted order, concatenated along N.

``calibview report 'logits-*.h5'`` (or ``--shards 'logits-*.h5'``) evaluates the shards exactly as one file
holding the same rows in that order. Every shard must hold the same runs, splits and class count; the run's
metadata (class names, attributes) comes from the first shard.
"""

from __future__ import annotations

import glob
import os
import threading
from dataclasses import replace
from typing import Optional, Union

import numpy as np

from . import logits as lg
from .errors import CalibviewError, Progress, check_cancel, report

GLOB_CHARS = "*?["


def is_pattern(path) -> bool:
    return any(c in os.fspath(path) for c in GLOB_CHARS)


def expand(pattern: str) -> list[str]:
    files = sorted(os.path.abspath(p) for p in glob.glob(os.path.expanduser(os.fspath(pattern))))
    if not files:
        raise CalibviewError(f"No file matches the shard pattern {pattern}; quote it so the shell does not expand "
                             "it, and check the directory.")
    return files


def list_runs(pattern: str) -> list[lg.RunInfo]:
    """The runs of the first shard, with each split's N summed over all shards (metadata only)."""
    files = expand(pattern)
    per_file = [lg.list_runs(f) for f in files]
    first = per_file[0]
    shape = _layout(first)
    for f, runs in zip(files[1:], per_file[1:]):
        if _layout(runs) != shape:
            raise CalibviewError(f"The shard {f} holds other runs, splits or class counts than {files[0]}; every "
                                 f"shard of {pattern} must have the same layout.")
    out = []
    for i, run in enumerate(first):
        splits = tuple(replace(s, n=sum(runs[i].splits[j].n for runs in per_file))
                       for j, s in enumerate(run.splits))
        out.append(replace(run, file=os.fspath(pattern), splits=splits))
    return out


def _layout(runs: list[lg.RunInfo]) -> list:
    return [(r.name, r.k, tuple((s.name, s.kind) for s in r.splits)) for r in runs]


def read_split(pattern: str, run: Union[str, lg.RunInfo], split: str, *, chunk_rows: Optional[int] = None,
               progress: Optional[Progress] = None, cancel: Optional[threading.Event] = None) -> lg.SplitData:
    """The split of every shard, validated, concatenated in sorted file order into one read-only array."""
    files = expand(pattern)
    runs = list_runs(pattern)
    info_run = lg.find_run(runs, run.name if isinstance(run, lg.RunInfo) else run)
    info = info_run.split(split)
    scores = labels = None
    at = 0
    for i, f in enumerate(files):
        check_cancel(cancel)
        sub = None if progress is None else (lambda fr, m, i=i: progress((i + fr) / len(files), m))
        part = lg.read_split(f, info_run.name, split, chunk_rows=chunk_rows, progress=sub, cancel=cancel)
        if scores is None:       # allocated once: the whole split plus one shard in memory at most
            dtype = np.result_type(*(_stored_dtype(f, info_run.name, split) for f in files))
            scores = np.empty((info.n, info.k), dtype=dtype)
            labels = np.empty(info.n, np.int64)
        rows = part.labels.shape[0]
        scores[at:at + rows] = part.scores
        labels[at:at + rows] = part.labels
        at += rows
        del part
    report(progress, 1.0, f"Read {info.n} rows of {split} from {len(files)} shards")
    scores.flags.writeable = False
    labels.flags.writeable = False
    return lg.SplitData(scores=scores, labels=labels, kind=info.kind, info=info, run=info_run)


def _stored_dtype(file: str, run: str, split: str) -> np.dtype:
    """The dtype read_split returns for that shard (float16 is widened to float32)."""
    info = lg.find_run(lg.list_runs(file), run).split(split)
    return np.dtype(np.float64) if np.dtype(info.dtype) == np.float64 else np.dtype(np.float32)
