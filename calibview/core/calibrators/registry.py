"""The calibrators by name: every family registered, and the functions that look them up, configure, fit and
load them.

Importing this module registers, in the order users see them: the identity and temperature scaling (``none``,
``ts``, ``ts-grid``), histogram binning and isotonic regression (``hb``, ``ir``), Platt and beta calibration
(``platt``, ``beta``), the MRR baseline (``mrr``) and the scaling family (``vs``, ``ms``, ``dirichlet``). A new
family is a module that imports only :mod:`~calibview.core.calibrators.base` (and
:mod:`~calibview.core.calibrators.temperature`), and one more line here.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Mapping, Optional

import torch

from calibview.core.calibrators import base
from calibview.core.calibrators.base import FORMAT_VERSION, Fitted, Method, register  # noqa: F401  (re-exported)
from calibview.core.calibrators.binning import MRR, HistogramBinning, Isotonic
from calibview.core.calibrators.logistic import Beta, Platt
from calibview.core.calibrators.scaling import Dirichlet, MatrixScaling, VectorScaling
from calibview.core.calibrators.temperature import Identity, Temperature, TemperatureGrid
from calibview.core.calibrators.temperature import fit_temperature  # noqa: F401  (re-exported)
from calibview.core.errors import CalibviewError
from calibview.core.io import stream

for _method in (Identity(), Temperature(), TemperatureGrid(), HistogramBinning(), Isotonic(), Platt(), Beta(),
                MRR(), VectorScaling(), MatrixScaling(), Dirichlet()):
    register(_method)
del _method


def available() -> tuple[str, ...]:
    """Every calibrator's name, in the order users see them (``("none", "ts", "ts-grid", "hb", ...)``)."""
    return base.registered_names()


def get(name: str) -> Method:
    """The registered method called ``name``; an unknown name is a user error that lists the known ones."""
    return base.registered(name)


def option_types(method: str) -> dict[str, str]:
    """The constructor options of ``method`` (a name), each with its type as its signature spells it:
    ``{"bins": "int", "strategy": "str"}`` for hb, ``{}`` for a method without options."""
    return base.options_of(get(method))


def configured(method: str, options: Mapping[str, Any] | None = None) -> Method:
    """The registered method, or a new instance of its class built with ``options`` (constructor keywords, e.g.
    ``{"bins": 20}`` for hb, ``{"penalty": "l2", "lam": 0.1}`` for ms); an unknown key or a value of the wrong
    type is a user error whose message lists the valid keys and their types."""
    return base.with_options(get(method), options)


def fit(method: str, scores: torch.Tensor, labels: torch.Tensor, *, fit_info: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None, progress=None, cancel: Optional[threading.Event] = None
        ) -> Fitted:
    """Fit ``method`` (configured with ``options``) on the fit split: ``scores`` (N, K) logits or
    log-probabilities (a tensor, or a streamed split for the methods that stream), ``labels`` (N,) int64.
    ``fit_info`` (file, run, split, n) is stored with the result."""
    m = configured(method, options)
    k = int(scores.shape[1])
    if m.binary_only and k != 2:
        raise CalibviewError(f"{m.label} is for binary problems (K = 2), but this run has K = {k} classes; "
                             "use temperature or vector scaling instead.")
    if not m.streams:
        stream.require_in_memory(m.label, scores)
    params, warnings = m.fit(scores, labels, progress=progress, cancel=cancel)
    return Fitted(method=method, k=k, params=params, warnings=tuple(warnings), fit_info=dict(fit_info or {}))


def from_json(obj: Mapping[str, Any] | str) -> Fitted:
    """Load a calibrator written by :meth:`Fitted.to_json` (a dict, or its JSON text)."""
    if isinstance(obj, str):
        obj = json.loads(obj)
    if not isinstance(obj, Mapping) or "method" not in obj or "k" not in obj:
        raise CalibviewError("This JSON is not a calibview calibrator (it has no 'method' and 'k').")
    get(obj["method"])
    return Fitted(method=obj["method"], k=int(obj["k"]), params=dict(obj.get("params", {})),
                  warnings=tuple(obj.get("warnings", ())), fit_info=dict(obj.get("fit", {})))
