"""The caching engine: what a change of request recomputes (asserted through counters), that caching never
changes a number, ablations equal separate runs, files rewritten on disk are re-read, and class-wise resamples
accumulated during scoring equal explicit resampling on every path."""

import os
import subprocess
import sys
import textwrap
import threading
from dataclasses import replace

import numpy as np
import pytest
import torch

from calibview.core.evaluation import stages as stages_mod
from calibview.core.stats import bootstrap as bootstrap_mod
from calibview.core.stats.resampling import Resampler
from calibview.core.evaluation.cache import LRUCache
from calibview.core.evaluation.engine import Engine, Setting, evaluate
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.logits import read_split
from calibview.core.io.writer import write_run
from calibview.core.stats.metrics import classwise_ece, sample_stats
from calibview.core.errors import CalibviewError

NAMES = ("none", "ts", "hb", "mrr")


def _write(path, seed=0, n=(1200, 1500), k=6, scale=2.5, margin=(1.5, 1.0)):
    rng = np.random.default_rng(seed)
    for split, m in zip(("val", "test"), n):
        y = rng.integers(0, k, m)
        z = rng.normal(size=(m, k)) * scale
        z[np.arange(m), y] += rng.normal(*margin, m)
        write_run(path, "net", "toy", split, logits=z.astype(np.float32), labels=y)
    return path


@pytest.fixture()
def toy(tmp_path):
    return _write(tmp_path / "toy.h5")


def _req(path, **kw):
    base = dict(file=str(path), run="net/toy", calibrators=NAMES, n_boot=60, seed=1)
    base.update(kw)
    return EvalRequest(**base)


def _values(ev):
    return {(r.name, m): (e.value, e.lo, e.hi) for r in ev.results for m, e in r.metrics.items()}


def _same(a, b):
    va, vb = _values(a), _values(b)
    assert va.keys() == vb.keys()
    for key in va:
        np.testing.assert_array_equal(np.array(va[key]), np.array(vb[key]), err_msg=str(key))


def test_first_request_fits_and_scores_everything(toy):
    ev = Engine().evaluate(_req(toy))
    assert ev.counters.fitted == ("ts", "hb", "mrr")
    assert ev.counters.reused == ()
    assert ev.counters.scored == tuple((n, "test") for n in NAMES)


@pytest.mark.parametrize("change", [dict(bandwidth=0.1), dict(kernel="epanechnikov"), dict(level=0.9)])
def test_bandwidth_kernel_and_level_fit_nothing_and_score_nothing(toy, change):
    eng = Engine()
    eng.evaluate(_req(toy))
    ev = eng.evaluate(_req(toy, **change))
    assert ev.counters.fitted == () and ev.counters.scored == ()
    assert ev.counters.reused == ("ts", "hb", "mrr")
    if "level" in change:
        assert ev.counters.resampled == ()            # percentiles of the stored resamples
    else:                                              # only the kernel part: CAL, TOT, sharpness gap
        assert ev.counters.resampled and all(":kernel" in p for p in ev.counters.resampled)
    _same(ev, evaluate(_req(toy, **change)))           # and the numbers are those of a fresh evaluation


@pytest.mark.parametrize("change", [dict(bins=10), dict(n_boot=80), dict(seed=2)])
def test_bins_n_boot_and_seed_rescore_without_refitting(toy, change):
    eng = Engine()
    eng.evaluate(_req(toy))
    ev = eng.evaluate(_req(toy, **change))
    assert ev.counters.fitted == ()
    assert ev.counters.scored == tuple((n, "test") for n in NAMES)
    _same(ev, evaluate(_req(toy, **change)))


def test_adding_a_calibrator_fits_only_it_and_removing_fits_nothing(toy):
    eng = Engine()
    eng.evaluate(_req(toy))
    more = eng.evaluate(_req(toy, calibrators=NAMES + ("ir",)))
    assert more.counters.fitted == ("ir",) and more.counters.scored == (("ir", "test"),)
    fewer = eng.evaluate(_req(toy, calibrators=("none", "ts")))
    assert fewer.counters.fitted == () and fewer.counters.scored == () and fewer.counters.resampled == ()
    assert [r.name for r in fewer.results] == ["none", "ts"]


