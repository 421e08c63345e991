"""The Dask engine: the local engine's stages with the score stage made of maps over the evaluation shards.

```
fit      on the client, as the local engine fits (in memory, or streamed from the shards past --max-memory)
score    map 1: tasks.score_shard per shard   -> per-sample vectors, class-wise entries, positives, refinement sums
         merge: concatenated in shard order (the local engine's row order), sums added
         map 2: tasks.rank_shard per shard    -> AUROC pair counts, refinement derivatives
points   the unchanged local stages (calibview.core.evaluation.stages.assemble) on the merged Scored
```

The merged :class:`~calibview.core.evaluation.results.Scored` is what the local scoring pass builds from the same
rows (the per-sample vectors bit for bit; sums up to their order of summation), so every point estimate equals the
local engine's to rounding. The cache and its keys are the local engine's.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from types import MappingProxyType
from typing import Mapping, Optional, Sequence

import numpy as np

from calibview.core import calibrators as calib
from calibview.core.distributed import shards as dshards
from calibview.core.distributed import tasks
from calibview.core.errors import CalibviewError, ParameterError, check_cancel, report
from calibview.core.evaluation import stages
from calibview.core.evaluation.engine import Engine, log
from calibview.core.evaluation.job import Job
from calibview.core.evaluation.request import EvalRequest, Setting, check_request, settings_of
from calibview.core.evaluation.results import Evaluation, Scored
from calibview.core.io.toplabel.format import is_toplabel
from calibview.core.stats.corp.refinement import Refinement


class DaskEngine(Engine):
    """An :class:`~calibview.core.evaluation.engine.Engine` whose score stage runs on the Dask cluster of
    ``client`` (a connected ``distributed.Client``, see :func:`calibview.core.distributed.client.connect`)."""

    def __init__(self, client, budget: Optional[int] = None) -> None:
        super().__init__(*(() if budget is None else (budget,)))
        self.client = client
        #: the last map of each kind ("scoring", "AUROC"): each shard task's seconds on its worker, in shard order
        self.task_seconds: dict[str, list[float]] = {}

    def evaluate_settings(self, req: EvalRequest, settings: Optional[Sequence[Setting]] = None, *,
                          progress=None, cancel: Optional[threading.Event] = None, on_partial=None,
                          given: Optional[Mapping[str, calib.Fitted]] = None) -> list[Evaluation]:
        """As the local engine's: one :class:`Evaluation` per setting."""
        t0 = time.perf_counter()
        settings = list(settings or settings_of(req))
        for s in settings:
            check_request(replace(req, bins=s.bins, bandwidth=s.bandwidth, kernel=s.kernel))
        job = self._job(req, settings, progress, cancel, on_partial, t0, given)
        stages.fit_stage(job)
        self._score_stage(job)
        report(job.progress, 1.0, "done")
        evaluations = stages.assemble(job, pending=False)
        log.info(job.log_line(evaluations[0]) + " (dask)")
        return evaluations

    def scored(self, req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
               given: Optional[Mapping[str, calib.Fitted]] = None) -> dict[str, Scored]:
        """The fit and (distributed) score stages alone, as the local engine's :meth:`Engine.scored`."""
        check_request(req)
        job = self._job(req, settings_of(req), progress, cancel, None, time.perf_counter(), given)
        stages.fit_stage(job)
        self._score_stage(job)
        return dict(job.scored)

    def _job(self, req, settings, progress, cancel, on_partial, t0, given) -> Job:
        dshards.check_request(req.file, req.n_boot)
        job = Job(self.cache, req, settings, progress, cancel, on_partial, t0, given)
        if is_toplabel(job.run_info):
            raise ParameterError(f"engine=dask scores runs of logits or probabilities; {job.run_info.name} is a "
                                 "top-label run: evaluate it on the local engine.", "engine")
        return job

    # --- score ---------------------------------------------------------------------------------------------------

    def _score_stage(self, job: Job) -> None:
        """Fill ``job.scored`` like :func:`calibview.core.evaluation.stages.score_stage`, scoring on the cluster
        the calibrators the cache does not hold (every shard checked before the first task is scheduled)."""
        todo = [nm for nm in job.names if not _cached(job, nm)]
        if not todo:
            return
        t1 = time.perf_counter()
        plan = dshards.plan(job.req.file, job.run_info.name, job.req.eval_split)
        fitted = {nm: replace(job.fitted[nm], _prepared={}) for nm in todo}     # frozen records, no tensors
        bins = tuple(sorted(set(job.all_bins)))
        ref_rows = Refinement(job.n, job.k, job.req.seed, resampled=False).rows
        seed, rows = job.req.seed, job.req.chunk_rows
        fit_scattered = self.client.scatter(fitted, broadcast=True)
        firsts = self._map(job, tasks.score_shard, plan, (0.35, 0.5), "scoring",
                           lambda s: (s, fit_scattered, bins, _local(ref_rows, s), seed, rows))
        t2 = time.perf_counter()
        merged = merge_scores(job, plan, firsts, todo, bins, ref_rows)
        merge_s = time.perf_counter() - t2
        labels = merged["labels"]
        big = self.client.scatter({"labels": labels, "pos": {nm: merged[nm]["pos"] for nm in todo}},
                                  broadcast=True)
        beta = {nm: merged[nm]["ref"].nodes() for nm in todo}
        seconds = self._map(job, _rank, plan, (0.5, 0.6), "AUROC",
                            lambda s: (s, fit_scattered, big, beta, seed, rows, bool(job.req.n_boot)))
        for nm in todo:
            t2 = time.perf_counter()
            scored = finish(job, nm, plan, merged, seconds, bins)
            merge_s += time.perf_counter() - t2
            job.scored[nm] = job.cache.put(job.score_key(nm), scored)
            job.counters["scored"].append((nm, job.req.eval_split))
            stages.emit_partial(job)
        job.timings["score"] = time.perf_counter() - t1
        job.timings["score:merge"] = merge_s        # the client's share of the score stage (O(N) work)

    def _map(self, job: Job, fn, plan, span, what: str, args) -> list:
        """``fn(*args(shard))`` for every shard on the cluster, results in shard order; progress counts finished
        tasks, ``job.cancel`` (and Ctrl+C) cancels the futures, a task's CalibviewError ends the map."""
        from distributed import as_completed

        futures = [self.client.submit(fn, *args(s), key=f"calibview-{what}-{s.index}-{time.monotonic_ns()}",
                                      pure=False) for s in plan]
        done = 0
        try:
            for _ in as_completed(futures):
                check_cancel(job.cancel)
                done += 1
                report(job.progress, span[0] + (span[1] - span[0]) * done / len(plan),
                       f"{what}: {done} of {len(plan)} shard tasks")
            results = [f.result() for f in futures]
        except BaseException:
            self.client.cancel(futures)
            raise
        for r in results:
            if "error" in r:
                raise CalibviewError(r["error"])
        self.task_seconds[what] = [r.pop("_seconds") for r in results]
        return results


