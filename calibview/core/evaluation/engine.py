"""The evaluation engine: a pipeline of cacheable stages that never recomputes what did not change.

```
read(file identity, run, split)          validated arrays, or a streamed view (not cached: O(N K))
fit(file, run, fit split, method, options)            -> Fitted                        (expensive)
score(fit key, eval split, n_boot, seed, device)      -> Scored: O(N) per-sample vectors, class-wise sums
                                                         and class-wise ECE resamples for a set of bin counts
points / resamples(score key, bins | bandwidth+kernel) -> metric values and bootstrap distributions (cheap)
```

A request enters at the first stage whose key changed: a bandwidth or kernel change computes CAL, TOT and the
sharpness gap only; an interval level change computes nothing (percentiles of stored distributions); a new
calibrator is one fit and one score; bins, n_boot or seed re-score (class-wise ECE needs every probability).
The cache is a bounded LRU (:mod:`calibview.core.evaluation.cache`); each result carries :class:`Counters` saying what was
fitted, reused and scored, and one log line per request goes to the ``calibview`` logger at INFO.

Results arrive progressively through ``on_partial(evaluations)``: point estimates and curves of each calibrator
as soon as it is scored (intervals pending), then everything.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import torch

from calibview.core.stats import auroc as au
from calibview.core import calibrators as calib
from calibview.core.io import logits as lg
from calibview.core.io import shards, stream
from calibview.core.stats.bootstrap import (BINNED_METRICS, COMMON_METRICS, KERNEL_METRICS, ClasswiseBootstrap, Interval, Resampler,
                        SampleBootstrap, bootstrap_units, mixed_classes, percentile_interval)
from calibview.core.evaluation.cache import DEFAULT_BUDGET, LRUCache, file_identity
from calibview.core.errors import check_cancel, report
from calibview.core.evaluation.request import (CalibratorResult, Estimate, EvalRequest, Evaluation, check_request, resolve_device,
                       scores_tensor)
from calibview.core.stats.metrics import METRIC_NAMES, SampleStats, StatsAccumulator, chunk_rows, resolve_bins
from calibview.core.stats.points import compute_part, resample_part

log = logging.getLogger("calibview")

#: resample counts kept in memory while a split is scored ((n_boot, units) uint8); above, no class-wise interval
COUNTS_BUDGET = 512 << 20
#: class-wise accumulators of the calibrators scored in one pass ((n_boot or units, K) float32 each)
CLASSWISE_BUDGET = 1 << 30
#: a (n_boot x N x K) dense class-wise product above this many multiply-adds is restricted to the classes that
#: need it, at the cost of a second pass over the (in-memory) evaluation split
_TWO_PASS_FLOPS = 2_000_000_000


@dataclass(frozen=True)
class Counters:
    """What one request recomputed: calibrators fitted anew and taken from the cache (``none`` is in neither),
    (calibrator, eval split) pairs scored anew, and bootstrap parts resampled anew ("ts:kernel 0.05 gaussian")."""

    fitted: tuple[str, ...] = ()
    reused: tuple[str, ...] = ()
    scored: tuple[tuple[str, str], ...] = ()
    resampled: tuple[str, ...] = ()


@dataclass(frozen=True)
class Setting:
    """One (bins, bandwidth, kernel) of an ablation; ``bins`` may be "auto"."""

    bins: int | str
    bandwidth: float
    kernel: str


@dataclass(frozen=True)
class Scored:
    """A calibrator's scores on an evaluation split: per-sample vectors and class-wise statistics."""

    stats: SampleStats
    bins: tuple[int, ...]
    classwise_sums: MappingProxyType           # B -> (K, B) float64
    classwise_dist: MappingProxyType           # B -> (n_boot,) float64, or None (no interval, see notes)
    argmax_changed: float
    notes: tuple[str, ...] = ()
    auroc: float = float("nan")                # macro one-vs-rest AUROC (calibview.core.stats.auroc), counted here
    auroc_dist: Optional[np.ndarray] = None    # (n_boot,) or None (no interval, see notes)


def settings_of(req: EvalRequest, bins: Sequence = (), bandwidths: Sequence = (), kernels: Sequence = ()
                ) -> list[Setting]:
    """Every combination of the given lists (each defaulting to the request's single value), bins outermost."""
    return [Setting(b, float(h), k) for b, h, k in itertools.product(bins or [req.bins], bandwidths or
                                                                     [req.bandwidth], kernels or [req.kernel])]


