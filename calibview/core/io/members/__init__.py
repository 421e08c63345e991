"""Members: the (M, N, K) logits of M ensemble members or M stochastic (MC-dropout) passes stored as one
``/<model>/<dataset>/<split>/members`` dataset (docs/FORMAT.md).

Here: :mod:`~calibview.core.io.members.format` (the names, the validation of a stored members dataset, the member
labels of a split) and :mod:`~calibview.core.io.members.read` (the readers: the ensemble's mean probabilities,
one member's logits, the per-sample entropy split), which read member by member in chunks of rows, so that memory
stays O(N x K) and never O(M x N x K).
"""
