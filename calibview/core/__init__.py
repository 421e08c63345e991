"""The evaluation core: numpy / scipy / torch / h5py only, never Qt (see tests/core/test_evaluate.py).

Importing it changes nothing process-wide: programs that evaluate call :func:`calibview.core.stream.tune_allocator`
at start-up themselves (the CLI, the window, the benchmarks)."""
