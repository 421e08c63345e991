"""The Dask engine on a LocalCluster of two worker processes: the same numbers as the local engine on the same rows
written as one file, one-sentence refusals of shards that disagree, and no dask import unless asked for."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("distributed")

from calibview.cli import main  # noqa: E402
from calibview.core.distributed import shards as dshards  # noqa: E402
from calibview.core.distributed import tasks  # noqa: E402
from calibview.core.distributed.engine import DaskEngine  # noqa: E402
from calibview.core.errors import CalibviewError  # noqa: E402
from calibview.core.evaluation.engine import Engine  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402
from calibview.core.io.writer import write_run  # noqa: E402

RUN = "net/data"
K = 6
#: rows of (val, test) per shard: uneven, one shard with a single test row
SIZES = [(400, 700), (300, 1), (350, 900)]


def _split(rng, n, k=K):
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)) * 2.0
    z[np.arange(n), y] += 1.5
    return z, y


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The shards part-0..2 (part-1 stored in float16) and the same rows written whole to one file."""
    d = tmp_path_factory.mktemp("dask")
    rng = np.random.default_rng(7)
    whole = {"val": [], "test": []}
    for i, sizes in enumerate(SIZES):
        for split, n in zip(("val", "test"), sizes):
            z, y = _split(rng, n)
            z = z.astype(np.float16 if i == 1 else np.float32)
            write_run(d / f"part-{i}.h5", "net", "data", split, logits=z, labels=y)
            whole[split].append((z.astype(np.float32), y))
    for split, parts in whole.items():
        write_run(d / "whole.h5", "net", "data", split, logits=np.concatenate([p[0] for p in parts]),
                  labels=np.concatenate([p[1] for p in parts]))
    return d


