"""Post-hoc calibrators: fit on one split, apply to another, full probability rows out.

The interface every calibrator plugs into (the calibrator-family issue adds VS, MS, Dirichlet, HB, IR, Platt, beta
and MRR through :func:`register`):

- a :class:`Method` knows its CLI ``name``, a display ``label``, whether it ``keeps_argmax``, and implements
  ``fit(scores, labels, *, progress, cancel) -> dict`` (JSON-able parameters) and
  ``apply(params, scores) -> log-probabilities``;
- :func:`fit` wraps the result in an immutable :class:`Fitted` that applies itself, reports warnings and
  round-trips through JSON (``to_json`` / :func:`from_json`).

``scores`` is an (N, K) torch tensor of logits, or of log-probabilities when the file stores probabilities
(softmax of log p is p, so every method treats both alike). Outputs are float64 log-probabilities.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Optional

import numpy as np
import torch

from calibview.core.io import stream
from calibview.core.errors import CalibviewError, check_cancel, report
from calibview.core.stats.metrics import chunk_rows

FORMAT_VERSION = 1


class Method:
    """One post-hoc calibration method (stateless; parameters live in :class:`Fitted`)."""

    name: ClassVar[str]
    label: ClassVar[str]
    keeps_argmax: ClassVar[bool] = False
    binary_only: ClassVar[bool] = False
    #: fits from a :class:`calibview.core.io.stream.StreamedSplit` (full-batch passes over chunks read from disk);
    #: the others need the fit split in memory and refuse a streamed one
    streams: ClassVar[bool] = False

    def fit(self, scores: torch.Tensor, labels: torch.Tensor, *, progress=None,
            cancel: Optional[threading.Event] = None) -> tuple[dict[str, Any], tuple[str, ...]]:
        """Return (JSON-able parameters, warnings)."""
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


_REGISTRY: dict[str, Method] = {}


def register(method: Method) -> Method:
    _REGISTRY[method.name] = method
    return method


def available() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get(name: str) -> Method:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise CalibviewError(f"Unknown calibrator {name!r}; choose from {', '.join(_REGISTRY)}.") from None


@dataclass(frozen=True)
class Fitted:
    """A fitted calibrator: immutable, applies itself, exports its parameters as JSON."""

    method: str
    k: int
    params: Mapping[str, Any]
    warnings: tuple[str, ...] = ()
    fit_info: Mapping[str, Any] = field(default_factory=dict)   # file, run, split, n of the fit split
    _prepared: dict = field(default_factory=dict, compare=False, repr=False)   # device -> Method.prepare(...)

    @property
    def label(self) -> str:
        return get(self.method).label

    @property
    def keeps_argmax(self) -> bool:
        return get(self.method).keeps_argmax_with(self.params, self.k)

    def apply(self, scores: torch.Tensor) -> torch.Tensor:
        if scores.ndim != 2 or scores.shape[1] != self.k:
            raise CalibviewError(
                f"The {self.label} calibrator was fitted on K = {self.k} classes but the scores have "
                f"{scores.shape[1] if scores.ndim == 2 else 'no'} columns; fit it on data with the same classes.")
        method = get(self.method)
        key = str(scores.device)
        if key not in self._prepared:
            self._prepared[key] = method.prepare(self.params, scores.device)
        return method.apply(self._prepared[key], scores)

    def to_json(self) -> dict[str, Any]:
        return {"calibview_calibrator": FORMAT_VERSION, "method": self.method, "k": self.k,
                "params": _jsonable(self.params), "warnings": list(self.warnings),
                "fit": _jsonable(self.fit_info)}


def from_json(obj: Mapping[str, Any] | str) -> Fitted:
    """Load a calibrator written by :meth:`Fitted.to_json` (a dict, or its JSON text)."""
    if isinstance(obj, str):
        obj = json.loads(obj)
    if not isinstance(obj, Mapping) or "method" not in obj or "k" not in obj:
        raise CalibviewError("This JSON is not a calibview calibrator (it has no 'method' and 'k').")
    get(obj["method"])
    return Fitted(method=obj["method"], k=int(obj["k"]), params=dict(obj.get("params", {})),
                  warnings=tuple(obj.get("warnings", ())), fit_info=dict(obj.get("fit", {})))


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


def option_types(method: str) -> dict[str, str]:
    """The constructor options of ``method``, each with its type as its signature spells it: ``{"bins": "int",
    "strategy": "str"}`` for hb, ``{}`` for a method without options."""
    params = list(inspect.signature(type(get(method)).__init__).parameters.values())[1:]
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


def configured(method: str, options: Mapping[str, Any] | None = None) -> Method:
    """The registered method, or a new instance of its class built with ``options`` (constructor keywords, e.g.
    ``{"bins": 20}`` for hb, ``{"penalty": "l2", "lam": 0.1}`` for ms); an unknown key or a value of the wrong
    type is a user error whose message lists the valid keys and their types."""
    m = get(method)
    if not options:
        return m
    types = option_types(method)
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


def fit(method: str, scores: torch.Tensor, labels: torch.Tensor, *, fit_info: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None, progress=None, cancel: Optional[threading.Event] = None
        ) -> Fitted:
    """Fit ``method`` (configured with ``options``) on (scores, labels) of the fit split."""
    m = configured(method, options)
    k = int(scores.shape[1])
    if m.binary_only and k != 2:
        raise CalibviewError(f"{m.label} is for binary problems (K = 2), but this run has K = {k} classes; "
                             "use temperature or vector scaling instead.")
    if not m.streams:
        stream.require_in_memory(m.label, scores)
    params, warnings = m.fit(scores, labels, progress=progress, cancel=cancel)
    return Fitted(method=method, k=k, params=params, warnings=tuple(warnings), fit_info=dict(fit_info or {}))


# --- the identity -------------------------------------------------------------------------------------------

class Identity(Method):
    name, label, keeps_argmax = "none", "Uncalibrated", True
    streams = True

    def fit(self, scores, labels, *, progress=None, cancel=None):
        return {}, ()

    def apply(self, params, scores):
        return torch.log_softmax(scores.to(torch.float64), dim=1)


# --- temperature scaling --------------------------------------------------------------------------------------

def _temperature_moments(scores: torch.Tensor, labels: torch.Tensor, beta: float,
                         rows: int | None = None, cancel=None, has_neg_inf: bool = False, tick=None
                         ) -> tuple[float, float, float]:
    """NLL(beta) and its first two derivatives in beta = 1/T, means over rows.

    NLL(beta) = mean[logsumexp(beta z) - beta z_y]; d/dbeta = mean[E_p z - z_y]; d2/dbeta2 = mean[Var_p z] >= 0,
    so the problem is convex in beta and a safeguarded Newton iteration converges from any start.
    Rows are shifted by their maximum first (p is unchanged), so the terms that carry the probability mass are
    small numbers: the pass runs in the scores' own precision, half precision raised to float32 (float32 is 3x
    faster than float64 here), with per-row results accumulated in float64, which keeps T accurate to ~1e-7.
    ``scores`` may be a :class:`~calibview.core.io.stream.StreamedSplit` (each pass reads it from disk);
    ``tick(fraction)`` is called after each chunk. Chunks have :func:`calibview.core.stats.metrics.chunk_rows` rows
    unless ``rows`` says otherwise (a fixed 4,096 rows made 700 MB temporaries at K = 21,843).
    """
    f = g = h = 0.0
    n, k = scores.shape
    rows = rows or chunk_rows(k)
    for start in range(0, n, rows):
        check_cancel(cancel)
        z = scores[start:start + rows]
        y = labels[start:start + rows]
        if z.dtype in (torch.float16, torch.bfloat16):
            z = z.float()       # half precision sums would round s0, s1, s2 to 3 digits (and run slower on CPU)
        zs = z - z.amax(dim=1, keepdim=True)
        # exact zeros in a probabilities file are -inf here: weight 0, and 0 * -inf must not become NaN
        if has_neg_inf:
            zs = torch.nan_to_num(zs, neginf=-1e30)
        e = torch.exp(zs * beta)
        s0 = e.sum(1).double()
        ez = e.mul_(zs)
        s1 = ez.sum(1).double()
        s2 = ez.mul_(zs).sum(1).double()
        zy = zs.gather(1, y[:, None])[:, 0].double()
        mean = s1 / s0
        f += float((torch.log(s0) - beta * zy).sum())
        g += float((mean - zy).sum())
        h += float((s2 / s0 - mean * mean).clamp_min(0).sum())
        if tick is not None:
            tick(min(n, start + rows) / n)
    return f / n, g / n, h / n


def fit_temperature(scores: torch.Tensor, labels: torch.Tensor, *, tol: float = 1e-7, max_iter: int = 100,
                    cancel=None, progress=None) -> tuple[float, int, tuple[str, ...]]:
    """Temperature T minimising the NLL of softmax(z / T): safeguarded Newton in beta = 1/T, converged.

    Iterates on a subsample first (cheap), then polishes on the full split; each full pass costs one exp over
    the (N, K) matrix. Returns (T, full passes used, warnings).
    """
    n = scores.shape[0]
    warnings: list[str] = []
    beta = 1.0
    # Exact zeros in a probabilities file are -inf log-probabilities: they need masking in every pass.
    has_neg_inf = (scores.kind == "probs") if stream.is_streamed(scores) else bool(torch.isneginf(scores).any())
    stages = []
    if n > 20_000:
        stages.append((*stream.subsample(scores, labels, 10_000), 1e-6))
    stages.append((scores, labels, tol))
    passes = 0
    for si, (z, y, stage_tol) in enumerate(stages):
        lo, hi = 0.0, math.inf     # bracket on beta from the sign of the gradient (convexity)
        for it in range(max_iter):
            tick = None
            if stream.is_streamed(z) and progress is not None:        # a pass reads the split: show it going
                tick = (lambda fr, it=it: report(progress, min(0.95, 0.2 + 0.15 * (it + fr)),
                                                 f"temperature scaling: pass {it + 1}, {fr:.0%} read"))
            f, g, h = _temperature_moments(z, y, beta, cancel=cancel, has_neg_inf=has_neg_inf, tick=tick)
            if si == len(stages) - 1:
                passes += 1
                report(progress, min(0.95, 0.2 + 0.15 * (it + 1)), f"temperature scaling: T = {1 / beta:.6g}")
            if h <= 0.0 and g <= 0.0:
                # every row is numerically one-hot on its label: the NLL only falls further as T -> 0
                beta = 1e6
                break
            if g > 0:
                hi = min(hi, beta)
            else:
                lo = max(lo, beta)
            step = -g / h if h > 0 else math.inf
            new = beta + step
            if not (lo < new < hi) or not math.isfinite(new):
                new = (lo + hi) / 2 if math.isfinite(hi) else max(2 * beta, lo * 2 if lo > 0 else 2 * beta)
            converged = abs(new - beta) <= stage_tol * max(beta, 1e-12)
            beta = new
            if converged:
                break
        else:
            warnings.append(f"temperature scaling did not converge in {max_iter} Newton steps (T = {1 / beta:.6g})")
        if beta >= 1e6:
            warnings.append("the NLL keeps falling as T -> 0: the fit split is separable; T was capped at 1e-6")
            beta = 1e6
            break
    return 1.0 / beta, passes, tuple(warnings)


class Temperature(Method):
    name, label, keeps_argmax, streams = "ts", "Temperature scaling", True, True

    def fit(self, scores, labels, *, progress=None, cancel=None):
        t, passes, warnings = fit_temperature(scores, labels, cancel=cancel, progress=progress)
        return {"temperature": t, "objective": "nll", "passes": passes}, warnings

    def apply(self, params, scores):
        return torch.log_softmax(scores.to(torch.float64) / float(params["temperature"]), dim=1)


class TemperatureGrid(Temperature):
    """Mukhoti et al.'s protocol: the first T on 0.1, 0.2, ..., 10.0 with minimal fit-split ECE (15 bins)."""

    name, label, streams = "ts-grid", "Temperature scaling (ECE grid)", False
    grid = tuple(round(0.1 * i, 1) for i in range(1, 101))

    def fit(self, scores, labels, *, progress=None, cancel=None, n_bins: int = 15):
        from calibview.core.stats.metrics import ece_from_sums, equal_width_table
        z = scores.to(torch.float64)
        pred = z.argmax(dim=1)      # T > 0 never changes the arg-max
        correct = (pred == labels).to(torch.float64).cpu().numpy()
        zmax = z.max(dim=1, keepdim=True).values
        gap = torch.where(torch.isfinite(z), z - zmax, torch.full((), -math.inf, dtype=torch.float64,
                                                                   device=z.device))
        best_t, best_ece = None, math.inf
        for i, t in enumerate(self.grid):
            check_cancel(cancel)
            conf = (1.0 / torch.exp(gap / t).sum(dim=1)).cpu().numpy()
            table = equal_width_table(conf, correct, n_bins)
            ece = float(ece_from_sums(table.count, table.sum_conf, table.sum_correct, conf.shape[0])[0])
            if ece < best_ece:         # strict: the first T with minimal ECE wins ties
                best_t, best_ece = t, ece
            report(progress, (i + 1) / len(self.grid), f"temperature grid: T = {t:.1f}")
        return {"temperature": best_t, "objective": "ece-grid", "fit_ece": best_ece}, ()


register(Identity())
register(Temperature())
register(TemperatureGrid())

# The calibrator family registers itself on import (kept in their own modules to stay readable).
from calibview.core.calibrators import binning as calibrators_binning  # noqa: E402,F401  (hb, ir, platt, beta, mrr)
from calibview.core.calibrators import scaling as calibrators_scaling  # noqa: E402,F401  (vs, ms, dirichlet)
