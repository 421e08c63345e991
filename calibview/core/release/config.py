"""The versioned inference config: what is shipped with the model weights, so that weights, calibrator and
thresholds are versioned and rolled back together.

```
{"schema": "calibview.inference-config/1", "model", "dataset", "class_names",
 "calibrator": {"method", "params", "warnings"}, "thresholds": {"global", "per_class", "target_precision"},
 "provenance": {"file", "fit_split", "fit_sha256", "n_fit", "eval_split", "eval_sha256", "n_eval",
                "calibview_version", "created"},
 "settings": {"bins", "bandwidth", "kernel", "n_boot", "seed", "level"},
 "metrics": {"ece", "ece_lo", "ece_hi", ...}, "parent": null, "config_sha256"}
```

With ``release --weights FILE`` the config also has ``"weights": [{"file", "sha256", "size"}, ...]``
(:mod:`calibview.core.release.weights`).

- ``fit_sha256`` / ``eval_sha256``: SHA-256 over the stored bytes of the split's ``logits`` (or ``probs``) dataset
  in C order and its stored dtype, followed by those of its ``labels`` dataset, read chunk by chunk. A config
  refitted by ``calibview drift`` on part of a split also has ``provenance.fit_rows`` / ``eval_rows``
  (``{"part", "seed", "of"}``): the hash then covers those rows only (in ascending order), see :func:`halves`.
- ``calibrator.warnings``: the fit's warnings (empty for a clean fit; ``release`` writes a config with any only
  when told to, and ``check`` fails such a config). Configs written before it have no such key.
- ``config_sha256``: SHA-256 of the canonical JSON (sorted keys, separators ``,`` and ``:``, ASCII) of the config
  without that field (and without ``signature``), so that an accidentally changed config is detected. Anyone can
  recompute it after a deliberate edit: ``release --sign`` adds ``signature``, an Ed25519 signature
  (:mod:`calibview.core.release.signing`), which ``check --trust`` verifies. Non-finite numbers are stored as null.

Reading a config refuses a file that is not a regular file, a JSON object with a key twice, and (after the hash
matched) any field of the wrong type or range (:mod:`calibview.core.release.strict`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from datetime import datetime, timezone
from typing import Any, Mapping, Optional

import h5py
import numpy as np

from calibview.core import calibrators as calib
from calibview.core.io import discovery
from calibview.core.io import logits as lg
from calibview.core.io import schema
from calibview.core.io import writer
from calibview.core.io.toplabel import format as tf
from calibview.core.io.toplabel import write as tw
from calibview.core.io.toplabel.read import read_toplabel
from calibview.core.errors import CalibviewError, ParameterError
from calibview.core.stats.metrics import METRIC_NAMES

SCHEMA = "calibview.inference-config/1"
CONFIG_KEYS = ("schema", "model", "dataset", "class_names", "calibrator", "thresholds", "provenance", "settings",
               "metrics", "parent", "config_sha256")
PROVENANCE_KEYS = ("file", "fit_split", "fit_sha256", "n_fit", "eval_split", "eval_sha256", "n_eval",
                   "calibview_version", "created")
SETTINGS_KEYS = ("bins", "bandwidth", "kernel", "n_boot", "seed", "level")
#: rows hashed per read (the stored dtype's bytes of these rows are fed to the hash, then the next rows)
HASH_ROWS_BYTES = 16 << 20


# --- hashes ------------------------------------------------------------------------------------------------------

def split_sha256(file: str | os.PathLike, run: str | schema.RunInfo, split: str,
                 rows: Optional[np.ndarray] = None) -> str:
    """SHA-256 hex of the split's scores dataset (``logits`` or ``probs``) as stored (dtype and byte order of the
    file, C order), then of its ``labels`` dataset, read chunk by chunk. ``rows``: ascending row indices to hash
    instead of all rows (a half of a split, :func:`halves`)."""
    info = discovery.find_run(file, run) if isinstance(run, str) else run
    split_info = info.split(split)
    h = hashlib.sha256()
    path = os.path.abspath(os.fspath(file))
    try:
        with h5py.File(path, "r") as f:
            for ds in [f[p] for p in _hashed_paths(split_info)]:
                row_bytes = ds.dtype.itemsize * int(np.prod(ds.shape[1:], dtype=np.int64))
                step = max(1, HASH_ROWS_BYTES // max(row_bytes, 1))
                if rows is None:
                    for start in range(0, ds.shape[0], step):
                        h.update(np.ascontiguousarray(ds[start:start + step]).tobytes())
                else:
                    for start in range(0, len(rows), step):
                        h.update(np.ascontiguousarray(ds[np.asarray(rows[start:start + step])]).tobytes())
    except OSError as e:
        if schema.is_locked(e):
            raise CalibviewError(schema.locked_message(path)) from None
        raise CalibviewError(f"{path}: could not read {split_info.path} to hash it ({e}).") from None
    return h.hexdigest()


def _hashed_paths(split_info: schema.SplitInfo) -> list[str]:
    """The datasets of a split that :func:`split_sha256` hashes, in order: the scores then the labels; for a
    top-label split its confidence, predictions and labels."""
    if split_info.kind == tf.KIND:
        return [schema.join(split_info.path, name) for name in (tf.CONFIDENCE, tf.PREDICTIONS, tf.LABELS)]
    return [split_info.scores_path, split_info.labels_path]


def halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The seeded fit and verify halves of ``n`` rows (ascending indices; the fit half has n // 2 rows)."""
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2:])