def test_returning_to_an_evaluated_run_recomputes_nothing(tmp_path):
    a = _write(tmp_path / "a.h5", seed=0)
    b = _write(tmp_path / "b.h5", seed=1)
    eng = Engine()
    first = eng.evaluate(_req(a))
    eng.evaluate(_req(b))
    again = eng.evaluate(_req(a))
    assert again.counters.fitted == () and again.counters.scored == () and again.counters.resampled == ()
    _same(first, again)


def test_results_are_identical_with_and_without_the_cache(toy):
    eng = Engine()
    eng.evaluate(_req(toy, bandwidth=0.1, bins=10))
    cached = eng.evaluate(_req(toy))
    _same(cached, evaluate(_req(toy)))


def test_a_file_rewritten_on_disk_is_read_again(tmp_path):
    path = _write(tmp_path / "f.h5", seed=0)
    eng = Engine()
    first = eng.evaluate(_req(path))
    os.unlink(path)
    _write(path, seed=5)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))     # a clock that did not tick is no excuse
    again = eng.evaluate(_req(path))
    assert again.counters.fitted == ("ts", "hb", "mrr")
    assert again.counters.scored == tuple((n, "test") for n in NAMES)
    assert again.result("none").metrics["accuracy"].value != first.result("none").metrics["accuracy"].value
    _same(again, evaluate(_req(path)))


def test_none_is_shared_between_fit_splits(toy):
    eng = Engine()
    eng.evaluate(_req(toy, calibrators=("none",), fit_split=None))
    ev = eng.evaluate(_req(toy, calibrators=("none", "ts")))
    assert ev.counters.scored == (("ts", "test"),)



def test_the_stages_called_one_by_one_give_the_engines_evaluation(toy):
    # what another engine (one that farms the stages out) relies on: a Job and the stage functions alone
    from calibview.core.evaluation.job import Job
    from calibview.core.evaluation.request import settings_of

    req = _req(toy)
    job = Job(LRUCache(), req, settings_of(req))
    stages_mod.fit_stage(job)
    stages_mod.score_stage(job)
    stages_mod.resample_stage(job)
    (ev,) = stages_mod.assemble(job, pending=False)
    assert set(job.fitted) == set(job.scored) == set(NAMES)
    assert all(job.cache.get(job.score_key(nm)) is job.scored[nm] for nm in NAMES)
    _same(ev, Engine().evaluate(req))

def test_the_cache_is_bounded_and_evicts_least_recently_used():
    c = LRUCache(budget=4000)          # 800 bytes of array + ENTRY_OVERHEAD each: three fit
    c.put("a", np.zeros(100))
    c.put("b", np.zeros(100))
    c.put("c", np.zeros(100))
    assert c.get("a") is not None      # a is now the most recent
    c.put("d", np.zeros(100))
    assert "b" not in c and "a" in c and "c" in c and "d" in c
    assert c.size <= 4000
    c.put("huge", np.zeros(1000))      # larger than the budget: returned, not kept
    assert "huge" not in c


def test_an_engine_with_a_tiny_budget_recomputes_but_agrees(toy):
    eng = Engine(budget=1)
    eng.evaluate(_req(toy))
    ev = eng.evaluate(_req(toy))
    assert ev.counters.fitted == ("ts", "hb", "mrr")
    _same(ev, evaluate(_req(toy)))


def test_ablation_rows_equal_separate_single_setting_runs(toy):
    req = _req(toy, calibrators=("none", "ts", "hb"))
    settings = [Setting(b, h, k) for b in (10, 15) for h in (0.03, 0.1) for k in ("gaussian", "epanechnikov")]
    evs = Engine().evaluate_settings(req, settings)
    assert len(evs) == len(settings)
    assert evs[0].counters.scored == (("none", "test"), ("ts", "test"), ("hb", "test"))    # one pass each
    for s, ev in zip(settings, evs):
        assert (ev.request.bins, ev.request.bandwidth, ev.request.kernel) == (s.bins, s.bandwidth, s.kernel)
        single = evaluate(_req(toy, calibrators=("none", "ts", "hb"), bins=s.bins, bandwidth=s.bandwidth,
                               kernel=s.kernel))
        va, vb = _values(ev), _values(single)
        for key in va:
            np.testing.assert_allclose(va[key], vb[key], rtol=0, atol=1e-12, err_msg=f"{s} {key}")


