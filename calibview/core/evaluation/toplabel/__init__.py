"""Evaluating top-label runs (confidence, predictions, labels; :mod:`calibview.core.io.toplabel`).

Here: :mod:`~calibview.core.evaluation.toplabel.absent` (the metrics such a run cannot have and the calibrators
it cannot take; no torch), :mod:`~calibview.core.evaluation.toplabel.slicing` (its slices by class, never by
epistemic uncertainty) and :mod:`~calibview.core.evaluation.toplabel.stages` (its fit and score stages: the
per-sample vectors the engine's later stages read, from the three stored vectors instead of an (N, K) matrix).
"""