@pytest.fixture(scope="module")
def client():
    """One LocalCluster of two single-threaded worker processes for the whole module."""
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture()
def workers_threads(monkeypatch):
    """This process's torch on one thread, as on the workers (dask's nanny starts them with OMP_NUM_THREADS=1),
    while a test compares the two engines to 1e-9. The resamples' fluctuation products (W - 1) @ F run in float32,
    and on an Intel Xeon torch's BLAS summed them in another order on two threads than on one: the class-wise
    ECE's bounds then differed by 1e-8 relative (not on AMD EPYC, where the orders agreed). Equal threads compare
    like with like; the engines' agreement is what is tested, not the BLAS's. The calibrators are resampled one
    at a time too: a pool thread starts with OpenMP's default team, not the one set here."""
    import torch

    from calibview.core.evaluation import stages

    monkeypatch.setattr(stages, "PARALLEL_MAX_ENTRIES", 0)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _close(a, b, tol=1e-9):
    """Equal, floats to ``tol`` (NaN equal to NaN), inside dicts and lists too."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= tol
    return a == b


def test_point_estimates_equal_the_local_engine_on_one_file(data, client):
    kw = dict(run=RUN, calibrators=("none", "ts", "vs", "hb"), n_boot=0, bins=10)
    local = Engine().evaluate(EvalRequest(file=str(data / "whole.h5"), **kw))
    engine = DaskEngine(client)
    dask = engine.evaluate(EvalRequest(file=str(data / "part-*.h5"), **kw))
    assert dask.n_eval == local.n_eval == sum(t for _, t in SIZES)
    checked = 0
    for a, b in zip(local.results, dask.results):
        assert a.name == b.name
        tol = 1e-9
        assert _close(a.fitted.to_json()["params"], b.fitted.to_json()["params"], tol), a.name
        for m, est in a.metrics.items():
            assert _close(est.value, b.metrics[m].value, tol), (a.name, m, est.value, b.metrics[m].value)
            checked += 1
        np.testing.assert_allclose(a.per_class_ece, b.per_class_ece, atol=tol)
    assert checked > 100
    # a second request of the same calibrators is the cache's: nothing is scored again
    again = engine.evaluate(EvalRequest(file=str(data / "part-*.h5"), **kw))
    assert again.counters.scored == ()


def test_cli_records_equal_without_engine(data, client, capsys):
    pattern = str(data / "part-*.h5")
    args = ["metrics", "--shards", pattern, "--calibrators", "none,ts", "--n-boot", "0", "--json", "--quiet"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(args + ["--engine", "dask", "--scheduler", client.scheduler.address]) == 0
    dask = json.loads(capsys.readouterr().out)
    assert len(plain) == len(dask) == 2
    for a, b in zip(plain, dask):
        assert a.keys() == b.keys()
        for key in a:
            assert _close(a[key], b[key]), (a["calibrator"], key, a[key], b[key])


def test_cli_local_two_workers(data, capsys):
    # the literal command line: calibview starts a LocalCluster of two processes and closes it
    assert main(["metrics", "--shards", str(data / "part-*.h5"), "--engine", "dask", "--scheduler", "local:2",
                 "--calibrators", "none,ts", "--n-boot", "0", "--json", "--quiet"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["calibrator"] for r in rows] == ["none", "ts"]


def _one_sentence(err: str) -> str:
    line = err.strip()
    assert "\n" not in line and "Traceback" not in line, err
    return line


@pytest.mark.parametrize("odd", ["k", "splits"])
def test_a_shard_that_disagrees_is_named(tmp_path, data, client, capsys, odd):
    rng = np.random.default_rng(1)
    for i in range(2):
        for split in ("val", "test"):
            if odd == "splits" and i == 1 and split == "val":
                continue
            z, y = _split(rng, 50, K + 1 if odd == "k" and i == 1 else K)
            write_run(tmp_path / f"p-{i}.h5", "net", "data", split, logits=z.astype(np.float32), labels=y)
    rc = main(["metrics", "--shards", str(tmp_path / "p-*.h5"), "--engine", "dask", "--scheduler",
               client.scheduler.address, "--calibrators", "none", "--n-boot", "0", "--json", "--quiet"])
    assert rc == 2
    line = _one_sentence(capsys.readouterr().err)
    assert str(tmp_path / "p-1.h5") in line


def test_no_shard_matches(tmp_path, client, capsys):
    rc = main(["metrics", "--shards", str(tmp_path / "none-*.h5"), "--engine", "dask", "--scheduler",
               client.scheduler.address, "--n-boot", "0", "--quiet"])
    assert rc == 2 and "No file matches" in _one_sentence(capsys.readouterr().err)


def test_refusals_before_a_cluster_starts(data, capsys):
    # a single file and multinomial resamples are refused by the flags' names, without starting local workers
    assert main(["metrics", str(data / "whole.h5"), "--engine", "dask", "--n-boot", "0", "--quiet"]) == 2
    assert "--engine dask scores shards" in _one_sentence(capsys.readouterr().err)
    assert main(["metrics", "--shards", str(data / "part-*.h5"), "--engine", "dask", "--n-boot", "5",
                 "--bootstrap", "multinomial"]) == 2
    assert "--bootstrap poisson" in _one_sentence(capsys.readouterr().err)


def _intervals(ev) -> dict:
    return {(r.name, m): (e.value, e.lo, e.hi) for r in ev.results for m, e in r.metrics.items()}


@pytest.mark.parametrize("grouped", [False, True])
def test_poisson_intervals_equal_the_local_poisson_engine(data, client, monkeypatch, grouped, workers_threads):
    """Every value and BCa interval bound (its acceleration from the jackknife, the class-wise ECE's on the
    workers' rows; the class-wise ECE's resamples accumulated on the workers, the AUROC's from their
    probabilities) equals the local engine's on the same
    shards with the same Poisson draws, to 1e-9. ``grouped``: units are groups of samples inside row blocks, as
    for a split above UNIT_LIMIT (forced here at N = 1,601; the scheme is decided on the client)."""
    from calibview.core.stats import resampling as poisson

    if grouped:
        for name, value in (("UNIT_LIMIT", 500), ("MIN_UNITS", 300), ("MAX_UNITS", 300)):
            monkeypatch.setattr(poisson, name, value)
    kw = dict(file=str(data / "part-*.h5"), run=RUN, calibrators=("none", "ts", "hb"), n_boot=60, seed=5, bins=10,
              bootstrap="poisson", interval="bca")
    local = Engine().evaluate(EvalRequest(**kw))
    dask = DaskEngine(client).evaluate(EvalRequest(**kw))
    a, b = _intervals(local), _intervals(dask)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(b[key], a[key], rtol=1e-9, atol=1e-12, err_msg=str(key))
    for m in ("ece", "classwise_ece", "auroc", "smece", "cal", "aurc", "nll_refinement"):
        assert np.isfinite(a[("ts", m)][1:]).all(), m              # every interval was really drawn
    assert local.result("ts").metrics["classwise_ece"].method.startswith("bca")
    scheme = poisson.poisson_scheme([700, 1, 900], K, 5)
    assert (scheme.groups is not None) == grouped and (not grouped or scheme.n_units < 400)


def test_cli_poisson_records_equal_the_local_engines(data, client, capsys, workers_threads):
    """``--engine dask`` draws Poisson resamples by default: its records equal ``--bootstrap poisson``'s."""
    pattern = str(data / "part-*.h5")
    args = ["metrics", "--shards", pattern, "--calibrators", "none,ts", "--n-boot", "40", "--json", "--quiet"]
    assert main(args + ["--bootstrap", "poisson"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(args + ["--engine", "dask", "--scheduler", client.scheduler.address]) == 0
    dask = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    multinomial = json.loads(capsys.readouterr().out)
    for a, b, m in zip(plain, dask, multinomial):
        assert a.keys() == b.keys()
        for key in a:
            if "seconds" not in key:
                assert _close(a[key], b[key]), (a["calibrator"], key, a[key], b[key])
        assert a["accuracy_lo"] != m["accuracy_lo"] and a["ece"] == m["ece"]     # another scheme, the same estimate


def test_a_shard_that_vanishes_or_changes_after_planning(tmp_path, client):
    rng = np.random.default_rng(2)
    for i in range(2):
        z, y = _split(rng, 30)
        write_run(tmp_path / f"q-{i}.h5", "net", "data", "test", logits=z.astype(np.float32), labels=y)
    plan = dshards.plan(str(tmp_path / "q-*.h5"), RUN, "test")
    assert [s.start for s in plan] == [0, 30]
    from calibview.core.calibrators import Fitted

    fitted = {"none": Fitted(method="none", k=K, params={})}
    assert "error" not in tasks.score_shard(plan[0], fitted, (15,), np.arange(30), 0)
    # rewritten: the identity differs
    z, y = _split(rng, 30)
    write_run(tmp_path / "q-0.h5", "net", "data", "test", logits=z.astype(np.float32), labels=y, overwrite=True)
    os.utime(tmp_path / "q-0.h5", ns=(1, 1))
    out = client.submit(tasks.score_shard, plan[0], fitted, (15,), np.arange(30), 0, pure=False).result()
    assert "changed during the run" in out["error"]
    os.remove(tmp_path / "q-1.h5")
    out = tasks.score_shard(plan[1], fitted, (15,), np.arange(30), 0)
    assert "vanished during the run" in out["error"] and str(tmp_path / "q-1.h5") in out["error"]
    with pytest.raises(CalibviewError, match="missing|No file matches|does not exist"):
        dshards.plan(str(tmp_path / "q-1.h5"), RUN, "test")


NO_DASK = """
import sys
{block}
from calibview.cli.program import main
rc = main(sys.argv[1:])
print("DASK_MODULES", sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed")))
print("RC", rc)
"""


def _fresh(code: str, *argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_nothing_from_dask_is_imported_without_engine(data):
    r = _fresh(NO_DASK.format(block=""), "metrics", "--shards", str(data / "part-*.h5"), "--calibrators", "none",
               "--n-boot", "0", "--json", "--quiet")
    assert "RC 0" in r.stdout, r.stderr
    assert "DASK_MODULES []" in r.stdout


def test_without_dask_installed_the_install_is_named(data):
    block = "sys.modules['dask'] = None; sys.modules['distributed'] = None   # import dask raises ImportError"
    r = _fresh(NO_DASK.format(block=block), "metrics", "--shards", str(data / "part-*.h5"), "--engine", "dask",
               "--n-boot", "0", "--quiet")
    assert "RC 2" in r.stdout
    assert "pip install calibview[dask]" in _one_sentence(r.stderr)


class _KillOnce:
    """A worker plugin that ends its worker's process (as a crash or an OOM kill would) when the first scoring
    task starts executing on it, once per test and on one worker only: the marker file says it has happened."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def setup(self, worker) -> None:
        self.worker = worker

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing" or "calibview-scoring" not in str(key):
            return
        # both workers can start a scoring task at the same instant: an exclusive create lets exactly one of them
        # die (an exists-then-create check let both die once, and with them the broadcast calibrators)
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os._exit(1)


def test_a_killed_worker_still_gives_the_identical_result(data, tmp_path):
    """The nanny restarts the dead worker and the scheduler runs its task again elsewhere: the result is the one
    an undisturbed cluster gives, exactly."""
    import distributed

    req = EvalRequest(file=str(data / "part-*.h5"), run=RUN, eval_split="test", fit_split="val",
                      calibrators=("none", "ts"), n_boot=0)
    marker = tmp_path / "killed"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        undisturbed = DaskEngine(c).evaluate(req)
        plugin = type("KillOnce", (_KillOnce, distributed.WorkerPlugin), {})(str(marker))
        c.register_plugin(plugin)
        disturbed = DaskEngine(c).evaluate(req)
    assert marker.exists()                      # a worker did die during the second run
    assert disturbed.counters.scored                # scored again (a fresh engine), not read from a cache
    for a, b in zip(undisturbed.results, disturbed.results):
        assert a.name == b.name
        assert a.metrics.keys() == b.metrics.keys()
        # bit for bit; an absent value (NaN: no resamples, no log decomposition for K > 2) is absent on both sides
        np.testing.assert_array_equal([a.metrics[m].value for m in a.metrics], [b.metrics[m].value for m in a.metrics])
        np.testing.assert_array_equal(a.per_class_ece, b.per_class_ece)


def test_the_fit_runs_on_the_shards_and_equals_the_local_fit(data, client):
    """ts and vs fitted by maps over the fit split's shards (every Newton or L-BFGS evaluation one map, the
    client taking the steps): T and vs's parameters equal the local engine's fit on the same rows to 1e-9 (vs
    ends with Newton steps, whose curvature blocks and gradients are maps too); hb, which needs the whole split,
    is fitted on the client as before."""
    kw = dict(run=RUN, calibrators=("none", "ts", "vs", "hb"), n_boot=0)
    local = Engine().fitted(EvalRequest(file=str(data / "whole.h5"), **kw))
    engine = DaskEngine(client)
    ev = engine.evaluate(EvalRequest(file=str(data / "part-*.h5"), **kw))
    split = engine.last_fit_split
    assert split is not None and split.maps >= 5                   # the passes ran on the cluster
    assert set(ev.counters.fitted) == {"ts", "vs", "hb"}
    fitted = {r.name: r.fitted for r in ev.results}
    assert fitted["ts"].params["temperature"] == pytest.approx(local["ts"].params["temperature"], rel=1e-9, abs=0)
    for key in ("w", "b"):
        np.testing.assert_allclose(fitted["vs"].params[key], local["vs"].params[key], rtol=0, atol=1e-9)
    assert fitted["vs"].params["newton_steps"] >= 1
    np.testing.assert_array_equal(np.asarray(fitted["hb"].params["edges"]), np.asarray(local["hb"].params["edges"]))


def test_a_cancelled_fit_pass_stops_with_cancelled(data, client):
    """A cancel (the window's Esc, the CLI's Ctrl+C) ends a fit pass on the cluster with Cancelled, not a
    half-summed result."""
    import threading

    from calibview.core.calibrators.temperature import _shard_moments
    from calibview.core.distributed.fit import ShardedSplit
    from calibview.core.errors import Cancelled
    from calibview.core.io import shards as io_shards

    pattern = str(data / "part-*.h5")
    run = next(r for r in io_shards.list_runs(pattern) if r.name == RUN)
    cancel = threading.Event()
    split = ShardedSplit(client, dshards.plan(pattern, RUN, "val"), pattern, run, "val", cancel=cancel)
    try:
        parts = split.map_shards(_shard_moments, 1.0, False, None)
        assert len(parts) == len(SIZES) and split.maps == 1
        cancel.set()
        with pytest.raises(Cancelled):
            split.map_shards(_shard_moments, 1.0, False, None)
        assert split.maps == 1
    finally:
        split.close()


def test_slices_on_dask_equal_the_local_poisson_slices(tmp_path, client, capsys):
    """``slices --by grp --engine dask``: the per-slice records and their Poisson intervals equal the local
    engine's ``--bootstrap poisson`` on the same shards."""
    rng = np.random.default_rng(4)
    for i, n in enumerate((260, 340)):
        for split in ("val", "test"):
            z, y = _split(rng, n)
            write_run(tmp_path / f"s-{i}.h5", "net", "data", split, logits=z.astype(np.float32), labels=y,
                      meta={"grp": np.array(["a", "b"])[rng.integers(0, 2, n)]})
    args = ["slices", "--shards", str(tmp_path / "s-*.h5"), "--by", "grp", "--calibrators", "none,ts",
            "--n-boot", "30", "--min-slice", "20", "--json", "--quiet"]
    assert main(args + ["--bootstrap", "poisson"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main(args + ["--engine", "dask", "--scheduler", client.scheduler.address]) == 0
    dask = json.loads(capsys.readouterr().out)
    assert len(local) == len(dask) == 6                    # 2 calibrators x (the whole split, a, b)
    for a, b in zip(local, dask):
        assert a.keys() == b.keys()
        for key in a:
            if "seconds" not in key:
                assert _close(a[key], b[key]), (a["calibrator"], a["slice"], key, a[key], b[key])
    assert any(r["slice"] == "a" and math.isfinite(r["ece_lo"]) for r in dask)


def test_a_calibrator_that_needs_the_whole_fit_split_is_refused_past_the_budget(data, client):
    """hb fits on the client: with a fit split larger than --max-memory it is refused in the local engine's own
    sentence, before any scoring task, while ts streams by maps and fits."""
    kw = dict(file=str(data / "part-*.h5"), run=RUN, n_boot=0, max_memory=4_000)
    with pytest.raises(CalibviewError, match="needs the whole fit split in memory"):
        DaskEngine(client).evaluate(EvalRequest(**kw, calibrators=("none", "hb")))
    engine = DaskEngine(client)
    ev = engine.evaluate(EvalRequest(**kw, calibrators=("none", "ts")))
    assert ev.counters.fitted == ("ts",) and engine.last_fit_split.maps >= 3