def test_a_request_is_validated_before_any_work(toy):
    eng = Engine()
    with pytest.raises(CalibviewError, match="bandwidth"):
        eng.evaluate_settings(_req(toy), [Setting(15, 0.05, "gaussian"), Setting(15, 0.0003, "gaussian")])
    assert len(eng.cache) == 0


def test_partial_results_arrive_before_the_intervals(toy):
    seen = []
    ev = Engine().evaluate(_req(toy), on_partial=seen.append)
    assert [len(p.results) for p in seen] == [1, 2, 3, 4]
    assert all(p.pending for p in seen) and not ev.pending
    last = seen[-1]
    for r, final in zip(last.results, ev.results):
        assert np.isnan(r.metrics["ece"].lo)                       # intervals pending
        assert r.metrics["ece"].value == final.metrics["ece"].value
        assert r.curve(0.05).curve.shape == final.curve(0.05).curve.shape


def test_a_cancel_mid_request_leaves_the_cache_consistent(toy):
    eng = Engine()
    cancel = threading.Event()

    def stop_after_first(partial):
        cancel.set()

    with pytest.raises(CalibviewError):
        eng.evaluate(_req(toy), cancel=cancel, on_partial=stop_after_first)
    ev = eng.evaluate(_req(toy))
    _same(ev, evaluate(_req(toy)))



def _thread_spy(monkeypatch) -> set:
    """The set that collects the names (without their _N suffix) of the threads that resample a part."""
    from calibview.core.stats import points

    seen = set()
    real = points.resample_part

    def spy(*a, **kw):
        seen.add(threading.current_thread().name.split("_")[0])
        return real(*a, **kw)

    monkeypatch.setattr(stages_mod, "resample_part", spy)
    return seen


def test_calibrators_resampled_side_by_side_give_the_serial_numbers(toy, monkeypatch):
    """The resample stage runs a block's calibrators in threads (stats.resampling.for_each); every interval must
    be what the same resamples give one calibrator after another, and the threads must really have run."""
    seen = _thread_spy(monkeypatch)
    side_by_side = evaluate(_req(toy, n_boot=120))
    assert seen == {"calibview-resample"}               # every part ran in the pool, none in this thread
    seen.clear()
    monkeypatch.setattr(stages_mod, "PARALLEL_MAX_ENTRIES", 0)
    serial = evaluate(_req(toy, n_boot=120))
    assert seen == {threading.current_thread().name.split("_")[0]}
    _same(side_by_side, serial)


def test_calibrators_of_a_large_split_are_resampled_one_at_a_time(toy, monkeypatch):
    """Side by side only up to PARALLEL_MAX_ENTRIES probabilities (rows x classes), not rows: two calibrators'
    temporaries at once took a 50,000 x 1,000 report past its peak-memory target."""
    seen = _thread_spy(monkeypatch)
    n, k = read_split(str(toy), "net/toy", "test").scores.shape      # the evaluation split
    for limit, expect in ((n * k - 1, threading.current_thread().name), (n * k, "calibview-resample")):
        monkeypatch.setattr(stages_mod, "PARALLEL_MAX_ENTRIES", limit)      # limit >= n rows either way
        seen.clear()
        evaluate(_req(toy, n_boot=40))
        assert seen == {expect.split("_")[0]}, limit


def test_a_cancel_while_calibrators_resample_side_by_side_stops_them_all(toy, monkeypatch):
    """A cancel during the threaded resample stage raises in the caller only after every thread has stopped:
    none is left computing into a request that is gone."""
    from calibview.core.stats import points

    import time

    cancel = threading.Event()
    running, lock = [], threading.Lock()
    real = points.resample_part

    def slow(boot, block, part, **kw):
        with lock:
            first = not cancel.is_set()
            cancel.set()                # the first part to start cancels the request...
            running.append(part)
        try:
            if not first:
                time.sleep(0.3)         # ...while another is still at work in the other thread
            return real(boot, block, part, **kw)
        finally:
            with lock:
                running.remove(part)

    monkeypatch.setattr(stages_mod, "resample_part", slow)
    with pytest.raises(CalibviewError, match="[Cc]ancel"):
        Engine().evaluate(_req(toy, calibrators=("none", "ts")), cancel=cancel)
    assert running == []

