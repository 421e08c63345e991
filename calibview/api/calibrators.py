"""Post-hoc calibrators in the scikit-learn style, on arrays: ``calibrator("ts")`` or the classes
(:class:`TemperatureScaling`, :class:`HistogramBinning`, ...), each the registered method of
:mod:`calibview.core.calibrators` with its options (the registry's ``option_types``) as constructor keywords.

- ``fit(logits, labels)`` returns the calibrator; ``logits`` is (N, K) logits (or log-probabilities, e.g.
  ``np.log(probs)``), or (N,) logits of class 1 for a binary problem, numpy or torch, any float dtype and
  device (half precision is fitted as float32, as the file reader widens it); ``labels`` (N,) integers 0..K-1.
- ``predict_proba(logits)``: (N, K) float64 calibrated probabilities; ``predict_logits(logits)``: (N, K) float64
  calibrated log-probabilities. Numpy in, numpy out; a tensor in, a tensor on its device out.
- ``get_params()`` / ``set_params(**params)`` as in scikit-learn (``sklearn.base.clone`` works), without
  depending on it; after ``fit``, every fitted parameter is an attribute with a trailing underscore
  (``temperature_``, ``w_``, ``b_``, ...), with ``n_classes_``, ``classes_``, ``warnings_`` and ``fitted_`` (the core's
  :class:`~calibview.core.calibrators.base.Fitted`).
- ``to_json()`` / :func:`load_calibrator`: one record of a report's calibrators.json, so ``calibview apply
  calibrator.json FILE --run R --split S -o OUT`` applies a calibrator fitted in a notebook.

The fit is the engine's own (:func:`calibview.core.calibrators.registry.fit` on the scores as the engine reads
them), so a calibrator fitted here on a split's arrays equals the one ``calibview report`` fits on that split."""

from __future__ import annotations

import inspect
import json
import os
from typing import Any, ClassVar, Mapping, Optional

import numpy as np
import torch

from calibview.api.metric_inputs import ArrayLike, labels_tensor, logit_scores
from calibview.core.calibrators import registry
from calibview.core.calibrators.base import Fitted
from calibview.core.calibrators.file import SCHEMA, load_json
from calibview.core.errors import CalibviewError
from calibview.core.stats.metrics import chunk_rows


