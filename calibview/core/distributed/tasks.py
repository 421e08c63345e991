"""What runs on a Dask worker: one shard opened read-only, its rows scored, the file closed, numpy arrays back.

The two passes of the local scoring stage (:mod:`calibview.core.evaluation.stages`), one shard at a time:

- :func:`score_shard` applies every calibrator to each chunk with the local engine's own
  :func:`~calibview.core.evaluation.stages.score_chunk`, and returns the per-sample vectors and class-wise entries
  (:meth:`StatsAccumulator.state <calibview.core.stats.metrics.StatsAccumulator.state>`), each row's label
  probability (the AUROC's positives) and the refinement split's first-pass sums and subsample rows;
- :func:`rank_shard` applies them again and returns the AUROC pair counts against every positive of the split and
  the refinement split's exact derivatives at the first temperature.

Rows are numbered within the shard; the client adds the shard's first row. No h5py object, open file or torch
tensor leaves a task; calibrators travel as frozen :class:`~calibview.core.calibrators.Fitted` records without
their prepared tensors.
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator, Mapping, Optional

import numpy as np

from calibview.core.distributed.shards import Shard, check_unchanged
from calibview.core.errors import CalibviewError


def guarded(fn):
    """``fn`` returning ``{"error": sentence}`` for a CalibviewError instead of raising it: a user's error (a shard
    that vanished) reaches the client as its one sentence, not as a worker's logged traceback. A result gets the
    task's seconds on its worker as ``"_seconds"``."""
    import functools

    @functools.wraps(fn)
    def task(*args, **kw):
        t0 = time.perf_counter()
        try:
            out = fn(*args, **kw)
        except CalibviewError as e:
            return {"error": str(e)}
        out["_seconds"] = time.perf_counter() - t0        # the task's own time on its worker (benchmarks read it)
        return out
    return task


@contextlib.contextmanager
def opened(shard: Shard, chunk_rows: Optional[int] = None) -> Iterator[object]:
    """The shard's split as a :class:`~calibview.core.io.stream.StreamedSplit` (every chunk validated as a local
    read validates it), closed on exit; CalibviewError if the shard vanished or changed since it was planned."""
    import importlib

    importlib.import_module("calibview.core.calibrators.registry")     # a fresh worker registers every method
    from calibview.core.io import discovery, stream

    check_unchanged(shard)
    try:
        info_run = discovery.find_run(discovery.list_runs(shard.file), shard.run)
        info = info_run.split(shard.split)
        if (info.n, info.k) != (shard.n, shard.k):
            raise CalibviewError(f"The shard {shard.file} changed during the run; nothing was written, run again "
                                 "on shards that stay as they are.")
        split = stream.StreamedSplit(shard.file, info_run, shard.split, device="cpu", chunk_rows=chunk_rows)
    except OSError:
        check_unchanged(shard)
        raise
    try:
        yield split
    except OSError:             # the file vanished or was cut while it was read
        check_unchanged(shard)
        raise
    finally:
        split.close()
    check_unchanged(shard)      # rewritten while it was read: its rows may mix two versions


@guarded
def score_shard(shard: Shard, fitted: Mapping[str, object], bins: tuple[int, ...], ref_rows: np.ndarray,
                seed: int, chunk_rows: Optional[int] = None, boot: Optional[tuple] = None) -> dict:
    """The scoring pass over one shard (n rows) for every calibrator of ``fitted`` (name -> Fitted), class-wise
    sums for each of ``bins``; ``ref_rows`` the refinement subsample's rows in this shard (shard row numbers,
    sorted); ``boot``: (PoissonScheme, n_boot) when the class-wise ECE resamples are accumulated, drawn here for
    this shard's rows. Returns ``{"labels": (n,) int64, "base_pred": (n,) int64, "parts": name -> {"acc":
    accumulator state, "pos": (n,) float64, "at1": (2,) float64, "sub_lp": (m, K) float64, "sub_y": (m,) int64,
    "cw": None or the class-wise resample sums (ClasswiseBootstrap.partial, as numpy)}}``."""
    import torch

    from calibview.core.evaluation.stages import score_chunk
    from calibview.core.stats.bootstrap import ClasswiseBootstrap
    from calibview.core.stats.corp.refinement import Refinement
    from calibview.core.stats.metrics import StatsAccumulator
    from calibview.core.stats.rowwise import row_argmax

    with torch.inference_mode(), opened(shard, chunk_rows) as split:
        n, k = shard.n, shard.k
        accs = {nm: StatsAccumulator(n, k, bins) for nm in fitted}
        pos = {nm: torch.empty(n, dtype=torch.float64) for nm in fitted}
        refs = {nm: Refinement(n, k, seed, resampled=False) for nm in fitted}
        for ref in refs.values():
            ref.rows = np.asarray(ref_rows, np.int64)       # the whole split's subsample, not this shard's own
        cws = {nm: None for nm in fitted}
        if boot is not None:
            scheme, n_boot = boot
            counts, units = scheme.counts(0, n_boot, shard=shard.index), scheme.units(shard.index)
            cws = {nm: ClasswiseBootstrap(counts, k, units=units, segments=[0]) for nm in fitted}
        base_pred = np.empty(n, np.int64)
        for start, z, y in split.chunks():
            base_pred[start:start + z.shape[0]] = row_argmax(z).numpy()
            for nm, f in fitted.items():
                score_chunk(accs[nm], f, start, z, y, pos[nm], cws[nm], refs[nm])
        labels = split.labels.numpy().copy()
        partials = {nm: None if cws[nm] is None else tuple(t.numpy() for t in cws[nm].partial()) for nm in fitted}
    parts = {}
    for nm in fitted:
        sub = refs[nm]._sub     # the refinement's first-pass state, merged on the client (see engine.merge_scores)
        m = sum(int(s[1].shape[0]) for s in sub)
        cw = partials[nm]
        parts[nm] = {"acc": accs[nm].state(), "pos": pos[nm].numpy(), "at1": np.array(refs[nm]._at1),
                     "sub_lp": torch.cat([s[0] for s in sub]).numpy() if m else np.zeros((0, k)),
                     "sub_y": torch.cat([s[1] for s in sub]).numpy() if m else np.zeros(0, np.int64), "cw": cw}
    return {"labels": labels, "base_pred": base_pred, "parts": parts}


