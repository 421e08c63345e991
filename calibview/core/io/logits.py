"""Reading the HDF5 logits format (docs/FORMAT.md): a whole split (:func:`read_split`), a split in chunks
(:func:`iter_split`), a metadata column (:func:`read_meta`), and the row readers that streaming reuses.

Files are only ever opened read-only. Every chunk read is validated (:mod:`calibview.core.io.checks`) before it
is handed on; the records live in :mod:`calibview.core.io.schema`, finding runs in
:mod:`calibview.core.io.discovery` and writing in :mod:`calibview.core.io.writer`.
"""

from __future__ import annotations

import threading
from typing import Iterator, Optional, Union

import h5py
import numpy as np

from calibview.core.errors import CalibviewError, Progress, check_cancel, report
from calibview.core.io import guard
from calibview.core.io import meta as md
from calibview.core.io.checks import ScoreCheck, check_labels, check_shapes, check_stored
from calibview.core.io.discovery import discover, find_run
from calibview.core.io.limits import blocks, cost
from calibview.core.io.members import format as mf
from calibview.core.io.members import read as mr
from calibview.core.io.toplabel import format as toplabel_format
from calibview.core.io.schema import (CHUNK_BYTES, PathLike, RunInfo, SplitData, SplitInfo, abspath, join,
                                      oneline, open_file)


def _resolve(f: h5py.File, file: str, run: Union[str, RunInfo], split: str) -> tuple[RunInfo, SplitInfo]:
    """Find the run and split in the open file; a RunInfo is re-checked against the file's current metadata."""
    runs = discover(f, file)
    name = run.name if isinstance(run, RunInfo) else run
    if isinstance(run, RunInfo):
        match = [r for r in runs if r.path == run.path]
        info = match[0] if match else find_run(runs, name)
    else:
        info = find_run(runs, name)
    return info, info.split(split)


def out_dtype(stored: np.dtype) -> np.dtype:
    """float64 stays float64; everything narrower is widened (float16) or kept (float32) as native float32."""
    return np.dtype(np.float64) if np.dtype(stored).itemsize >= 8 else np.dtype(np.float32)


