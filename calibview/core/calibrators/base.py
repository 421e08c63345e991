"""What every post-hoc calibrator plugs into: fit on one split, apply to another, full probability rows out.

- a :class:`Method` knows its CLI ``name``, a display ``label``, whether it ``keeps_argmax``, and implements
  ``fit(scores, labels, *, progress, cancel) -> (params, warnings)`` (JSON-able parameters) and
  ``apply(prepared, scores) -> log-probabilities``;
- :func:`register` files a method under its name (:mod:`calibview.core.calibrators.registry` registers every
  family and looks them up);
- a fitted calibrator is an immutable :class:`Fitted` that applies itself, reports warnings and exports its
  parameters as JSON (``to_json``; ``registry.from_json`` loads it back);
- :func:`options_of` and :func:`with_options` read and check a method's constructor options.

``scores`` is an (N, K) torch tensor of logits, or of log-probabilities when the file stores probabilities
(softmax of log p is p, so every method treats both alike). Outputs are float64 log-probabilities.
"""

from __future__ import annotations

import ast
import inspect
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Optional

import numpy as np
import torch

from calibview.core.errors import CalibviewError
from calibview.core.stats.metrics import chunk_rows

FORMAT_VERSION = 1


class Method:
    """One post-hoc calibration method (stateless; parameters live in :class:`Fitted`).

    The window's tooltip for a method is the first line of its class's docstring (its label when the class has
    none), so that line is the label or a one-line summary."""

    name: ClassVar[str]
    label: ClassVar[str]
    keeps_argmax: ClassVar[bool] = False
    binary_only: ClassVar[bool] = False
    #: fits from a :class:`calibview.core.io.stream.StreamedSplit` (full-batch passes over chunks read from disk);
    #: the others need the fit split in memory and refuse a streamed one
    streams: ClassVar[bool] = False

    def fit(self, scores: torch.Tensor, labels: torch.Tensor, *, progress=None,
            cancel: Optional[threading.Event] = None) -> tuple[dict[str, Any], tuple[str, ...]]:
        """Return (JSON-able parameters, warnings) fitted on ``scores`` (N, K) logits or log-probabilities and
        ``labels`` (N,) int64 class indices; ``progress(fraction, message)`` and ``cancel`` as everywhere."""
        raise NotImplementedError

    def keeps_argmax_with(self, params: Mapping[str, Any], k: int) -> bool:
        """Whether the method fitted to ``params`` keeps the arg-max; ``keeps_argmax`` promises it for every fit,
        a method whose promise depends on the fit (MRR) says so here."""
        return self.keeps_argmax

    def prepare(self, params: Mapping[str, Any], device: torch.device) -> Any:
        """Turn JSON parameters into whatever ``apply`` wants (tensors on ``device``); called once per device,
        because ``apply`` runs on every chunk of rows."""
        return params

    def apply(self, prepared: Any, scores: torch.Tensor) -> torch.Tensor:
        """(N, K) calibrated log-probabilities, float64, on the scores' device. ``prepared`` is what
        :meth:`prepare` returned. Rows are independent: this is called on chunks of rows."""
        raise NotImplementedError


def fit_checks(scores: torch.Tensor, labels: torch.Tensor, label: str) -> list[str]:
    """Errors and warnings the one-vs-rest, logistic and MRR fits share: an empty split or a label count that
    is not one per row (errors), a single row, identical rows or a single class (warnings). ``scores`` (N, K),
    ``labels`` (N,); ``label`` is the method's display name."""
    n = int(scores.shape[0])
    if n == 0:
        raise CalibviewError(f"The fit split has no rows; {label} needs labelled rows to fit on.")
    if labels.shape[0] != n:
        raise CalibviewError(f"The fit split has {n} rows of scores but {labels.shape[0]} labels; "
                             "they must have one label per row.")
    if n == 1:
        return [f"{label} was fitted on a single row, so it only knows that row's class."]
    rows = chunk_rows(int(scores.shape[1]))
    if all(bool((scores[s:s + rows] == scores[:1]).all()) for s in range(0, n, rows)):
        return [f"Every row of the fit split has the same scores, so {label} can only learn the class "
                "frequencies."]
    if scores.shape[1] > 1 and bool((labels == labels[0]).all()):
        return [f"Every one of the {n:,} fit samples has class {int(labels[0])}, so {label} cannot learn how "
                "often the model is wrong about the other classes."]
    return []


# --- the registry's storage -----------------------------------------------------------------------------------

# In the order of registration, which is the order users see (registry.available, the window's list).
_REGISTRY: dict[str, Method] = {}


def register(method: Method) -> Method:
    """File ``method`` under its ``name`` (a later method of the same name replaces it); returns it."""
    _REGISTRY[method.name] = method
    return method


def registered_names() -> tuple[str, ...]:
    """The names registered so far, in order of registration."""
    return tuple(_REGISTRY)


