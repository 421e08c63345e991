"""One request on its way through the engine's stages (:mod:`calibview.core.evaluation.stages`): what it asks, what
the file holds, what the stages produced so far, and the cache key of every stage's output.

Cache keys (plain tuples; after the stage name come the file as the user named it, its identity and the run, so
that :meth:`LRUCache.forget_file <calibview.core.evaluation.cache.LRUCache.forget_file>` finds them)::

    ("fit", file, ident, run, fit split | None | "given", method, options)   -> calibrators.Fitted
    ("score", *fit_key[1:], eval split, n_boot, seed, device[, "poisson"]) -> results.Scored
    ("point", *score_key[1:], *part)                                       -> stats.points.compute_part's dict
    ("dist", *score_key[1:], *part)                                        -> metric -> (n_boot,) float64
    ("tests", *score_key[1:], "ece", B) | ("tests", *score_key[1:], "skce") -> a p-value | stats.corp.parts'
                                                                               skce_test dict
    ("counts", N, K, n_boot, seed[, scheme])                               -> (n_boot, units) uint8 tensor
    ("units", N, K, seed[, scheme])                                        -> (N,) int64 tensor, or None

(``scheme``: the :class:`~calibview.core.stats.resampling.PoissonScheme` of a request with ``bootstrap="poisson"``,
which depends on the shards' sizes too.)

A *part* is a group of metrics computed together: ``("common",)``, ``("corp",)`` (the bandwidth-free CORP
decomposition and refinement split), ``("binned", B)`` or ``("kernel", bandwidth, kernel)``
(:mod:`calibview.core.stats.points`). The calibration tests' p-values are no part: one number each, drawn in the
resample stage. Resample counts and units depend on (N, K, n_boot, seed) only (and the shards' sizes for the
Poisson bootstrap), so runs on the same samples share them (paired comparisons).
"""

from __future__ import annotations

import json
import time
from typing import Mapping, Optional

import torch

from calibview.core import calibrators as calib
from calibview.core.io import memory
from calibview.core.io import arrays, discovery
from calibview.core.io import logits as lg
from calibview.core.io import shards, stream
from calibview.core.stats.resampling import Resampler, bootstrap_units, poisson_scheme
from calibview.core.stats.metrics import resolve_bins
from calibview.core.stats.points import compute_part
from calibview.core.errors import CalibviewError, report
from calibview.core.io.members import format as members_format
from calibview.core.evaluation.cache import LRUCache, file_identity
from calibview.core.evaluation import cost
from calibview.core.evaluation.cost import COUNTS_BUDGET, budget, check_bins  # noqa: F401 (COUNTS_BUDGET: its old home)
from calibview.core.evaluation.request import EvalRequest, Setting
from calibview.core.evaluation.tensors import resolve_device, scores_tensor
from calibview.core.evaluation.results import Evaluation, Scored


def run_key(run: str, member: Optional[str]) -> str:
    """The run as the cache keys name it (their fourth item): one member of a run with members is a run of its
    own. ``run`` is the run's full name ("model/dataset")."""
    return run if member is None else f"{run}#member={member}"


def source_of(file: str):
    """The reader of ``file``: :mod:`calibview.core.io.arrays` for the pseudo-path of in-memory arrays,
    :mod:`~calibview.core.io.shards` for a glob, else :mod:`~calibview.core.io.logits` (one HDF5 file). Each has
    ``read_split``; arrays and shards also ``list_runs`` (a file's runs are :mod:`~calibview.core.io.discovery`'s)."""
    if arrays.is_memory(file):
        return arrays
    return shards if shards.is_pattern(file) else lg


