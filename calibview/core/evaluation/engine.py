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
The stages are the functions of :mod:`calibview.core.evaluation.stages`, run on a
:class:`~calibview.core.evaluation.job.Job` that names each stage's cache key. The cache is a bounded LRU
(:mod:`calibview.core.evaluation.cache`); each result carries :class:`Counters` saying what was fitted, reused
and scored, and one log line per request goes to the ``calibview`` logger at INFO.

Results arrive progressively through ``on_partial(evaluations)``: point estimates and curves of each calibrator
as soon as it is scored (intervals pending), then everything.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import torch

from calibview.core import calibrators as calib
from calibview.core.stats.bootstrap import BINNED_METRICS, COMMON_METRICS, KERNEL_METRICS
from calibview.core.stats.resampling import Interval
from calibview.core.evaluation import stages
from calibview.core.evaluation.cache import DEFAULT_BUDGET, LRUCache
from calibview.core.evaluation.job import Job, run_key
from calibview.core.evaluation.request import EvalRequest, Setting, check_request, settings_of
from calibview.core.evaluation.results import Counters, Evaluation, Scored
from calibview.core.io.toplabel.format import is_toplabel


def stages_of(job: Job):
    """The stages that evaluate ``job``'s run: :mod:`calibview.core.evaluation.toplabel.stages` for a top-label
    run (confidence, predictions, labels), else :mod:`calibview.core.evaluation.stages`."""
    if is_toplabel(job.run_info):
        from calibview.core.evaluation.toplabel import stages as toplabel_stages

        return toplabel_stages
    return stages

log = logging.getLogger("calibview")


class Engine:
    """Evaluates requests through the cached stages. One engine per window (or per CLI process); not shared
    between threads at the same time."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.cache = LRUCache(budget)

    def forget_run(self, ev: Evaluation, unless: Sequence[EvalRequest] = ()) -> int:
        """Drop the cached results of the run (and member) that ``ev`` evaluated: its fits, scores, point estimates,
        intervals and tests, of every split; returns how many entries went. Nothing goes when one of ``unless``
        (requests still to come) names the same file, run and member, since its fits would be reused. The
        resample counts and units stay: they depend on the split's size only, and runs on the same samples
        share them. For a caller that will not come back to a run once it is evaluated: the command line,
        evaluating run after run, where each finished run's per-sample vectors piled up (1.3 MB per member of a
        10-member 10,000 x 100 run)."""
        req = ev.request
        if any((r.file, r.run, r.member) == (req.file, req.run, req.member) for r in unless):
            return 0
        key = run_key(ev.run.name, req.member)
        # the keys that name a run have the file and the run as their second and fourth items (job.py); the resample
        # counts' and units' keys name neither
        return self.cache.forget(lambda k: isinstance(k, tuple) and len(k) > 3 and k[1] == req.file and k[3] == key)

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
        job = Job(self.cache, req, settings, progress, cancel, on_partial, t0, given)
        evaluations = stages_of(job).run(job)
        log.info(job.log_line(evaluations[0]))
        log.debug("stage timings: %s", ", ".join(f"{k} {v:.2f} s" for k, v in job.timings.items()))
        return evaluations

    def scored(self, req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
               given: Optional[Mapping[str, calib.Fitted]] = None) -> dict[str, Scored]:
        """The fit and score stages alone (cached like everything else): calibrator name -> :class:`Scored`, whose
        ``stats`` holds the per-sample vectors (confidence, arg-max, correctness, NLL, Brier, label) of the
        evaluation split. What slices, selective prediction and thresholds are computed from."""
        check_request(req)
        job = Job(self.cache, req, settings_of(req), progress, cancel, None, time.perf_counter(), given)
        stages_of(job).fit_stage(job)
        stages_of(job).score_stage(job)
        return dict(job.scored)

    def fitted(self, req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
               given: Optional[Mapping[str, calib.Fitted]] = None) -> dict[str, calib.Fitted]:
        """The fit stage alone: calibrator name -> fitted calibrator (cached)."""
        check_request(req)
        job = Job(self.cache, req, settings_of(req), progress, cancel, None, time.perf_counter(), given)
        stages_of(job).fit_stage(job)
        return dict(job.fitted)

    def distributions(self, req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
                      given: Optional[Mapping[str, calib.Fitted]] = None) -> dict[str, dict[str, np.ndarray]]:
        """The bootstrap distributions behind the intervals of ``req`` (its one setting): calibrator name ->
        metric -> (n_boot,) float64 (empty when ``req.n_boot`` is 0; a metric without an interval is absent).
        Cached like everything else: after :meth:`evaluate` of the same request this computes nothing."""
        check_request(req)
        job = Job(self.cache, req, settings_of(req), progress, cancel, None, time.perf_counter(), given)
        stages_of(job).fit_stage(job)
        stages_of(job).score_stage(job)
        if not req.n_boot:
            return {nm: {} for nm in job.names}
        stages_of(job).resample_stage(job)
        s = job.settings[0]
        return {nm: job.distributions(nm, job.bins_of[s], s) for nm in job.names}

    def resamples(self, req: EvalRequest, given: Optional[Mapping[str, calib.Fitted]] = None
                  ) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
        """The evaluation split's bootstrap resamples as used by every interval of ``req``: ((n_boot, units) uint8
        counts or None when they would not fit COUNTS_BUDGET, (N,) unit of each sample or None). Restricting the
        columns to a subset of samples gives that subset's paired resamples."""
        check_request(req)
        job = Job(self.cache, req, settings_of(req), None, None, None, time.perf_counter(), given)
        counts, units, _ = job.resamples()
        return counts, units

    def resampler(self, req: EvalRequest):
        """The :class:`~calibview.core.stats.resampling.Resampler` of ``req``'s intervals (its scheme, units and
        seed), serving the blocks of :meth:`resamples`' counts."""
        check_request(req)
        job = Job(self.cache, req, settings_of(req), None, None, None, time.perf_counter())
        return job.resampler(job.units())


def evaluate(req: EvalRequest, *, progress=None, cancel: Optional[threading.Event] = None,
             on_partial=None) -> Evaluation:
    """Fit every requested calibrator on the fit split and score it on the evaluation split, with no cache kept
    (a fresh :class:`Engine`; the window and the CLI keep an engine of their own so that what did not change is
    not computed again).

    Progress goes to ``progress(fraction, message)``, ``cancel`` is checked between chunks of work, and CUDA is
    used when available (``device="auto"``) with the same float64 accumulation as on the CPU. A split that would
    take more than ``req.max_memory`` bytes in memory is streamed from disk instead of loaded (see
    :mod:`calibview.core.io.stream`); the numbers are the same either way."""
    return Engine().evaluate(req, progress=progress, cancel=cancel, on_partial=on_partial)


__all__ = ["Counters", "Engine", "Interval", "Scored", "Setting", "evaluate", "settings_of", "BINNED_METRICS",
           "COMMON_METRICS", "KERNEL_METRICS"]