def registered(name: str) -> Method:
    """The method registered as ``name``; an unknown name is a user error that lists the registered ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise CalibviewError(f"Unknown calibrator {name!r}; choose from {', '.join(_REGISTRY)}.") from None


# --- a fitted calibrator and its JSON form --------------------------------------------------------------------

@dataclass(frozen=True)
class Fitted:
    """A fitted calibrator: immutable, applies itself, exports its parameters as JSON.

    ``method`` is the registered name, ``k`` the number of classes it was fitted on, ``params`` the JSON-able
    parameters its method's ``fit`` returned."""

    method: str
    k: int
    params: Mapping[str, Any]
    warnings: tuple[str, ...] = ()
    fit_info: Mapping[str, Any] = field(default_factory=dict)   # file, run, split, n of the fit split
    _prepared: dict = field(default_factory=dict, compare=False, repr=False)   # device -> Method.prepare(...)

    @property
    def label(self) -> str:
        """The method's display name, e.g. "Temperature scaling"."""
        return registered(self.method).label

    @property
    def keeps_argmax(self) -> bool:
        """Whether this fit keeps every row's arg-max class."""
        return registered(self.method).keeps_argmax_with(self.params, self.k)

    def apply(self, scores: torch.Tensor) -> torch.Tensor:
        """Calibrate ``scores`` (N, K) logits or log-probabilities (any float dtype and device): (N, K) float64
        log-probabilities on the scores' device; K must be the fit's ``k``."""
        if scores.ndim != 2 or scores.shape[1] != self.k:
            raise CalibviewError(
                f"The {self.label} calibrator was fitted on K = {self.k} classes but the scores have "
                f"{scores.shape[1] if scores.ndim == 2 else 'no'} columns; fit it on data with the same classes.")
        method = registered(self.method)
        key = str(scores.device)
        if key not in self._prepared:
            self._prepared[key] = method.prepare(self.params, scores.device)
        return method.apply(self._prepared[key], scores)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (plain lists and numbers), read back by ``registry.from_json``."""
        return {"calibview_calibrator": FORMAT_VERSION, "method": self.method, "k": self.k,
                "params": _jsonable(self.params), "warnings": list(self.warnings),
                "fit": _jsonable(self.fit_info)}


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.ndarray, torch.Tensor)):
        return _jsonable(np.asarray(x.cpu() if isinstance(x, torch.Tensor) else x).tolist())
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return x


# --- options --------------------------------------------------------------------------------------------------

def options_of(method: Method) -> dict[str, str]:
    """The constructor options of ``method``, each with its type as its signature spells it: ``{"bins": "int",
    "strategy": "str"}`` for hb, ``{}`` for a method without options."""
    params = list(inspect.signature(type(method).__init__).parameters.values())[1:]
    return {p.name: "any" if p.annotation is p.empty else str(p.annotation)
            for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _type_ok(value: Any, annotation: str) -> bool:
    for part in (t.strip() for t in annotation.split("|")):
        if part.startswith("Literal[") and part.endswith("]"):
            allowed = ast.literal_eval(f"({part[8:-1]},)")
            if any(value == a and type(value) is type(a) for a in allowed):
                return True
        elif part == "None" and value is None or part == "bool" and isinstance(value, bool):
            return True
        elif part == "int" and isinstance(value, int) and not isinstance(value, bool):
            return True
        elif part == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        elif part == "str" and isinstance(value, str) or part not in ("None", "bool", "int", "float", "str"):
            return True
    return False


def _type_words(annotation: str) -> str:
    """ "float | Literal['auto']" -> "float or 'auto'"."""
    parts = [t.strip() for t in annotation.split("|")]
    return " or ".join(p[8:-1] if p.startswith("Literal[") else p for p in parts)


def with_options(m: Method, options: Mapping[str, Any] | None = None) -> Method:
    """``m`` itself, or a new instance of its class built with ``options`` (constructor keywords, e.g.
    ``{"bins": 20}`` for hb, ``{"penalty": "l2", "lam": 0.1}`` for ms); an unknown key or a value of the wrong
    type is a user error whose message lists the valid keys and their types."""
    if not options:
        return m
    method = m.name
    types = options_of(m)
    valid = (f"its options are {', '.join(f'{k} ({_type_words(t)})' for k, t in types.items())}" if types
             else "it takes no options")
    for key, value in options.items():
        if key not in types:
            raise CalibviewError(f"Unknown option {method}.{key} for the {m.label} calibrator ({method}); {valid}.")
        if not _type_ok(value, types[key]):
            article = "an" if _type_words(types[key])[0] in "aeiou" else "a"
            raise CalibviewError(f"Invalid option {method}.{key} = {value!r} for the {m.label} calibrator "
                                 f"({method}): {key} takes {article} {_type_words(types[key])}; {valid}.")
    try:
        return type(m)(**dict(options))
    except (TypeError, ValueError) as e:
        raise CalibviewError(f"Invalid option for the {m.label} calibrator ({method}) ({e}); {valid}.") from None