class Job:
    """The state of one request while it runs through the stages.

    Resolved (and checked: the run and the splits it needs must exist) on construction: ``device``, ``source``
    (the split reader: :func:`source_of`), ``run_info``,
    ``n`` (samples of the evaluation split), ``k`` (classes), ``bins_of`` (setting -> resolved bin count),
    ``all_bins`` (the distinct bin counts, sorted), ``names`` (the calibrators, in the request's order) and
    ``needs_fit`` (False when every calibrator is ``none`` or given). Entries of ``cache`` whose file changed on
    disk are dropped at once.

    Filled by the stages: ``fitted`` (name -> Fitted), ``scored`` (name -> Scored), ``dists`` ((name, part) ->
    metric -> (n_boot,) float64: this request's own resamples, whatever the cache keeps), ``counters`` (lists
    behind :class:`~calibview.core.evaluation.results.Counters`) and ``timings`` (seconds per stage).
    ``progress(fraction, message)``, ``cancel`` (a threading.Event) and ``on_partial(evaluations)`` are the
    caller's; ``given`` maps calibrator names to calibrators fitted elsewhere, applied as they are."""

    def __init__(self, cache: LRUCache, req: EvalRequest, settings: list[Setting], progress=None, cancel=None,
                 on_partial=None, t0: Optional[float] = None,
                 given: Optional[Mapping[str, calib.Fitted]] = None) -> None:
        self.cache, self.req, self.settings = cache, req, settings
        self.progress, self.cancel, self.on_partial = progress, cancel, on_partial
        self.t0 = time.perf_counter() if t0 is None else t0
        self.device = resolve_device(req.device)
        self.source = source_of(req.file)
        self.run_info = discovery.find_run((discovery if self.source is lg else self.source)
                                           .list_runs(req.file), req.run)
        self.ident = file_identity(req.file)
        self.cache.forget_file(req.file, self.ident)
        self.names = tuple(req.calibrators)
        self.given = dict(given or {})
        self.needs_fit = any(c != "none" and c not in self.given for c in self.names)
        self.run_info.split(req.eval_split)
        if self.needs_fit:
            self.run_info.split(req.fit_split)
        for split in (req.eval_split, req.fit_split if self.needs_fit else None):
            if split is not None:
                members_format.check_member(self.run_info.split(split), req.member, req.file)
        if req.member is not None and self.source is shards:
            raise CalibviewError(f"{req.file}: the members of a sharded run are read as their ensemble only; "
                                 f"evaluate member {req.member} from one file.")
        self.run_key = run_key(self.run_info.name, req.member)        # a member is a run of its own
        self.n = self.run_info.split(req.eval_split).n
        self.k = self.run_info.k
        self.bins_of = {s: resolve_bins(s.bins, self.n) for s in settings}
        self.all_bins = tuple(sorted(set(self.bins_of.values())))
        check_bins(self.n, self.k, self.all_bins, req.n_boot, len(self.names), budget(req.max_memory))
        self.fitted: dict[str, calib.Fitted] = {}
        self.scored: dict[str, Scored] = {}
        self.dists: dict[tuple, dict] = {}
        #: the calibration tests of this request (test key -> result), whatever the cache keeps
        self.tests: dict[tuple, object] = {}
        self.counters = {"fitted": [], "reused": [], "scored": [], "resampled": []}
        self.timings: dict[str, float] = {}
        self.budget = req.max_memory or memory.DEFAULT_MAX_MEMORY
        self._poisson = None            # the request's Poisson scheme, once asked for (poisson())

    # --- keys ----------------------------------------------------------------------------------------------------

    def fit_key(self, name: str) -> tuple:
        """The fit stage's key of calibrator ``name``: ``none`` is the same whatever the fit split, a given
        calibrator is keyed by what it is (method and parameters), not where it came from."""
        if name == "none":
            return ("fit", self.req.file, self.ident, self.run_key, None, "none", ())
        if name in self.given:
            g = self.given[name].to_json()
            return ("fit", self.req.file, self.ident, self.run_key, "given", g["method"],
                    json.dumps(g["params"], sort_keys=True))
        opts = tuple(sorted(self.req.options_for(name).items()))
        return ("fit", self.req.file, self.ident, self.run_key, self.req.fit_split, name, opts)

    def score_key(self, name: str) -> tuple:
        """The score stage's key of calibrator ``name``: its fit key, the evaluation split, n_boot, seed, device."""
        r = self.req
        poisson = ("poisson",) if r.bootstrap == "poisson" else ()
        return ("score",) + self.fit_key(name)[1:] + (r.eval_split, r.n_boot, r.seed, str(self.device)) + poisson

    def point_key(self, name: str, part: tuple) -> tuple:
        """The key of the point estimates of ``part`` (see the module notes) of calibrator ``name``."""
        return ("point",) + self.score_key(name)[1:] + part

    def dist_key(self, name: str, part: tuple) -> tuple:
        """The key of the bootstrap distributions of ``part`` of calibrator ``name``."""
        return ("dist",) + self.score_key(name)[1:] + part

    def test_key(self, name: str, *which) -> tuple:
        """The key of a calibration test of calibrator ``name``: ``("ece", B)`` or ``("skce",)``."""
        return ("tests",) + self.score_key(name)[1:] + tuple(which)

    def test(self, name: str, *which):
        """The calibration test ``which`` (:meth:`test_key`) of calibrator ``name``: this request's, else the
        cache's, else None (not tested yet)."""
        key = self.test_key(name, *which)
        return self.tests[key] if key in self.tests else self.cache.get(key)

    def parts(self) -> list[tuple]:
        """The metric parts the settings need: common, corp, binned per bin count, kernel per (bandwidth,
        kernel)."""
        kernels = list(dict.fromkeys((s.bandwidth, s.kernel) for s in self.settings))
        return ([("common",), ("corp",)] + [("binned", b) for b in self.all_bins]
                + [("kernel", h, kn) for h, kn in kernels])

    # --- inputs --------------------------------------------------------------------------------------------------

    def sub_progress(self, lo: float, hi: float):
        """``progress`` mapped onto [lo, hi] of the whole request (None without a progress callback)."""
        if self.progress is None:
            return None
        return lambda f, msg: self.progress(lo + (hi - lo) * f, msg)

    def open_split(self, name: str, span: tuple[float, float], opened: list):
        """(scores, labels) of split ``name``: (N, K) scores (log-probabilities or logits, as
        :func:`~calibview.core.evaluation.tensors.scores_tensor`) and (N,) int64 labels on the device, read into
        memory; or, above the memory budget, a :class:`~calibview.core.io.stream.StreamedSplit` (appended to
        ``opened``: the caller closes it) and its labels. ``span``: the progress range of the read."""
        info = self.run_info.split(name)
        if self.source is not arrays and memory.memory_bytes(info) > self.budget:   # arrays: in memory already
            split = stream.StreamedSplit(self.req.file, self.run_info, name, device=self.device,
                                         chunk_rows=self.req.chunk_rows, member=self.req.member)
            opened.append(split)
            return split, split.labels
        report(self.progress, span[0], f"reading {name}")
        member = {"member": self.req.member} if self.req.member is not None else {}   # shards: refused above
        data = self.source.read_split(self.req.file, self.run_info, name, chunk_rows=self.req.chunk_rows,
                                      progress=self.sub_progress(*span), cancel=self.cancel, **member)
        return scores_tensor(data, self.device), torch.from_numpy(data.labels).to(self.device)

    def resamples(self):
        """(counts, units, note) for the class-wise accumulators: (n_boot, units) uint8 resample counts (cached
        under :meth:`counts_key`; None without resamples or above COUNTS_BUDGET, ``note`` then says why), the (N,)
        unit of each sample or None (see :meth:`units`)."""
        r = self.req
        if not r.n_boot:
            return None, None, None
        units = self.units()
        n_units = self.n if units is None else int(units.max()) + 1
        if r.n_boot * n_units > COUNTS_BUDGET:
            return None, units, (f"no class-wise ECE interval: {r.n_boot} resamples of {n_units:,} samples would "
                                 f"take {memory.human(r.n_boot * n_units)} while scoring; lower --n-boot")
        counts = self.cache.get_or_build(self.counts_key(), lambda: self.resampler(units).counts_matrix())
        return counts, units, None

    def counts_key(self) -> tuple:
        """The cache key of the request's (n_boot, units) resample counts."""
        r = self.req
        return ("counts", self.n, self.k, r.n_boot, r.seed) + ((self.poisson(),) if r.bootstrap == "poisson" else ())

    def resampler(self, units) -> Resampler:
        """The request's :class:`~calibview.core.stats.resampling.Resampler` (``units`` from :meth:`units`)."""
        r = self.req
        return Resampler(self.n, r.n_boot, r.seed, device=self.device, units=units,
                         poisson=self.poisson() if r.bootstrap == "poisson" else None)

    def units(self) -> Optional[torch.Tensor]:
        """The (N,) int64 resampling unit of each sample (groups of a large split,
        :func:`~calibview.core.stats.resampling.bootstrap_units`, or the Poisson scheme's groups), or None:
        samples are resampled one by one. Cached under ``("units", N, K, seed[, scheme])``."""
        if self.req.bootstrap == "poisson":
            scheme = self.poisson()
            return self.cache.get_or_build(("units", self.n, self.k, self.req.seed, scheme), scheme.units)
        return self.cache.get_or_build(("units", self.n, self.k, self.req.seed),
                                       lambda: bootstrap_units(self.n, self.k, self.req.seed))

    def poisson(self):
        """The :class:`~calibview.core.stats.resampling.PoissonScheme` of the evaluation split: its shards' sizes in
        order (one file: a single shard), K and the seed."""
        if self._poisson is not None:
            return self._poisson
        if self.source is shards:
            _, per_file = shards.layout(self.req.file)
            sizes = [discovery.find_run(runs, self.run_info.name).split(self.req.eval_split).n for runs in per_file]
        else:
            sizes = [self.n]
        self._poisson = poisson_scheme(sizes, self.k, self.req.seed)
        return self._poisson

    def check_bootstrap(self) -> None:
        """Refuse (CalibviewError) a bootstrap whose distributions would not fit the memory budget, before any
        work."""
        r = self.req
        if r.n_boot:
            cost.check_bootstrap(cost.bootstrap_cost(self.n, self.k, r.n_boot, len(self.names)),
                                 budget(r.max_memory), r.n_boot)

    # --- outputs -------------------------------------------------------------------------------------------------

    def point(self, name: str, part: tuple) -> dict:
        """The point estimates of ``part`` for calibrator ``name`` (scored), computed once and cached under
        :meth:`point_key`: :func:`~calibview.core.stats.points.compute_part`'s dict."""
        sc = self.scored[name]
        return self.cache.get_or_build(self.point_key(name, part),
                                       lambda: compute_part(sc.stats, sc.classwise_sums, part,
                                                            refinement=sc.refinement))

    def distributions(self, name: str, b: int, s: Setting) -> dict:
        """metric -> (n_boot,) float64 bootstrap distribution of calibrator ``name`` at bin count ``b`` and
        setting ``s`` (empty before the resample stage); TOT shares the Brier score's."""
        sc, dists = self.scored[name], {}
        for part in (("common",), ("corp",), ("binned", b), ("kernel", s.bandwidth, s.kernel)):
            dists.update(self.dists.get((name, part)) or self.cache.get(self.dist_key(name, part)) or {})
        if sc.classwise_dist.get(b) is not None and dists:
            dists["classwise_ece"] = sc.classwise_dist[b]
        if "brier" in dists:
            dists["tot"] = dists["brier"]      # TOT is the Brier score, whatever the bandwidth
        if sc.auroc_dist is not None and dists:
            dists["auroc"] = sc.auroc_dist
        return dists

    def n_fit(self) -> int:
        """Samples the calibrators were fitted on: the fit split's, or the largest a given calibrator records."""
        if self.needs_fit:
            return self.run_info.split(self.req.fit_split).n
        return max([int(f.fit_info.get("n", 0) or 0) for f in self.given.values()] or [0])

    def log_line(self, ev: Evaluation) -> str:
        """The one INFO line per request: what was fitted, reused and scored, and the time taken."""
        c = ev.counters
        return (f"evaluated {self.run_info.name} fit={self.req.fit_split or 'none'} eval={self.req.eval_split}: "
                f"fitted {len(c.fitted)}, reused {len(c.reused)}, scored {len(c.scored)}, "
                f"{time.perf_counter() - self.t0:.2f} s")