class Calibrator:
    """The scikit-learn-style protocol every calibrator class shares; ``method`` is its registry name."""

    method: ClassVar[str] = ""

    # --- parameters (scikit-learn semantics) ---------------------------------------------------------------

    @classmethod
    def _param_names(cls) -> list[str]:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters and their values (``deep`` is accepted for scikit-learn and ignored: no
        parameter is an estimator)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> "Calibrator":
        """Set constructor parameters (checked as the constructor checks them); returns the calibrator. A fitted
        calibrator keeps its fit until the next ``fit``."""
        names = self._param_names()
        for key in params:
            if key not in names:
                raise CalibviewError(f"Unknown parameter {key!r} for {type(self).__name__}; "
                                     f"{_valid(names)}.")
        _check_options(self.method, {**self.get_params(), **params})
        for key, value in params.items():
            setattr(self, key, value)
        return self

    def _options(self) -> dict[str, Any]:
        return self.get_params()

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in list(inspect.signature(type(self).__init__).parameters.values())[1:]}
        shown = [f"{k}={v!r}" for k, v in self.get_params().items() if not _same(v, defaults.get(k))]
        return f"{type(self).__name__}({', '.join(shown)})"

    # --- fit and apply -----------------------------------------------------------------------------------

    def fit(self, logits: ArrayLike, labels: ArrayLike) -> "Calibrator":
        """Fit on ``logits`` (N, K) (or (N,) binary logits) and ``labels`` (N,) integers 0..K-1; returns self."""
        options = self._options()
        _check_options(self.method, options)
        scores = logit_scores(logits)
        n, k = int(scores.shape[0]), int(scores.shape[1])
        y = labels_tensor(labels, n, k, scores.device)
        with torch.inference_mode():                # as the engine's fit stage
            fitted = registry.fit(self.method, scores, y, options=options,
                                  fit_info={"n": n, "options": dict(options)})
        self._set_fitted(fitted)
        return self

    def _set_fitted(self, fitted: Fitted) -> None:
        for name in getattr(self, "_fitted_names", ()):
            self.__dict__.pop(name, None)
        names = []
        for key, value in fitted.params.items():
            setattr(self, f"{key}_", np.asarray(value) if isinstance(value, (list, tuple)) else value)
            names.append(f"{key}_")
        self.fitted_, self.n_classes_ = fitted, fitted.k
        self.classes_ = np.arange(fitted.k)
        self.warnings_ = tuple(fitted.warnings)
        self._fitted_names = names + ["fitted_", "n_classes_", "classes_", "warnings_"]

    def _fitted(self) -> Fitted:
        fitted = getattr(self, "fitted_", None)
        if fitted is None:
            raise CalibviewError(f"This {type(self).__name__} is not fitted yet; call .fit(logits, labels) first.")
        return fitted

    def _top_label(self) -> bool:
        from calibview.core.calibrators.toplabel import FORM

        return (self._fitted().fit_info or {}).get("form") == FORM

    def _apply(self, logits: ArrayLike, proba: bool):
        fitted = self._fitted()
        if self._top_label():
            raise CalibviewError(f"This {type(self).__name__} was fitted on a top-label run (the predicted class's "
                                 f"confidence against whether the prediction is right); apply it with "
                                 f".predict_confidence(confidence), not to logits.")
        scores = logit_scores(logits)
        if scores.shape[1] != fitted.k:
            raise CalibviewError(f"This {type(self).__name__} was fitted on K = {fitted.k} classes but the logits "
                                 f"have {scores.shape[1]} columns; fit it on data with the same classes.")
        n = int(scores.shape[0])
        out = torch.empty((n, fitted.k), dtype=torch.float64, device=scores.device)
        rows = chunk_rows(fitted.k)
        with torch.no_grad():
            # calibview apply's chunks and torch's exp: the last bits of a row depend on both
            for start in range(0, n, rows):
                lp = fitted.apply(scores[start:start + rows])
                out[start:start + rows] = lp.exp() if proba else lp
        return out if isinstance(logits, torch.Tensor) else out.cpu().numpy()

    def predict_logits(self, logits: ArrayLike):
        """(N, K) float64 calibrated log-probabilities of ``logits`` (N, K), chunk by chunk as ``calibview
        apply`` computes them (log 0 = -inf where a calibrator gives an exact zero)."""
        return self._apply(logits, proba=False)

    def predict_proba(self, logits: ArrayLike):
        """(N, K) float64 calibrated probabilities of ``logits`` (N, K), bit for bit those that ``calibview
        apply`` writes: torch's exp of :meth:`predict_logits`, chunk by chunk."""
        return self._apply(logits, proba=True)

    def predict_confidence(self, confidence: ArrayLike):
        """(N,) float64 calibrated confidence of a calibrator fitted on a top-label run (``calibview.evaluate(
        confidence=..., ...)``): the probability that the prediction is right, given the predicted class's
        confidence (N,) in [0, 1]; the predictions themselves do not change. Exactly what ``calibview apply``
        writes for a top-label run."""
        from calibview.core.calibrators.toplabel import calibrated_confidence

        fitted = self._fitted()
        if not self._top_label() and fitted.method != "none":
            raise CalibviewError(f"This {type(self).__name__} was fitted on every class's scores; apply it with "
                                 f".predict_proba(logits), or fit it on a top-label run for confidences.")
        c = torch.as_tensor(np.array(confidence, dtype=np.float64)).reshape(-1)
        if c.numel() and not bool(((c >= 0) & (c <= 1)).all()):
            raise CalibviewError("confidence must lie in [0, 1] (the predicted class's probability).")
        with torch.no_grad():
            out = calibrated_confidence(fitted, c).clamp(0.0, 1.0)
        return out.numpy()

    # --- JSON ------------------------------------------------------------------------------------------------

    def to_json(self, path: Optional[str | os.PathLike] = None) -> str:
        """The fitted calibrator as JSON text: one calibrators.json record (``schema``, ``calibrator``,
        ``method``, ``k``, ``params``, ``warnings``, ``fit``), which :func:`load_calibrator` reads back and
        ``calibview apply`` applies to any run with K classes. Written to ``path`` too when one is given."""
        fitted = self._fitted()
        text = json.dumps({"schema": SCHEMA, "calibrator": self.method, **fitted.to_json()}, indent=2) + "\n"
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return text


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _valid(names) -> str:
    return f"its parameters are {', '.join(names)}" if names else "it takes no parameters"


def _check_options(method: str, options: Mapping[str, Any]) -> None:
    """The core's check of the options (type and value), so a bad one fails before any data is read."""
    registry.configured(method, options)


def _init(self: Calibrator, params: Mapping[str, Any]) -> None:
    for key, value in params.items():
        if key != "self":
            setattr(self, key, value)
    _check_options(self.method, self.get_params())


class Uncalibrated(Calibrator):
    """The identity (``none``): softmax of the scores, nothing fitted (a baseline that fits like the others)."""

    method = "none"

    def __init__(self):
        _init(self, {})


