"""Logits collected from a torch model into the HDF5 format: the forward passes (:mod:`.collector`, torch) and
the split written batch by batch and committed in one safe write (:mod:`.partial`, no torch)."""
