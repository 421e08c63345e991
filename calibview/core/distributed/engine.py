"""The Dask engine: the local engine's stages with the score stage made of maps over the evaluation shards.

```
fit       the methods that stream (ts, vs, ...): every pass over the fit split one map over its shards
          (fit.ShardedSplit); the others on the client, as the local engine fits them
score     map 1: tasks.score_shard per shard -> per-sample vectors, class-wise entries, positives, refinement
                 sums, and with resamples the shard's class-wise resample sums (its Poisson weights drawn there)
          merge: concatenated in shard order (the local engine's row order), sums added
          map 2: tasks.rank_shard per shard  -> AUROC pair counts, refinement derivatives, the class-wise
                 jackknife (BCa) and, for a small split's AUROC interval, the probabilities
resample  the unchanged local stage on the client, over the merged O(N) vectors, with the same Poisson draws
points    the unchanged local stages (calibview.core.evaluation.stages.assemble) on the merged Scored
```

The merged :class:`~calibview.core.evaluation.results.Scored` is what the local scoring pass builds from the same
rows (the per-sample vectors bit for bit; sums up to their order of summation), so every point estimate equals the
local engine's to rounding. Resamples must be Poisson (``bootstrap="poisson"``,
:class:`calibview.core.stats.resampling.PoissonScheme`): a multinomial draw couples every sample of the split, a
Poisson weight belongs to its shard and row block, so the shards' class-wise accumulators add up, in the order
the local engine folds them; the intervals then equal the local engine's with ``bootstrap="poisson"`` on the
same shards. The cache and its keys are the local engine's.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping, Optional, Sequence

import numpy as np

from calibview.core import calibrators as calib
from calibview.core.distributed import shards as dshards
from calibview.core.distributed import tasks
from calibview.core.errors import CalibviewError, ParameterError, report
from calibview.core.evaluation import stages
from calibview.core.evaluation.engine import Engine, log
from calibview.core.evaluation.job import Job
from calibview.core.evaluation.request import EvalRequest, Setting, check_request, settings_of
from calibview.core.evaluation.results import Evaluation, Scored
from calibview.core.io.toplabel.format import is_toplabel
from calibview.core.stats import auroc as au
from calibview.core.stats import jackknife
from calibview.core.stats.corp.refinement import Refinement


class DaskEngine(Engine):
    """An :class:`~calibview.core.evaluation.engine.Engine` whose score stage runs on the Dask cluster of
    ``client`` (a connected ``distributed.Client``, see :func:`calibview.core.distributed.client.connect`)."""

    def __init__(self, client, budget: Optional[int] = None) -> None:
        super().__init__(*(() if budget is None else (budget,)))
        self.client = client
        #: the last map of each kind ("scoring", "AUROC"): each shard task's seconds on its worker, in shard order
        self.task_seconds: dict[str, list[float]] = {}
        #: the last fit split handed to the calibrators (its ``maps``: the passes run on the cluster), or None
        self.last_fit_split = None

    def evaluate_settings(self, req: EvalRequest, settings: Optional[Sequence[Setting]] = None, *,
                          progress=None, cancel: Optional[threading.Event] = None, on_partial=None,
                          given: Optional[Mapping[str, calib.Fitted]] = None) -> list[Evaluation]:
        """As the local engine's: one :class:`Evaluation` per setting."""
        t0 = time.perf_counter()
        settings = list(settings or settings_of(req))
        for s in settings:
            check_request(replace(req, bins=s.bins, bandwidth=s.bandwidth, kernel=s.kernel))
        job = self._job(req, settings, progress, cancel, on_partial, t0, given)
        job.check_bootstrap()
        self._fit_stage(job)
        self._score_stage(job)
        if req.n_boot:
            stages.resample_stage(job)          # on the client, over the merged O(N) vectors
        report(job.progress, 1.0, "done")
        evaluations = stages.assemble(job, pending=False)
        log.info(job.log_line(evaluations[0]) + " (dask)")
        return evaluations

    def scored(self, req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
               given: Optional[Mapping[str, calib.Fitted]] = None) -> dict[str, Scored]:
        """The fit and (distributed) score stages alone, as the local engine's :meth:`Engine.scored`."""
        check_request(req)
        job = self._job(req, settings_of(req), progress, cancel, None, time.perf_counter(), given)
        self._fit_stage(job)
        self._score_stage(job)
        return dict(job.scored)

    def _job(self, req, settings, progress, cancel, on_partial, t0, given) -> Job:
        dshards.check_request(req.file, req.n_boot, req.bootstrap)
        job = Job(self.cache, req, settings, progress, cancel, on_partial, t0, given)
        if is_toplabel(job.run_info):
            raise ParameterError(f"engine=dask scores runs of logits or probabilities; {job.run_info.name} is a "
                                 "top-label run: evaluate it on the local engine.", "engine")
        return job

    # --- fit -----------------------------------------------------------------------------------------------------

    def _fit_stage(self, job: Job) -> None:
        """The local fit stage, with every method that streams fitted by maps over the fit split's shards (each
        Newton or L-BFGS evaluation one map, :mod:`calibview.core.distributed.fit`); the others on the client,
        loaded, or streamed past --max-memory, or refused there as the local engine refuses them."""
        from calibview.core.distributed.fit import ShardedSplit

        def sharded():
            split = ShardedSplit(self.client, dshards.plan(job.req.file, job.run_info.name, job.req.fit_split),
                                 job.req.file, job.run_info, job.req.fit_split, chunk_rows=job.req.chunk_rows,
                                 cancel=job.cancel)
            self.last_fit_split = split
            return split
        stages.fit_stage(job, sharded)

    # --- score ---------------------------------------------------------------------------------------------------

    def _score_stage(self, job: Job) -> None:
        """Fill ``job.scored`` like :func:`calibview.core.evaluation.stages.score_stage`, scoring on the cluster
        the calibrators the cache does not hold (every shard checked before the first task is scheduled)."""
        todo = [nm for nm in job.names if not _cached(job, nm)]
        if not todo:
            return
        t1 = time.perf_counter()
        r = job.req
        plan = dshards.plan(r.file, job.run_info.name, r.eval_split)
        fitted = {nm: replace(job.fitted[nm], _prepared={}) for nm in todo}     # frozen records, no tensors
        bins = tuple(sorted(set(job.all_bins)))
        ref_rows = Refinement(job.n, job.k, r.seed, resampled=False).rows
        seed, rows = r.seed, r.chunk_rows
        # Poisson resamples: every task draws its own shard's weights from the scheme (a few numbers), and the
        # client draws the whole matrix for the stages it runs itself, the same draws
        counts, units, note = job.resamples()
        boot = _Boot(counts, units, stages.classwise_note(job, counts, units, len(todo)) or note,
                     bool(r.n_boot) and counts is not None and au.boot_note(r.n_boot, job.n, job.k) is None)
        shard_boot = (job.poisson(), r.n_boot) if counts is not None and boot.cw_note is None else None
        fit_scattered = self.client.scatter(fitted, broadcast=True)
        firsts = self._map(job, tasks.score_shard, plan, (0.35, 0.5), "scoring",
                           lambda s: (s, fit_scattered, bins, _local(ref_rows, s), seed, rows, shard_boot))
        t2 = time.perf_counter()
        merged = merge_scores(job, plan, firsts, todo, bins, ref_rows, boot)
        merge_s = time.perf_counter() - t2
        labels = merged["labels"]
        big = self.client.scatter({"labels": labels, "pos": {nm: merged[nm]["pos"] for nm in todo}},
                                  broadcast=True)
        beta = {nm: merged[nm]["ref"].nodes() for nm in todo}
        # the class-wise jackknife (BCa) reads the whole split's class-wise sums, known only after the merge
        sub = jackknife.subsample_rows(job.n, seed) if r.n_boot else None
        sums = {nm: {b: merged[nm]["acc"].classwise_sums(b) for b in bins} for nm in todo} if r.n_boot else {}
        seconds = self._map(job, _rank, plan, (0.5, 0.6), "AUROC",
                            lambda s: (s, fit_scattered, big, beta, seed, rows, bool(r.n_boot),
                                       {nm: (_local(sub, s), sums[nm], job.n) for nm in sums}, boot.keep))
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
        from calibview.core.distributed.client import gather

        futures = [self.client.submit(fn, *args(s), key=f"calibview-{what}-{s.index}-{time.monotonic_ns()}",
                                      pure=False) for s in plan]

        def done(count: int) -> None:
            report(job.progress, span[0] + (span[1] - span[0]) * count / len(plan),
                   f"{what}: {count} of {len(plan)} shard tasks")
        results = gather(self.client, futures, job.cancel, done)
        self.task_seconds[what] = [r.pop("_seconds") for r in results]
        return results


