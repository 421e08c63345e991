"""Regression runs in the HDF5 format (docs/FORMAT.md, "Regression runs"): a split holding ``mean`` and
``targets`` plus exactly one predictive form, ``var``, ``quantiles`` (with the ``levels`` attribute) or
``samples``. Here: their records (:mod:`.schema`), discovery (:mod:`.discovery`), validation (:mod:`.checks`),
reading (:mod:`.read`), writing (:mod:`.write`) and importing from .npz (:mod:`.importer`); numpy and h5py
only, never torch."""
