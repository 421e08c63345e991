"""Runs held in memory: arrays that the engine reads as it reads a file, beside the file reader
(:mod:`calibview.core.io.logits`), the shards (:mod:`~calibview.core.io.shards`) and the streamed splits
(:mod:`~calibview.core.io.stream`).

:func:`register` validates the arrays by the rules of the format (:mod:`calibview.core.io.checks`, the same
one-sentence messages, naming the arrays as the caller spells them) and returns an :class:`ArrayRun` whose
``path`` is a unique pseudo-path (``"<arrays:...>"``). An :class:`~calibview.core.evaluation.request.EvalRequest`
naming that path is read from the arrays: :func:`list_runs` and :func:`read_split` answer as
:func:`~calibview.core.io.discovery.list_runs` and :func:`~calibview.core.io.logits.read_split` do on a file
holding the same arrays, with the same :class:`~calibview.core.io.schema.RunInfo` and
:class:`~calibview.core.io.schema.SplitData`. Nothing is copied that the file reader would not produce: float32
and float64 scores are handed on as read-only views of the caller's arrays, float16 is widened to float32 (as
the reader widens it), labels become int64.

:func:`register_toplabel` holds a top-label run (the confidence, predictions and labels of each split, the form of
:mod:`calibview.core.io.toplabel`), validated by that form's rules; :func:`read_toplabel` answers as
:func:`calibview.core.io.toplabel.read.read_toplabel` does on a file holding the same vectors (confidence float64,
predictions and labels int64, read-only; float64 confidences are handed on as views, others widened as the reader
widens them).

The registry holds the runs weakly: a run lives as long as its :class:`ArrayRun` is referenced (by the result
that evaluated it), and a path is never reused, so the engine's cache keys of different arrays never meet.
"""

from __future__ import annotations

import itertools
import threading
import uuid
import weakref
from types import MappingProxyType
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from calibview.core.errors import CalibviewError, Progress, check_cancel, report
from calibview.core.io import meta as md
from calibview.core.io.checks import validate_arrays
from calibview.core.io.limits.blocks import widened
from calibview.core.io.members import format as mf
from calibview.core.io.schema import RunInfo, SplitData, SplitInfo
from calibview.core.io.toplabel import format as tf

PREFIX = "<arrays:"

_RUNS: "weakref.WeakValueDictionary[str, ArrayRun]" = weakref.WeakValueDictionary()
_LOCK = threading.Lock()
_COUNTER = itertools.count(1)


class ArrayRun:
    """One run of in-memory splits: ``path`` (the pseudo-path a request names as its file), ``info`` (the
    RunInfo, ``info.name`` is "model/dataset") and ``data`` (split name -> validated SplitData: scores (N, K)
    float32/float64 read-only, labels (N,) int64 read-only; of a top-label run, TopLabelData), ``meta`` (split name -> column -> (N,) array)."""

    def __init__(self, path: str, info: RunInfo, data: Mapping[str, SplitData],
                 meta: Mapping[str, Mapping[str, np.ndarray]],
                 members: Optional[Mapping[str, np.ndarray]] = None,
                 own: Optional[Mapping[str, SplitData]] = None) -> None:
        self.path, self.info = path, info
        self.data = MappingProxyType(dict(data))
        self.meta = MappingProxyType({k: MappingProxyType(dict(v)) for k, v in meta.items()})
        #: split -> (M, N, K) read-only member logits; ``data`` then holds their ensemble (mean probabilities)
        self.members = MappingProxyType(dict(members or {}))
        #: split -> the split's own scores given beside its members (the "deterministic" row)
        self.own = MappingProxyType(dict(own or {}))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s.name} {s.n} x {s.k}" for s in self.info.splits)
        return f"ArrayRun({self.path}, {self.info.name}: {sizes})"


def is_memory(path) -> bool:
    """True if ``path`` is the pseudo-path of an in-memory run (alive or not)."""
    return isinstance(path, str) and path.startswith(PREFIX)