@dataclass(frozen=True)
class _Boot:
    """The resamples of a Dask evaluation: (n_boot, units) uint8 ``counts`` and (N,) ``units`` (or None),
    ``cw_note`` (why the class-wise ECE has no interval, or None) and ``keep`` (the AUROC is resampled: the
    rank tasks return their probabilities)."""

    counts: Optional[object]
    units: Optional[object]
    cw_note: Optional[str]
    keep: bool


def _rank(shard, fitted, big, beta, seed, rows, resampled, jk, keep):
    """:func:`tasks.rank_shard` with the broadcast labels and positives unpacked."""
    return tasks.rank_shard(shard, fitted, big["labels"], big["pos"], beta, seed, rows, resampled, jk, keep)


def _cached(job: Job, nm: str) -> bool:
    hit = job.cache.get(job.score_key(nm))
    if hit is not None and set(job.all_bins) <= set(hit.bins):
        job.scored[nm] = hit
        return True
    return False


def _local(rows: np.ndarray, shard) -> np.ndarray:
    """The rows of the sorted ``rows`` (split row numbers) inside ``shard``, numbered within it."""
    return rows[np.searchsorted(rows, shard.start):np.searchsorted(rows, shard.start + shard.n)] - shard.start


def merge_scores(job: Job, plan, parts: list, names, bins, ref_rows, boot: "_Boot") -> dict:
    """The first map's shard results merged in shard order: ``{"labels": (N,), "base_pred": (N,), "boot": boot,
    name: {"acc": StatsAccumulator, "pos": (N,) float64, "ref": Refinement after its first pass, "cw": the
    class-wise resample accumulator or None}}``."""
    import torch

    from calibview.core.stats.metrics import StatsAccumulator

    labels = np.concatenate([p["labels"] for p in parts]) if parts else np.zeros(0, np.int64)
    if labels.shape[0] != job.n:
        raise CalibviewError(f"The shards of {job.req.file} hold {labels.shape[0]:,} rows of {job.req.eval_split} "
                             f"now, not {job.n:,}; nothing was written, run again on shards that stay as they are.")
    out = {"labels": labels, "base_pred": np.concatenate([p["base_pred"] for p in parts]), "boot": boot}
    for nm in names:
        acc = StatsAccumulator(job.n, job.k, bins)
        for s, p in zip(plan, parts):
            acc.add_state(s.start, p["parts"][nm]["acc"])
        ref = Refinement(job.n, job.k, job.req.seed, resampled=bool(job.req.n_boot))
        # the refinement's first pass, as Refinement.add leaves it after every chunk of the split
        ref._at1 = np.sum([p["parts"][nm]["at1"] for p in parts], axis=0)
        ref._sub = [(torch.from_numpy(p["parts"][nm]["sub_lp"]), torch.from_numpy(p["parts"][nm]["sub_y"]))
                    for p in parts if p["parts"][nm]["sub_y"].size]
        out[nm] = {"acc": acc, "pos": np.concatenate([p["parts"][nm]["pos"] for p in parts]), "ref": ref,
                   "cw": _merged_classwise(job, boot, [p["parts"][nm]["cw"] for p in parts])}
    return out