@guarded
def rank_shard(shard: Shard, fitted: Mapping[str, object], labels: np.ndarray, pos: Mapping[str, np.ndarray],
               beta: Mapping[str, float], seed: int, chunk_rows: Optional[int] = None, resampled: bool = False,
               jk: Optional[Mapping[str, tuple]] = None, keep: bool = False) -> dict:
    """The rank pass over one shard: ``labels`` (N,) and ``pos[name]`` (N,) float64 are the whole split's labels
    and positives, ``beta[name]`` the refinement's first estimate; ``jk[name]``: (this shard's rows of the
    class-wise jackknife subsample, sorted, B -> (K, B) class-wise sums of the whole split, N) for BCa;
    ``keep``: return the probabilities themselves (for the resampled AUROC of a small split). Returns name ->
    {"gt", "eq": (K,) int64 AUROC pair counts of this shard's probabilities, "sum_f": (5,), "sum_b": (4,)
    float64, "coef": (n, 8) float32, or None unless ``resampled`` (a bootstrap reads them), "loo": B -> (m,)
    leave-one-out class-wise ECE of the subsample rows, "p": (n, K) float64 or None}."""
    import torch

    from calibview.core.stats import auroc as au
    from calibview.core.stats import jackknife
    from calibview.core.stats.corp.refinement import Refinement

    jk = jk or {}
    with torch.inference_mode(), opened(shard, chunk_rows) as split:
        n, k = shard.n, shard.k
        counters = {nm: au.AurocCounter(labels, torch.from_numpy(pos[nm]), k) for nm in fitted}
        refs = {}
        for nm in fitted:
            refs[nm] = Refinement(n, k, seed, resampled=resampled)
            refs[nm].beta = float(beta[nm])
        loo: dict = {nm: {} for nm in jk}
        kept = {nm: np.empty((n, k)) for nm in fitted} if keep else {}
        for start, z, y in split.chunks():
            for nm, f in fitted.items():
                lp = f.apply(z)
                refs[nm].add_node(start, lp, y)
                p = lp.exp_()
                counters[nm].add(p, y.cpu().numpy(), shard.start + start)   # own counts by the split's row
                if nm in jk:
                    rows, sums, n_all = jk[nm]
                    jackknife.add_chunk(loo[nm], rows, sums, start, p, y, n_all)
                if keep:
                    kept[nm][start:start + p.shape[0]] = p.numpy()
    return {nm: {"gt": counters[nm].gt, "eq": counters[nm].eq, "sum_f": np.array(refs[nm]._sum_f),
                 "sum_b": np.array(refs[nm]._sum_b), "coef": refs[nm].coef,
                 "loo": {b: np.concatenate(v) for b, v in loo.get(nm, {}).items()}, "p": kept.get(nm)}
            for nm in fitted}


@guarded
def run_on_shard(shard: Shard, fn, args: tuple, chunk_rows: Optional[int] = None) -> dict:
    """``{"value": fn(the shard's split, *args)}``: one shard's share of a fit pass
    (:meth:`calibview.core.distributed.fit.ShardedSplit.map_shards`); ``fn`` returns numbers or numpy arrays."""
    import torch

    with torch.inference_mode(), opened(shard, chunk_rows) as split:
        return {"value": fn(split, *args)}