def _default_chunk_rows(ds: h5py.Dataset, out_dtype: np.dtype) -> int:
    n, k = ds.shape
    rows = max(1, CHUNK_BYTES // (k * out_dtype.itemsize))
    if ds.chunks:  # whole HDF5 chunks per read, so no compressed chunk is decompressed twice
        c = ds.chunks[0]
        rows = max(c, rows // c * c)
    return min(rows, n)


def read_rows(ds: h5py.Dataset, out: np.ndarray, start: int, stop: int, at: int,
              staging: Optional[np.ndarray], file: str) -> None:
    """Fill ``out[at : at + stop - start]`` from ``ds[start:stop]``, copying at most one chunk on the way.

    ds : an (N, K) scores dataset; out : (rows, K) in :func:`out_dtype`; staging : None, or for float16 data a
    (>= stop - start, K) buffer in the stored dtype that each chunk passes through."""
    try:
        if staging is None:  # HDF5 writes straight into the output (and byte-swaps if needed), block by block
            blocks.read_direct(ds, out, start, stop, at)
        else:  # float16: HDF5's own conversion is slow, blocks.widen's is fast
            for r0, r1, c0, c1 in blocks.blocks(ds, start, stop):
                part = staging[:r1 - r0]
                ds.read_direct(part, np.s_[r0:r1, c0:c1], np.s_[0:r1 - r0, c0:c1])
                blocks.widen(out[at + r0 - start:at + r1 - start, c0:c1], part[:, c0:c1])
    except (OSError, ValueError, RuntimeError, KeyError) as e:
        raise CalibviewError(f"{file}: could not read rows {start}-{stop - 1} of {ds.name} ({oneline(e)}); "
                             f"the file may be truncated or corrupt.") from None
    except MemoryError:
        raise CalibviewError(f"{file}: ran out of memory reading rows {start}-{stop - 1} of {ds.name}; raise the "
                             f"memory available or lower --max-memory, so that it is streamed.") from None


def read_labels(ds: h5py.Dataset, out: np.ndarray, start: int, stop: int, file: str) -> None:
    """Fill ``out`` ((stop - start,) int64) with ``ds[start:stop]``; a failed read is a CalibviewError. The values
    are not checked here (:func:`calibview.core.io.checks.check_labels` does)."""
    try:
        blocks.read_direct(ds, out, start, stop)
    except (OSError, ValueError, RuntimeError, KeyError) as e:
        raise CalibviewError(f"{file}: could not read {ds.name} ({oneline(e)}); "
                             f"the file may be truncated or corrupt.") from None


def open_split(f: h5py.File, file: str, info: SplitInfo) -> tuple[h5py.Dataset, h5py.Dataset, np.dtype]:
    """(scores dataset, labels dataset, output dtype) of the split ``info`` in the open file ``f``, re-checked
    (guard, shapes, dtypes) in case the file changed since it was listed. A top-label split has no scores
    matrix: what asks for one is refused by name, not as a file that changed."""
    if info.kind == toplabel_format.KIND:
        raise CalibviewError(f"{file}: {info.path} is a top-label split (confidence, predictions, labels), which "
                             f"stores only the confidence of the predicted class; this needs every class's "
                             f"logit or probability.")
    scores, labels = guard.resolve(f, info.scores_path, file), guard.resolve(f, info.labels_path, file)
    if not (isinstance(scores, h5py.Dataset) and isinstance(labels, h5py.Dataset)):
        raise CalibviewError(f"{file}: {info.scores_path} or {info.labels_path} is no longer a dataset; the file "
                             f"changed while it was read.")
    check_stored(file, scores, labels)
    check_shapes(file, scores.name, scores.shape, scores.dtype, labels.name, labels.shape, labels.dtype, info.kind)
    return scores, labels, out_dtype(scores.dtype)


def read_split(path: Optional[PathLike], run: Union[str, RunInfo], split: str, *, chunk_rows: Optional[int] = None,
               progress: Optional[Progress] = None, cancel: Optional[threading.Event] = None,
               member: Optional[str] = None) -> SplitData:
    """Read and validate one split: ``scores`` (N, K) float32/float64, ``labels`` (N,) int64, both read-only.

    The output is allocated once and filled chunk by chunk (default about 64 MB of rows, whole HDF5 chunks);
    each chunk is validated, then ``progress(fraction, message)`` is called and ``cancel`` is checked.
    ``path`` may be None when ``run`` is a RunInfo (its ``file`` is used). A split with members reads as their
    ensemble ((N, K) float64 mean probabilities, kind "probs", :mod:`calibview.core.io.members`) unless
    ``member`` names member "i" (its logits) or "deterministic" (the split's own scores)."""
    if chunk_rows is not None and chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    file = abspath(path if path is not None else run.file)  # type: ignore[union-attr]
    with open_file(file) as f:
        run_info, info = _resolve(f, file, run, split)
    if info.members and member != mf.DETERMINISTIC:
        return mr.read_members(file, run_info, info, member, chunk_rows_=chunk_rows, progress=progress,
                               cancel=cancel)
    mf.check_member(info, member, file)
    with open_file(file) as f:
        sds, lds, out_dtype = open_split(f, file, info)
        n, k = info.n, info.k
        report(progress, 0.0, f"Reading {info.scores_path} ({n} x {k})")
        labels = np.empty(n, np.int64)
        read_labels(lds, labels, 0, n, file)
        check_labels(file, lds.name, labels, k)
        scores = np.empty((n, k), out_dtype)
        rows = min(chunk_rows, n) if chunk_rows else _default_chunk_rows(sds, out_dtype)
        staging = np.empty((rows, k), sds.dtype) if sds.dtype.itemsize < 4 else None
        checker = ScoreCheck(file, sds.name, info.kind, sds.dtype)
        for start in range(0, n, rows):
            check_cancel(cancel)
            stop = min(n, start + rows)
            read_rows(sds, scores, start, stop, start, staging, file)
            checker.update(scores[start:stop], start)
            report(progress, stop / n, f"Read {stop} of {n} rows of {info.scores_path}")
        checker.raise_if_bad(n)
    scores.flags.writeable = False
    labels.flags.writeable = False
    return SplitData(scores=scores, labels=labels, kind=info.kind, info=info, run=run_info)


def read_meta(path: Optional[PathLike], run: Union[str, RunInfo], split: str, column: str) -> np.ndarray:
    """The metadata column ``/<run>/<split>/meta/<column>`` as a read-only (N,) array: int64, bool, str (object)
    or float64 (NaN = missing); see :mod:`calibview.core.io.meta`. Unknown columns, wrong lengths, non-1-D data and
    NaN in a categorical column are one-sentence CalibviewErrors naming the file and the dataset."""
    file = abspath(path if path is not None else run.file)  # type: ignore[union-attr]
    with open_file(file) as f:
        run_info, info = _resolve(f, file, run, split)
        if column not in info.meta:
            have = ", ".join(info.meta) if info.meta else "none"
            raise CalibviewError(f"{file}: split {info.path} has no metadata column '{column}' (available: {have}); "
                                 f"add it as {join(info.path, md.META_GROUP)}/{column}.")
        ds = f[join(join(info.path, md.META_GROUP), column)]     # discovery lists hard links only
        md.check_layout(file, ds.name, ds.shape, info.n)         # the length first: nothing read yet
        guard.check_dataset(ds, file, ratio=True)
        cost.check_read_cost(ds, file, kept=info.n * cost.value_bytes(ds))
        try:
            values = blocks.read_all(ds)
            categorical, name = bool(ds.attrs.get("categorical", False)), ds.name
        except (OSError, ValueError, TypeError, RuntimeError, KeyError) as e:
            raise CalibviewError(f"{file}: could not read {ds.name} ({oneline(e)}).") from None
    return md.validate(file, name, values, info.n, categorical=categorical)


def iter_split(path: Optional[PathLike], run: Union[str, RunInfo], split: str, *,
               chunk_rows: int) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """Yield ``(scores (rows, K), labels (rows,) int64, row offset)`` chunks, each validated before it is yielded.

    Run, split and shapes are checked when this is called; data errors surface at the chunk that holds them."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    file = abspath(path if path is not None else run.file)  # type: ignore[union-attr]
    with open_file(file) as f:
        _, info = _resolve(f, file, run, split)
        if info.members:          # the run's prediction: the members' ensemble
            return _iter_ensemble(file, info, int(chunk_rows))
        open_split(f, file, info)
    return _iter_chunks(file, info, int(chunk_rows))


def _iter_ensemble(file: str, info: SplitInfo, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    with mr.opened(file, info) as (block, labels):
        for start in range(0, info.n, rows):
            stop = min(info.n, start + rows)
            yield mr.ensemble_rows(block, info.members, start, stop), labels[start:stop].copy(), start


def _iter_chunks(file: str, info: SplitInfo, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    with open_file(file) as f:
        sds, lds, out_dtype = open_split(f, file, info)
        n, k = sds.shape
        staging = np.empty((min(rows, n), k), sds.dtype) if sds.dtype.itemsize < 4 else None
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            scope = f" (rows {start}-{stop - 1})"
            labels = np.empty(stop - start, np.int64)
            read_labels(lds, labels, start, stop, file)
            check_labels(file, lds.name, labels, k, start, scope)
            scores = np.empty((stop - start, k), out_dtype)
            read_rows(sds, scores, start, stop, 0, staging, file)
            checker = ScoreCheck(file, sds.name, info.kind, sds.dtype)
            checker.update(scores, start)
            checker.raise_if_bad(stop - start, scope)
            yield scores, labels, start