class Engine:
    """Evaluates requests through the cached stages. One engine per window (or per CLI process); not shared
    between threads at the same time."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.cache = LRUCache(budget)

    # --- the public calls --------------------------------------------------------------------------------------

    def evaluate(self, req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
                 on_partial: Optional[Callable[[Evaluation], None]] = None,
                 given: Optional[Mapping[str, calib.Fitted]] = None) -> Evaluation:
        """One setting: the request's bins, bandwidth and kernel. ``given`` maps calibrator names of the request to
        calibrators fitted elsewhere (a shipped inference config): they are applied as they are, not refitted,
        and the fit split need not be in the file."""
        partial = None if on_partial is None else (lambda evs: on_partial(evs[0]))
        return self.evaluate_settings(req, None, progress=progress, cancel=cancel, on_partial=partial,
                                      given=given)[0]

    def evaluate_settings(self, req: EvalRequest, settings: Optional[Sequence[Setting]] = None, *,
                          progress=None, cancel: Optional[threading.Event] = None,
                          on_partial: Optional[Callable[[list[Evaluation]], None]] = None,
                          given: Optional[Mapping[str, calib.Fitted]] = None) -> list[Evaluation]:
        """One :class:`Evaluation` per setting (an ablation); fits, scores and resamples are shared."""
        t0 = time.perf_counter()
        settings = list(settings or settings_of(req))
        for s in settings:                       # the whole request is validated before any work
            check_request(replace(req, bins=s.bins, bandwidth=s.bandwidth, kernel=s.kernel))
        job = _Job(self, req, settings, progress, cancel, on_partial, t0, given)
        evaluations = job.run()
        log.info(job.log_line(evaluations[0]))
        return evaluations

    def scored(self, req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
               given: Optional[Mapping[str, calib.Fitted]] = None) -> dict[str, Scored]:
        """The fit and score stages alone (cached like everything else): calibrator name -> :class:`Scored`, whose
        ``stats`` holds the per-sample vectors (confidence, arg-max, correctness, NLL, Brier, label) of the
        evaluation split. What slices, selective prediction and thresholds are computed from."""
        check_request(req)
        job = _Job(self, req, settings_of(req), progress, cancel, None, time.perf_counter(), given)
        job._fit_all()
        job._score_all()
        return dict(job.scored)

    def fitted(self, req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
               given: Optional[Mapping[str, calib.Fitted]] = None) -> dict[str, calib.Fitted]:
        """The fit stage alone: calibrator name -> fitted calibrator (cached)."""
        check_request(req)
        job = _Job(self, req, settings_of(req), progress, cancel, None, time.perf_counter(), given)
        job._fit_all()
        return dict(job.fitted)

    def distributions(self, req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
                      given: Optional[Mapping[str, calib.Fitted]] = None) -> dict[str, dict[str, np.ndarray]]:
        """The bootstrap distributions behind the intervals of ``req`` (its one setting): calibrator name ->
        metric -> (n_boot,) float64 (empty when ``req.n_boot`` is 0; a metric without an interval is absent).
        Cached like everything else: after :meth:`evaluate` of the same request this computes nothing."""
        check_request(req)
        job = _Job(self, req, settings_of(req), progress, cancel, None, time.perf_counter(), given)
        job._fit_all()
        job._score_all()
        if not req.n_boot:
            return {nm: {} for nm in job.names}
        job._resample_all()
        s = job.settings[0]
        return {nm: job._dists(nm, job.bins_of[s], s) for nm in job.names}

    def resamples(self, req: EvalRequest, given: Optional[Mapping[str, calib.Fitted]] = None
                  ) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
        """The evaluation split's bootstrap resamples as used by every interval of ``req``: ((n_boot, units) uint8
        counts or None when they would not fit COUNTS_BUDGET, (N,) unit of each sample or None). Restricting the
        columns to a subset of samples gives that subset's paired resamples."""
        check_request(req)
        job = _Job(self, req, settings_of(req), None, None, None, time.perf_counter(), given)
        counts, units, _ = job._resamples()
        return counts, units


