"""The evaluation core: numpy / scipy / torch / h5py only, never Qt (see tests/core/test_layering.py)."""

from .stream import tune_allocator

tune_allocator()       # glibc keeps freed chunk temporaries for reuse (see stream.tune_allocator)