def _native(a: np.ndarray) -> np.ndarray:
    """``a`` in native byte order and C order: the array itself when it already is (no copy)."""
    return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (the caller's array keeps its own flags)."""
    v = a.view()
    v.flags.writeable = False
    return v


def register(model: str, dataset: str, splits: Mapping[str, tuple[str, object, object]], *,
             label: str = "arrays", names: Optional[Mapping[str, tuple[str, str]]] = None,
             class_names: Optional[Sequence[str]] = None,
             meta: Optional[Mapping[str, Mapping[str, object]]] = None,
             attrs: Optional[Mapping[str, str]] = None,
             members: Optional[Mapping[str, tuple[str, object]]] = None) -> ArrayRun:
    """Validate ``splits`` ({name: (kind "logits" | "probs", scores (N, K) float16/32/64, labels (N,) int)}) by
    the reading rules and hold them as one run ``model/dataset``; ``meta`` ({split: {column: (N,) values}}) and
    ``class_names`` (K strings) as the writer takes them. Messages start with ``label`` and name each split's
    arrays by ``names[split]`` ((scores name, labels name); default "<split> scores" / "<split> labels").

    ``members`` ({split: (kind "ensemble" | "mc-dropout", (M, N, K) logits)}) gives a split members, as the
    ``members`` dataset of a file does: the split's scores are then their ensemble (scores may be None; scores
    given beside them are the split's "deterministic" row)."""
    names = dict(names or {})
    splits = dict(splits)
    held: dict[str, np.ndarray] = {}
    own: dict[str, tuple[str, object, object]] = {}
    for split, (mkind, ms) in (members or {}).items():
        if mkind not in mf.MEMBER_KINDS:
            raise CalibviewError(f"{label}: the members kind must be 'ensemble' or 'mc-dropout', not {mkind!r}.")
        kind, scores, labels = splits.get(split, ("logits", None, None))
        if labels is None:
            raise CalibviewError(f"{label}: the members of split '{split}' need labels.")
        k = None if scores is None else int(np.shape(scores)[-1])
        a = mf.check_member_arrays(label, ms, labels, k)
        a = _native(widened(a))
        if scores is not None:
            own[split] = (kind, scores, labels)
        held[split] = _read_only(a)
        splits[split] = ("probs", _ensemble(a), labels)
    checked: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}
    stored: dict[str, str] = {}
    for split, (kind, scores, labels) in splits.items():
        sname, lname = names.get(split, (f"{split} scores", f"{split} labels"))
        s, y = validate_arrays(label, sname, lname, kind, scores, labels)
        stored[split] = str(s.dtype)
        s = _native(widened(s))     # float16 widened, as read_split does
        y = y if y.dtype == np.int64 else y.astype(np.int64)
        checked[split] = (kind, s, _native(y))
    ks = {split: s.shape[1] for split, (_, s, _) in checked.items()}
    if len(set(ks.values())) > 1:
        detail = ", ".join(f"{names.get(sp, (sp,))[0]} K = {k}" for sp, k in ks.items())
        raise CalibviewError(f"{label}: the splits have different class counts ({detail}); a run's splits must "
                             f"share their classes.")
    k = next(iter(ks.values()))
    cnames = None if class_names is None else tuple(str(c) for c in class_names)
    if cnames is not None and len(cnames) != k:
        raise CalibviewError(f"{label}: {len(cnames)} class names were given but the scores have K = {k} columns.")
    columns = _meta_columns(label, meta, {split: s.shape[0] for split, (_, s, _) in checked.items()})
    path, run_path = _new_path(), _run_path(model, dataset)
    infos = tuple(SplitInfo(name=split, path=f"{run_path}/{split}", n=int(s.shape[0]), k=k,
                            kind=(own[split][0] if split in own else "members") if split in held else kind,
                            dtype=str(held[split].dtype) if split in held else stored[split],
                            meta=tuple(columns.get(split, {})), members=int(held[split].shape[0]) if split in held
                            else 0, members_kind=members[split][0] if split in held else "")
                  for split, (kind, s, _) in checked.items())
    info = _run_info(path, model, dataset, run_path, k, infos, cnames, attrs)
    data = {sp.name: SplitData(scores=_read_only(checked[sp.name][1]), labels=_read_only(checked[sp.name][2]),
                               kind=checked[sp.name][0], info=sp, run=info) for sp in infos}
    own_data = {}
    for sp in infos:
        if sp.name in own:
            kind, scores, labels = own[sp.name]
            sc, y = validate_arrays(label, f"{sp.name} scores", f"{sp.name} labels", kind, scores, labels)
            sc = _native(widened(sc))
            own_data[sp.name] = SplitData(scores=_read_only(sc), labels=data[sp.name].labels, kind=kind, info=sp,
                                          run=info)
    run = ArrayRun(path, info, data, columns, held, own_data)
    with _LOCK:
        _RUNS[path] = run
    return run


