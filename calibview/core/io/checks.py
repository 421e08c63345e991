"""What the logits format accepts, checked the same way for stored datasets and for arrays about to be written.

Here: the guard checks of stored datasets before any read (:func:`check_stored`), the shape and dtype rules
(:func:`check_shapes`), the label range (:func:`check_labels`), the score rules (:class:`ScoreCheck`: finite
logits; non-negative probabilities whose rows sum to 1) and :func:`validate_arrays`, which applies all of them to
in-memory arrays. Every failure is one sentence naming the file and the dataset.
"""

from __future__ import annotations

from typing import Optional

import h5py
import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io.limits import cost
from calibview.core.io.schema import CHUNK_BYTES, SCORE_KINDS


def _prob_tolerance(dtype: np.dtype) -> float:
    """Row sums of probabilities must be within this of 1 (absolute), by the *stored* dtype."""
    return 1e-6 if np.dtype(dtype).itemsize >= 8 else 1e-3


def check_stored(file: str, scores: h5py.Dataset, labels: h5py.Dataset) -> None:
    """No foreign files, no unwritten chunks, no compression bombs (calibview.core.io.guard), and no read over
    the read budget (calibview.core.io.limits.cost), before any read.

    scores : the (N, K) scores dataset of a split; labels : its (N,) labels dataset."""
    guard.check_dataset(scores, file, scores=True)
    guard.check_dataset(labels, file)
    cost.check_read_cost(scores, file)                    # read block by block: only the chunks' overhead
    cost.check_read_cost(labels, file, kept=int(labels.shape[0]) * 8 if labels.shape else 8)


def check_shapes(file: str, spath: str, sshape: tuple, sdtype: np.dtype, lpath: str, lshape: tuple,
                 ldtype: np.dtype, kind: str) -> None:
    """Shape and dtype rules shared by reading and writing; each failure is one sentence.

    The scores at ``spath`` (``kind`` "logits" or "probs") must be (N, K) floating point with N >= 1 and K >= 2;
    the labels at ``lpath`` (N,) integers. Only shapes and dtypes are looked at, never the values."""
    if len(sshape) != 2:
        raise CalibviewError(
            f"{file}: {spath} has shape {tuple(sshape)} but {kind} must be 2-D (N samples, K classes)."
        )
    if np.dtype(sdtype).kind != "f":
        raise CalibviewError(
            f"{file}: {spath} has dtype {np.dtype(sdtype)} but {kind} must be floating point (float16/32/64)."
        )
    if len(lshape) != 1:
        raise CalibviewError(f"{file}: {lpath} has shape {tuple(lshape)} but labels must be 1-D (N,).")
    if np.dtype(ldtype).kind in "SUO":          # fixed-length, numpy or HDF5 variable-length strings
        raise CalibviewError(
            f"{file}: {lpath} holds strings (dtype {np.dtype(ldtype)}) but labels must be integer class indices "
            f"0..K-1; store each label as the index of its class (int64) and the names, in that order, as the "
            f"run's class_names."
        )
    if np.dtype(ldtype).kind not in "iu":
        floats = " (store them as int64, not as floats)" if np.dtype(ldtype).kind == "f" else " (store them as int64)"
        raise CalibviewError(
            f"{file}: {lpath} has dtype {np.dtype(ldtype)} but labels must be integer class indices 0..K-1{floats}."
        )
    n, k = sshape
    if n != lshape[0]:
        raise CalibviewError(
            f"{file}: {spath} has {n} rows but {lpath} has {lshape[0]}; there must be one label per row."
        )
    if n == 0:
        raise CalibviewError(f"{file}: {spath} is empty (N = 0); a split needs at least one sample.")
    if k < 2:
        raise CalibviewError(f"{file}: {spath} has K = {k} columns but a classifier needs at least 2 class columns.")


def check_labels(file: str, path: str, labels: np.ndarray, k: int, offset: int = 0, scope: str = "") -> None:
    """CalibviewError unless every label is a class index in [0, k).

    labels : (rows,) integers, rows ``offset ..`` of the dataset at ``path``; ``scope`` (e.g. " (rows 0-99)") is
    added to the message after "labels"."""
    bad = (labels < 0) | (labels >= k)
    count = int(np.count_nonzero(bad))
    if count:
        first = int(np.argmax(bad))
        raise CalibviewError(
            f"{file}: {count} of {len(labels)} labels{scope} in {path} are outside [0, {k}) "
            f"(for example {int(labels[first])} at row {offset + first}); labels must be class indices 0..K-1."
        )


