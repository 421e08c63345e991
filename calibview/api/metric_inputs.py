"""Arrays as the metric functions and the calibrators take them: numpy or torch, checked with the rules of the
logits format (calibview.core.io.checks), each failure one sentence (:class:`~calibview.core.errors.CalibviewError`).

Scores become what the engine reads from a file, so the numbers are the command line's: logits as they are
(float16 widened to float32, as the reader does), probabilities as float64 log-probabilities (log 0 = -inf,
:func:`calibview.core.evaluation.tensors.scores_tensor`). A binary problem may be given as (N,) arrays: the
probability of class 1, or the logit of class 1 against class 0, which become the two columns (1 - p, p) and
(0, z)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from calibview.core.errors import CalibviewError

#: what a score array may be
ArrayLike = Any


def _tensor(x: ArrayLike, name: str) -> torch.Tensor:
    """A torch view of ``x`` (numpy, torch, or a nested list), never a copy of a numpy array in native order."""
    if isinstance(x, torch.Tensor):
        return x.detach()
    try:
        a = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise CalibviewError(f"{name} is not an array of numbers ({e}).") from None
    if a.dtype.kind in "SUO":
        raise CalibviewError(f"{name} holds {'strings' if a.dtype.kind in 'SU' else 'objects'} (dtype {a.dtype}); "
                             f"give a numeric numpy array or torch tensor.")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    with warnings.catch_warnings():
        # read-only arrays (memory maps, h5py reads) are only read here; torch warns about them all the same
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(a)


def _float_scores(t: torch.Tensor, name: str) -> torch.Tensor:
    if not t.is_floating_point():
        raise CalibviewError(f"{name} has dtype {str(t.dtype).replace('torch.', '')} but must be floating point "
                             f"(float16, float32 or float64).")
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.float()                    # as the file reader widens half precision
    return t


def labels_tensor(labels: ArrayLike, n: int, k: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """(N,) int64 class indices on ``device``: integers (or booleans for K = 2) in [0, k), one per score row."""
    if labels is None:
        raise CalibviewError("labels are missing; give the (N,) integer class index of each sample.")
    t = _tensor(labels, "labels")
    if t.ndim != 1:
        raise CalibviewError(f"labels has shape {tuple(t.shape)} but must be 1-D (N,) class indices.")
    if t.dtype == torch.bool and k == 2:
        t = t.long()
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise CalibviewError(f"labels has dtype {str(t.dtype).replace('torch.', '')} but must be integer class "
                             f"indices 0..K-1 (convert them with .astype(int) or .long()).")
    if t.shape[0] != n:
        raise CalibviewError(f"labels has {t.shape[0]} entries but the scores have {n} rows; give one label per "
                             f"row.")
    t = t.to(device=device, dtype=torch.int64)
    bad = (t < 0) | (t >= k)
    count = int(bad.sum())
    if count:
        first = int(torch.argmax(bad.to(torch.uint8)))
        raise CalibviewError(f"{count} of {n} labels are outside [0, {k}) (for example {int(t[first])} at row "
                             f"{first}); labels must be class indices 0..K-1.")
    return t


def _check_shape(t: torch.Tensor, name: str) -> None:
    if t.ndim not in (1, 2):
        raise CalibviewError(f"{name} has shape {tuple(t.shape)} but must be (N, K), or (N,) for the class 1 of a "
                             f"binary problem.")
    if t.shape[0] == 0:
        raise CalibviewError(f"{name} is empty (N = 0); give at least one sample.")
    if t.ndim == 2 and t.shape[1] < 2:
        raise CalibviewError(f"{name} has K = {t.shape[1]} column but a classifier needs at least 2; give the "
                             f"(N,) score of class 1 for a binary problem.")


def _first_bad(rows: torch.Tensor) -> tuple[int, int]:
    """(count, first row) of the True entries of a (N,) mask."""
    count = int(rows.sum())
    return count, (int(torch.argmax(rows.to(torch.uint8))) if count else -1)


def logit_scores(logits: ArrayLike, name: str = "logits") -> torch.Tensor:
    """(N, K) logits as a tensor on their own device, in their own float dtype (half precision as float32): NaN and
    +inf are refused, and so is a row without a finite entry; -inf is accepted (the log-probability of an exact
    zero). (N,) binary logits z become the columns (0, z)."""
    t = _float_scores(_tensor(logits, name), name)
    _check_shape(t, name)
    if t.ndim == 1:
        t = torch.stack([torch.zeros_like(t), t], dim=1)
    bad = torch.isnan(t).any(dim=1) | torch.isposinf(t).any(dim=1) | ~torch.isfinite(t.amax(dim=1))
    count, first = _first_bad(bad)
    if count:
        raise CalibviewError(f"{count} of {t.shape[0]} rows of {name} contain NaN or +inf or no finite entry "
                             f"(first at row {first}); fix or drop those rows.")
    return t


def _prob_tolerance(dtype: torch.dtype) -> float:
    """Row sums of probabilities must be within this of 1: 1e-6 for float64, 1e-3 narrower (as files)."""
    return 1e-6 if dtype == torch.float64 else 1e-3


def prob_scores(probs: ArrayLike, name: str = "probs") -> torch.Tensor:
    """(N, K) float64 log-probabilities of (N, K) probabilities (non-negative, finite, each row summing to 1
    within 1e-6 for float64 and 1e-3 for narrower dtypes) or of (N,) probabilities of class 1 in [0, 1]."""
    t = _float_scores(_tensor(probs, name), name)
    _check_shape(t, name)
    n = t.shape[0]
    count, first = _first_bad(~torch.isfinite(t) if t.ndim == 1 else ~torch.isfinite(t).all(dim=1))
    if count:
        raise CalibviewError(f"{count} of {n} rows of {name} contain NaN or Inf (first at row {first}); fix or drop "
                             f"those rows.")
    if t.ndim == 1:
        count, first = _first_bad((t < 0) | (t > 1))
        if count:
            raise CalibviewError(f"{count} of {n} probabilities in {name} lie outside [0, 1] (first at row {first}: "
                                 f"{float(t[first]):.6g}); give the probability of class 1, or logits=.")
        p1 = t.to(torch.float64)
        return torch.log(torch.stack([1.0 - p1, p1], dim=1))
    count, first = _first_bad((t < 0).any(dim=1))
    if count:
        raise CalibviewError(f"{count} of {n} rows of {name} contain negative probabilities (first at row "
                             f"{first}).")
    tol = _prob_tolerance(t.dtype)
    sums = t.sum(dim=1, dtype=torch.float64)
    count, first = _first_bad(~((sums - 1.0).abs() <= tol))
    if count:
        raise CalibviewError(f"{count} of {n} rows of {name} do not sum to 1 within {tol:g} (first at row {first}, "
                             f"sum {float(sums[first]):.6g}); give normalised probabilities, or logits=.")
    return torch.log(t.to(torch.float64))


def scores_of(probs: ArrayLike = None, logits: ArrayLike = None) -> torch.Tensor:
    """The (N, K) scores the engine would read for exactly one of ``probs`` (float64 log-probabilities) and
    ``logits`` (as they are)."""
    if probs is not None and logits is not None:
        raise CalibviewError("Give probs or logits=, not both.")
    if probs is None and logits is None:
        raise CalibviewError("Give the probabilities (probs) or the logits (logits=) of the samples.")
    return prob_scores(probs) if probs is not None else logit_scores(logits)


def like_input(x: np.ndarray, reference: ArrayLike, device: torch.device | None = None):
    """``x`` (numpy) as a torch tensor on ``device`` when ``reference`` is a tensor, else as it is."""
    if isinstance(reference, torch.Tensor):
        return torch.from_numpy(x).to(device if device is not None else reference.device)
    return x
