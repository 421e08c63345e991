"""The evaluation core, in layers that import only downward: ``release`` > ``reports`` > ``evaluation`` >
``calibrators`` > ``io`` | ``stats`` > ``errors`` (docs/ARCHITECTURE.md draws them).

numpy / scipy / torch / h5py only, never Qt (import-linter contracts in pyproject.toml, checked with
tests/test_architecture.py, which also runs the core tests with Qt unimportable).

Importing it changes nothing process-wide: programs that evaluate call
:func:`calibview.core.io.heap.tune_allocator` at start-up themselves (the CLI, the window, the benchmarks)."""
