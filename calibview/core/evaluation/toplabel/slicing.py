"""The slices of a top-label run (:mod:`calibview.core.evaluation.slices`): by the true label or by a metadata
column as for any run, never by the members' mutual information (it has no members). No torch."""

from __future__ import annotations

import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io.toplabel.format import is_toplabel


def check_by(run, split: str, by: str, epistemic: str) -> None:
    """CalibviewError when ``run`` (a RunInfo) is top-label and asked to be sliced by ``epistemic`` (which needs
    every member's probabilities) without a metadata column of that name on ``split``."""
    if by == epistemic and is_toplabel(run) and by not in run.split(split).meta:
        raise CalibviewError(f"Run {run.name} is a top-label run, so it cannot be sliced by {epistemic}: that needs "
                             f"the members' probabilities of every class, and a top-label run stores only the "
                             f"confidence of the predicted class.")


def class_codes(run, labels: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """(slice names, (N,) int64 slice of each sample) by the true label ``labels`` (N,) int64: one slice per
    class 0..K-1 (named by ``class_names`` when the run has them); for a top-label run that does not say K
    (``run.k`` 0), one per label present, in increasing order."""
    if run.k:
        return tuple(run.class_names or tuple(str(c) for c in range(run.k))), np.asarray(labels, dtype=np.int64)
    present, codes = np.unique(np.asarray(labels, dtype=np.int64), return_inverse=True)
    return tuple(str(c) for c in present.tolist()), codes.astype(np.int64).reshape(-1)
