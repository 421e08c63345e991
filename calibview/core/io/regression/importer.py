"""Importing regression predictions from .npz (docs/FORMAT.md, "Importing"): ``mean_<split>``,
``targets_<split>`` and one of ``var_<split>``, ``quantiles_<split>`` (with ``levels_<split>`` or one shared
``levels``) or ``samples_<split>``; unsuffixed keys are the split given by ``split`` (default "all"). Nothing
is unpickled; the output is written to a temporary copy that replaces it only once it reads back valid."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Optional

import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io.regression.checks import check_layout, check_values
from calibview.core.io.regression.schema import RegRunInfo
from calibview.core.io.regression.write import write_regression

_KEY = re.compile(r"^(mean|targets|var|quantiles|samples|levels)(?:_(.+))?$")


def is_regression_npz(src: Path) -> bool:
    """Whether the .npz holds regression keys (``mean``/``targets``...) and no classification scores."""
    try:
        with zipfile.ZipFile(src) as z:
            keys = [n[:-4] if n.endswith(".npy") else n for n in z.namelist()]
    except (OSError, zipfile.BadZipFile):
        return False
    has_scores = any(re.match(r"^(logits|probs)(_.+)?$", k) for k in keys)
    return not has_scores and any(re.match(r"^targets(_.+)?$", k) for k in keys)


def _load(src: Path) -> dict[str, np.ndarray]:
    try:
        with zipfile.ZipFile(src) as z:
            for info in z.infolist():
                guard.check_archive_member(str(src), info.filename, info.file_size, info.compress_size)
        with np.load(src, allow_pickle=False) as z:
            return {k: z[k] for k in z.files if _KEY.match(k)}
    except ValueError as e:
        raise CalibviewError(f"{src}: an array in this .npz needs pickle to load ({' '.join(str(e).split())}); "
                             "store plain numeric arrays.") from None
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise CalibviewError(f"{src}: not a readable .npz file ({' '.join(str(e).split())}).") from None


def _splits(src: Path, arrays: dict, split: Optional[str]) -> dict[str, dict[str, np.ndarray]]:
    shared_levels = arrays.pop("levels", None)
    out: dict[str, dict[str, np.ndarray]] = {}
    for key, value in arrays.items():
        kind, suffix = _KEY.match(key).groups()
        out.setdefault(suffix or split or "all", {})[kind] = value
    if split is not None and any(s != split for s in out):
        out = {s: v for s, v in out.items() if s == split}
    for name, parts in out.items():
        if "levels" not in parts and shared_levels is not None and "quantiles" in parts:
            parts["levels"] = shared_levels
        missing = [k for k in ("mean", "targets") if k not in parts]
        if missing:
            raise CalibviewError(f"{src}: split {name!r} has no {' or '.join(missing)} array; a regression split "
                                 "needs mean_<split> and targets_<split>.")
    if not out:
        raise CalibviewError(f"{src}: no regression split {split!r} found in the file.")
    return out


def import_regression_npz(src: Path, out: Path, *, model: str, dataset: str, split: Optional[str] = None,
                          overwrite: bool = False) -> list[RegRunInfo]:
    """Write the regression splits of the .npz ``src`` as run ``model/dataset`` of the HDF5 file ``out``
    (created or appended to; an existing split is replaced only with ``overwrite``); returns that run."""
    splits = _splits(src, _load(src), split)
    for name, parts in splits.items():
        where = f"{src.name}:{name}"
        shapes = {k: (tuple(v.shape), v.dtype) for k, v in parts.items() if k != "levels"}
        check_layout(str(src), where, shapes, parts.get("levels"))
        form = next(k for k in ("var", "quantiles", "samples") if k in parts)
        f64 = {k: np.asarray(parts[k], dtype=np.float64) for k in ("mean", "targets", form)}
        check_values(str(src), where, f64["mean"], f64["targets"], form, f64[form], allow_crossing=True)
    # kept as given: crossing quantiles are the readers' to refuse or sort (--allow-crossing), as for any file
    return [write_regression(out, model, dataset, splits, overwrite=overwrite, crossing="keep")]
