"""Convert logits stored as .npz, .npy or .pt/.pth into the HDF5 logits format (docs/FORMAT.md, "Importing").

Arrays are found by name: ``logits`` or ``probs`` with ``labels`` is one split; ``logits_<s>`` / ``probs_<s>`` with
``labels_<s>`` is split ``<s>``. ``meta_<column>`` (or ``meta_<column>_<s>``) is a metadata column of the split.
A ``.npy`` file holds one array, so its labels are looked up next to it.
A binary model's (N,) or (N, 1) scores of class 1 become two class columns (:func:`binary_columns`).
Nothing is ever unpickled: .npz/.npy are loaded with ``allow_pickle=False`` and .pt with ``weights_only=True``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import zipfile
import zlib
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from calibview.core.io.limits import archives
from calibview.core.errors import CalibviewError, ParameterError, Progress, report
from calibview.core.io.checks import validate_arrays
from calibview.core.io.members.format import check_member_arrays
from calibview.core.io.members.write import write_members
from calibview.core.io.discovery import list_runs
from calibview.core.io.schema import PathLike, RunInfo
from calibview.core.io.writer import write_splits
from calibview.core.io.meta import check_name
from calibview.core.io.safe_io import refuse_overwriting_inputs
from calibview.core.io.meta import validate as validate_meta

SUFFIXES = (".npz", ".npy", ".pt", ".pth")
_KEY = re.compile(r"^(logits|probs|labels)(?:_(.+))?$")
_META = re.compile(r"^meta_(.+)$")


def _wanted(key) -> bool:
    return isinstance(key, str) and bool(_KEY.match(key) or _META.match(key))


def import_arrays(src: PathLike, out: PathLike, *, model: Optional[str] = None, dataset: Optional[str] = None,
                  split: Optional[str] = None, progress: Optional[Progress] = None,
                  overwrite: bool = False, binary: Optional[str] = None,
                  notes: Optional[list] = None) -> list[RunInfo]:
    """Write the splits found in ``src`` as run ``<model>/<dataset>`` of the HDF5 file ``out`` (created or appended
    to; an existing split is replaced only with ``overwrite=True``) and return that run, re-read from ``out``, as a
    one-item list.

    ``model`` defaults to the source file stem (without a ``_logits``/``_probs`` suffix for .npy), ``dataset`` to
    "data". ``split`` names the split of an unsuffixed pair (default "all"); for suffixed pairs it selects one.

    (N,) or (N, 1) floating-point scores are a binary model's scores of class 1 (:func:`binary_columns`):
    ``binary`` ("logits" or "probs") says which they are; otherwise the array's name does, and for an unnamed
    .npy the value range. Each conversion is described in a sentence appended to ``notes`` (without ``notes``:
    logged as a warning on the ``calibview`` logger)."""
    if binary not in (None, "logits", "probs"):
        raise ParameterError(f"binary must be 'logits' or 'probs', not {binary!r}.", "binary")
    src_path, out_path = Path(os.path.abspath(os.fspath(src))), Path(os.path.abspath(os.fspath(out)))
    if not src_path.is_file():
        raise CalibviewError(f"{src_path}: the file does not exist; check the path.")
    refuse_overwriting_inputs([out_path], [src_path])
    suffix = src_path.suffix.lower()
    report(progress, 0.0, f"Loading {src_path.name}")
    names: dict[str, tuple[str, str]] = {}
    named = True                      # the scores' kind comes from an array name (an unnamed .npy: a guess)
    if suffix == ".npz":
        from calibview.core.io.regression import importer as regression

        if regression.is_regression_npz(src_path):          # mean_<s>, targets_<s> and var/quantiles/samples
            return regression.import_regression_npz(src_path, out_path, model=model or _default_model(src_path),
                                                    dataset="data" if dataset is None else dataset, split=split,
                                                    overwrite=overwrite)
        arrays = _load_npz(src_path)
    elif suffix == ".npy":
        arrays, names = _load_npy_pair(src_path)
        named = bool(re.search(r"(^|_)(logits|probs)$", src_path.stem))
        refuse_overwriting_inputs([out_path], [labels_for_npy(src_path)])
    elif suffix in (".pt", ".pth"):
        arrays = _load_torch(src_path)
    else:
        raise CalibviewError(f"{src_path}: cannot import '{suffix}' files; use one of {', '.join(SUFFIXES)}.")
    meta_arrays = {k: arrays.pop(k) for k in [k for k in arrays if _META.match(k)]}
    splits = _pair_up(src_path, arrays, split, names)
    meta = _meta_of(src_path, meta_arrays, splits, arrays)
    # a 3-D logits_<split> (M, N, K) holds the split's members (calibview.core.io.members)
    stacked = {name: v for name, v in splits.items() if v[0] == "logits" and np.ndim(v[1]) == 3}
    for name, (kind, scores, labels, keys) in stacked.items():
        check_member_arrays(f"{src_path}: {keys[0]}", scores, labels)
        del splits[name]
    for name, (kind, scores, labels, keys) in list(splits.items()):
        kind, scores, note = binary_columns(kind, scores, named=named, binary=binary)
        splits[name] = (kind, scores, labels, keys)
        if note is not None:
            note = f"{src_path.name}: {keys[0]} {note}"
            if notes is None:
                logging.getLogger("calibview").warning(f"note: {note}")
            else:
                notes.append(note)
    for kind, scores, labels, (scores_name, labels_name) in splits.values():  # errors name the source arrays
        report(progress, 0.1, f"Checking {scores_name}")
        validate_arrays(str(src_path), scores_name, labels_name, kind, scores, labels)
    model = model or _default_model(src_path)
    dataset = "data" if dataset is None else dataset
    report(progress, 0.3, f"Writing {len(splits) + len(stacked)} split(s) to {out_path.name}")
    if stacked:
        write_members(out_path, model, dataset, {name: (v[1], v[2]) for name, v in stacked.items()},
                      overwrite=overwrite)
    if splits:
        write_splits(out_path, model, dataset, {name: value[:3] for name, value in splits.items()},
                     overwrite=overwrite, meta={k: v for k, v in (meta or {}).items() if k in splits} or None)
    report(progress, 1.0, f"Imported {src_path.name} as {model}/{dataset}")
    run_path = "/" + "/".join(p for p in (model, dataset) if p)
    return [r for r in list_runs(out_path) if r.path == run_path]


def binary_columns(kind: str, scores, *, named: bool = True, binary: Optional[str] = None
                   ) -> tuple[str, object, Optional[str]]:
    """(kind, scores, note): a binary model's scores of class 1, shape (N,) or (N, 1) floating point, as the
    (N, 2) class columns of the format, in the input's dtype; any other array unchanged with note None.

    Logits z become [0, z] (their softmax is [1 - sigmoid(z), sigmoid(z)]); probabilities p become [1 - p, p].
    Which they are: ``binary`` ("logits" or "probs") when given, else ``kind`` when ``named`` (the array's name
    said it), else the value range (probabilities when every value lies in [0, 1]). The note says what was done
    and by which rule, e.g. "(400,) read as binary logits z of class 1, stored as [0, z] (its name says
    logits)"."""
    a = np.asarray(scores)
    if a.dtype.kind != "f" or a.shape[:1] == (0,) or not (a.ndim == 1 or (a.ndim == 2 and a.shape[1] == 1)):
        return kind, scores, None
    v = a.reshape(-1)
    if binary is not None:
        kind, rule = binary, f"binary={binary!r}"
    elif named:
        rule = f"its name says {kind}"
    elif bool(np.all((v >= 0) & (v <= 1))):
        kind, rule = "probs", "every value lies in [0, 1]"
    else:
        kind, rule = "logits", "a value lies outside [0, 1]"
    if kind == "logits":
        out, what = np.stack([np.zeros_like(v), v], axis=1), "logits z of class 1, stored as [0, z]"
    else:
        out, what = np.stack([1 - v, v], axis=1), "probabilities p of class 1, stored as [1 - p, p]"
    return kind, out, f"{a.shape} read as binary {what} ({rule})"


