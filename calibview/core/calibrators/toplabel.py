"""Top-label calibration (Gupta & Ramdas 2022): a calibrator of a top-label run maps the confidence c of the
predicted class to the probability that the prediction is correct, fitted on the binary problem
(c, 1[prediction = label]) of the fit split; the prediction itself never changes.

The binary problem is handed to the registered binary methods as two-class log-probabilities
``[log(1 - c), log c]`` with label 1 for a correct prediction (:func:`binary_scores`), so ``platt`` and ``beta``
are the ordinary binary fits, and ``hb`` and ``ir`` use their class-1 map alone (histogram binning or isotonic
regression of correctness on c, :func:`calibrated_confidence`), not the renormalised pair. Calibrators that
need logits or the class probabilities (temperature, vector, matrix and Dirichlet scaling, MRR) cannot run on
such a run: :data:`DISABLED` says why.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import torch

from calibview.core.calibrators import binning
from calibview.core.calibrators.base import Fitted

#: the calibrators a top-label run takes, in the registry's order
USABLE = ("none", "hb", "ir", "platt", "beta")
#: why each of the other calibrators cannot run on a top-label run
REASON = "it needs logits or the probabilities of every class, and a top-label run stores only the confidence of " \
         "the predicted class"
DISABLED = {name: REASON for name in ("ts", "ts-grid", "mrr", "vs", "ms", "dirichlet")}
#: what the JSON form of a top-label calibrator records about its input (``fit_info["form"]``)
FORM = "top-label"


def disabled_reason(name: str) -> str:
    """Why calibrator ``name`` cannot run on a top-label run ("" when it can)."""
    return "" if name in USABLE else DISABLED.get(name, REASON)


def binary_scores(confidence: torch.Tensor) -> torch.Tensor:
    """(N, 2) float64 log-probabilities ``[log(1 - c), log c]`` of (N,) confidences in [0, 1]: the input of the
    binary fits (log 0 is -inf, as the binary methods expect for an exact zero)."""
    c = confidence.to(torch.float64)
    return torch.stack([torch.log1p(-c), torch.log(c)], dim=1)


def correctness(predictions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(N,) int64 label of the binary problem: 1 where the prediction is the label."""
    return (predictions == labels).to(torch.int64)


def calibrated_confidence(fitted: Fitted, confidence: torch.Tensor) -> torch.Tensor:
    """(N,) float64 calibrated confidence of (N,) confidences for a calibrator fitted on :func:`binary_scores`:
    unchanged for ``none``, the class-1 map for ``hb`` / ``ir``, the binary probability of class 1 otherwise."""
    if fitted.method == "none":
        return confidence.to(torch.float64)
    scores = binary_scores(confidence)
    if fitted.method in ("hb", "ir"):
        return binning.one_vs_rest(fitted, scores)[:, 1].contiguous()
    return fitted.apply(scores)[:, 1].exp()


#: histogram binning's warning on the two columns of the binary problem (binning.HistogramBinning.fit)
_EMPTY_BINS = re.compile(r"^\d+ of the \d+ class bins are empty in the fit split")


def top_label_warnings(fitted: Fitted, confidence: np.ndarray) -> Fitted:
    """``fitted`` with its warnings said of the confidence: histogram binning counts its empty bins over both
    columns of the binary problem (1 - c and c), but only the map of c is used, so the warning counts the empty
    bins of c's edges among ``confidence`` (N,) of the fit split instead."""
    if fitted.method != "hb" or not any(_EMPTY_BINS.match(w) for w in fitted.warnings):
        return fitted
    edges = np.asarray(fitted.params["edges"], np.float64)
    edges = edges[1] if edges.ndim == 2 else edges
    b = edges.shape[0] - 1
    # the bins as binning searches them (lo < c <= hi, the outer edges open)
    bins = np.clip(np.searchsorted(edges[1:-1], np.asarray(confidence, np.float64), side="left"), 0, b - 1)
    empty = int((np.bincount(bins, minlength=b) == 0).sum())
    said = f"{empty} of the {b} confidence bins are empty in the fit split; they map to their bin centre."
    warnings = [w for w in fitted.warnings if not _EMPTY_BINS.match(w)]
    return replace(fitted, warnings=tuple(([said] if empty else []) + warnings))