def rows_of(spec: Optional[Mapping[str, Any]]) -> Optional[np.ndarray]:
    """The row indices a provenance ``fit_rows`` / ``eval_rows`` entry names (None: the whole split)."""
    if not spec:
        return None
    fit, verify = halves(int(spec["of"]), int(spec["seed"]))
    return fit if spec["part"] == "fit" else verify


def write_subset(info: schema.RunInfo, parts: Mapping[str, np.ndarray], directory: str, source: str
                 ) -> schema.RunInfo:
    """Write the rows ``parts[name]`` of split ``source`` of ``info`` as splits ``name`` of a new file in
    ``directory`` (uncompressed, same run name and class names) and return that run: how halves of a split are
    evaluated by the engine, which reads whole splits."""
    path = os.path.join(directory, "subset.h5")
    if info.split(source).kind == tf.KIND:
        top = read_toplabel(info.file, info, source)
        tw.write_toplabel(path, info.model, info.dataset,
                          {name: (top.confidence[rows], top.predictions[rows], top.labels[rows])
                           for name, rows in parts.items()},
                          num_classes=info.k or None, class_names=info.class_names, compression=None)
        return discovery.find_run(path, info.name)
    data = lg.read_split(info.file, info, source)
    writer.write_splits(path, info.model, info.dataset,
                        {name: (data.kind, data.scores[rows], data.labels[rows]) for name, rows in parts.items()},
                        class_names=info.class_names, compression=None)
    return discovery.find_run(path, info.name)


def disjoint_halves(a: Optional[Mapping[str, Any]], b: Optional[Mapping[str, Any]]) -> bool:
    """Whether two ``fit_rows``/``eval_rows`` entries name the two different halves of one seeded split."""
    return bool(a and b and a.get("seed") == b.get("seed") and a.get("of") == b.get("of")
                and a.get("part") != b.get("part"))


def canonical_json(obj: Any) -> bytes:
    """UTF-8 JSON with sorted keys and no spaces (non-finite numbers refused): the bytes ``config_sha256``
    hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def config_sha256(config: Mapping[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of ``config`` without its ``config_sha256`` and ``signature`` fields (the
    signature covers the hash, so it is added after it)."""
    return hashlib.sha256(canonical_json({k: v for k, v in config.items()
                                          if k not in ("config_sha256", "signature")})).hexdigest()


def _finite(x: Any) -> Any:
    """JSON-safe: non-finite floats (a missing interval, an infinite NLL) become null; numpy scalars plain."""
    if isinstance(x, Mapping):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(float(x)) else None
    return x


# --- building ----------------------------------------------------------------------------------------------------

def metrics_of(row: Mapping[str, Any]) -> dict:
    """The flat metric keys of a metrics.csv row (value, _lo, _hi of every metric)."""
    return {key: row[key] for m in METRIC_NAMES for key in (m, f"{m}_lo", f"{m}_hi") if key in row}


