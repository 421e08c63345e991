"""What an evaluation is asked: :class:`EvalRequest` and its validation (:func:`check_request`), the settings of
an ablation (:class:`Setting`) and the default splits of a run. Importing it loads no torch (the device and the
scores as tensors live in :mod:`calibview.core.evaluation.tensors`).

The engine (:mod:`calibview.core.evaluation.engine`) turns a request into the immutable results of
:mod:`calibview.core.evaluation.results`; ``engine.evaluate(request)`` runs one request through a fresh engine.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import numpy as np

from calibview.core import calibrators as calib
from calibview.core.evaluation import defaults
from calibview.core.io import schema
from calibview.core.errors import CalibviewError, ParameterError

KERNELS = ("gaussian", "epanechnikov")
#: how resamples are drawn (calibview.core.stats.resampling says why there are two)
BOOTSTRAPS = ("multinomial", "poisson")


@dataclass(frozen=True)
class EvalRequest:
    """What to evaluate. ``fit_split`` may be None when only ``none`` is requested."""

    file: str
    run: str
    eval_split: str = defaults.EVAL_SPLIT
    fit_split: Optional[str] = defaults.FIT_SPLIT
    calibrators: tuple[str, ...] = defaults.CALIBRATORS
    bins: Union[int, str] = defaults.BINS
    n_boot: int = defaults.N_BOOT
    seed: int = defaults.SEED
    level: float = defaults.LEVEL
    interval: str = defaults.INTERVAL
    bandwidth: float = defaults.BANDWIDTH
    kernel: str = defaults.KERNEL
    device: str = defaults.DEVICE
    chunk_rows: Optional[int] = None
    #: bytes a split may take in memory (None: memory.DEFAULT_MAX_MEMORY); larger splits are streamed from disk
    max_memory: Optional[int] = None
    #: per-calibrator constructor options, e.g. (("hb", (("bins", 20),)),): nested tuples keep the request
    #: hashable and immutable; see calibrators.configured
    options: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    #: of a run with members (calibview.core.io.members): None for their ensemble (the run's prediction), "0" ..
    #: "M-1" for one member, "deterministic" for the split's own scores beside the members; fit and eval alike
    member: Optional[str] = None
    #: "multinomial" (N draws with replacement) or "poisson" (a Poisson(1) weight per unit, drawn per shard and
    #: row block: what an engine scoring shards apart can draw, calibview.core.stats.resampling)
    bootstrap: str = "multinomial"

    def options_for(self, name: str) -> dict:
        """The constructor options given for calibrator ``name`` (empty when none were)."""
        return {k: v for n, opts in self.options if n == name for k, v in opts}


@dataclass(frozen=True)
class Setting:
    """One (bins, bandwidth, kernel) of an ablation; ``bins`` may be "auto"."""

    bins: int | str
    bandwidth: float
    kernel: str


def settings_of(req: EvalRequest, bins: Sequence = (), bandwidths: Sequence = (), kernels: Sequence = ()
                ) -> list[Setting]:
    """Every combination of the given lists (each defaulting to the request's single value), bins outermost."""
    return [Setting(b, float(h), k) for b, h, k in itertools.product(bins or [req.bins], bandwidths or
                                                                     [req.bandwidth], kernels or [req.kernel])]


def check_request(req: EvalRequest) -> None:
    """Refuse a request that cannot succeed, before any work (every setting, option and name is checked)."""
    # Imported here, not at the top, so that the request types cost no torch (the window and the command line
    # build requests before anything is computed).
    from calibview.core.stats import smoothing
    from calibview.core.stats.metrics import resolve_bins

    if req.kernel not in KERNELS:
        raise CalibviewError(f"Unknown kernel {req.kernel!r}; use gaussian or epanechnikov.")
    if not (isinstance(req.bandwidth, (int, float)) and req.bandwidth > 0 and np.isfinite(req.bandwidth)):
        raise CalibviewError(f"The bandwidth must be a positive number, not {req.bandwidth!r}.")
    smoothing.check_curve_bandwidth(req.bandwidth)
    if not 0 < req.level < 1:
        hint = f" (for {req.level:g} %, give {req.level / 100:g})" if 1 < req.level < 100 else ""
        raise CalibviewError(f"The interval level must lie in (0, 1), not {req.level!r}{hint}.")
    if req.interval not in defaults.INTERVALS:
        raise CalibviewError(f"Unknown interval method {req.interval!r}; choose from {', '.join(defaults.INTERVALS)}.")
    if req.bootstrap not in BOOTSTRAPS:
        raise ParameterError(f"Unknown bootstrap {req.bootstrap!r}; choose multinomial or poisson.", "bootstrap")
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
        raise ParameterError("Calibrators other than 'none' need a fit split (fit_split).", "fit_split")


def default_bootstrap(engine: str = "local") -> str:
    """The resampling scheme when none is named: poisson on the Dask engine (the only one it can draw shard by
    shard), multinomial on the local engine."""
    return "poisson" if engine == "dask" else "multinomial"


def default_splits(run: schema.RunInfo, eval_split: Optional[str] = None) -> tuple[Optional[str], str]:
    """(fit split, evaluation split) when the user names none: evaluate on "test" (else the last split), fit on
    "val" (else the first other split, else None: nothing to fit on)."""
    names = [s.name for s in run.splits]
    eval_split = eval_split or ("test" if "test" in names else names[-1])
    others = [n for n in names if n != eval_split]
    return ("val" if "val" in others else (others[0] if others else None)), eval_split


def quick_request(file: str, run: str, calibrators: Sequence[str] = ("none", "ts"), **kw) -> EvalRequest:
    """A request for ``run`` of ``file`` with the given calibrators; every other field from ``kw`` or its
    default."""
    return EvalRequest(file=str(file), run=run, calibrators=tuple(calibrators), **kw)