# --- class-wise ECE resamples, accumulated while scoring, against explicit resampling -------------------------

def _explicit_classwise(path, run, name, n_boot, seed, bins, fitted):
    d = read_split(path, run, "test")
    z = torch.from_numpy(np.asarray(d.scores, dtype=np.float64))
    y = torch.from_numpy(d.labels.copy())
    counts = torch.cat([b.counts for b in Resampler(y.numel(), n_boot, seed).blocks()]).numpy().astype(int)
    lp = fitted.apply(z)
    out = []
    for w in counts:
        idx = np.repeat(np.arange(w.size), w)
        out.append(classwise_ece(sample_stats(lp[idx], y[idx], n_bins=bins))[0])
    return np.percentile(out, [2.5, 97.5])


def _widened(lo, hi, value):
    """The percentile interval extended to contain its estimate (calibview.core.stats.intervals)."""
    return min(lo, value), max(hi, value)


@pytest.mark.parametrize("entry_block", [None, 7])
@pytest.mark.parametrize("path_kind", ["one pass", "two passes, every class", "two passes, mixed classes only"])
def test_classwise_intervals_equal_explicit_resampling(tmp_path, monkeypatch, path_kind, entry_block):
    """``entry_block``: the sparse entries above 1/B made into sparse matrices a few at a time (ranges of
    classes; the mixed-classes path then has a "rest" row in each range, summed into one)."""
    # Confident logits and few samples per class: most classes never have one of their own samples below 1/B,
    # so the restricted product really is restricted (checked below).
    if entry_block is not None:
        monkeypatch.setattr(bootstrap_mod, "ENTRY_BLOCK", entry_block)
    path = _write(tmp_path / "cw.h5", seed=3, n=(300, 300), k=200, scale=1.0, margin=(5.0, 2.0))
    if path_kind != "one pass":
        monkeypatch.setattr(stages_mod, "TWO_PASS_FLOPS", 0)
    if path_kind == "two passes, every class":
        monkeypatch.setattr(stages_mod, "mixed_classes", lambda stats, b: np.arange(stats.k))
    seen = []
    real = stages_mod.ClasswiseBootstrap.__init__

    def spy(self, *a, **kw):
        seen.append(kw.get("columns"))
        real(self, *a, **kw)

    monkeypatch.setattr(stages_mod.ClasswiseBootstrap, "__init__", spy)
    req = EvalRequest(file=str(path), run="net/toy", calibrators=("none", "ts"), n_boot=25, seed=4,
                      bins=15, interval="percentile")
    eng = Engine()
    evs = eng.evaluate_settings(req, [Setting(10, 0.05, "gaussian"), Setting(15, 0.05, "gaussian")])
    if path_kind == "two passes, mixed classes only":
        assert all(c is not None and 0 < len(c) < 100 for c in seen), seen
    else:
        assert all(c is None for c in seen)
    for ev, bins in zip(evs, (10, 15)):
        for name in ("none", "ts"):
            est = ev.result(name).metrics["classwise_ece"]
            lo, hi = _explicit_classwise(path, "net/toy", name, 25, 4, bins, ev.result(name).fitted)
            lo, hi = _widened(lo, hi, est.value)
            assert est.lo == pytest.approx(lo, abs=2e-6), (name, bins)
            assert est.hi == pytest.approx(hi, abs=2e-6), (name, bins)


