"""What an evaluation is asked and what it returns: :class:`EvalRequest` in, immutable :class:`Evaluation` out.

``evaluate(request, *, progress, cancel)`` runs one request through a fresh :class:`calibview.core.evaluation.engine.Engine`
(no cache kept); the window and the CLI keep an engine of their own so that what did not change is not computed
again. Progress goes to ``progress(fraction, message)``, ``cancel`` is checked between chunks of work, and CUDA is
used when available (``device="auto"``) with the same float64 accumulation as on the CPU.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from calibview.core import calibrators as calib
from calibview.core.io import logits as lg
from calibview.core.stats import smoothing
from calibview.core.errors import CalibviewError
from calibview.core.stats.metrics import BinTable, resolve_bins

KERNELS = ("gaussian", "epanechnikov")


@dataclass(frozen=True)
class EvalRequest:
    """What to evaluate. ``fit_split`` may be None when only ``none`` is requested."""

    file: str
    run: str
    eval_split: str = "test"
    fit_split: Optional[str] = "val"
    calibrators: tuple[str, ...] = ("none", "ts")
    bins: Union[int, str] = 15
    n_boot: int = 1000
    seed: int = 0
    level: float = 0.95
    bandwidth: float = 0.05
    kernel: str = "gaussian"
    device: str = "auto"
    chunk_rows: Optional[int] = None
    #: bytes a split may take in memory (None: stream.DEFAULT_MAX_MEMORY); larger splits are streamed from disk
    max_memory: Optional[int] = None
    #: per-calibrator constructor options, e.g. (("hb", (("bins", 20),)),): nested tuples keep the request
    #: hashable and immutable; see calibrators.configured
    options: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()

    def options_for(self, name: str) -> dict:
        return {k: v for n, opts in self.options if n == name for k, v in opts}


@dataclass(frozen=True)
class Estimate:
    value: float
    lo: float
    hi: float


@dataclass(frozen=True)
class CalibratorResult:
    """Everything shown for one calibrator on the evaluation split (arrays are read-only)."""

    name: str
    label: str
    fitted: calib.Fitted
    metrics: Mapping[str, Estimate]
    bins: BinTable                      # equal-width reliability bins of the evaluation split
    bin_acc_lo: np.ndarray              # Wilson 95 % interval of each bin's accuracy
    bin_acc_hi: np.ndarray
    stats: smoothing.BinnedStats        # sufficient statistics for the calibration-sharpness diagram
    per_class_ece: np.ndarray           # (K,)
    per_class_accuracy: np.ndarray      # (K,) accuracy on the samples of each true class
    per_class_count: np.ndarray         # (K,)
    smece_sigma: float
    argmax_changed: float               # fraction of evaluation samples whose arg-max the calibrator moved
    warnings: tuple[str, ...] = ()

    def curve(self, bandwidth: float, kernel: str = "gaussian") -> smoothing.SharpnessCurve:
        """The calibration-sharpness curve at any bandwidth: O(grid), never touches the samples again."""
        return smoothing.sharpness_curve(self.stats, bandwidth, kernel)



@dataclass(frozen=True)
class Evaluation:
    request: EvalRequest
    run: lg.RunInfo
    n_eval: int
    n_fit: int
    k: int
    n_bins: int
    device: str
    results: tuple[CalibratorResult, ...]
    elapsed_s: float
    timings: Mapping[str, float] = field(default_factory=dict)
    #: what this request recomputed (calibview.core.evaluation.engine.Counters); None outside the engine
    counters: Any = None
    #: True for a progressive partial result: point estimates and curves, intervals not yet computed (NaN)
    pending: bool = False

    def result(self, name: str) -> CalibratorResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA when torch sees a GPU, else the CPU; ``cuda`` without a GPU is a user error."""
    device = (device or "auto").lower()
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise CalibviewError("--device cuda was requested but torch sees no CUDA GPU on this machine; "
                             "use --device cpu or auto.")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise CalibviewError(f"Unknown device {device!r}; use cpu, cuda or auto.")
    return torch.device(device)


def check_request(req: EvalRequest) -> None:
    """Refuse a request that cannot succeed, before any work (every setting, option and name is checked)."""
    if req.kernel not in KERNELS:
        raise CalibviewError(f"Unknown kernel {req.kernel!r}; use gaussian or epanechnikov.")
    if not (isinstance(req.bandwidth, (int, float)) and req.bandwidth > 0 and np.isfinite(req.bandwidth)):
        raise CalibviewError(f"The bandwidth must be a positive number, not {req.bandwidth!r}.")
    smoothing.check_curve_bandwidth(req.bandwidth)
    if not 0 < req.level < 1:
        hint = f" (for {req.level:g} %, give {req.level / 100:g})" if 1 < req.level < 100 else ""
        raise CalibviewError(f"The interval level must lie in (0, 1), not {req.level!r}{hint}.")
    if req.max_memory is not None and not req.max_memory > 0:
        raise CalibviewError(f"The memory allowed for a split must be positive, not {req.max_memory!r}.")
    if req.n_boot < 0:
        raise CalibviewError("The number of bootstrap resamples must be 0 or more.")
    if req.seed < 0:
        raise CalibviewError(f"The bootstrap seed must be 0 or more, not {req.seed}.")
    try:
        resolve_bins(req.bins, 1)
    except ValueError as e:
        raise CalibviewError(f"{e}.") from None
    if not req.calibrators:
        raise CalibviewError("No calibrators were requested; give at least 'none'.")
    for name in req.calibrators:
        calib.configured(name, req.options_for(name))        # unknown names and bad options fail early
    if any(c != "none" for c in req.calibrators) and not req.fit_split:
        raise CalibviewError("Calibrators other than 'none' need a fit split (--fit-split).")


def evaluate(req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
             on_partial=None) -> Evaluation:
    """Fit every requested calibrator on the fit split and score it on the evaluation split, with no cache kept.

    A split that would take more than ``req.max_memory`` bytes in memory is streamed from disk instead of loaded
    (see :mod:`calibview.core.io.stream`); the numbers are the same either way."""
    from calibview.core.evaluation.engine import Engine          # the engine builds on this module's types

    return Engine().evaluate(req, progress=progress, cancel=cancel, on_partial=on_partial)


def default_splits(run: lg.RunInfo, eval_split: Optional[str] = None) -> tuple[Optional[str], str]:
    """(fit split, evaluation split) when the user names none: evaluate on "test" (else the last split), fit on
    "val" (else the first other split, else None: nothing to fit on)."""
    names = [s.name for s in run.splits]
    eval_split = eval_split or ("test" if "test" in names else names[-1])
    others = [n for n in names if n != eval_split]
    return ("val" if "val" in others else (others[0] if others else None)), eval_split


def scores_tensor(data: lg.SplitData, device: torch.device | str = "cpu") -> torch.Tensor:
    """Logits as stored; probabilities become log-probabilities (log 0 = -inf), so calibrators see one kind."""
    with warnings.catch_warnings():
        # The arrays are read-only on purpose; torch warns about that, but nothing here writes to them.
        warnings.simplefilter("ignore", UserWarning)
        t = torch.from_numpy(np.asarray(data.scores))
    if data.kind == "probs":
        t = torch.log(t.to(torch.float64))
    return t.to(device)


def quick_request(file: str, run: str, calibrators: Sequence[str] = ("none", "ts"), **kw) -> EvalRequest:
    return EvalRequest(file=str(file), run=run, calibrators=tuple(calibrators), **kw)
