"""Reading members: the ensemble's mean probabilities, one member's logits, and the per-sample split of the
predictive entropy, each read member by member in chunks of rows.

For a chunk of rows, each member's logits are read in turn, turned into float64 probabilities and added up, so
that memory is the output plus a few (rows, K) buffers: O(N x K) for a whole split, O(rows x K) plus O(N) per
sample for a streamed one or for the decomposition, never O(M x N x K). The same readers serve a file
(``members`` dataset, opened read-only through :mod:`calibview.core.io.guard`) and an in-memory run of
:mod:`calibview.core.io.arrays` (its ``members`` arrays).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import h5py
import numpy as np

from calibview.core.errors import CalibviewError, Progress, check_cancel, report
from calibview.core.io import arrays, guard
from calibview.core.io.checks import ScoreCheck, check_labels
from calibview.core.io.limits import blocks, cost
from calibview.core.io.members import format as mf
from calibview.core.io.schema import RunInfo, SplitData, SplitInfo, oneline, open_file

#: float64 bytes per (rows, K) buffer of a chunk: a few of them live at once, far below one member's N x K
CHUNK_BYTES = 512 << 10

Block = Callable[[int, int, int], np.ndarray]   # (member, start, stop) -> (stop - start, K) logits, validated


def chunk_rows(k: int, rows: Optional[int] = None) -> int:
    """Rows per chunk for K classes: ``rows`` when given, else about CHUNK_BYTES of float64 per buffer."""
    return max(1, int(rows)) if rows else max(1, CHUNK_BYTES // (8 * int(k)))


def file_blocks(f: h5py.File, file: str, info: SplitInfo) -> Block:
    """The member reader of split ``info`` in the open file ``f``: ``block(m, start, stop)`` is member m's logits
    of rows start..stop-1, (rows, K) float32 (float16 widened) or float64, checked finite."""
    ds = guard.resolve(f, info.members_path, file)
    labels = guard.resolve(f, info.labels_path, file)
    if not (isinstance(ds, h5py.Dataset) and isinstance(labels, h5py.Dataset)):
        raise CalibviewError(f"{file}: {info.members_path} or {info.labels_path} is no longer a dataset; the file "
                             f"changed while it was read.")
    mf.check_members(file, ds, labels)
    if tuple(ds.shape) != (info.members, info.n, info.k):
        raise CalibviewError(f"{file}: {ds.name} changed shape while it was read; open the file again.")
    cost.check_read_cost(ds, file)          # many tiny chunks cost memory per chunk: refused before any read
    cache = _chunk_cache(ds)
    if cache is not None:                   # chunked: reopened with its cache once this handle is closed
        name = ds.name
        del ds
        ds = _reopened(f, name, cache)
    wide = np.float64 if ds.dtype.itemsize >= 8 else np.float32

    def block(m: int, start: int, stop: int) -> np.ndarray:
        out = np.empty((stop - start, info.k), dtype=wide)
        try:
            for r0, r1, c0, c1 in _member_blocks(ds, start, stop):
                blocks.widen(out[r0 - start:r1 - start, c0:c1], ds[m, r0:r1, c0:c1])
        except (OSError, ValueError) as e:
            raise CalibviewError(f"{file}: could not read rows {start}-{stop - 1} of member {m} of {ds.name} "
                                 f"({oneline(e)}); the file may be truncated or corrupt.") from None
        check = ScoreCheck(file, f"{ds.name} (member {m})", "logits", ds.dtype)
        check.update(out, start)
        check.raise_if_bad(stop - start, f" (rows {start}-{stop - 1})")
        return out

    return block


#: the most a members dataset's chunk cache may hold (compressed chunks: see :func:`_chunk_cache`)
CACHE_LIMIT = 256 << 20


def _chunk_cache(ds: h5py.Dataset) -> Optional[tuple[int, int]]:
    """(hash slots, bytes) of the chunk cache that fits how members are read, or None (not chunked: no cache).

    Each chunk of rows reads every member in turn, so HDF5's default cache (a few MB a dataset) held the wrong
    member's chunk, and each read of a member loaded its whole chunk again, and decompressed it again if it was
    compressed: 10 members of 10,000 x 100 float32, one gzip chunk each, read in 16 chunks of rows, took 2.6-2.9 s
    against 0.28 s with a cache that holds every member's chunk. Unfiltered chunks get no cache (HDF5 then reads
    a part of a chunk straight from the file: 0.04 against 0.21 s for three reads of the uncompressed twin);
    filtered ones a cache for the chunks one band of rows spans across every member, up to CACHE_LIMIT."""
    if ds.chunks is None:
        return None
    if not ds.id.get_create_plist().get_nfilters():
        return 0, 0
    m, _, k = ds.shape
    c0, c1, c2 = ds.chunks
    band = -(-m // c0) * -(-k // c2)
    return 8 * band + 1, min(CACHE_LIMIT, band * c0 * c1 * c2 * ds.dtype.itemsize)


def _reopened(f: h5py.File, name: str, cache: tuple[int, int]) -> h5py.Dataset:
    """The dataset ``name`` of ``f`` (resolved and checked by the caller, which holds no other handle of it: HDF5
    shares one cache among a dataset's open handles, set by the first) opened with chunk ``cache``."""
    dapl = h5py.h5p.create(h5py.h5p.DATASET_ACCESS)
    dapl.set_chunk_cache(cache[0], cache[1], 1.0)
    return h5py.Dataset(h5py.h5d.open(f.id, name.encode(), dapl=dapl))


def _member_blocks(ds: h5py.Dataset, start: int, stop: int) -> Iterator[tuple[int, int, int, int]]:
    """(r0, r1, c0, c1) blocks of rows start..stop-1 of one member of the (M, N, K) ``ds``, each touching at most
    MAX_CHUNKS_PER_READ chunks, so that peak memory stays O(block), not O(chunk count)."""
    k = int(ds.shape[2])
    if ds.chunks is None:
        yield start, stop, 0, k
        return
    rows, cols = int(ds.chunks[1]), int(ds.chunks[2])
    per_row = -(-k // cols)
    if per_row > cost.MAX_CHUNKS_PER_READ:
        step, width = rows, cost.MAX_CHUNKS_PER_READ * cols
    else:
        step, width = rows * max(1, cost.MAX_CHUNKS_PER_READ // per_row), k
    r0 = start
    while r0 < stop:
        r1 = min(stop, (r0 // step + 1) * step)
        for c0 in range(0, k, width):
            yield r0, r1, c0, min(k, c0 + width)
        r0 = r1


def array_blocks(path: str, info: SplitInfo) -> Block:
    """The member reader of split ``info`` of the in-memory run at ``path`` (validated when registered)."""
    held = arrays.lookup(path).members.get(info.name)
    if held is None:
        raise CalibviewError(f"{path}: split {info.name} has no members.")
    return lambda m, start, stop: held[m, start:stop]


def log_softmax(z: np.ndarray) -> np.ndarray:
    """(rows, K) logits -> float64 log-probabilities (a new array)."""
    lp = np.array(z, dtype=np.float64)
    lp -= lp.max(axis=1, keepdims=True)
    lp -= np.log(np.exp(lp).sum(axis=1, keepdims=True))
    return lp


def ensemble_rows(block: Block, m: int, start: int, stop: int, entropy: Optional[np.ndarray] = None
                  ) -> np.ndarray:
    """(rows, K) float64 mean of the M members' probabilities of rows start..stop-1, members read one by one;
    ``entropy`` ((rows,) float64, optional) receives the mean member entropy in nats (the aleatoric part)."""
    total = None
    if entropy is not None:
        entropy[:] = 0.0
    for i in range(m):
        lp = log_softmax(block(i, start, stop))
        p = np.exp(lp)
        if entropy is not None:
            entropy -= np.einsum("ij,ij->i", p, lp)
        if total is None:
            total = p
        else:
            total += p
        del lp, p
    total /= m
    if entropy is not None:
        entropy /= m
    return total


def member_block(block: Block, info: SplitInfo, member: Optional[str], start: int, stop: int) -> np.ndarray:
    """Rows start..stop-1 of the ensemble (member None or "ensemble": float64 mean probabilities) or of member
    "i" (its logits as stored, widened)."""
    if member in (None, mf.ENSEMBLE):
        return ensemble_rows(block, info.members, start, stop)
    return block(int(member), start, stop)


def read_members(path: str, run: RunInfo, info: SplitInfo, member: Optional[str] = None, *,
                 chunk_rows_: Optional[int] = None, progress: Optional[Progress] = None,
                 cancel: Optional[threading.Event] = None) -> SplitData:
    """The ensemble (``member`` None: (N, K) float64 mean probabilities, kind "probs") or member "i" ((N, K)
    logits, kind "logits") of split ``info``, with its (N,) int64 labels; both read-only."""
    mf.check_member(info, member, path)
    if member == mf.DETERMINISTIC:
        raise ValueError("the deterministic row is the split's own scores: read them with read_split")
    n, k = info.n, info.k
    rows = chunk_rows(k, chunk_rows_)
    report(progress, 0.0, f"Reading {info.members_path} ({info.members} x {n} x {k})")
    with opened(path, info) as (block, labels):
        first = member_block(block, info, member, 0, min(n, rows))
        out = np.empty((n, k), first.dtype)
        out[:first.shape[0]] = first
        for start in range(first.shape[0], n, rows):
            check_cancel(cancel)
            stop = min(n, start + rows)
            out[start:stop] = member_block(block, info, member, start, stop)
            report(progress, stop / n, f"Read {stop} of {n} rows of {info.members_path}")
    out.flags.writeable = False
    labels.flags.writeable = False
    kind = "probs" if member in (None, mf.ENSEMBLE) else "logits"
    return SplitData(scores=out, labels=labels, kind=kind, info=info, run=run)


class opened:
    """``with opened(path, info) as (block, labels)``: the member reader and the validated (N,) int64 labels of
    split ``info`` of a file (kept open meanwhile) or of an in-memory run."""

    def __init__(self, path: str, info: SplitInfo) -> None:
        self.path, self.info, self.f = path, info, None

    def __enter__(self):
        info = self.info
        if arrays.is_memory(self.path):
            labels = np.array(arrays.lookup(self.path).data[info.name].labels)
            return array_blocks(self.path, info), labels
        self.f = open_file(self.path)
        block = file_blocks(self.f, self.path, info)
        lds = guard.resolve(self.f, info.labels_path, self.path)
        labels = np.empty(info.n, np.int64)
        try:
            lds.read_direct(labels)
        except (OSError, ValueError) as e:
            raise CalibviewError(f"{self.path}: could not read {lds.name} ({oneline(e)}); the file may be "
                                 f"truncated or corrupt.") from None
        check_labels(self.path, lds.name, labels, info.k)
        return block, labels

    def __exit__(self, *exc) -> None:
        if self.f is not None:
            self.f.close()


@dataclass(frozen=True)
class Decomposition:
    """The per-sample split of the ensemble's predictive entropy, in nats, all (N,) float64 (``correct`` bool):
    ``total`` = H(mean p) = ``aleatoric`` (the mean member entropy) + ``epistemic`` (the mutual information
    between the prediction and the member); ``confidence`` (the ensemble's top probability) and ``correct``
    (its argmax equals the label)."""

    total: np.ndarray
    aleatoric: np.ndarray
    epistemic: np.ndarray
    confidence: np.ndarray
    correct: np.ndarray
    kind: str               # "ensemble" | "mc-dropout"
    members: int


def decompose(path: str, info: SplitInfo, *, rows: Optional[int] = None,
              cancel: Optional[threading.Event] = None) -> Decomposition:
    """The :class:`Decomposition` of split ``info`` (members read one by one per chunk of rows: memory O(N)
    plus a few (rows, K) buffers). The mutual information is clipped at 0 (it is >= 0 by Jensen's inequality;
    rounding can leave -1e-16)."""
    n = info.n
    total, alea, conf = np.empty(n), np.empty(n), np.empty(n)
    correct = np.empty(n, bool)
    step = chunk_rows(info.k, rows)
    with opened(path, info) as (block, labels):
        for start, stop in _ranges(n, step):
            check_cancel(cancel)
            p = ensemble_rows(block, info.members, start, stop, alea[start:stop])
            with np.errstate(divide="ignore", invalid="ignore"):
                total[start:stop] = -np.einsum("ij,ij->i", p, np.where(p > 0, np.log(p), 0.0))
            conf[start:stop] = p.max(axis=1)
            correct[start:stop] = p.argmax(axis=1) == labels[start:stop]
            del p
    epi = np.maximum(total - alea, 0.0)
    for a in (total, alea, epi, conf, correct):
        a.flags.writeable = False
    return Decomposition(total=total, aleatoric=alea, epistemic=epi, confidence=conf, correct=correct,
                         kind=info.members_kind, members=info.members)


def _ranges(n: int, step: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, step):
        yield start, min(n, start + step)