def _merged_classwise(job: Job, boot: "_Boot", partials: list):
    """The class-wise resample accumulator of the whole split from the shards' partial sums (None without):
    float64 totals added in shard order, as the local engine folds its shards
    (:class:`~calibview.core.stats.bootstrap.ClasswiseBootstrap`), or per-unit sums side by side (a group
    never spans two shards)."""
    import torch

    from calibview.core.stats.bootstrap import ClasswiseBootstrap

    if not partials or partials[0] is None:
        return None
    if boot.units is None:
        total = rest = None
        for t, r in partials:
            total = torch.from_numpy(t) if total is None else total + torch.from_numpy(t)
            rest = torch.from_numpy(r) if rest is None else rest + torch.from_numpy(r)
    else:
        total = torch.cat([torch.from_numpy(t) for t, _ in partials])
        rest = torch.cat([torch.from_numpy(r) for _, r in partials])
    return ClasswiseBootstrap(boot.counts, job.k, units=boot.units, device=job.device,
                              merged=(total.to(job.device), rest.to(job.device)))


def finish(job: Job, nm: str, plan, merged: dict, ranked: list, bins) -> Scored:
    """The :class:`Scored` of calibrator ``nm`` from the merged first pass and the rank pass's shard results, as
    :func:`calibview.core.evaluation.stages.scoring_pass` builds it without resamples."""
    import torch

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
    notes = [refinement.note] if refinement.note else []
    boot, dists, loo, auroc_dist = merged["boot"], {}, {}, None
    if job.req.n_boot:
        loo = {b: np.concatenate([r[nm]["loo"][b] for r in ranked]) for b in bins}
        cw = merged[nm]["cw"]
        if cw is not None:
            totals = stages.classwise_totals(job, boot.counts, boot.units)
            dists = {b: cw.distribution(acc, b, totals) for b in bins}
            cw.release()
        else:
            notes.insert(0, boot.cw_note)
            dists = {b: None for b in bins}
        if boot.keep:
            kept = np.concatenate([r[nm]["p"] for r in ranked])
            auroc_dist = au.resampled_auroc(kept, merged["labels"], boot.counts, boot.units)
    return Scored(stats=stats, bins=tuple(bins),
                  classwise_sums=MappingProxyType({b: acc.classwise_sums(b) for b in bins}),
                  classwise_loo=MappingProxyType(loo), classwise_dist=MappingProxyType(dists),
                  argmax_changed=float((stats.pred != merged["base_pred"]).mean()),
                  notes=tuple(notes), auroc=counter.value(), auroc_dist=auroc_dist, refinement=refinement)


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