class TemperatureScaling(Calibrator):
    """Temperature scaling (``ts``): softmax(z / T), T > 0 minimising the fit split's NLL (Guo et al. 2017);
    keeps every arg-max. Fitted: ``temperature_`` (T), ``passes_``."""

    method = "ts"

    def __init__(self):
        _init(self, {})


class GridTemperatureScaling(Calibrator):
    """Temperature scaling with T picked from a grid by the fit split's ECE (``ts-grid``). Fitted:
    ``temperature_``, ``fit_ece_`` (a fraction)."""

    method = "ts-grid"

    def __init__(self):
        _init(self, {})


class HistogramBinning(Calibrator):
    """Histogram binning (``hb``), one-vs-rest: per class, p_k mapped to the fraction of positives in its bin.
    ``bins`` bins per class, ``strategy`` ``"uniform"`` (equal-width) or ``"quantile"`` (equal-mass) edges.
    Fitted: ``edges_`` ((B + 1,) or (K, B + 1)), ``value_`` ((K, B) fractions)."""

    method = "hb"

    def __init__(self, bins: int = 15, strategy: str = "uniform"):
        _init(self, locals())


class IsotonicCalibration(Calibrator):
    """Isotonic regression (``ir``), one-vs-rest: per class the increasing isotonic fit of 1[y = k] on p_k,
    interpolated linearly and clipped to its range (as scikit-learn's). Fitted: ``x_``, ``y_`` (every class's
    thresholds, concatenated) and ``offsets_`` (where each class's start)."""

    method = "ir"

    def __init__(self):
        _init(self, {})


class PlattScaling(Calibrator):
    """Platt scaling (``platt``), K = 2 only: p_1 = sigmoid(a s + c) on the log-odds s = z_1 - z_0.
    ``smooth_targets``: Platt's smoothed targets (N+ + 1) / (N+ + 2) and 1 / (N- + 2) instead of 0/1. Fitted:
    ``a_``, ``c_``."""

    method = "platt"

    def __init__(self, smooth_targets: bool = False):
        _init(self, locals())


class BetaCalibration(Calibrator):
    """Beta calibration (``beta``, Kull et al. 2017), K = 2 only: p_1 = sigmoid(a ln p_1 - b ln(1 - p_1) + c),
    a, b >= 0; ``smooth_targets`` as :class:`PlattScaling`. Fitted: ``a_``, ``b_``, ``c_``."""

    method = "beta"

    def __init__(self, smooth_targets: bool = False):
        _init(self, locals())


class MRR(Calibrator):
    """The MRR baseline (``mrr``): the arg-max class gets the fit split's accuracy, the other classes share the
    rest equally. Fitted: ``accuracy_`` (a fraction)."""

    method = "mrr"

    def __init__(self):
        _init(self, {})


class VectorScaling(Calibrator):
    """Vector scaling (``vs``): softmax(z * w + b), unpenalised mean NLL. ``absent``: classes missing from the fit
    split (fewer than ``min_count`` rows) keep the temperature-scaling map (``"ts"``), the identity (``"identity"``)
    or are fitted like the others (``"free"``); ``prior`` (>= 0): a Gaussian pull worth ``prior`` samples per
    parameter towards the temperature-scaling start. Fitted: ``w_`` (K,), ``b_`` (K,), ``pinned_classes_``."""

    method = "vs"

    def __init__(self, absent: str = "ts", min_count: int = 10, prior: float = 0.0):
        _init(self, locals())


class MatrixScaling(Calibrator):
    """Matrix scaling (``ms``): softmax(W z + b), mean NLL plus an ODIR (default, ``penalty=None``) or ``"l2"``
    penalty of strength ``lam`` on W (``"auto"``: picked on a held-out fifth of the fit split) and ``mu`` on b
    (None: ``lam``); ``max_iter``, ``rel_tol``: the L-BFGS limits. Fitted: ``W_`` (K, K), ``b_`` (K,), ``lam_``."""

    method = "ms"

    def __init__(self, penalty: str | None = None, lam: float | str = "auto", mu: float | None = None,
                 max_iter: int = 500, rel_tol: float = 1e-10):
        _init(self, locals())


class DirichletCalibration(Calibrator):
    """Dirichlet calibration (``dirichlet``, Kull et al. 2019): matrix scaling of the log-probabilities,
    softmax(W log p + b), with the options of :class:`MatrixScaling`. Fitted: ``W_`` (K, K), ``b_`` (K,)."""

    method = "dirichlet"

    def __init__(self, penalty: str | None = None, lam: float | str = "auto", mu: float | None = None,
                 max_iter: int = 500, rel_tol: float = 1e-10):
        _init(self, locals())