def _row_sums(block: np.ndarray) -> np.ndarray:
    """(rows,) sums of a (rows, K) float32/float64 block, in its dtype, by torch's reduction.

    Not by BLAS (``block @ ones``), though that is as fast: a multithreaded OpenBLAS call leaves its worker
    threads spinning for about 0.1 s, and a read validates every chunk, so on 2 cores those threads took a core
    from the torch work that follows each chunk (a streamed 50,000 x 1,000 none+ts report: 7.5 s against 5.6 s
    with OPENBLAS_NUM_THREADS=1). torch's row sum runs on the threads the evaluation uses anyway, and is 1-2x
    faster than single-threaded BLAS here. torch is imported on the first call, not with this module: listing
    runs reads no scores and must not pay for it. A read-only array (torch wraps one only with a warning) or a
    reversed view (not at all) is summed by numpy."""
    if (not block.flags.writeable or block.dtype not in (np.float32, np.float64)
            or any(step < 0 for step in block.strides)):
        return np.add.reduce(block, axis=1)
    import torch
    return torch.from_numpy(block).sum(1).numpy()


class ScoreCheck:
    """Accumulates per-chunk validation of scores so that one error can report the total count of bad rows.

    Logits must be finite; probabilities also non-negative, each row summing to 1 within a tolerance set by the
    *stored* dtype ``stored`` (1e-6 for float64, 1e-3 for narrower floats)."""

    def __init__(self, file: str, path: str, kind: str, stored: np.dtype) -> None:
        self.file, self.path, self.kind = file, path, kind
        self.tol = _prob_tolerance(stored)
        self.bad = {"nonfinite": [0, -1, 0.0], "negative": [0, -1, 0.0], "sum": [0, -1, 0.0]}

    def _add(self, what: str, rows: np.ndarray, offset: int, values: Optional[np.ndarray] = None) -> None:
        idx = np.flatnonzero(rows)
        if idx.size:
            entry = self.bad[what]
            if entry[0] == 0:
                entry[1] = offset + int(idx[0])
                entry[2] = float(values[idx[0]]) if values is not None else 0.0
            entry[0] += idx.size

    def update(self, block: np.ndarray, offset: int) -> None:
        """Check rows ``offset .. offset + len(block)`` (block is (rows, K) in the output dtype)."""
        # Row sums are the cheapest full pass: NaN/Inf in a row makes its sum non-finite (so can overflow of huge
        # finite values, which the exact per-element test below then clears).
        with np.errstate(all="ignore"):
            sums = _row_sums(block)
            nonfinite = ~np.isfinite(sums)
            if nonfinite.any():
                nonfinite[nonfinite] = ~np.isfinite(block[nonfinite]).all(axis=1)
                self._add("nonfinite", nonfinite, offset)
            if self.kind == "logits":
                return
            if not block.min() >= 0:  # negative or NaN: find the rows that hold a negative entry
                self._add("negative", (block < 0).any(axis=1), offset)
            self._add("sum", ~nonfinite & ~(np.abs(sums - 1.0) <= self.tol), offset, sums)

    def raise_if_bad(self, n_rows: int, scope: str = "") -> None:
        """CalibviewError for the first kind of bad row seen (non-finite, negative, row sum), with its count out of
        ``n_rows`` and the first row; nothing if every row checked so far is valid."""
        count, first, value = self.bad["nonfinite"]
        if count:
            raise CalibviewError(f"{self.file}: {count} of {n_rows} rows{scope} of {self.path} contain NaN or Inf "
                                 f"(first at row {first}); fix or drop those rows.")
        count, first, value = self.bad["negative"]
        if count:
            raise CalibviewError(f"{self.file}: {count} of {n_rows} rows{scope} of {self.path} contain negative "
                                 f"probabilities (first at row {first}).")
        count, first, value = self.bad["sum"]
        if count:
            raise CalibviewError(f"{self.file}: {count} of {n_rows} rows{scope} of {self.path} do not sum to 1 "
                                 f"within {self.tol:g} (first at row {first}, sum {value:.6g}); "
                                 f"store logits or normalised probabilities.")


def validate_arrays(file: str, scores_path: str, labels_path: str, kind: str, scores, labels
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Apply the reading rules to in-memory arrays, naming ``file`` and the two paths in any error.

    scores : (N, K) float logits or probabilities (``kind``); labels : (N,) integer class indices 0..K-1.
    Works in chunks, so a memory-mapped array is never copied whole; returns the arrays as numpy arrays."""
    if kind not in SCORE_KINDS:
        raise CalibviewError(f"{file}: {scores_path} has score kind '{kind}' but it must be 'logits' or 'probs'.")
    scores, labels = np.asarray(scores), np.asarray(labels)
    check_shapes(file, scores_path, scores.shape, scores.dtype, labels_path, labels.shape, labels.dtype, kind)
    n, k = scores.shape
    check_labels(file, labels_path, labels, k)
    checker = ScoreCheck(file, scores_path, kind, scores.dtype)
    rows = max(1, CHUNK_BYTES // (k * 8))
    for start in range(0, n, rows):
        block = scores[start:start + rows]
        checker.update(block.astype(np.float32) if block.dtype.itemsize < 4 else block, start)
    checker.raise_if_bad(n)
    return scores, labels