def _meta_columns(label: str, meta: Optional[Mapping[str, Mapping[str, object]]], rows: Mapping[str, int]
                  ) -> dict[str, dict[str, np.ndarray]]:
    """{split: {column: (N,) values}} of ``meta``, each column checked by the writer's rules against its split's
    ``rows[split]`` samples; a split not in ``rows`` is refused."""
    columns: dict[str, dict[str, np.ndarray]] = {}
    for split, cols in (meta or {}).items():
        if split not in rows:
            raise CalibviewError(f"{label}: metadata was given for split '{split}', which is not among the splits "
                                 f"({', '.join(rows)}).")
        for column, values in (cols or {}).items():
            md.check_name(label, f"meta of {split}", column)
            columns.setdefault(split, {})[column] = md.validate(label, f"meta[{column!r}]", values, rows[split])
    return columns


def _new_path() -> str:
    """A fresh in-memory path, never reused in this process (see :func:`is_memory`)."""
    return f"{PREFIX}{next(_COUNTER)}:{uuid.uuid4().hex[:12]}>"


def _run_path(model: str, dataset: str) -> str:
    return "/" + "/".join([model] + ([dataset] if dataset else []))


def _run_info(path: str, model: str, dataset: str, run_path: str, k: int, infos: tuple, cnames, attrs) -> RunInfo:
    return RunInfo(file=path, name=f"{model}/{dataset}" if dataset else model, model=model, dataset=dataset,
                   path=run_path, k=k, splits=infos, class_names=cnames,
                   attrs=MappingProxyType({str(a): str(v) for a, v in (attrs or {}).items()}))


def _num_classes(label: str, num_classes, class_names: Optional[tuple[str, ...]]) -> int:
    """K of a top-label run: ``num_classes`` (one integer >= 2), else the number of class names, else 0 (unknown)."""
    if num_classes is not None:
        if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or int(num_classes) < 2:
            raise CalibviewError(f"{label}: num_classes must be one integer >= 2 (the number of classes K) but is "
                                 f"{num_classes!r}.")
        if class_names is not None and len(class_names) != int(num_classes):
            raise CalibviewError(f"{label}: {len(class_names)} class names were given but num_classes is "
                                 f"{int(num_classes)}.")
        return int(num_classes)
    return len(class_names) if class_names is not None else 0


def _toplabel_vectors(label: str, shown: Mapping[str, str], conf, pred, labels, k: int):
    """The (confidence float64, predictions int64, labels int64) of one split, checked by the top-label rules
    (:mod:`calibview.core.io.toplabel.format`) and read-only; float64 native confidences are not copied."""
    given = {tf.CONFIDENCE: np.asarray(conf), tf.PREDICTIONS: np.asarray(pred), tf.LABELS: np.asarray(labels)}
    tf.check_layout(label, "", {a: v.shape for a, v in given.items()}, {a: v.dtype for a, v in given.items()},
                    names=shown)
    c = _native(given[tf.CONFIDENCE].astype(np.float64, copy=False))
    p, y = (_native(given[a].astype(np.int64, copy=False)) for a in (tf.PREDICTIONS, tf.LABELS))
    tf.check_values(label, "", c, p, y, k, names=shown)
    return _read_only(c), _read_only(p), _read_only(y)


def register_toplabel(model: str, dataset: str, splits: Mapping[str, tuple[object, object, object]], *,
                      num_classes: Optional[int] = None, label: str = "arrays",
                      names: Optional[Mapping[str, tuple[str, str, str]]] = None,
                      class_names: Optional[Sequence[str]] = None,
                      meta: Optional[Mapping[str, Mapping[str, object]]] = None,
                      attrs: Optional[Mapping[str, str]] = None) -> ArrayRun:
    """Validate ``splits`` ({name: (confidence (N,) float in [0, 1], predictions (N,) int, labels (N,) int)}) by the
    rules of a top-label file and hold them as one top-label run ``model/dataset``. K is ``num_classes``, else the
    number of ``class_names``, else unknown (``info.k`` 0, as a file without ``num_classes``): predictions and
    labels must then be >= 0 only. Messages start with ``label`` and name each split's vectors by
    ``names[split]`` ((confidence, predictions, labels) names; default "<split> confidence", ...)."""
    names = dict(names or {})
    cnames = None if class_names is None else tuple(str(c) for c in class_names)
    k = _num_classes(label, num_classes, cnames)
    checked: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    stored: dict[str, str] = {}
    for split, (conf, pred, labels) in dict(splits).items():
        shown = dict(zip((tf.CONFIDENCE, tf.PREDICTIONS, tf.LABELS),
                         names.get(split, tuple(f"{split} {a}" for a in (tf.CONFIDENCE, tf.PREDICTIONS, tf.LABELS)))))
        stored[split] = str(np.asarray(conf).dtype)
        checked[split] = _toplabel_vectors(label, shown, conf, pred, labels, k)
    columns = _meta_columns(label, meta, {split: c.shape[0] for split, (c, _, _) in checked.items()})
    path, run_path = _new_path(), _run_path(model, dataset)
    infos = tuple(SplitInfo(name=split, path=f"{run_path}/{split}", n=int(c.shape[0]), k=k, kind=tf.KIND,
                            dtype=stored[split], meta=tuple(columns.get(split, {})))
                  for split, (c, _, _) in checked.items())
    info = _run_info(path, model, dataset, run_path, k, infos, cnames, attrs)
    data = {sp.name: tf.TopLabelData(*checked[sp.name], k=k, info=sp, run=info) for sp in infos}
    run = ArrayRun(path, info, data, columns)
    with _LOCK:
        _RUNS[path] = run
    return run


