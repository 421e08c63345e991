"""The records of the HDF5 logits format, and the helpers its readers and writers share (docs/FORMAT.md).

A *split* is any group holding a ``logits`` (or ``probs``) dataset of shape (N, K), or a ``members`` dataset of
shape (M, N, K) (:mod:`calibview.core.io.members`), and a ``labels`` dataset of shape (N,); its parent group is the
*run*. The canonical layout is ``/<model>/<dataset>/<split>/{logits,labels}``.

Here: the metadata records :class:`SplitInfo` and :class:`RunInfo`, the arrays of a read split
(:class:`SplitData`), the score kinds and the read chunk size, and the path, file-opening and message helpers of
discovery (:mod:`calibview.core.io.discovery`), validation (:mod:`calibview.core.io.checks`), reading
(:mod:`calibview.core.io.logits`) and writing (:mod:`calibview.core.io.writer`).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Optional, Union

import h5py
import numpy as np

from calibview.core.errors import CalibviewError

PathLike = Union[str, "os.PathLike[str]"]

SCORE_KINDS = ("logits", "probs")  # a group holding one of these plus ``labels`` is a split; logits win if both
CHUNK_BYTES = 64 << 20  # default read chunk: about this many bytes of scores


@dataclass(frozen=True)
class SplitInfo:
    """One split of a run: metadata only, no arrays."""

    name: str  # "val", "test", "all"
    path: str  # HDF5 group path of the split, e.g. "/resnet110/cifar10/val"
    n: int
    k: int
    kind: str  # "logits" or "probs"; "members" for a split holding members only
    dtype: str  # stored dtype of the scores, e.g. "float32"
    meta: tuple[str, ...] = ()  # metadata columns under <split>/meta, in file order (names only)
    members: int = 0  # M of a (M, N, K) ``members`` dataset beside (or instead of) the scores; 0 without one
    members_kind: str = ""  # "ensemble" | "mc-dropout" with members, else ""

    @property
    def members_path(self) -> str:
        """HDF5 path of the (M, N, K) members dataset, e.g. "/resnet110-ensemble/cifar10/val/members"."""
        return join(self.path, "members")

    @property
    def scores_path(self) -> str:
        """HDF5 path of the scores dataset, e.g. "/resnet110/cifar10/val/logits"."""
        return join(self.path, self.kind)

    @property
    def labels_path(self) -> str:
        """HDF5 path of the labels dataset, e.g. "/resnet110/cifar10/val/labels"."""
        return join(self.path, "labels")


@dataclass(frozen=True)
class RunInfo:
    """One model evaluated on one dataset: its splits, class names and string attributes (metadata only)."""

    file: str  # absolute path of the HDF5 file
    name: str  # "model/dataset" (what the CLI's --run takes); "model" when dataset is ""
    model: str
    dataset: str
    path: str  # HDF5 group path of the run
    k: int
    splits: tuple[SplitInfo, ...]  # in file order
    class_names: Optional[tuple[str, ...]]
    attrs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    @property
    def split_names(self) -> tuple[str, ...]:
        """The names of the run's splits, in file order."""
        return tuple(s.name for s in self.splits)

    def split(self, name: str) -> SplitInfo:
        """The split called ``name``; CalibviewError naming the available splits if there is none."""
        for s in self.splits:
            if s.name == name:
                return s
        raise CalibviewError(
            f"{self.file}: split '{name}' not found in run '{self.name}' ({self.path}); "
            f"available splits: {', '.join(self.split_names)}."
        )


@dataclass(frozen=True)
class SplitData:
    """The validated arrays of one split. ``scores`` (N, K) float32/float64 and ``labels`` (N,) int64 are read-only."""

    scores: np.ndarray
    labels: np.ndarray
    kind: str  # "logits" | "probs"
    info: SplitInfo
    run: RunInfo


def abspath(path: PathLike) -> str:
    """``path`` as an absolute path string (the form every message and record uses)."""
    return os.path.abspath(os.fspath(path))


def join(group: str, name: str) -> str:
    """The HDF5 path of ``name`` inside ``group`` ("/" + "val" is "/val", "/a/" + "b" is "/a/b")."""
    return group.rstrip("/") + "/" + name


def open_file(file: str) -> h5py.File:
    """Open ``file`` read-only, turning every way that can fail into a one-sentence CalibviewError."""
    if not os.path.exists(file):
        raise CalibviewError(f"{file}: the file does not exist; check the path.")
    if os.path.isdir(file):
        raise CalibviewError(f"{file}: this is a directory, not an HDF5 logits file.")
    try:
        if not h5py.is_hdf5(file):
            raise CalibviewError(
                f"{file}: not an HDF5 file; convert .npz/.npy/.pt logits with `calibview import` first."
            )
        return h5py.File(file, "r")
    except OSError as e:
        if is_locked(e):
            raise CalibviewError(locked_message(file)) from None
        raise CalibviewError(f"{file}: could not be opened as an HDF5 file ({oneline(e)}).") from None


def is_locked(e: OSError) -> bool:
    """Whether h5py's error says the file is locked: HDF5 locks a file it writes (flock), and a reader then fails
    with EAGAIN ("unable to lock file, errno = 11")."""
    return e.errno in (errno.EAGAIN, errno.EWOULDBLOCK) or "unable to lock file" in str(e)


def locked_message(file: str) -> str:
    """The one sentence for a file that another program holds open for writing."""
    return (f"{file}: another program has this HDF5 file open for writing (HDF5 locks it meanwhile); close the file "
            f"there, or wait until it is written, and try again.")


def oneline(e: BaseException) -> str:
    """An exception's text as one clause: whitespace collapsed, no final period, inner sentences joined by ";"."""
    return " ".join(str(e).split()).rstrip(".").replace(". ", "; ")