#: registry name -> class
CLASSES: dict[str, type[Calibrator]] = {c.method: c for c in (
    Uncalibrated, TemperatureScaling, GridTemperatureScaling, HistogramBinning, IsotonicCalibration, PlattScaling,
    BetaCalibration, MRR, VectorScaling, MatrixScaling, DirichletCalibration)}


def _class_of(name: str) -> type[Calibrator]:
    registry.get(name)                       # an unknown name: the registry's sentence, listing the known ones
    try:
        return CLASSES[name]
    except KeyError:
        raise CalibviewError(f"The calibrator {name!r} has no Python class yet; choose from "
                             f"{', '.join(CLASSES)}.") from None


def calibrator(name: str, **options) -> Calibrator:
    """A new, unfitted calibrator by its CLI name (``"ts"``, ``"hb"``, ``"dirichlet"``, ...; see
    ``calibview.core.calibrators.available()``) with its options as keywords: ``calibrator("hb", bins=20)``."""
    cls = _class_of(name)
    names = cls._param_names()
    for key in options:
        if key not in names:
            raise CalibviewError(f"Unknown option {key!r} for the {name} calibrator ({cls.__name__}); "
                                 f"{_valid(names)}.")
    return cls(**options)


def _options_from(fitted: Fitted, names: list[str]) -> dict[str, Any]:
    """The constructor options of a fit: as stored by :meth:`Calibrator.fit`, else read off the fitted parameters
    (a lam chosen by the held-out rule was ``"auto"``)."""
    stored = fitted.fit_info.get("options")
    if isinstance(stored, Mapping):
        return {k: v for k, v in stored.items() if k in names}
    params = fitted.params
    out = {k: params[k] for k in names if k in params}
    if "lam_selection" in params:
        out.update(lam="auto", mu=None)
    return out


def from_fitted(fitted: Fitted) -> Calibrator:
    """The fitted calibrator of the core (:class:`calibview.core.calibrators.base.Fitted`, e.g. one of an engine's
    results) as an instance of its class here, with its options and fitted attributes."""
    cls = _class_of(fitted.method)
    est = cls(**_options_from(fitted, cls._param_names()))
    est._set_fitted(fitted)
    return est


def _pick(records: list, run: Optional[str], use: Optional[str], where: str) -> Mapping:
    if not records or not all(isinstance(r, Mapping) for r in records):
        raise CalibviewError(f"{where} is not a calibview calibrators file (expected a list of calibrator records "
                             f"or one calibrator's JSON).")
    chosen = [r for r in records if run is None or r.get("run") == run]
    if use is not None:
        chosen = [r for r in chosen if r.get("calibrator", r.get("method")) == use]
    elif len(chosen) > 1:
        chosen = [r for r in chosen if r.get("method") != "none"]
    if len(chosen) != 1:
        found = ", ".join(sorted({f"{r.get('run', '?')}:{r.get('calibrator', r.get('method'))}" for r in records}))
        raise CalibviewError(f"{where} holds {len(chosen)} calibrators that match; pick one with run= and use= "
                             f"(it has {found}).")
    return chosen[0]


def load_calibrator(source: Any, *, run: Optional[str] = None, use: Optional[str] = None) -> Calibrator:
    """A fitted calibrator from JSON: the text of :meth:`Calibrator.to_json`, its dict, a path to such a file, or a
    report's calibrators.json (a list of records, or its path), picked by ``run`` ("model/dataset") and ``use``
    (the calibrator's name; default: the only one that is not ``none``)."""
    where = "this JSON"
    obj = source
    if isinstance(source, os.PathLike) or isinstance(source, str) and source.lstrip()[:1] not in ("{", "["):
        where = os.fspath(source)
        obj = load_json(where, "a calibrators JSON", "give the calibrators.json of calibview report or the file "
                                                     "written by to_json")
    elif isinstance(source, str):
        try:
            obj = json.loads(source)
        except json.JSONDecodeError as e:
            raise CalibviewError(f"This text is not valid JSON (line {e.lineno}); give the text of to_json, its "
                                 f"dict or a path.") from None
    record = obj if isinstance(obj, Mapping) else _pick(list(obj) if isinstance(obj, list) else [], run, use, where)
    if record.get("schema", SCHEMA) != SCHEMA:
        raise CalibviewError(f"{where} has schema {record.get('schema')!r}, which is not a calibrator record "
                             f"({SCHEMA}).")
    return from_fitted(registry.from_json(dict(record)))


__all__ = ["Calibrator", "calibrator", "load_calibrator", "from_fitted", *(c.__name__ for c in CLASSES.values())]