class _Job:
    """The state of one request while it runs through the stages."""

    def __init__(self, engine: Engine, req: EvalRequest, settings: list[Setting], progress, cancel, on_partial,
                 t0: float, given: Optional[Mapping[str, calib.Fitted]] = None) -> None:
        self.cache, self.req, self.settings = engine.cache, req, settings
        self.progress, self.cancel, self.on_partial, self.t0 = progress, cancel, on_partial, t0
        self.device = resolve_device(req.device)
        self.source = shards if shards.is_pattern(req.file) else lg
        self.run_info = lg.find_run(self.source.list_runs(req.file), req.run)
        self.ident = file_identity(req.file)
        self.cache.forget_file(req.file, self.ident)
        self.names = tuple(req.calibrators)
        self.given = dict(given or {})
        self.needs_fit = any(c != "none" and c not in self.given for c in self.names)
        self.run_info.split(req.eval_split)
        if self.needs_fit:
            self.run_info.split(req.fit_split)
        self.n = self.run_info.split(req.eval_split).n
        self.k = self.run_info.k
        self.bins_of = {s: resolve_bins(s.bins, self.n) for s in settings}
        self.all_bins = tuple(sorted(set(self.bins_of.values())))
        self.fitted: dict[str, calib.Fitted] = {}
        self.scored: dict[str, Scored] = {}
        self.dists: dict[tuple, dict] = {}       # this request's resamples, whatever the cache keeps
        self.counters = {"fitted": [], "reused": [], "scored": [], "resampled": []}
        self.timings: dict[str, float] = {}
        self.budget = req.max_memory or stream.DEFAULT_MAX_MEMORY

    # --- keys ----------------------------------------------------------------------------------------------------

    def fit_key(self, name: str) -> tuple:
        if name == "none":               # the identity: the same whatever the fit split
            return ("fit", self.req.file, self.ident, self.run_info.name, None, "none", ())
        if name in self.given:           # fitted elsewhere: keyed by what it is, not where it came from
            g = self.given[name].to_json()
            return ("fit", self.req.file, self.ident, self.run_info.name, "given", g["method"],
                    json.dumps(g["params"], sort_keys=True))
        opts = tuple(sorted(self.req.options_for(name).items()))
        return ("fit", self.req.file, self.ident, self.run_info.name, self.req.fit_split, name, opts)

    def score_key(self, name: str) -> tuple:
        r = self.req
        return ("score",) + self.fit_key(name)[1:] + (r.eval_split, r.n_boot, r.seed, str(self.device))

    # --- the stages ----------------------------------------------------------------------------------------------

    def run(self) -> list[Evaluation]:
        self._fit_all()
        self._score_all()
        if self.req.n_boot:
            self._resample_all()
        report(self.progress, 1.0, "done")
        return self._assemble(pending=False)

    def _prog(self, lo: float, hi: float):
        if self.progress is None:
            return None
        return lambda f, msg: self.progress(lo + (hi - lo) * f, msg)

    def _open(self, name: str, span: tuple[float, float], opened: list):
        info = self.run_info.split(name)
        if stream.memory_bytes(info) > self.budget:
            split = stream.StreamedSplit(self.req.file, self.run_info, name, device=self.device,
                                         chunk_rows=self.req.chunk_rows)
            opened.append(split)
            return split, split.labels
        report(self.progress, span[0], f"reading {name}")
        data = self.source.read_split(self.req.file, self.run_info, name, chunk_rows=self.req.chunk_rows,
                                      progress=self._prog(*span), cancel=self.cancel)
        return scores_tensor(data, self.device), torch.from_numpy(data.labels).to(self.device)

    def _fit_all(self) -> None:
        todo = []
        for name in self.names:
            hit = self.cache.get(self.fit_key(name))
            if name in self.given and name != "none":
                self.fitted[name] = self.given[name]
            elif name == "none":
                self.fitted[name] = hit or self.cache.put(self.fit_key(name),
                                                          calib.Fitted(method="none", k=self.k, params={}))
            elif hit is not None:
                self.fitted[name] = hit
                self.counters["reused"].append(name)
            else:
                todo.append(name)
        if not todo:
            return
        opened: list = []
        t1 = time.perf_counter()
        try:
            with torch.inference_mode():
                scores, labels = self._open(self.req.fit_split, (0.0, 0.05), opened)
                n_fit = int(scores.shape[0])
                for i, name in enumerate(todo):
                    check_cancel(self.cancel)
                    report(self.progress, 0.05 + 0.25 * i / len(todo),
                           f"fitting {calib.get(name).label} ({i + 1} of {len(todo)})")
                    t2 = time.perf_counter()
                    fitted = calib.fit(name, scores, labels, options=self.req.options_for(name),
                                       progress=self._prog(0.05 + 0.25 * i / len(todo),
                                                           0.05 + 0.25 * (i + 1) / len(todo)),
                                       cancel=self.cancel,
                                       fit_info={"file": str(self.req.file), "run": self.run_info.name,
                                                 "split": self.req.fit_split, "n": n_fit})
                    self.timings[f"fit:{name}"] = time.perf_counter() - t2
                    self.fitted[name] = self.cache.put(self.fit_key(name), fitted)
                    self.counters["fitted"].append(name)
        finally:
            for split in opened:
                split.close()
        self.timings["fit"] = time.perf_counter() - t1

    def _score_all(self) -> None:
        todo = []
        for name in self.names:
            hit = self.cache.get(self.score_key(name))
            if hit is not None and set(self.all_bins) <= set(hit.bins):
                self.scored[name] = hit
            else:
                todo.append((name, () if hit is None else hit.bins))
        if not todo:
            self._emit_partial()
            return
        opened: list = []
        t1 = time.perf_counter()
        try:
            with torch.inference_mode():
                scores, labels = self._open(self.req.eval_split, (0.3, 0.35), opened)
                counts, units, note = self._resamples()
                if stream.is_streamed(scores):          # one pass over the disk for all of them
                    self._score(scores, labels, todo, counts, units, note, (0.35, 0.6))
                else:
                    for i, item in enumerate(todo):
                        span = (0.35 + 0.25 * i / len(todo), 0.35 + 0.25 * (i + 1) / len(todo))
                        self._score(scores, labels, [item], counts, units, note, span)
                del scores
        finally:
            for split in opened:
                split.close()
        stream.trim_heap()
        self.timings["score"] = time.perf_counter() - t1

    def _resamples(self):
        """(counts (n_boot, units) uint8 or None, units or None, note) for the class-wise accumulators."""
        r = self.req
        if not r.n_boot:
            return None, None, None
        units = self._units()
        n_units = self.n if units is None else int(units.max()) + 1
        if r.n_boot * n_units > COUNTS_BUDGET:
            return None, units, (f"no class-wise ECE interval: {r.n_boot} resamples of {n_units:,} samples would "
                                 f"take {stream.human(r.n_boot * n_units)} while scoring; lower --n-boot")
        key = ("counts", self.n, self.k, r.n_boot, r.seed)
        counts = self.cache.get_or_build(key, lambda: Resampler(self.n, r.n_boot, r.seed, units=units)
                                         .counts_matrix())
        return counts, units, None

    def _units(self) -> Optional[torch.Tensor]:
        return self.cache.get_or_build(("units", self.n, self.k, self.req.seed),
                                       lambda: bootstrap_units(self.n, self.k, self.req.seed))

    def _score(self, scores, labels, items, counts, units, note, span) -> None:
        """One pass over the evaluation split for the calibrators in ``items`` ((name, previously scored bins))."""
        n, k, r = self.n, self.k, self.req
        names = [name for name, _ in items]
        bins = {name: tuple(sorted(set(self.all_bins) | set(old))) for name, old in items}
        label = ", ".join(calib.get(nm).label for nm in names)
        report(self.progress, span[0], f"scoring {label}")
        accs = {nm: StatsAccumulator(n, k, bins[nm], self.device) for nm in names}
        cw_note = note
        per_pass = ClasswiseBootstrap.nbytes(r.n_boot, 0 if units is None else int(units.max()) + 1, k,
                                             units is not None)
        if counts is not None and per_pass * len(names) > CLASSWISE_BUDGET:
            cw_note = (f"no class-wise ECE interval: its resamples would take {stream.human(per_pass)} per "
                       f"calibrator; lower --n-boot")
        two_pass = (counts is not None and cw_note is None and units is None and not stream.is_streamed(scores)
                    and r.n_boot * n * k > _TWO_PASS_FLOPS)
        cws = {nm: (ClasswiseBootstrap(counts, k, units=units, device=self.device)
                    if counts is not None and cw_note is None and not two_pass else None) for nm in names}
        base_pred = torch.empty(n, dtype=torch.int64, device=self.device)
        pos = {nm: torch.empty(n, dtype=torch.float64, device=self.device) for nm in names}
        for start, z, y in self._chunks(scores, labels):
            check_cancel(self.cancel)
            stream.trim_heap()          # the previous chunk's temporaries: see stream.trim_heap (in memory too)
            base_pred[start:start + z.shape[0]] = z.argmax(dim=1)
            for nm in names:
                accs[nm].add(start, self.fitted[nm].apply(z), y, _on_chunk(pos[nm], cws[nm]))
            stop = start + z.shape[0]
            report(self.progress, span[0] + (span[1] - span[0]) * stop / n * (0.5 if two_pass else 1.0),
                   f"scoring {label}: {stop:,} of {n:,} rows")
        base_pred = base_pred.cpu().numpy()
        aurocs = self._auroc_pass(scores, labels, names, pos, counts, units, span)
        for nm in names:
            check_cancel(self.cancel)
            stats = accs[nm].result(labels)
            dists, notes = {}, []
            if counts is not None and cw_note is None:
                cw = cws[nm]
                if two_pass:
                    cw = self._classwise_pass(scores, labels, nm, counts, stats, bins[nm], span)
                totals = np.full(r.n_boot, float(n)) if units is None else \
                    (counts.double() @ torch.bincount(units, minlength=counts.shape[1]).double()).numpy()
                for b in bins[nm]:
                    check_cancel(self.cancel)
                    dists[b] = cw.distribution(accs[nm], b, totals)
                cw.release()
            elif r.n_boot:
                notes.append(cw_note)
                dists = {b: None for b in bins[nm]}
            auroc, auroc_dist, auroc_note = aurocs[nm]
            if auroc_note:      # routine above the work budget (documented), so information, not a warning
                log.info("%s %s: %s", self.run_info.name, nm, auroc_note)
            scored = Scored(stats=stats, bins=bins[nm],
                            classwise_sums=MappingProxyType({b: accs[nm].classwise_sums(b) for b in bins[nm]}),
                            classwise_dist=MappingProxyType(dists),
                            argmax_changed=float((stats.pred != base_pred).mean()),
                            notes=tuple(notes),
                            auroc=auroc, auroc_dist=auroc_dist)
            self.scored[nm] = self.cache.put(self.score_key(nm), scored)
            self.counters["scored"].append((nm, r.eval_split))
            accs[nm] = cws[nm] = None
            self._emit_partial()

    def _chunks(self, scores, labels):
        """The scoring pass's chunks (the AUROC pass must see the same rows together: same bits)."""
        return (scores.chunks() if stream.is_streamed(scores) else
                stream.tensor_chunks(scores, labels, chunk_rows(self.k)))

    def _auroc_pass(self, scores, labels, names, pos, counts, units, span) -> dict:
        """name -> (auroc, (n_boot,) resampled auroc or None, note or None): a second pass over the chunks counts
        every probability against the sorted positives collected while scoring (calibview.core.stats.auroc); when the
        interval is affordable the (small) probability matrix is kept for it."""
        r, n, k = self.req, self.n, self.k
        note = au.boot_note(r.n_boot, n, k) if r.n_boot else None
        if r.n_boot and note is None and counts is None:
            note = "no AUROC interval: the resample counts were not kept (see the class-wise ECE note)"
        keep = bool(r.n_boot) and note is None
        y_np = labels.cpu().numpy()
        counters = {nm: au.AurocCounter(y_np, pos[nm], k) for nm in names}
        kept = {nm: torch.empty((n, k), dtype=torch.float64) for nm in names} if keep else {}
        t1 = time.perf_counter()
        for start, z, y in self._chunks(scores, labels):
            check_cancel(self.cancel)
            for nm in names:
                p = self.fitted[nm].apply(z).exp()
                counters[nm].add(p)
                if keep:
                    kept[nm][start:start + z.shape[0]] = p.cpu()
            report(self.progress, span[1], f"AUROC: {start + z.shape[0]:,} of {n:,} rows")
        out = {}
        for nm in names:
            dist = au.resampled_auroc(kept[nm].numpy(), y_np, counts, units) if keep else None
            out[nm] = (counters[nm].value(), dist, note)
        self.timings["auroc"] = self.timings.get("auroc", 0.0) + time.perf_counter() - t1
        return out

    def _classwise_pass(self, scores, labels, name, counts, stats, bins, span) -> ClasswiseBootstrap:
        """The class-wise accumulator of a large in-memory split, restricted to the classes that need the dense
        product (:func:`mixed_classes` for the smallest bin count, which covers every larger one)."""
        cols = mixed_classes(stats, bins[0])
        cw = ClasswiseBootstrap(counts, self.k, columns=cols if len(cols) < self.k // 2 else None,
                                device=self.device)
        fitted = self.fitted[name]
        for start, z, y in stream.tensor_chunks(scores, labels, chunk_rows(self.k)):
            check_cancel(self.cancel)
            stream.trim_heap()
            lp = fitted.apply(z)
            cw.add(start, lp, lp.exp(), y)
            stop = start + z.shape[0]
            report(self.progress, span[0] + (span[1] - span[0]) * (0.5 + 0.5 * stop / self.n),
                   f"class-wise resamples of {fitted.label}: {stop:,} of {self.n:,} rows")
        return cw

    # --- points and resamples ------------------------------------------------------------------------------------

    def _point(self, name: str, part: tuple) -> dict:
        key = ("point",) + self.score_key(name)[1:] + part
        return self.cache.get_or_build(key, lambda: self._compute_point(name, part))

    def _compute_point(self, name: str, part: tuple) -> dict:
        sc = self.scored[name]
        return compute_part(sc.stats, sc.classwise_sums, part)

    def _parts(self) -> list[tuple]:
        """The metric parts the settings need: common, binned per bin count, kernel per (bandwidth, kernel)."""
        kernels = list(dict.fromkeys((s.bandwidth, s.kernel) for s in self.settings))
        return [("common",)] + [("binned", b) for b in self.all_bins] + [("kernel", h, kn) for h, kn in kernels]

    def _dist_key(self, name: str, part: tuple) -> tuple:
        return ("dist",) + self.score_key(name)[1:] + part

    def _resample_all(self) -> None:
        todo = {nm: [p for p in self._parts() if self.cache.get(self._dist_key(nm, p)) is None]
                for nm in self.names}
        todo = {nm: parts for nm, parts in todo.items() if parts}
        if not todo:
            return
        t1 = time.perf_counter()
        r = self.req
        units = self._units()
        counts = self.cache.get(("counts", self.n, self.k, r.n_boot, r.seed))
        resampler = Resampler(self.n, r.n_boot, r.seed, device=self.device, units=units)
        boots = {nm: SampleBootstrap(self.scored[nm].stats, device=self.device, units=units,
                                     tick=lambda: check_cancel(self.cancel)) for nm in todo}
        values: dict = {(nm, p): {} for nm, parts in todo.items() for p in parts}
        # Blocks outer (each drawn once) for samples; calibrators outer for groups of a large split, where a block
        # is cheap and one calibrator's O(N) helpers at a time keep the memory down.
        order = ([list(todo)] if units is None else [[nm] for nm in todo])
        total, done = len(resampler) * len(order), 0
        for group in order:
            for block in resampler.blocks(counts):
                check_cancel(self.cancel)
                for nm in group:
                    boot = boots[nm]
                    for p in todo[nm]:
                        check_cancel(self.cancel)
                        out = resample_part(boot, block, p)
                        for metric, v in out.items():
                            values[(nm, p)].setdefault(metric, []).append(np.asarray(v, dtype=np.float64))
                done += 1
                stop = min(r.n_boot, (done % len(resampler) or len(resampler)) * resampler.block)
                report(self.progress, 0.6 + 0.39 * done / total, f"bootstrap {stop}/{r.n_boot}")
                del block
            for nm in group:
                boots[nm].release()
            stream.trim_heap()
        for (nm, p), metrics in values.items():
            self.dists[(nm, p)] = self.cache.put(self._dist_key(nm, p),
                                                 {m: np.concatenate(v) for m, v in metrics.items()})
            self.counters["resampled"].append(f"{nm}:{' '.join(str(x) for x in p)}")
        self.timings["bootstrap"] = time.perf_counter() - t1

    # --- results -------------------------------------------------------------------------------------------------

    def _emit_partial(self) -> None:
        if self.on_partial is not None:
            self.on_partial(self._assemble(pending=True))

    def _assemble(self, pending: bool) -> list[Evaluation]:
        counters = Counters(tuple(self.counters["fitted"]), tuple(self.counters["reused"]),
                            tuple(self.counters["scored"]), tuple(self.counters["resampled"]))
        out = []
        for s in self.settings:
            b = self.bins_of[s]
            req = replace(self.req, bins=s.bins, bandwidth=s.bandwidth, kernel=s.kernel)
            results = tuple(self._result(nm, b, s, pending) for nm in self.names if nm in self.scored)
            out.append(Evaluation(request=req, run=self.run_info, n_eval=self.n,
                                  n_fit=self._n_fit(), k=self.k, n_bins=b, device=str(self.device),
                                  results=results, elapsed_s=time.perf_counter() - self.t0,
                                  timings=MappingProxyType(dict(self.timings)), counters=counters,
                                  pending=pending))
        return out

    def _n_fit(self) -> int:
        if self.needs_fit:
            return self.run_info.split(self.req.fit_split).n
        return max([int(f.fit_info.get("n", 0) or 0) for f in self.given.values()] or [0])

    def _result(self, name: str, b: int, s: Setting, pending: bool) -> CalibratorResult:
        sc, fitted = self.scored[name], self.fitted[name]
        common, binned = self._point(name, ("common",)), self._point(name, ("binned", b))
        kern = self._point(name, ("kernel", s.bandwidth, s.kernel))
        values = {**common["values"], **binned["values"], **kern["values"], "auroc": sc.auroc}
        dists = self._dists(name, b, s) if self.req.n_boot else {}
        metrics = {}
        for m in METRIC_NAMES:
            iv = percentile_interval(dists[m], self.req.level) if m in dists else None
            metrics[m] = Estimate(values[m], iv.lo if iv else float("nan"), iv.hi if iv else float("nan"))
        warnings = list(fitted.warnings) + list(sc.notes)
        if not np.isfinite(values["nll"]):
            n_zero = int((~np.isfinite(sc.stats.nll)).sum())
            warnings.append(f"NLL is infinite: {fitted.label} gives probability 0 to the true class of "
                            f"{n_zero} sample(s).")
        return CalibratorResult(
            name=name, label=fitted.label, fitted=fitted, metrics=MappingProxyType(metrics), bins=binned["table"],
            bin_acc_lo=_frozen(binned["lo"]), bin_acc_hi=_frozen(binned["hi"]), stats=common["curve_stats"],
            per_class_ece=_frozen(binned["per_class_ece"]), per_class_accuracy=_frozen(common["per_class_accuracy"]),
            per_class_count=_frozen(common["per_class_count"]), smece_sigma=common["sigma"],
            argmax_changed=sc.argmax_changed, warnings=tuple(warnings))

    def _dists(self, name: str, b: int, s: Setting) -> dict:
        """metric -> bootstrap distribution of calibrator ``name`` at bin count ``b`` and setting ``s``."""
        sc, dists = self.scored[name], {}
        for part in (("common",), ("binned", b), ("kernel", s.bandwidth, s.kernel)):
            dists.update(self.dists.get((name, part)) or self.cache.get(self._dist_key(name, part)) or {})
        if sc.classwise_dist.get(b) is not None and dists:
            dists["classwise_ece"] = sc.classwise_dist[b]
        if "brier" in dists:
            dists["tot"] = dists["brier"]      # TOT is the Brier score, whatever the bandwidth
        if sc.auroc_dist is not None and dists:
            dists["auroc"] = sc.auroc_dist
        return dists

    def log_line(self, ev: Evaluation) -> str:
        c = ev.counters
        return (f"evaluated {self.run_info.name} fit={self.req.fit_split or 'none'} eval={self.req.eval_split}: "
                f"fitted {len(c.fitted)}, reused {len(c.reused)}, scored {len(c.scored)}, "
                f"{time.perf_counter() - self.t0:.2f} s")


def _on_chunk(pos: torch.Tensor, cw: Optional[ClasswiseBootstrap]):
    """The scoring pass's per-chunk consumer: keep each row's label probability for the AUROC (before the
    class-wise accumulator, which overwrites the probabilities)."""
    def consume(start, lp, p, y):
        pos[start:start + p.shape[0]] = au.positives(p, y)
        if cw is not None:
            cw.add(start, lp, p, y)
    return consume


def _frozen(a: np.ndarray) -> np.ndarray:
    """The cached array itself, made read-only (results are immutable and share the cache's arrays)."""
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


__all__ = ["Counters", "Engine", "Interval", "Scored", "Setting", "settings_of", "BINNED_METRICS",
           "COMMON_METRICS", "KERNEL_METRICS"]
