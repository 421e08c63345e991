"""The shard plan of a Dask run: which file holds which rows of a split, checked before any task is scheduled.

Every shard of the glob is listed and checked as the local reader checks a file (:func:`calibview.core.io.shards.
layout` for the runs, splits and K across shards; :func:`calibview.core.io.logits.open_split` for the guard,
shapes and dtypes of each split's datasets), and its identity (size, mtime) is recorded, so that a task meeting a
shard that vanished or was rewritten since ends the run with one sentence instead of mixing two versions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from calibview.core.errors import CalibviewError


@dataclass(frozen=True)
class Shard:
    """Rows ``start .. start + n`` of split ``split`` of run ``run`` (K classes) live in ``file``, shard number
    ``index`` of the sorted glob; ``size`` and ``mtime_ns`` as listed."""

    index: int
    file: str
    run: str
    split: str
    start: int
    n: int
    k: int
    size: int
    mtime_ns: int


def check_request(file: str, n_boot: int, bootstrap: str = "poisson") -> None:
    """Refuse what the Dask engine cannot do, before a cluster starts: a single file (it scores shards) and
    multinomial resamples (they cannot be drawn shard by shard; calibview.core.stats.resampling)."""
    from calibview.core.errors import ParameterError
    from calibview.core.io import shards as io_shards

    if not io_shards.is_pattern(file):
        raise ParameterError(f"engine=dask scores shards: give a quoted glob of HDF5 files such as 'logits-*.h5', "
                             f"not the single file {file}.", "engine")
    if n_boot and bootstrap != "poisson":
        raise ParameterError("engine=dask draws Poisson resamples, which can be drawn shard by shard: give "
                             "--bootstrap poisson (its default), or --n-boot 0.", "engine", "bootstrap")


def plan(pattern: str, run: str, split: str) -> tuple[Shard, ...]:
    """The shards of ``split`` of ``run`` over the files ``pattern`` matches, in order (CalibviewError naming the
    odd shard when one cannot be read or differs from the first)."""
    from calibview.core.io import discovery, schema
    from calibview.core.io import logits as lg
    from calibview.core.io import shards as io_shards

    files, per_file = io_shards.layout(pattern)
    out, at = [], 0
    for i, (f, runs) in enumerate(zip(files, per_file)):
        info = discovery.find_run(runs, run).split(split)
        st = _stat(f)
        with schema.open_file(f) as h5:
            lg.open_split(h5, f, info)          # the guard, shapes and dtypes, as a local read checks them
        out.append(Shard(i, f, run, split, at, int(info.n), int(info.k), st.st_size, st.st_mtime_ns))
        at += int(info.n)
    return tuple(out)


def check_unchanged(shard: Shard) -> None:
    """CalibviewError if ``shard``'s file vanished or was rewritten since it was planned."""
    try:
        st = os.stat(shard.file)
    except OSError:
        raise CalibviewError(f"The shard {shard.file} vanished during the run; nothing was written, restore it "
                             "and run again.") from None
    if (st.st_size, st.st_mtime_ns) != (shard.size, shard.mtime_ns):
        raise CalibviewError(f"The shard {shard.file} changed during the run; nothing was written, run again on "
                             "shards that stay as they are.")


def _stat(file: str) -> os.stat_result:
    try:
        return os.stat(file)
    except OSError:
        raise CalibviewError(f"The shard {file} is missing (it vanished after the glob was listed); restore it "
                             "or change the pattern.") from None
