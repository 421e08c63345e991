"""Reading a dataset in bounded, chunk-aligned blocks, so that the memory HDF5 spends on one read stays
O(block), not O(chunk count) (see :mod:`calibview.core.io.limits.cost`).

A block covers whole HDF5 chunks (its row bounds are multiples of the chunk's rows, except at the ends of the
range asked for) and touches at most :data:`~calibview.core.io.limits.cost.MAX_CHUNKS_PER_READ` chunks; a row
that alone spans more chunks than that is read in column blocks. A dataset of ordinary chunks is read in one
block per call, as before.
"""

from __future__ import annotations

from typing import Iterator, Optional

import h5py
import numpy as np

from calibview.core.io.limits.cost import MAX_CHUNKS_PER_READ


def blocks(ds: h5py.Dataset, start: int, stop: int) -> Iterator[tuple[int, int, Optional[int], Optional[int]]]:
    """``(r0, r1, c0, c1)`` blocks covering rows ``start .. stop - 1`` of the 1-D or 2-D ``ds`` (columns c0..c1-1;
    both None for a 1-D dataset), in order, each touching at most MAX_CHUNKS_PER_READ chunks."""
    ncols = int(ds.shape[1]) if len(ds.shape) == 2 else None
    chunks = ds.chunks
    if chunks is None or start >= stop:
        if start < stop:
            yield start, stop, (0 if ncols is not None else None), ncols
        return
    chunk_rows = int(chunks[0])
    per_row = -(-ncols // int(chunks[1])) if ncols is not None else 1     # chunks across one chunk-row
    if per_row > MAX_CHUNKS_PER_READ:                  # one chunk-row at a time, in column blocks
        step, cols = chunk_rows, MAX_CHUNKS_PER_READ * int(chunks[1])
    else:
        step, cols = chunk_rows * max(1, MAX_CHUNKS_PER_READ // per_row), ncols
    r0 = start
    while r0 < stop:
        r1 = min(stop, (r0 // step + 1) * step)
        if ncols is None:
            yield r0, r1, None, None
        else:
            for c0 in range(0, ncols, cols):
                yield r0, r1, c0, min(ncols, c0 + cols)
        r0 = r1


def read_direct(ds: h5py.Dataset, out: np.ndarray, start: int, stop: int, at: int = 0) -> None:
    """Fill ``out[at : at + stop - start]`` (C-contiguous, 1-D or 2-D like ``ds``) from ``ds[start:stop]`` block by
    block. HDF5's errors pass through (the callers name the file)."""
    for r0, r1, c0, c1 in blocks(ds, start, stop):
        a, b = at + r0 - start, at + r1 - start
        if c0 is None:
            ds.read_direct(out, np.s_[r0:r1], np.s_[a:b])
        else:
            ds.read_direct(out, np.s_[r0:r1, c0:c1], np.s_[a:b, c0:c1])


def widen(out: np.ndarray, part: np.ndarray) -> None:
    """``out[...] = part``: float16 values widened to float32 (exact), any other pair as numpy assigns them.

    torch's converting copy is used where both sides are native-endian: numpy converts float16 element by element
    (1.6 ns each here, 3.3 s per pass over a 2,000,000 x 1,000 split, which a streamed report reads a dozen
    times), torch with vector instructions (0.1 ns). torch is imported here, not at the top: listing a file's
    runs reads no scores and must not pay for it."""
    if part.dtype == np.float16 and part.dtype.isnative and out.dtype.isnative and out.flags.writeable:
        import torch
        torch.from_numpy(out).copy_(torch.from_numpy(part))
    else:
        out[...] = part


def widened(a: np.ndarray) -> np.ndarray:
    """A float16 array widened to a new float32 array by :func:`widen`; a wider one returned as it is."""
    if a.dtype.itemsize >= 4:
        return a
    out = np.empty(a.shape, np.float32)
    widen(out, a)
    return out


def read_all(ds: h5py.Dataset) -> np.ndarray:
    """The whole 1-D ``ds`` as an array, read block by block (any dtype, strings included)."""
    n = int(ds.shape[0])
    out = None
    for r0, r1, _, _ in blocks(ds, 0, n):
        part = ds[r0:r1]
        if out is None:
            out = np.empty(n, dtype=part.dtype)
        out[r0:r1] = part
    return out if out is not None else ds[()]
