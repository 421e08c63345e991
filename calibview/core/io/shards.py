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

from calibview.core.io import discovery
from calibview.core.io import logits as lg
from calibview.core.io import schema
from calibview.core.errors import CalibviewError, Progress, check_cancel, report

GLOB_CHARS = "*?["


def is_pattern(path) -> bool:
    """True if ``path`` holds a glob character (``*?[``): a shard pattern rather than one file."""
    return any(c in os.fspath(path) for c in GLOB_CHARS)


def expand(pattern: str) -> list[str]:
    """The absolute paths of the files matching ``pattern``, sorted (the shards' order); CalibviewError if none."""
    files = sorted(os.path.abspath(p) for p in glob.glob(os.path.expanduser(os.fspath(pattern))))
    if not files:
        raise CalibviewError(f"No file matches the shard pattern {pattern}; quote it so the shell does not expand "
                             "it, and check the directory.")
    return files


def list_runs(pattern: str) -> list[schema.RunInfo]:
    """The runs of the first shard, with each split's N summed over all shards (metadata only)."""
    return _listing(pattern)[0]


def layout(pattern: str) -> tuple[list[str], list[list[schema.RunInfo]]]:
    """(shard files in order, each shard's own runs), checked alike across shards: what an engine that reads
    each shard on its own (calibview.core.distributed) plans from."""
    _, files, per_file = _listing(pattern)
    return files, per_file


def _listing(pattern: str) -> tuple[list[schema.RunInfo], list[str], list[list[schema.RunInfo]]]:
    """(merged runs, shard files, each shard's own runs), from one metadata pass over the shards."""
    files = expand(pattern)
    per_file = [discovery.list_runs(f) for f in files]
    first = per_file[0]
    shape = _layout(first)
    for f, runs in zip(files[1:], per_file[1:]):
        if _layout(runs) != shape:
            raise CalibviewError(f"The shard {f} holds other runs, splits or class counts than {files[0]}; every "
                                 f"shard of {pattern} must have the same layout.")
    merged = []
    for i, run in enumerate(first):
        splits = tuple(replace(s, n=sum(runs[i].splits[j].n for runs in per_file))
                       for j, s in enumerate(run.splits))
        merged.append(replace(run, file=os.fspath(pattern), splits=splits))
    return merged, files, per_file


def _layout(runs: list[schema.RunInfo]) -> list:
    return [(r.name, r.k, tuple((s.name, s.kind) for s in r.splits)) for r in runs]


def read_split(pattern: str, run: Union[str, schema.RunInfo], split: str, *, chunk_rows: Optional[int] = None,
               progress: Optional[Progress] = None, cancel: Optional[threading.Event] = None) -> schema.SplitData:
    """The split of every shard, validated, concatenated in sorted file order into one read-only array."""
    runs, files, per_file = _listing(pattern)
    info_run = discovery.find_run(runs, run.name if isinstance(run, schema.RunInfo) else run)
    info = info_run.split(split)
    # read_split widens float16 to float32; the concatenation keeps float64 if any shard stores it
    stored = [np.dtype(discovery.find_run(r, info_run.name).split(split).dtype) for r in per_file]
    dtype = np.float64 if any(d == np.float64 for d in stored) else np.float32
    scores = np.empty((info.n, info.k), dtype=dtype)      # the whole split plus one shard in memory at most
    labels = np.empty(info.n, np.int64)
    at = 0
    for i, f in enumerate(files):
        check_cancel(cancel)
        sub = None if progress is None else (lambda fr, m, i=i: progress((i + fr) / len(files), m))
        part = lg.read_split(f, info_run.name, split, chunk_rows=chunk_rows, progress=sub, cancel=cancel)
        rows = part.labels.shape[0]
        scores[at:at + rows] = part.scores
        labels[at:at + rows] = part.labels
        at += rows
        del part
    report(progress, 1.0, f"Read {info.n} rows of {split} from {len(files)} shards")
    scores.flags.writeable = False
    labels.flags.writeable = False
    return schema.SplitData(scores=scores, labels=labels, kind=info.kind, info=info, run=info_run)
