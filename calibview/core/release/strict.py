"""The strict reading of an inference config: every field's type and range, checked after its ``config_sha256``
matched, so that a config edited and rehashed by hand (or written by another tool) with values ``check`` or
``apply`` would act on blindly is refused with one sentence naming the field.

What is checked (K = the number of class names):

- top level: exactly the keys a release writes (``weights`` and ``signature`` optional); ``model`` a non-empty
  text, ``dataset`` a text or null, ``class_names`` a list of K >= 1 texts, ``parent`` null or a SHA-256 hex;
- ``calibrator``: a registered ``method``, ``params`` of that method's shape (:func:`check_params`: the
  temperature a positive finite number, hb's edges and values (B + 1,) or (K, B + 1) and (K, B) in [0, 1], ir's
  runs, vs' (K,) weights, ms' and dirichlet's (K, K) matrix, Platt's and beta's finite coefficients at K = 2,
  mrr's accuracy in [0, 1]), ``warnings`` a list of texts;
- ``thresholds``: ``global`` null or in [0, 1]; ``per_class`` null or K entries, each null or in [0, 1] (only
  with a ``target_precision``); ``target_precision`` null or in (0, 1];
- ``provenance``: the split names, ``n_fit`` >= 0, ``n_eval`` >= 1, ``eval_sha256`` (and ``fit_sha256`` where
  present) SHA-256 hex; a missing ``fit_sha256`` is no error here, it fails its checklist row;
- ``settings``: ``bins`` in [1, :data:`MAX_BINS`], ``n_boot`` in [0, :data:`MAX_N_BOOT`], ``bandwidth`` in
  (0, 1], ``level`` in (0, 1), a known ``kernel``, ``seed`` in [0, 2^63);
- ``metrics``: text keys, each value null or a finite number (they are never trusted: ``check`` recomputes them);
- ``weights``: records of ``file``, ``sha256``, ``size``; ``signature``: ``algorithm``, ``key_sha256``, ``value``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

import numpy as np

from calibview.core.errors import CalibviewError

#: the most resamples a config may ask ``check`` for (the default is 1,000; 10^7 would run for hours)
MAX_N_BOOT = 100_000
#: the most equal-width bins a config may ask for
MAX_BINS = 10_000
#: seeds the bootstrap accepts: numpy's and torch's generators take non-negative 64-bit seeds
MAX_SEED = 2 ** 63
KERNELS = ("gaussian", "epanechnikov")
_HEX = re.compile(r"[0-9a-f]{64}")
#: ``calibrator.form`` of a config released for a top-label run (calibview.core.calibrators.toplabel.FORM)
TOP_LABEL = "top-label"
_TOP = ("schema", "model", "dataset", "class_names", "calibrator", "thresholds", "provenance", "settings",
        "metrics", "parent", "config_sha256", "weights", "signature")
_PROVENANCE = ("file", "fit_split", "fit_sha256", "n_fit", "eval_split", "eval_sha256", "n_eval",
               "calibview_version", "created", "fit_rows", "eval_rows", "forced")


class _Bad(Exception):
    """A field that breaks its rule: args are (field, what it must be)."""


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _need(ok: bool, field: str, rule: str) -> None:
    if not ok:
        raise _Bad(field, rule)


def _get(obj: Mapping, key: str, field: str) -> Any:
    if key not in obj:
        raise _Bad(f"{field}.{key}", "present")
    return obj[key]


def _mapping(obj: Any, field: str, allowed: tuple = ()) -> Mapping:
    _need(isinstance(obj, Mapping), field, "a JSON object")
    extra = sorted(str(k) for k in obj if allowed and k not in allowed)
    where = "" if field == "config" else f"{field}."
    _need(not extra, f"{where}{extra[0]}" if extra else field, "absent (calibview release writes no such key)")
    return obj


def _number(v: Any, field: str, lo: float, hi: float, *, open_lo: bool = False, open_hi: bool = False,
            optional: bool = False) -> None:
    if v is None and optional:
        return
    if hi == math.inf:
        rule = ("a finite number" if lo == -math.inf else
                "a positive finite number" if lo == 0 and open_lo else f"a finite number >= {lo:g}")
    else:
        rule = f"a number in {'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"
    _need(_is_number(v) and (v > lo if open_lo else v >= lo) and (v < hi if open_hi else v <= hi), field, rule)


def _integer(v: Any, field: str, lo: int, hi: int) -> None:
    _need(_is_int(v) and lo <= v <= hi, field, f"an integer in [{lo:,}, {hi:,}]")


def _text(v: Any, field: str, *, optional: bool = False, nonempty: bool = True) -> None:
    if v is None and optional:
        return
    _need(isinstance(v, str) and (bool(v) or not nonempty), field, "a non-empty text" if nonempty else "a text")


def _hex(v: Any, field: str, *, optional: bool = False) -> None:
    if v is None and optional:
        return
    _need(isinstance(v, str) and _HEX.fullmatch(v) is not None, field, "a SHA-256 hex digest (64 of 0-9a-f)")


def _array(v: Any, field: str, shapes: tuple, lo: float = -math.inf, hi: float = math.inf) -> np.ndarray:
    """``v`` as a float64 array of one of ``shapes`` (tuples), every entry a finite number in [lo, hi]."""
    shown = " or ".join(str(s).replace(",)", ")") for s in shapes)
    try:
        a = np.asarray(v)
    except (ValueError, TypeError):
        a = np.asarray([None])
    within = "" if lo == -math.inf else f" in [{lo:g}, {hi:g}]"
    _need(a.dtype.kind in "iuf" and a.shape in shapes, field, f"an array of shape {shown} of numbers{within}")
    a = a.astype(np.float64)
    _need(bool(np.isfinite(a).all() and (a >= lo).all() and (a <= hi).all()), field,
          f"an array of finite numbers{within}")
    return a


def check_params(method: str, params: Any, k: int, field: str = "calibrator.params") -> None:
    """Refuse (``_Bad``) ``params`` that do not have the shape the fitted ``method`` writes for K = ``k``."""
    _mapping(params, field)
    floor = params.get("log_floor")
    _need(floor is None or (_is_number(floor) and floor <= 0), f"{field}.log_floor", "null or a number <= 0")
    if method in ("ts", "ts-grid"):
        _number(_get(params, "temperature", field), f"{field}.temperature", 0, math.inf, open_lo=True)
    elif method == "hb":
        _text(_get(params, "strategy", field), f"{field}.strategy")
        _need(params["strategy"] in ("uniform", "quantile"), f"{field}.strategy", "uniform or quantile")
        b = _get(params, "bins", field)
        _integer(b, f"{field}.bins", 1, 1 << 20)
        value = _array(_get(params, "value", field), f"{field}.value", ((k, b),), 0.0, 1.0)
        edges = _array(_get(params, "edges", field), f"{field}.edges", ((b + 1,), (k, b + 1)), 0.0, 1.0)
        _need(bool((np.diff(edges, axis=-1) >= 0).all()) and value.size > 0, f"{field}.edges", "non-decreasing")
    elif method == "ir":
        x = _get(params, "x", field)
        n = len(x) if isinstance(x, list) else -1
        _array(x, f"{field}.x", ((n,),))
        _array(_get(params, "y", field), f"{field}.y", ((n,),), 0.0, 1.0)
        off = _array(_get(params, "offsets", field), f"{field}.offsets", ((k + 1,),), 0, n)
        _need(bool(off[0] == 0 and off[-1] == n and (np.diff(off) >= 1).all() and (off == np.round(off)).all()),
              f"{field}.offsets", f"integers from 0 to len(x) = {n}, each class's run at least one long")
    elif method == "mrr":
        _number(_get(params, "accuracy", field), f"{field}.accuracy", 0, 1)
    elif method in ("platt", "beta"):
        _need(k == 2, "class_names", f"2 classes for {method} (a binary calibrator)")
        for name in ("a", "c") if method == "platt" else ("a", "b", "c"):
            _number(_get(params, name, field), f"{field}.{name}", -math.inf, math.inf)
    elif method in ("vs", "ms", "dirichlet"):
        key, shape = ("w", (k,)) if method == "vs" else ("W", (k, k))
        _array(_get(params, key, field), f"{field}.{key}", (shape,))
        _array(_get(params, "b", field), f"{field}.b", ((k,),))


def validate(config: Mapping[str, Any], path: str = "the inference config") -> None:
    """Refuse, in one sentence naming ``path`` and the field, a config (already hash-checked) whose fields do not
    have the types and ranges :mod:`calibview.core.release.strict` lists."""
    try:
        _validate(config)
    except _Bad as e:
        field, rule = e.args
        value = _value_at(config, field)
        shown = "missing" if value is _MISSING else f"{_show(value)}"
        raise CalibviewError(f"{path}: {field} is {shown}, but it must be {rule}; the config was edited after "
                             f"calibview release wrote it, so give the released file or release again.") from None


_MISSING = object()


def _value_at(config: Any, field: str) -> Any:
    obj = config
    for part in field.split("."):
        if isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        elif isinstance(obj, Mapping) and part in obj:
            obj = obj[part]
        else:
            return _MISSING
    return obj


def _validate(c: Mapping[str, Any]) -> None:
    from calibview.core.calibrators import registry

    _mapping(c, "config", _TOP)
    _text(c["model"], "model")
    _text(c["dataset"], "dataset", optional=True, nonempty=False)
    names = c["class_names"]
    _need(isinstance(names, list) and len(names) >= 1 and all(isinstance(n, str) for n in names), "class_names",
          "a non-empty list of texts")
    k = len(names)
    _hex(c["parent"], "parent", optional=True)
    _hex(c["config_sha256"], "config_sha256")

    cal = _mapping(c["calibrator"], "calibrator", ("method", "params", "warnings", "form"))
    method = _get(cal, "method", "calibrator")
    _need(isinstance(method, str) and method in registry.available(), "calibrator.method",
          "one of " + ", ".join(registry.available()))
    form = cal.get("form")
    _need(form in (None, TOP_LABEL), "calibrator.form", f"absent or {TOP_LABEL!r}")
    # a top-label calibrator maps the confidence: it was fitted on the two-class problem "is the prediction right"
    check_params(method, _get(cal, "params", "calibrator"), 2 if form == TOP_LABEL else k)
    warned = cal.get("warnings", [])
    _need(isinstance(warned, list) and all(isinstance(w, str) for w in warned), "calibrator.warnings",
          "a list of texts")

    t = _mapping(c["thresholds"], "thresholds", ("global", "per_class", "target_precision"))
    _number(_get(t, "global", "thresholds"), "thresholds.global", 0, 1, optional=True)
    target = _get(t, "target_precision", "thresholds")
    _number(target, "thresholds.target_precision", 0, 1, open_lo=True, optional=True)
    per = _get(t, "per_class", "thresholds")
    if per is not None:
        _need(target is not None, "thresholds.per_class", "null without a target_precision")
        _need(isinstance(per, list) and len(per) == k, "thresholds.per_class", f"null or a list of K = {k} entries")
        for i, v in enumerate(per):
            _number(v, f"thresholds.per_class.{i}", 0, 1, optional=True)

    p = _mapping(c["provenance"], "provenance", _PROVENANCE)
    for key in ("file", "fit_split", "n_fit", "eval_split", "eval_sha256", "n_eval", "calibview_version", "created"):
        _get(p, key, "provenance")
    _text(p["file"], "provenance.file")
    _text(p["fit_split"], "provenance.fit_split", optional=True)
    _text(p["eval_split"], "provenance.eval_split")
    _hex(p.get("fit_sha256"), "provenance.fit_sha256", optional=True)
    _hex(p["eval_sha256"], "provenance.eval_sha256")
    _integer(p["n_fit"], "provenance.n_fit", 0, 1 << 62)
    _integer(p["n_eval"], "provenance.n_eval", 1, 1 << 62)
    _text(p["calibview_version"], "provenance.calibview_version")
    _text(p["created"], "provenance.created")
    for key, part in (("fit_rows", "fit"), ("eval_rows", "verify")):
        if p.get(key) is not None:
            spec = _mapping(p[key], f"provenance.{key}", ("part", "seed", "of"))
            _need(_get(spec, "part", f"provenance.{key}") == part, f"provenance.{key}.part", repr(part))
            _integer(_get(spec, "seed", f"provenance.{key}"), f"provenance.{key}.seed", 0, MAX_SEED - 1)
            _integer(_get(spec, "of", f"provenance.{key}"), f"provenance.{key}.of", 2, 1 << 62)
    forced = p.get("forced", [])
    _need(isinstance(forced, list) and all(isinstance(w, str) for w in forced), "provenance.forced",
          "a list of texts")

    s = _mapping(c["settings"], "settings", ("bins", "bandwidth", "kernel", "n_boot", "seed", "level"))
    _integer(_get(s, "bins", "settings"), "settings.bins", 1, MAX_BINS)
    _integer(_get(s, "n_boot", "settings"), "settings.n_boot", 0, MAX_N_BOOT)
    _integer(_get(s, "seed", "settings"), "settings.seed", 0, MAX_SEED - 1)
    _number(_get(s, "bandwidth", "settings"), "settings.bandwidth", 0, 1, open_lo=True)
    _number(_get(s, "level", "settings"), "settings.level", 0, 1, open_lo=True, open_hi=True)
    _need(_get(s, "kernel", "settings") in KERNELS, "settings.kernel", " or ".join(KERNELS))

    m = _mapping(c["metrics"], "metrics")
    for key, v in m.items():
        _need(v is None or _is_number(v), f"metrics.{key}", "null or a finite number")

    if "weights" in c:
        w = c["weights"]
        _need(isinstance(w, list), "weights", "a list of records")
        for i, rec in enumerate(w):
            _mapping(rec, f"weights.{i}", ("file", "sha256", "size"))
            _text(_get(rec, "file", f"weights.{i}"), f"weights.{i}.file")
            _hex(_get(rec, "sha256", f"weights.{i}"), f"weights.{i}.sha256")
            _integer(_get(rec, "size", f"weights.{i}"), f"weights.{i}.size", 0, 1 << 62)
    if "signature" in c:
        sig = _mapping(c["signature"], "signature", ("algorithm", "key_sha256", "value"))
        _need(_get(sig, "algorithm", "signature") == "ed25519", "signature.algorithm", "'ed25519'")
        _hex(_get(sig, "key_sha256", "signature"), "signature.key_sha256")
        _text(_get(sig, "value", "signature"), "signature.value")


__all__ = ["MAX_BINS", "MAX_N_BOOT", "check_params", "validate"]
