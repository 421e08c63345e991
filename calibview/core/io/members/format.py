"""The members layout: names, the validation of a stored ``members`` dataset, and which member rows a split has.

A split's ``members`` dataset is (M, N, K) floating-point logits with the string attribute ``kind`` ("ensemble"
or "mc-dropout"); M >= 2, N and K as the split's ``labels`` and, where present, its ``logits``/``probs``. The
run's prediction is the ensemble (the mean of the member probabilities); the split's own ``logits``, when
present too, is the row ``member = "deterministic"``.
"""

from __future__ import annotations

from typing import Optional

import h5py
import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io.checks import check_shapes, check_stored

MEMBERS = "members"                          # the dataset's name inside a split
MEMBER_KINDS = ("ensemble", "mc-dropout")    # the values of its ``kind`` attribute
ENSEMBLE = "ensemble"                        # the member label of the ensemble's row
DETERMINISTIC = "deterministic"              # the member label of the split's own logits beside its members
SELECTIONS = ("all", "ensemble", "none")     # ``--members``: which member rows an evaluation gets


def check_members(file: str, ds: h5py.Dataset, labels: h5py.Dataset,
                  scores: Optional[h5py.Dataset] = None) -> tuple[int, str]:
    """(M, kind) of the stored members dataset ``ds`` ((M, N, K) floats); one-sentence CalibviewError when it is
    not 3-D, not floating point, has M < 2, no valid ``kind`` attribute, or disagrees with ``labels`` ((N,)) or
    the split's ``scores`` ((N, K'), K' must be K)."""
    check_stored(file, ds, labels)
    path = ds.name
    if len(ds.shape) != 3:
        raise CalibviewError(f"{file}: {path} has shape {tuple(ds.shape)} but members must be 3-D "
                             f"(M members, N samples, K classes).")
    m, n, k = (int(v) for v in ds.shape)
    check_shapes(file, path, (n, k), ds.dtype, labels.name, labels.shape, labels.dtype, "members")
    if m < 2:
        raise CalibviewError(f"{file}: {path} holds M = {m} member, but an ensemble needs at least 2; store a "
                             f"single model's scores as logits instead.")
    kind = member_kind(file, ds)
    if scores is not None and len(scores.shape) == 2 and int(scores.shape[1]) != k:
        raise CalibviewError(f"{file}: {path} has K = {k} classes but {scores.name} beside it has K = "
                             f"{int(scores.shape[1])}; the members and the deterministic scores must share their "
                             f"classes.")
    return m, kind


def member_kind(file: str, ds: h5py.Dataset) -> str:
    """The ``kind`` attribute of the members dataset ``ds`` ("ensemble" | "mc-dropout"); CalibviewError if it is
    missing or another value."""
    raw = ds.attrs.get("kind")
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    elif isinstance(raw, np.ndarray) and raw.shape == ():
        raw = raw.item()
        raw = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if raw not in MEMBER_KINDS:
        shown = "none" if raw is None else repr(raw)
        raise CalibviewError(f"{file}: {ds.name} needs the string attribute kind = \"ensemble\" or \"mc-dropout\" "
                             f"(it has {shown}).")
    return str(raw)