def _brief(e: BaseException) -> str:
    """An exception's text as one clause (messages stay one sentence)."""
    return " ".join(str(e).split())[:200].rstrip(".").replace(". ", "; ")


def _default_model(src: Path) -> str:
    stem = src.stem
    if src.suffix.lower() == ".npy":
        stem = re.sub(r"_(logits|probs)$", "", stem)
    return stem


def _load_npz(src: Path) -> dict[str, np.ndarray]:
    try:
        archives.check_npz(str(src), _wanted)     # every member's size and their sum, before any is loaded
        with np.load(src, allow_pickle=False) as z:
            arrays = {key: z[key] for key in z.files if _wanted(key)}
            _require_scores(src, arrays, z.files)
            return arrays
    except ValueError as e:  # object arrays need pickle
        raise CalibviewError(f"{src}: an array in this .npz needs pickle to load ({_brief(e)}); store plain "
                             f"numeric arrays.") from None
    except (OSError, zipfile.BadZipFile, EOFError, zlib.error, RuntimeError, NotImplementedError) as e:
        raise CalibviewError(f"{src}: not a readable .npz file ({_brief(e)}).") from None


def _require_scores(src: Path, arrays: Mapping[str, np.ndarray], keys) -> None:
    """A clear error naming the keys the file does hold when none of them is a logits/probs array."""
    if not any(_KEY.match(k) and _KEY.match(k).group(1) != "labels" for k in arrays):
        raise CalibviewError(f"{src}: no 'logits' or 'probs' array found (keys: {', '.join(map(str, keys)) or 'none'}"
                             f"); name them logits/labels or logits_<split>/labels_<split>.")


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)  # memory-mapped: written out chunk by chunk
    except ValueError as e:
        raise CalibviewError(f"{path}: not a plain numeric .npy array ({_brief(e)}).") from None
    except OSError as e:
        raise CalibviewError(f"{path}: not a readable .npy file ({_brief(e)}).") from None


