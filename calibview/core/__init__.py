"""The evaluation core: numpy / scipy / torch / h5py only, never Qt (see tests/core/test_layering.py)."""
