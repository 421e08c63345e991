"""Splits that stay on disk: read in chunks of rows on demand, for files larger than memory.

A split whose scores would take more than ``max_memory`` bytes in memory (float16 is widened to float32,
probabilities become float64 log-probabilities) is not loaded. The evaluation then works on a
:class:`StreamedSplit` instead of a tensor:

- the metrics are accumulated chunk by chunk (:class:`calibview.core.stats.metrics.StatsAccumulator`): only per-sample
  vectors (O(N)) and per-class sums stay in memory;
- temperature and vector scaling are fitted with full-batch passes: each pass reads the split once, chunk by
  chunk (a :class:`StreamedSplit` can be sliced like a tensor, ``split[a:b]``, which is all their loops need);
- calibrators that need the whole fit split at once refuse with an explanation (:func:`require_in_memory`).

Every chunk is validated as it is read (NaN/Inf, probabilities, labels), so a bad row is reported with its index
whichever pass meets it first. The file is opened read-only and stays open until :meth:`StreamedSplit.close`.
"""

from __future__ import annotations

import os
import warnings
from typing import Iterator, Optional, Union

import h5py
import numpy as np
import torch

from calibview.core.io import checks, discovery
from calibview.core.io import logits as lg
from calibview.core.io.memory import human, memory_bytes
from calibview.core.io import schema
from calibview.core.io.members import format as mf
from calibview.core.io.members import read as mr
from calibview.core.io import shards
from calibview.core.io.heap import trim_heap, tune_allocator  # noqa: F401  (stream.trim_heap: the engine's)
from calibview.core.errors import CalibviewError, ParameterError

#: rows per read when streaming: about this many bytes of float32 scores per chunk (the float64 temporaries of
#: a chunk are then 16 MB; see calibview.core.stats.metrics.CHUNK_BYTES)
STREAM_CHUNK_BYTES = 8 << 20


