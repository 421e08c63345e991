"""Reading one regression split into validated float64 arrays (:func:`read_regression_split`)."""

from __future__ import annotations

import numpy as np

from calibview.core.io import guard
from calibview.core.io.regression.checks import check_values
from calibview.core.io.regression.schema import RegRunInfo, RegSplitData
from calibview.core.io.schema import open_file


def read_regression_split(run: RegRunInfo, split: str, *, allow_crossing: bool = False) -> RegSplitData:
    """The validated arrays of ``split`` of ``run`` (see :class:`RegSplitData`); CalibviewError (one sentence) for
    NaN targets, non-finite values, a variance <= 0 or crossing quantiles (sorted instead with
    ``allow_crossing``)."""
    info = run.split(split)
    with open_file(run.file) as f:
        group = f[info.path]

        def read(name: str) -> np.ndarray:
            ds = guard.child(group, name, run.file)
            guard.check_dataset(ds, run.file)
            return np.asarray(ds[()], dtype=np.float64)

        mean, targets, values = read("mean"), read("targets"), read(info.form)
    values, sorted_rows = check_values(run.file, info.path, mean, targets, info.form, values, allow_crossing)
    arrays = {info.form: values}
    if info.form == "quantiles":
        arrays["levels"] = np.asarray(info.levels, dtype=np.float64)
    for a in (mean, targets, *arrays.values()):
        a.setflags(write=False)
    return RegSplitData(mean=mean, targets=targets, form=info.form, sorted_rows=sorted_rows, info=info, run=run,
                        **arrays)