def _ensemble(members: np.ndarray) -> np.ndarray:
    """(N, K) float64 mean of the (M, N, K) members' softmax probabilities, member by member."""
    total = np.zeros(members.shape[1:], np.float64)
    for z in members:
        p = z.astype(np.float64)
        p -= p.max(axis=1, keepdims=True)
        np.exp(p, out=p)
        p /= p.sum(axis=1, keepdims=True)
        total += p
    return total / members.shape[0]


def lookup(path: str) -> ArrayRun:
    """The live run of pseudo-path ``path``; CalibviewError once its arrays were released."""
    with _LOCK:
        run = _RUNS.get(path)
    if run is None:
        raise CalibviewError(f"{path}: these in-memory arrays were released; evaluate them again.")
    return run


def list_runs(path: str) -> list[RunInfo]:
    """The one run of the in-memory ``path``, as :func:`calibview.core.io.discovery.list_runs` lists a file's."""
    return [lookup(path).info]


def read_meta(path: str, run: Union[str, RunInfo], split: str, column: str) -> np.ndarray:
    """The metadata column ``column`` of split ``split`` of the in-memory run at ``path``, (N,) read-only as
    :func:`calibview.core.io.logits.read_meta` returns a file's (validated when registered)."""
    held = lookup(path)
    held.info.split(split)
    cols = held.meta.get(split, {})
    if column not in cols:
        have = ", ".join(cols) if cols else "none"
        raise CalibviewError(f"{path}: split {split} has no metadata column '{column}' (available: {have}); give "
                             f"it in meta.")
    return cols[column]


def read_split(path: Optional[str], run: Union[str, RunInfo], split: str, *, chunk_rows: Optional[int] = None,
               progress: Optional[Progress] = None, cancel: Optional[threading.Event] = None,
               member: Optional[str] = None) -> SplitData:
    """Split ``split`` of the in-memory run at ``path`` (validated when registered, so nothing is read or
    copied); the signature of :func:`calibview.core.io.logits.read_split`, ``member`` as there."""
    held = lookup(path if path is not None else run.file)      # type: ignore[union-attr]
    check_cancel(cancel)
    info = held.info.split(split)                               # the RunInfo's sentence for a split it lacks
    if info.kind == tf.KIND:
        raise CalibviewError(f"{held.path}: split {split} of {held.info.name} is a top-label split (confidence, "
                             f"predictions, labels), which has no (N, K) scores to read.")
    report(progress, 1.0, f"Read {info.n} rows of {split} (in memory)")
    if member is None or member == "ensemble":
        return held.data[split]
    mf.check_member(info, member, held.path)
    if member == mf.DETERMINISTIC:
        return held.own[split]
    return SplitData(scores=held.members[split][int(member)], labels=held.data[split].labels, kind="logits",
                     info=info, run=held.info)


def read_toplabel(path: Optional[str], run: Union[str, RunInfo], split: str, *,
                  progress: Optional[Progress] = None,
                  cancel: Optional[threading.Event] = None) -> tf.TopLabelData:
    """Split ``split`` of the in-memory top-label run at ``path`` (validated when registered, so nothing is read or
    copied), as :func:`calibview.core.io.toplabel.read.read_toplabel` returns a file's."""
    held = lookup(path if path is not None else run.file)      # type: ignore[union-attr]
    check_cancel(cancel)
    info = held.info.split(split)
    if info.kind != tf.KIND:
        raise CalibviewError(f"{held.path}: split {split} of {held.info.name} stores {info.kind}, not the top-label "
                             f"form (confidence, predictions, labels).")
    report(progress, 1.0, f"Read {info.n} rows of {split} (in memory)")
    return held.data[split]