def check_member_arrays(label: str, members, labels, k: Optional[int] = None) -> np.ndarray:
    """In-memory members ((M, N, K) floats, or a sequence of M (N, K) arrays) checked by the rules of the stored
    layout; returns them as one (M, N, K) array. ``labels`` (N,) and ``k`` (the deterministic scores' K, if any)
    must agree; every failure is one sentence starting with ``label``."""
    if isinstance(members, (list, tuple)):
        shapes = [np.shape(a) for a in members]
        ks = {s[-1] if len(s) else None for s in shapes}
        ns = {s[0] if len(s) else None for s in shapes}
        if len(ks) > 1:
            raise CalibviewError(f"{label}: the members have different class counts "
                                 f"({', '.join(f'member {i} K = {s[-1]}' for i, s in enumerate(shapes))}); every "
                                 f"member must score the same K classes.")
        if len(ns) > 1:
            raise CalibviewError(f"{label}: the members have different sample counts "
                                 f"({', '.join(f'member {i} N = {s[0]}' for i, s in enumerate(shapes))}); every "
                                 f"member must score the same samples.")
        members = np.stack([np.asarray(a) for a in members]) if members else np.empty((0, 0, 0))
    a = np.asarray(members)
    if a.ndim != 3:
        raise CalibviewError(f"{label}: members has shape {a.shape} but must be 3-D (M members, N samples, "
                             f"K classes).")
    if a.dtype.kind != "f":
        raise CalibviewError(f"{label}: members has dtype {a.dtype} but must be floating-point logits.")
    if a.shape[0] < 2:
        raise CalibviewError(f"{label}: members holds M = {a.shape[0]} member, but an ensemble needs at least 2; "
                             f"pass a single model's scores as logits instead.")
    y = np.asarray(labels)
    if y.ndim != 1 or y.shape[0] != a.shape[1]:
        raise CalibviewError(f"{label}: members has N = {a.shape[1]} samples but the labels have shape "
                             f"{y.shape}; there must be one label per sample.")
    if k is not None and k != a.shape[2]:
        raise CalibviewError(f"{label}: members has K = {a.shape[2]} classes but the logits beside it have K = {k}; "
                             f"they must share their classes.")
    if not np.isfinite(a).all():
        bad = int((~np.isfinite(a)).any(axis=2).any(axis=0).sum())
        raise CalibviewError(f"{label}: {bad} samples of members contain NaN or Inf; fix or drop those rows.")
    return a


def member_labels(info, selection: str = "all") -> tuple[Optional[str], ...]:
    """The member rows of split ``info`` (a SplitInfo) for ``selection`` ("all" | "ensemble" | "none"): None
    (the ensemble: the run's prediction), then "deterministic" when the split has scores beside its members,
    then "0" .. "M-1"; ``(None,)`` for a split without members or with "ensemble" / "none"."""
    if selection not in SELECTIONS:
        raise CalibviewError(f"Unknown members selection {selection!r}; choose from {', '.join(SELECTIONS)}.")
    if not info.members or selection != "all":
        return (None,)
    own = (DETERMINISTIC,) if info.kind != MEMBERS else ()
    return (None,) + own + tuple(str(i) for i in range(info.members))


def check_member(info, member: Optional[str], file: str = "") -> None:
    """Refuse a member label that split ``info`` does not have (one sentence)."""
    if member is None:
        return
    where = f"{file}: " if file else ""
    if not info.members:
        raise CalibviewError(f"{where}split {info.path} has no members, so there is no member {member!r}.")
    if member == DETERMINISTIC:
        if info.kind == MEMBERS:
            raise CalibviewError(f"{where}split {info.path} holds members only, so there is no deterministic row.")
        return
    if not (member.isdigit() and int(member) < info.members):
        raise CalibviewError(f"{where}split {info.path} has members 0..{info.members - 1} (and the ensemble), "
                             f"not {member!r}.")


def stack_members(label: str, parts) -> tuple[np.ndarray, np.ndarray]:
    """((M, N, K) logits, (N,) int64 labels) from M (logits (N, K), labels (N,)) pairs of separately stored
    models (e.g. the runs of one test set); one sentence when their K or their labels differ, or M < 2."""
    parts = list(parts)
    if len(parts) < 2:
        raise CalibviewError(f"{label}: {len(parts)} member was given, but an ensemble needs at least 2.")
    ks = [np.shape(z)[-1] for z, _ in parts]
    if len(set(ks)) > 1:
        raise CalibviewError(f"{label}: the members have different class counts "
                             f"({', '.join(f'member {i} K = {k}' for i, k in enumerate(ks))}); every member must "
                             f"score the same K classes.")
    y0 = np.asarray(parts[0][1])
    for i, (_, y) in enumerate(parts[1:], 1):
        y = np.asarray(y)
        if y.shape != y0.shape or not np.array_equal(y, y0):
            differ = "their sample counts differ" if y.shape != y0.shape else \
                f"{int((y != y0).sum())} of {y0.shape[0]} labels differ"
            raise CalibviewError(f"{label}: member {i} has other labels than member 0 ({differ}); members must "
                                 f"score the same samples in the same order.")
    return np.stack([np.asarray(z) for z, _ in parts]), y0.astype(np.int64)
