"""The read budget: what reading a dataset costs, estimated from its layout before anything is read.

HDF5 keeps bookkeeping for every chunk a single read touches (a chunk record and two dataspaces, about 4 kB per
chunk, measured with HDF5 2.0: reading a (200, 1,000) dataset stored in 1 x 1 chunks at once took 760 MB), so a
small file stored in tiny chunks can exhaust memory. calibview reads every dataset in blocks of at most
:data:`MAX_CHUNKS_PER_READ` chunks (:mod:`calibview.core.io.limits.blocks`), which bounds that part of the peak,
and still refuses a layout whose reading costs more than the budget in all: the chunk count times the per-chunk
overhead (the work each chunk costs in lookups), the filter pipeline's buffers when compressed, plus the bytes kept
in memory at once (a label vector, a metadata column). The budget is ``--max-memory`` (default 2 GiB), never less
than :data:`MIN_BUDGET`; ``--allow-large-read`` (or ``--allow-sparse``) lifts it.
"""

from __future__ import annotations

import math

import h5py

from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io.memory import DEFAULT_MAX_MEMORY, human

#: HDF5's bookkeeping per chunk touched by a read (measured: ~3.8 kB with HDF5 2.0, h5py 3.16)
PER_CHUNK_BYTES = 4 << 10
#: one read touches at most this many chunks (reads of ~1,000 chunks were also the fastest per chunk)
MAX_CHUNKS_PER_READ = 1024
#: a small --max-memory streams a split; it does not make every ordinary file unreadable
MIN_BUDGET = 256 << 20
#: bytes per value of a column kept in memory: strings become Python objects (pointer, header, text)
STRING_VALUE_BYTES = 64


def read_budget() -> int:
    """Bytes a read may cost (see the module docstring): ``--max-memory`` or the default, at least MIN_BUDGET."""
    return max(guard.policy().max_memory or DEFAULT_MAX_MEMORY, MIN_BUDGET)


def chunk_count(ds: h5py.Dataset) -> int:
    """The number of chunks the dataset's shape declares (0 for a contiguous or compact dataset)."""
    if ds.chunks is None:
        return 0
    return math.prod(-(-int(s) // int(c)) for s, c in zip(ds.shape, ds.chunks))


def value_bytes(ds: h5py.Dataset) -> int:
    """Bytes one value of ``ds`` takes once read into memory (strings and other variable-length values as objects)."""
    if ds.dtype.kind == "O" or h5py.check_string_dtype(ds.dtype) is not None:
        return STRING_VALUE_BYTES
    return max(8, ds.dtype.itemsize)


def estimate(ds: h5py.Dataset, kept: int = 0) -> tuple[int, int]:
    """(estimated bytes, chunk count) of reading ``ds`` whole: chunks times the per-chunk overhead, plus for a
    filtered (compressed) dataset the buffer a chunk is decompressed into (one at a time), plus ``kept`` bytes
    held in memory at once."""
    chunks = chunk_count(ds)
    pipeline = 0
    if chunks and ds.id.get_create_plist().get_nfilters() > 0:
        pipeline = 2 * math.prod(int(c) for c in ds.chunks) * ds.dtype.itemsize     # compressed and inflated
    return chunks * PER_CHUNK_BYTES + pipeline + int(kept), chunks


def check_read_cost(ds: h5py.Dataset, file: str, kept: int = 0) -> None:
    """Refuse, with one sentence naming the dataset and the estimate, a read that costs more than the budget.

    ``kept``: the bytes the reader holds in memory at once (0 for scores read block by block)."""
    policy = guard.policy()
    if policy.allow_sparse or policy.allow_large_read:
        return
    try:
        cost, chunks = estimate(ds, kept)
    except (OSError, RuntimeError, ValueError) as e:
        raise CalibviewError(f"{file}: the layout of {ds.name} could not be read "
                             f"({' '.join(str(e).split()).rstrip('.')}); the file may be corrupt.") from None
    budget = read_budget()
    if cost <= budget:
        return
    if chunks * PER_CHUNK_BYTES > kept:
        shape = " x ".join(str(int(c)) for c in ds.chunks)
        why = f"{chunks:,} HDF5 chunks of {shape} values, about {human(PER_CHUNK_BYTES)} of bookkeeping each"
        fix = "rewrite it with larger chunks (h5repack -l CHUNK=...) or pass --allow-large-read"
    else:
        why = f"{human(kept)} kept in memory for {int(ds.shape[0]):,} values"
        fix = "store less, or raise --max-memory, or pass --allow-large-read"
    raise CalibviewError(f"{file}: reading {ds.name} would cost about {human(cost)} ({why}), over the "
                         f"{human(budget)} read budget (--max-memory), so it is refused; {fix}.")
