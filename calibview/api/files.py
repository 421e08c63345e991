"""``evaluate_file``: the evaluation of a run stored in an HDF5 file, or in shards matched by a glob, from a notebook;
on this process (``engine="local"``) or on a Dask cluster (``engine="dask"``).

The same request the command line builds for ``calibview metrics FILE``, with the same defaults (evaluate on
"test", fit on "val"), so ``evaluate_file(f).rows`` are the records of ``calibview metrics f --json``."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Mapping, Optional, Sequence, Union

from calibview.api.evaluation import _Progress, _names, _options, _settings
from calibview.api.result import Result
from calibview.core.errors import ParameterError

ENGINES = ("local", "dask")


def _run_info(path: str, run: Optional[str]):
    """The RunInfo of ``run`` in ``path`` (a file or a shard pattern); the file's only run when ``run`` is None."""
    from calibview.core.io import discovery, shards

    runs = shards.list_runs(path) if shards.is_pattern(path) else discovery.list_runs(path)
    if run is None:
        if len(runs) > 1:
            raise ParameterError(f"{path} holds {len(runs)} runs ({', '.join(r.name for r in runs)}); name one with "
                                 "run=.", "run")
        return runs[0]
    return discovery.find_run(runs, run)


def evaluate_file(path: Union[str, os.PathLike], *, run: Optional[str] = None, fit_split: Optional[str] = None,
                  eval_split: Optional[str] = None, calibrators: Union[str, Sequence[str]] = ("none",),
                  bins: Union[int, str, Sequence] = 15, bandwidth: Union[float, Sequence[float]] = 0.05,
                  kernel: Union[str, Sequence[str]] = "gaussian", n_boot: int = 1000, seed: int = 0,
                  level: float = 0.95, device: str = "auto", options: Optional[Mapping[str, Mapping[str, Any]]] = None,
                  max_memory: Optional[int] = None, engine: str = "local", scheduler: Any = "local",
                  bootstrap: Optional[str] = None, progress: bool = False) -> Result:
    """Evaluate run ``run`` of the HDF5 file ``path``, or of the shards a glob ``path`` matches ('logits-*.h5',
    concatenated along N in sorted order), as :func:`calibview.evaluate` evaluates arrays.

    fit_split, eval_split : split names (default: fit on "val", evaluate on "test", as the command line does).
    max_memory : bytes of logits held in memory before a split is streamed from disk (None: the default budget).
    engine : "local" (this process) or "dask": the shards are scored on a Dask cluster, one task per shard, with
        the same point estimates as the local engine, and with ``bootstrap="poisson"`` the same intervals (needs
        ``pip install calibview[dask]``).
    scheduler : with engine="dask", "local" or "local:N" (a cluster of N worker processes, started and closed
        here), the address of a running scheduler ("tcp://host:8786"), or a ``distributed.Client`` of yours.
    bootstrap : "multinomial" or "poisson" (a Poisson(1) weight per sample, drawn per shard and row block); None:
        poisson with engine="dask", the only scheme it can draw, else multinomial.
    The other arguments are :func:`calibview.evaluate`'s. Returns a :class:`~calibview.api.result.Result` whose
    report and figures reuse the fits and scores held in its engine's cache (on this process: a Dask cluster
    started here is closed on return)."""
    from calibview.core.evaluation.request import EvalRequest, check_request, default_bootstrap, default_splits

    if engine not in ENGINES:
        raise ParameterError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}.", "engine")
    path = os.fspath(path)
    info = _run_info(path, run)
    names = _names(calibrators)
    default_fit, eval_split = default_splits(info, eval_split)
    fit_split = fit_split or default_fit
    for name in (eval_split, fit_split):
        if name is not None:
            info.split(name)                # a split the run lacks is refused before any work
    if fit_split is None and any(c != "none" for c in names):
        raise ParameterError(f"Run {info.name} in {path} has only the split {eval_split!r}; calibrators other than "
                             "'none' need a fit split.", "fit_split")
    settings = _settings(bins, bandwidth, kernel)
    first = settings[0]
    req = EvalRequest(file=path, run=info.name, eval_split=eval_split, fit_split=fit_split, calibrators=names,
                      bins=first.bins, n_boot=n_boot, seed=seed, level=level, bandwidth=first.bandwidth,
                      kernel=first.kernel, device=device, options=_options(options, names), max_memory=max_memory,
                      bootstrap=bootstrap or default_bootstrap(engine))
    for s in settings:                  # every setting refused before any work (and before a cluster starts)
        check_request(replace(req, bins=s.bins, bandwidth=s.bandwidth, kernel=s.kernel))
    bar = _Progress() if progress else None
    try:
        if engine == "local":
            from calibview.core.evaluation.engine import Engine

            local = Engine()
            evaluations = local.evaluate_settings(req, settings, progress=bar)
        else:
            evaluations, local = _on_dask(req, settings, scheduler, bar)
    finally:
        if bar is not None:
            bar.close()
    return Result(evaluations, engine=local, settings=settings)


def _on_dask(req, settings, scheduler, bar):
    """(evaluations, a local Engine holding the Dask engine's cache): the report and the figures of the result
    read the cached fits and scores after the cluster is gone."""
    from calibview.core.distributed import client as dclient
    from calibview.core.distributed import shards as dshards
    from calibview.core.distributed.engine import open_engine
    from calibview.core.evaluation.engine import Engine

    dclient.require_dask()
    dshards.check_request(req.file, req.n_boot, req.bootstrap)
    with open_engine(scheduler) as dask_engine:
        evaluations = dask_engine.evaluate_settings(req, settings, progress=bar)
    local = Engine()
    local.cache = dask_engine.cache
    return evaluations, local