def build_config(run: schema.RunInfo, fitted: calib.Fitted, *, thresholds: Mapping[str, Any],
                 provenance: Mapping[str, Any], settings: Mapping[str, Any], metrics: Mapping[str, Any],
                 parent: Optional[str] = None, weights: Optional[list] = None, k: Optional[int] = None) -> dict:
    """The sealed config (``config_sha256`` set). ``provenance`` holds every PROVENANCE_KEYS entry but the
    version and the time, which are added here. ``weights``: the model weights' records
    (:mod:`calibview.core.release.weights`), stored as the ``weights`` key when given. ``k``: the number of
    classes when the run does not know it (a top-label run without ``num_classes``: the classes seen)."""
    from calibview._version import __version__

    names = list(run.class_names) if run.class_names is not None else [str(i) for i in range(run.k or k or 0)]
    prov = {**{k: provenance[k] for k in PROVENANCE_KEYS if k in provenance},
            "calibview_version": __version__,
            "created": datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")}
    prov.update({k: v for k, v in provenance.items() if k not in prov})          # fit_rows / eval_rows
    config = {"schema": SCHEMA, "model": run.model, "dataset": run.dataset, "class_names": names,
              "calibrator": {"method": fitted.method, "params": fitted.to_json()["params"],
                             "warnings": list(fitted.warnings),
                             **({"form": tf.KIND} if tf.is_toplabel(run) else {})},
              "thresholds": {"global": thresholds.get("global"), "per_class": thresholds.get("per_class"),
                             "target_precision": thresholds.get("target_precision")},
              "provenance": prov, "settings": {k: settings[k] for k in SETTINGS_KEYS},
              "metrics": dict(metrics), "parent": parent}
    if weights:
        config["weights"] = [dict(w) for w in weights]
    config = _finite(config)
    config["config_sha256"] = config_sha256(config)
    return config


def config_text(config: Mapping[str, Any]) -> str:
    """The text of inference_config.json (indented JSON and a final newline)."""
    return json.dumps(config, indent=2, allow_nan=False) + "\n"


def decide_thresholds(conf: np.ndarray, pred: np.ndarray, correct: np.ndarray, k: int, *,
                      threshold: Optional[float] = None, target_precision: Optional[float] = None) -> dict:
    """Thresholds decided on calibrated scores of the fit split: a given global ``threshold``; or, for a
    ``target_precision``, the global threshold and one per class (None where the target cannot be reached);
    or none at all."""
    from calibview.core.release import stats as rs

    if threshold is not None and target_precision is not None:
        raise ParameterError("Give either threshold or target_precision, not both.", "threshold", "target_precision")
    if threshold is not None:
        if not 0.0 <= threshold <= 1.0:
            raise ParameterError(f"threshold must lie in [0, 1] (a calibrated confidence), not {threshold}.",
                                 "threshold")
        return {"global": float(threshold), "per_class": None, "target_precision": None}
    if target_precision is not None:
        if not 0.0 < target_precision <= 1.0:
            raise ParameterError(f"target_precision must lie in (0, 1], not {target_precision}.", "target_precision")
        return {"global": rs.global_threshold(conf, correct, target_precision),
                "per_class": rs.per_class_thresholds(conf, pred, correct, k, target_precision),
                "target_precision": float(target_precision)}
    return {"global": None, "per_class": None, "target_precision": None}


def has_thresholds(config: Mapping[str, Any]) -> bool:
    """Whether the config ships a global or any per-class threshold."""
    t = config.get("thresholds") or {}
    return t.get("global") is not None or any(v is not None for v in (t.get("per_class") or []))


# --- loading and verifying ---------------------------------------------------------------------------------------

def read_config(path: str | os.PathLike) -> Any:
    """The parsed JSON of ``path``, not yet verified: a FIFO, device or folder, a binary or HDF5 file, bad JSON
    or a key given twice in one object is one sentence."""
    from calibview.core.calibrators.file import load_json

    return load_json(os.fspath(path), "an inference config",
                     "give an inference_config.json written by calibview release")


def load_config(path: str | os.PathLike) -> dict:
    """Read and verify an inference config: schema, keys, ``config_sha256`` (an edited config is refused) and
    every field's type and range."""
    return verify_config(read_config(path), os.fspath(path))


def is_config(obj: Any) -> bool:
    """Whether ``obj`` is a mapping with the inference config's schema."""
    return isinstance(obj, Mapping) and obj.get("schema") == SCHEMA


def verify_config(config: Any, path: str = "the inference config") -> dict:
    """A copy of ``config`` when it is an inference config with every key, an intact ``config_sha256`` and fields
    of the right types and ranges (:func:`calibview.core.release.strict.validate`); else a CalibviewError naming
    ``path``."""
    from calibview.core.release import strict

    if not is_config(config):
        raise CalibviewError(f"{path} is not a calibview inference config (its schema is not {SCHEMA!r}).")
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise CalibviewError(f"{path} lacks the key(s) {', '.join(missing)}; give a config written by "
                             f"calibview release.")
    try:
        actual = config_sha256(config)
    except (TypeError, ValueError):
        actual = None
    if actual != config["config_sha256"]:
        raise CalibviewError(f"{path} was modified after it was written (its config_sha256 does not match its "
                             f"content); restore the released file or release again.")
    strict.validate(config, path)
    return dict(config)


def calibrator_of(config: Mapping[str, Any]) -> calib.Fitted:
    """The shipped calibrator, ready to apply."""
    prov = config["provenance"]
    c = config["calibrator"]
    fit = {"file": prov.get("file"), "run": run_name(config), "split": prov.get("fit_split"), "n": prov.get("n_fit")}
    if c.get("form") == tf.KIND:          # fitted on the confidence's two-class problem
        return calib.from_json({"method": c["method"], "k": 2, "params": c["params"], "fit": {**fit, "form": tf.KIND}})
    return calib.from_json({"method": c["method"], "k": len(config["class_names"]), "params": c["params"],
                            "fit": fit})


def run_name(config: Mapping[str, Any]) -> str:
    """The name of the run the config was released for: MODEL/DATASET, or MODEL without a dataset."""
    return f"{config['model']}/{config['dataset']}" if config["dataset"] else config["model"]


def matching_run(config: Mapping[str, Any], file: str | os.PathLike, path: str = "the config",
                 run: Optional[str] = None) -> schema.RunInfo:
    """The run of ``file`` the config was released for (``run`` overrides the name): same class count and, where
    the file has class names, the same names; otherwise a one-sentence error."""
    name = run or run_name(config)
    info = discovery.find_run(file, name)
    names = config["class_names"]
    # K 0 is a top-label run that does not know its class count: its predictions and labels are checked
    # against the config's classes when it is read for the check.
    if info.k and info.k != len(names):
        raise CalibviewError(f"{path} was released for K = {len(names)} classes but run {info.name} in {file} has "
                             f"K = {info.k}; check it against data of the same model.")
    if info.class_names is not None and list(info.class_names) != list(names):
        raise CalibviewError(f"{path} was released for other class names than run {info.name} in {file} has; "
                             f"check it against data of the same model.")
    return info


def check_fit_hash(config: Mapping[str, Any], info: schema.RunInfo, path: str = "the config") -> Optional[bool]:
    """True when the file holds the config's fit split and its bytes hash to ``fit_sha256``; None when the file
    does not hold it; a one-sentence error when it does with other bytes (data or config tampered with)."""
    prov = config["provenance"]
    split = prov.get("fit_split")
    if not split or split not in info.split_names or not prov.get("fit_sha256"):
        return None
    spec = prov.get("fit_rows")
    if spec and int(spec["of"]) != info.split(split).n:
        raise CalibviewError(f"{path} was fitted on half of a {spec['of']}-row split {split!r} but "
                             f"{info.file} holds {info.split(split).n} rows there; the fit data differ.")
    if split_sha256(info.file, info, split, rows_of(spec)) != prov["fit_sha256"]:
        raise CalibviewError(f"{info.file}: split {split!r} of run {info.name} does not hash to the config's "
                             f"fit_sha256, so the calibrator in {path} was not fitted on these data (or either "
                             f"was modified).")
    return True


def ece_reading(ece: float) -> str:
    """The reading of an ECE value: near-perfect below 1 %, acceptable up to 5 %, watch up to 10 %, else must be
    recalibrated (unknown when not finite)."""
    if not math.isfinite(ece):
        return "unknown"
    if ece < 0.01:
        return "near-perfect"
    if ece <= 0.05:
        return "acceptable"
    if ece <= 0.10:
        return "watch"
    return "must be recalibrated"


__all__ = ["SCHEMA", "build_config", "calibrator_of", "check_fit_hash", "config_sha256", "config_text",
           "decide_thresholds", "ece_reading", "halves", "has_thresholds", "load_config", "matching_run",
           "read_config", "split_sha256", "verify_config"]
