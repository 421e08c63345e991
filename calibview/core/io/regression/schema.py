"""The records of a regression run: :class:`RegSplitInfo` and :class:`RegRunInfo` (metadata only) and
:class:`RegSplitData` (the validated arrays of one split)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Optional

import numpy as np

from calibview.core.errors import CalibviewError

#: the predictive forms, in the order they are looked for; a split holds exactly one of them
FORMS = ("var", "quantiles", "samples")
#: the datasets every regression split holds
BASE = ("mean", "targets")


@dataclass(frozen=True)
class RegSplitInfo:
    """One split of a regression run: metadata only. ``width`` is Q (quantiles), S (samples) or 1 (var)."""

    name: str
    path: str                     # HDF5 group path of the split
    n: int
    form: str                     # "var" | "quantiles" | "samples"
    width: int
    levels: Optional[tuple[float, ...]] = None   # the Q quantile levels in (0, 1), increasing (quantiles only)


@dataclass(frozen=True)
class RegRunInfo:
    """One regression model on one dataset: its splits (in file order) and string attributes."""

    file: str
    name: str                     # "model/dataset", as --run takes it
    model: str
    dataset: str
    path: str
    form: str                     # the form of every split of the run
    splits: tuple[RegSplitInfo, ...]
    attrs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    @property
    def split_names(self) -> tuple[str, ...]:
        """The names of the run's splits, in file order."""
        return tuple(s.name for s in self.splits)

    def split(self, name: str) -> RegSplitInfo:
        """The split called ``name``; CalibviewError naming the available splits if there is none."""
        for s in self.splits:
            if s.name == name:
                return s
        raise CalibviewError(f"{self.file}: split '{name}' not found in regression run '{self.name}'; available "
                             f"splits: {', '.join(self.split_names)}.")

    def describe(self) -> str:
        """The form as ``runs`` prints it: "var", "quantiles (Q=19)", "samples (S=200)"."""
        s = self.splits[0]
        return {"var": "var", "quantiles": f"quantiles (Q={s.width})", "samples": f"samples (S={s.width})"}[self.form]


@dataclass(frozen=True)
class RegSplitData:
    """The validated float64 arrays of one regression split: ``mean`` and ``targets`` (N,), and the one form:
    ``var`` (N,) > 0, ``quantiles`` (N, Q) non-decreasing along Q with ``levels`` (Q,), or ``samples`` (N, S).
    ``sorted_rows`` counts the rows whose crossing quantiles were sorted (``allow_crossing``)."""

    mean: np.ndarray
    targets: np.ndarray
    form: str
    var: Optional[np.ndarray] = None
    quantiles: Optional[np.ndarray] = None
    levels: Optional[np.ndarray] = None
    samples: Optional[np.ndarray] = None
    sorted_rows: int = 0
    info: Optional[RegSplitInfo] = None
    run: Optional[RegRunInfo] = None

    @property
    def n(self) -> int:
        """The number of samples N."""
        return int(self.targets.shape[0])