def test_an_evaluation_never_holds_an_n_by_k_array_per_calibrator(tmp_path):
    """Peak memory of scoring and resampling seven calibrators at N = K = 3000 (36 MB of float32 logits per
    split): holding one (N, K) array per calibrator, as the class-wise bootstrap once did (bfloat16), would add
    at least 7 x 18 MB. The fits are cached by a first request without intervals, so the second request's peak
    is the scoring pass's alone."""
    path = tmp_path / "wide.h5"
    rng = np.random.default_rng(0)
    n = k = 3000
    for split in ("val", "test"):
        y = rng.integers(0, k, n)
        z = rng.normal(size=(n, k)).astype(np.float32)
        z[np.arange(n), y] += 4.0
        write_run(path, "net", "wide", split, logits=z, labels=y)
    script = textwrap.dedent(f"""
        import resource
        from calibview.core.evaluation.engine import Engine
        from calibview.core.evaluation.request import EvalRequest
        eng = Engine()
        cals = ("none", "ts", "ts-grid", "mrr", "hb", "ir", "vs")
        eng.evaluate(EvalRequest(file={str(path)!r}, run="net/wide", n_boot=0, calibrators=cals))
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        ev = eng.evaluate(EvalRequest(file={str(path)!r}, run="net/wide", n_boot=50, calibrators=cals))
        assert ev.counters.fitted == () and len(ev.counters.scored) == 7
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(max(0, peak - base) * 1024)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    grown = int(out.stdout.split()[-1])
    assert grown < 2 * n * k * 4, f"peak grew by {grown / 2**20:.0f} MB"


def test_every_metric_is_the_same_on_each_scoring_path(tmp_path, monkeypatch):
    """The class-wise resamples in the scoring pass, in the rank pass (restricted), and the streamed split (one
    scoring pass for all calibrators, the rank pass reading the file again): every value and interval agrees to
    1e-12, the AUROC exactly."""
    path = _write(tmp_path / "paths.h5", seed=5, n=(400, 400), k=30, scale=1.0, margin=(3.0, 2.0))
    req = EvalRequest(file=str(path), run="net/toy", calibrators=("none", "ts", "hb"), n_boot=40, seed=2)
    base = evaluate(req)
    monkeypatch.setattr(stages_mod, "TWO_PASS_FLOPS", 0)
    rank_pass = evaluate(req)
    monkeypatch.undo()
    streamed = evaluate(replace(req, calibrators=("none", "ts"), max_memory=10_000))   # hb needs memory
    assert streamed.timings and "auroc" in streamed.timings
    for other in (rank_pass, streamed):
        for b in other.results:
            a = base.result(b.name)
            assert b.metrics["auroc"].value == a.metrics["auroc"].value
            for m, est in a.metrics.items():
                for part in ("value", "lo", "hi"):
                    x, y = getattr(est, part), getattr(b.metrics[m], part)
                    assert (np.isnan(x) and np.isnan(y)) or x == pytest.approx(y, abs=1e-12, rel=0), (a.name, m, part)


def test_the_long_steps_between_chunks_look_at_the_cancel(tmp_path, monkeypatch):
    """At millions of rows, building an AUROC counter, the class-wise resample distribution, the selective
    metrics' unit matrix and the CORP atoms each take a second or more: each looks at the cancel event inside
    (from the stage's check or the bootstrap's tick), so a cancel at the worst moment still stops within a
    second (bench_scale prints the longest gap)."""
    import inspect

    from calibview.core.stats import resampling

    monkeypatch.setattr(resampling, "UNIT_LIMIT", 100)          # groups of samples, as at millions of rows
    monkeypatch.setattr(resampling, "MIN_UNITS", 64)
    monkeypatch.setattr(resampling, "MAX_UNITS", 64)
    monkeypatch.setattr(bootstrap_mod, "ENTRY_BLOCK", 20)
    path = _write(tmp_path / "c.h5", seed=5, n=(300, 300), k=20, scale=1.0, margin=(2.0, 1.0))
    callers = set()
    real = stages_mod.check_cancel

    def spy(cancel):
        caller = next(f for f in inspect.stack()[1:] if f.function != "<lambda>")     # a tick is a lambda
        callers.add(f"{os.path.basename(caller.filename)}:{caller.function}")
        real(cancel)

    monkeypatch.setattr(stages_mod, "check_cancel", spy)
    Engine().evaluate(EvalRequest(file=str(path), run="net/toy", calibrators=("none", "ts"), n_boot=40, seed=1))
    for step in ("auroc.py:__init__", "bootstrap.py:_first_fluct", "bootstrap.py:_sparse_cells", "parts.py:resample"):
        assert step in callers, step