def labels_for_npy(src: Path) -> Path:
    """The labels file that goes with ``src``: for ``X_logits.npy`` or ``X_probs.npy`` the first of
    ``X_labels.npy`` and ``labels.npy`` that exists; for any other ``Y.npy``, ``Y_labels.npy`` or ``labels.npy``."""
    stem = re.sub(r"_(logits|probs)$", "", src.stem)
    candidates = [src.with_name(f"{stem}_labels.npy"), src.with_name("labels.npy")]
    for candidate in candidates:
        if candidate.is_file() and candidate != src:
            return candidate
    raise CalibviewError(f"{src}: no labels file found next to it (looked for "
                         f"{' and '.join(c.name for c in candidates)}).")


def _load_npy_pair(src: Path) -> tuple[dict[str, np.ndarray], dict[str, tuple[str, str]]]:
    kind = "probs" if re.search(r"(^|_)probs$", src.stem) else "logits"
    if re.search(r"(^|_)labels$", src.stem):
        raise CalibviewError(f"{src}: this is a labels file; import the logits (or probs) .npy next to it instead.")
    labels = labels_for_npy(src)
    return {kind: _load_npy(src), "labels": _load_npy(labels)}, {"": (src.name, labels.name)}


def _load_torch(src: Path) -> dict[str, np.ndarray]:
    import pickle

    import torch  # imported here: only .pt imports pay for it

    # numpy arrays inside a .pt need these globals; they rebuild plain numeric arrays and run no other code
    numpy_array_globals = [np.zeros(1).__reduce__()[0], np.ndarray, np.dtype] + [
        type(np.dtype(t)) for t in "?bBhHiIlLqQefd"]
    allow = getattr(torch.serialization, "safe_globals", None)  # torch < 2.5: tensors only
    archives.check_torch(str(src))      # the declared sizes of its records, before torch inflates any
    try:
        with allow(numpy_array_globals) if allow else contextlib.nullcontext():
            obj = torch.load(src, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        culprit = re.search(r"GLOBAL ([\w.]+)|got <class '([\w.]+)'>", str(e))
        detail = f" such as {culprit.group(1) or culprit.group(2)}" if culprit else ""
        raise CalibviewError(
            f"{src}: refusing to load, the file holds pickled Python objects{detail} that only a full unpickle "
            f"could restore; re-save it as torch.save({{'logits': tensor, 'labels': tensor}}, path)."
        ) from None
    except (RuntimeError, OSError, EOFError) as e:
        raise CalibviewError(f"{src}: not a readable PyTorch file ({_brief(e)}).") from None
    if not isinstance(obj, Mapping):
        raise CalibviewError(f"{src}: holds a {type(obj).__name__}, not a dict of 'logits'/'probs' and 'labels'.")
    arrays = {}
    _require_scores(src, {k: None for k in obj if isinstance(k, str) and _KEY.match(k)}, list(obj))
    for key, value in obj.items():
        if not _wanted(key):
            continue
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu()
            if value.dtype == torch.bfloat16:  # numpy has no bfloat16
                value = value.float()
            value = value.numpy()
        arrays[key] = np.asarray(value)
    return arrays


def _meta_of(src: Path, meta: Mapping[str, np.ndarray], splits: Mapping[str, tuple],
             scores: Mapping[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """``{split: {column: values}}`` from ``meta_<column>`` keys (the unsuffixed pair's split) or
    ``meta_<column>_<s>`` keys (split ``<s>`` of the suffixed pairs; the longest matching suffix wins, so columns
    and split names may hold underscores). Each column is validated against its split, naming the source key."""
    suffixed = sorted({_KEY.match(k).group(2) for k in scores if _KEY.match(k).group(2)}, key=len, reverse=True)
    out: dict[str, dict[str, np.ndarray]] = {}
    for key, values in meta.items():
        rest = _META.match(key).group(1)
        if not suffixed:
            target, column = next(iter(splits)), rest
        else:
            hit = next((s for s in suffixed if rest.endswith("_" + s) and len(rest) > len(s) + 1), None)
            if hit is None:
                raise CalibviewError(f"{src}: {key} does not end in the name of a split ({', '.join(suffixed)}); "
                                     f"name it meta_<column>_<split>.")
            target, column = hit, rest[:-len(hit) - 1]
        if target not in splits:              # a split the --split argument left out
            continue
        scores_array = splits[target][1]
        check_name(str(src), key, column)
        out.setdefault(target, {})[column] = validate_meta(str(src), key, values, np.shape(scores_array)[0])
    return out


def _pair_up(src: Path, arrays: Mapping[str, np.ndarray], split: Optional[str],
             names: Optional[Mapping[str, tuple[str, str]]] = None) -> dict[str, tuple]:
    """``{split name: (kind, scores, labels, (scores name, labels name))}`` from arrays named as in the module
    docstring; ``names`` overrides the names used in messages (for .npy pairs: the two file names)."""
    scores: dict[str, tuple[str, np.ndarray]] = {}
    labels: dict[str, np.ndarray] = {}
    for key, value in arrays.items():
        kind, suffix = _KEY.match(key).groups()
        name = suffix or ""
        if kind == "labels":
            labels[name] = value
        elif name in scores:
            raise CalibviewError(f"{src}: both {scores[name][0]}{'_' + name if name else ''} and {key} are "
                                 f"present; keep one of logits or probs per split.")
        else:
            scores[name] = (kind, value)
    if not scores:
        raise CalibviewError(f"{src}: no 'logits' or 'probs' array found (keys: {', '.join(arrays) or 'none'}); "
                             f"name them logits/labels or logits_<split>/labels_<split>.")
    missing = [n for n in scores if n not in labels]
    if missing:
        key = f"{scores[missing[0]][0]}{'_' + missing[0] if missing[0] else ''}"
        raise CalibviewError(f"{src}: {key} has no matching labels{'_' + missing[0] if missing[0] else ''} array.")
    if "" in scores and len(scores) > 1:
        raise CalibviewError(f"{src}: mixes unsuffixed and suffixed arrays ({', '.join(sorted(arrays))}); use one "
                             f"naming scheme.")

    def entry(name: str) -> tuple:
        kind = scores[name][0]
        keys = (f"{kind}_{name}", f"labels_{name}") if name else (kind, "labels")
        return (kind, scores[name][1], labels[name], (names or {}).get(name, keys))

    if "" in scores:
        return {split or "all": entry("")}
    if split is not None:
        if split not in scores:
            raise CalibviewError(f"{src}: split '{split}' not found; available splits: {', '.join(scores)}.")
        return {split: entry(split)}
    return {name: entry(name) for name in scores}