def _rank(shard, fitted, big, beta, seed, rows, resampled):
    """:func:`tasks.rank_shard` with the broadcast labels and positives unpacked."""
    return tasks.rank_shard(shard, fitted, big["labels"], big["pos"], beta, seed, rows, resampled)


def _cached(job: Job, nm: str) -> bool:
    hit = job.cache.get(job.score_key(nm))
    if hit is not None and set(job.all_bins) <= set(hit.bins):
        job.scored[nm] = hit
        return True
    return False


def _local(rows: np.ndarray, shard) -> np.ndarray:
    """The rows of the sorted ``rows`` (split row numbers) inside ``shard``, numbered within it."""
    return rows[np.searchsorted(rows, shard.start):np.searchsorted(rows, shard.start + shard.n)] - shard.start


def merge_scores(job: Job, plan, parts: list, names, bins, ref_rows) -> dict:
    """The first map's shard results merged in shard order: ``{"labels": (N,), "base_pred": (N,), name: {"acc":
    StatsAccumulator, "pos": (N,) float64, "ref": Refinement after its first pass}}``."""
    import torch

    from calibview.core.stats.metrics import StatsAccumulator

    labels = np.concatenate([p["labels"] for p in parts]) if parts else np.zeros(0, np.int64)
    if labels.shape[0] != job.n:
        raise CalibviewError(f"The shards of {job.req.file} hold {labels.shape[0]:,} rows of {job.req.eval_split} "
                             f"now, not {job.n:,}; nothing was written, run again on shards that stay as they are.")
    out = {"labels": labels, "base_pred": np.concatenate([p["base_pred"] for p in parts])}
    for nm in names:
        acc = StatsAccumulator(job.n, job.k, bins)
        for s, p in zip(plan, parts):
            acc.add_state(s.start, p["parts"][nm]["acc"])
        ref = Refinement(job.n, job.k, job.req.seed, resampled=bool(job.req.n_boot))
        # the refinement's first pass, as Refinement.add leaves it after every chunk of the split
        ref._at1 = np.sum([p["parts"][nm]["at1"] for p in parts], axis=0)
        ref._sub = [(torch.from_numpy(p["parts"][nm]["sub_lp"]), torch.from_numpy(p["parts"][nm]["sub_y"]))
                    for p in parts if p["parts"][nm]["sub_y"].size]
        out[nm] = {"acc": acc, "pos": np.concatenate([p["parts"][nm]["pos"] for p in parts]), "ref": ref}
    return out


def finish(job: Job, nm: str, plan, merged: dict, ranked: list, bins) -> Scored:
    """The :class:`Scored` of calibrator ``nm`` from the merged first pass and the rank pass's shard results, as
    :func:`calibview.core.evaluation.stages.scoring_pass` builds it without resamples."""
    import torch

    from calibview.core.stats import auroc as au

    acc, ref = merged[nm]["acc"], merged[nm]["ref"]
    labels = torch.from_numpy(merged["labels"])
    stats = acc.result(labels)
    counter = au.AurocCounter(merged["labels"], torch.from_numpy(merged[nm]["pos"]), job.k)
    counter.gt = np.sum([r[nm]["gt"] for r in ranked], axis=0)
    counter.eq = np.sum([r[nm]["eq"] for r in ranked], axis=0)
    ref._sum_f = np.sum([r[nm]["sum_f"] for r in ranked], axis=0)
    ref._sum_b = np.sum([r[nm]["sum_b"] for r in ranked], axis=0)
    if ref.coef is not None:
        ref.coef = np.concatenate([r[nm]["coef"] for r in ranked])
    refinement = ref.result(bool(np.isfinite(stats.nll).all()))
    return Scored(stats=stats, bins=tuple(bins),
                  classwise_sums=MappingProxyType({b: acc.classwise_sums(b) for b in bins}),
                  classwise_loo=MappingProxyType({}), classwise_dist=MappingProxyType({}),
                  argmax_changed=float((stats.pred != merged["base_pred"]).mean()),
                  notes=(refinement.note,) if refinement.note else (),
                  auroc=counter.value(), auroc_dist=None, refinement=refinement)


def open_engine(scheduler):
    """A context manager yielding a :class:`DaskEngine` on ``scheduler`` (see
    :func:`calibview.core.distributed.client.connect`); the cluster of ``local[:N]`` is closed on exit."""
    import contextlib

    from calibview.core.distributed.client import connect

    @contextlib.contextmanager
    def manager():
        with connect(scheduler) as client:
            yield DaskEngine(client)
    return manager()