class StreamedSplit:
    """One split on disk (one file, or several shards in sorted order), sliceable like an (N, K) tensor.

    ``split[a:b]`` reads rows a..b-1 and returns them as a tensor on ``device``: logits in float32 (float16
    widened) or float64, probabilities as float64 log-probabilities (as
    :func:`calibview.core.evaluation.tensors.scores_tensor` does for a loaded split). ``labels`` (N,) int64 are
    read once, validated, and kept in memory.
    """

    def __init__(self, file: str, run: schema.RunInfo, split: str, *, device: torch.device | str = "cpu",
                 chunk_rows: Optional[int] = None, member: Optional[str] = None) -> None:
        info = run.split(split)
        mf.check_member(info, member, file)
        # a split with members streams their ensemble (float64 probabilities) or one member's logits, read member
        # by member per chunk (calibview.core.io.members)
        self.member = member
        self._members = bool(info.members) and member != mf.DETERMINISTIC
        self._blocks: dict[str, object] = {}
        if shards.is_pattern(file):
            _, files, per_file = shards._listing(file)
            segments = [(f, discovery.find_run(r, run.name).split(split)) for f, r in zip(files, per_file)]
        else:
            segments = [(schema.abspath(file), info)]
        self.info, self.run, self.kind = info, run, info.kind
        if self._members:
            self.kind = "probs" if member in (None, mf.ENSEMBLE) else "logits"
        self.device = torch.device(device)
        self.shape = (int(info.n), int(info.k))
        self.dtype = torch.float64 if self.kind == "probs" or np.dtype(info.dtype).itemsize >= 8 else torch.float32
        self._files: dict[str, h5py.File] = {}
        self._segments = []                     # (file, info, first row, stop row)
        labels = np.empty(self.shape[0], np.int64)
        at = 0
        for f, s in segments:
            sds, lds = self._datasets(f, s)
            lg.read_labels(lds, labels[at:at + s.n], 0, s.n, f)
            checks.check_labels(f, lds.name, labels[at:at + s.n], s.k)
            self._segments.append((f, s, at, at + s.n))
            at += s.n
        self.labels = torch.from_numpy(labels).to(self.device)
        self.chunk_rows = int(chunk_rows) if chunk_rows else max(1, STREAM_CHUNK_BYTES // (4 * self.shape[1]))

    def _datasets(self, file: str, info: schema.SplitInfo) -> tuple[h5py.Dataset, h5py.Dataset]:
        if file not in self._files:
            self._files[file] = schema.open_file(file)
            self._blocks.pop(file, None)
        if self._members:       # (member reader, labels): the members dataset is no (N, K) scores dataset
            if file not in self._blocks:
                self._blocks[file] = mr.file_blocks(self._files[file], file, info)
            return self._blocks[file], self._files[file][info.labels_path]
        if file not in self._blocks:
            # resolved and checked once per opening of the file, not per chunk (0.4 ms each: 5 s over the dozen
            # passes of a streamed 2,000,000-row report)
            self._blocks[file] = lg.open_split(self._files[file], file, info)[:2]
        return self._blocks[file]

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index) -> torch.Tensor:
        if not isinstance(index, slice) or index.step not in (None, 1):
            raise TypeError("a streamed split can only be read in contiguous row slices")
        start, stop, _ = index.indices(self.shape[0])
        stop = max(start, stop)
        trim_heap()             # the previous chunk's temporaries are gone by now
        parts = []
        for file, info, first, last in self._segments:
            a, b = max(start, first), min(stop, last)
            if a >= b:
                continue
            sds, _ = self._datasets(file, info)
            if self._members:
                parts.append(mr.member_block(sds, info, self.member, a - first, b - first))
                continue
            block = np.empty((b - a, self.shape[1]), lg.out_dtype(sds.dtype))
            staging = np.empty((b - a, self.shape[1]), sds.dtype) if sds.dtype.itemsize < 4 else None
            lg.read_rows(sds, block, a - first, b - first, 0, staging, file)
            check = checks.ScoreCheck(file, sds.name, info.kind, sds.dtype)
            check.update(block, a - first)
            check.raise_if_bad(b - a, f" (rows {a - first}-{b - first - 1})")
            parts.append(block)
        block = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else \
            np.empty((0, self.shape[1]), np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            t = torch.from_numpy(block)
        if self.kind == "probs":
            t = torch.log(t.to(torch.float64))
        return t.to(self.device)

    def chunks(self, rows: Optional[int] = None) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
        """(first row, scores, labels) for consecutive chunks of ``rows`` rows."""
        rows = rows or self.chunk_rows
        for start in range(0, self.shape[0], rows):
            stop = min(self.shape[0], start + rows)
            yield start, self[start:stop], self.labels[start:stop]

    def close(self) -> None:
        """Close the HDF5 files opened for reading; a later read opens them again."""
        for f in self._files.values():
            f.close()
        self._files.clear()
        self._blocks.clear()

    def __enter__(self) -> "StreamedSplit":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StreamedSplit({os.path.basename(self.run.file)}:{self.run.name}/{self.info.name}, {self.shape})"


def is_streamed(scores) -> bool:
    """True if ``scores`` is a :class:`StreamedSplit` (read from disk in chunks) rather than an in-memory tensor."""
    return isinstance(scores, StreamedSplit)


def is_sharded(scores) -> bool:
    """True if ``scores`` is a streamed split whose full passes run where its shards are: it has ``map_shards(fn,
    *args)`` (:class:`calibview.core.distributed.fit.ShardedSplit`), and a fit asks it for each shard's sums."""
    return is_streamed(scores) and getattr(scores, "map_shards", None) is not None


def tensor_chunks(scores: torch.Tensor, labels: torch.Tensor, rows: int
                  ) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """The in-memory counterpart of :meth:`StreamedSplit.chunks`."""
    for start in range(0, scores.shape[0], rows):
        yield start, scores[start:start + rows], labels[start:start + rows]


def subsample(scores, labels: torch.Tensor, m: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """About ``m`` rows for a warm start: 16 evenly spread contiguous blocks (cheap to read from disk, and spread
    over the whole split, so a file sorted by class still gives every part a say)."""
    n = scores.shape[0]
    if n <= m:
        return scores[0:n], labels
    pieces = 16
    size = m // pieces
    starts = np.linspace(0, n - size, pieces).astype(np.int64)
    z = torch.cat([scores[int(a):int(a) + size] for a in starts])
    y = torch.cat([labels[int(a):int(a) + size] for a in starts])
    return z, y


def require_in_memory(label: str, scores) -> None:
    """Refuse a calibrator that needs the whole fit split at once when that split is streamed."""
    if is_streamed(scores):
        raise ParameterError(
            f"{label} needs the whole fit split in memory, but {scores.info.name} ({scores.shape[0]:,} x "
            f"{scores.shape[1]:,}) takes {human(memory_bytes(scores.info))}, more than the memory allowed; fit it "
            f"on a smaller split, raise max_memory, or use temperature or vector scaling, which stream from disk.", "max_memory")
