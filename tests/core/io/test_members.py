"""Members runs (an (M, N, K) members dataset): the reader against numpy, the entropy split against a direct
computation, member-by-member streaming memory, bad input, and the demo's real 2-member CIFAR-10 ensemble."""

from __future__ import annotations

import tracemalloc

import h5py
import numpy as np
import pytest

from calibview.core.errors import CalibviewError
from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io import arrays
from calibview.core.io.discovery import list_runs
from calibview.core.io.logits import iter_split, read_split
from calibview.core.io.members import read as mr
from calibview.core.io.members.format import stack_members
from calibview.core.io.members.write import write_members


def softmax(z):
    z = np.asarray(z, np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def toy(m=4, n=600, k=6, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(size=(m, n, k)).astype(np.float32) * 2
    z[:, np.arange(n), y] += 1.0
    return z, y


@pytest.fixture
def members_file(tmp_path):
    zv, yv = toy(seed=1)
    z, y = toy(seed=2)
    path = tmp_path / "m.h5"
    write_members(path, "ens", "toy", {"val": (zv, yv), "test": (z, y, z[0] + 0.5)}, kind="mc-dropout")
    return path, (zv, yv), (z, y)


def test_the_ensemble_is_the_mean_of_member_probabilities(members_file):
    path, _, (z, y) = members_file
    run = list_runs(path)[0]
    test = run.split("test")
    assert (test.members, test.members_kind, test.kind, run.split("val").kind) == (4, "mc-dropout", "logits",
                                                                                     "members")
    data = read_split(path, run, "test", chunk_rows=37)
    assert data.kind == "probs" and data.scores.dtype == np.float64
    np.testing.assert_allclose(data.scores, softmax(z).mean(0), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(data.labels, y)
    np.testing.assert_array_equal(read_split(path, run, "test", member="2").scores, z[2])
    np.testing.assert_array_equal(read_split(path, run, "test", member="deterministic").scores, z[0] + 0.5)
    chunks = list(iter_split(path, run, "test", chunk_rows=100))
    np.testing.assert_allclose(np.concatenate([c[0] for c in chunks]), softmax(z).mean(0), rtol=1e-12)


def test_mutual_information_equals_a_direct_numpy_computation(members_file):
    path, _, (z, y) = members_file
    p = softmax(z)                                   # (M, N, K)
    pbar = p.mean(0)
    total = -(pbar * np.log(pbar)).sum(1)
    aleatoric = -(p * np.log(p)).sum(2).mean(0)
    mi = (p * (np.log(p) - np.log(pbar)[None])).sum(2).mean(0)     # E_m KL(p_m || pbar), the same quantity
    d = mr.decompose(str(path), list_runs(path)[0].split("test"), rows=51)
    np.testing.assert_allclose(d.total, total, rtol=1e-10)
    np.testing.assert_allclose(d.aleatoric, aleatoric, rtol=1e-10)
    np.testing.assert_allclose(d.epistemic, mi, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(d.total, d.aleatoric + d.epistemic, atol=1e-12)
    np.testing.assert_array_equal(d.correct, pbar.argmax(1) == y)
    assert d.kind == "mc-dropout" and d.members == 4


def _ece(conf, correct, bins=15):
    edges = np.linspace(0, 1, bins + 1)
    b = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, bins - 1)
    out = 0.0
    for i in range(bins):
        sel = b == i
        if sel.any():
            out += sel.mean() * abs(correct[sel].mean() - conf[sel].mean())
    return out


@pytest.mark.parametrize("max_memory", [None, 20_000])            # in memory, and streamed from disk
def test_ensemble_metrics_equal_numpy_metrics_of_the_averaged_probabilities(members_file, max_memory):
    path, _, (z, y) = members_file
    engine = Engine()
    for member, p in ((None, softmax(z).mean(0)), ("1", softmax(z[1]))):
        ev = engine.evaluate(EvalRequest(file=str(path), run="ens/toy", eval_split="test", fit_split="val",
                                         calibrators=("none",), n_boot=0, member=member, max_memory=max_memory))
        m = ev.results[0].metrics
        conf, pred = p.max(1), p.argmax(1)
        correct = (pred == y).astype(float)
        onehot = np.eye(p.shape[1])[y]
        assert m["accuracy"].value == pytest.approx(correct.mean(), abs=1e-12)
        assert m["nll"].value == pytest.approx(-np.log(p[np.arange(len(y)), y]).mean(), rel=1e-6)
        assert m["brier"].value == pytest.approx(((p - onehot) ** 2).sum(1).mean(), rel=1e-6)
        assert m["ece"].value == pytest.approx(_ece(conf, correct), abs=1e-6)


def test_temperature_scaling_fits_on_the_log_of_the_mean_probabilities(members_file):
    path, (zv, yv), _ = members_file
    ev = Engine().evaluate(EvalRequest(file=str(path), run="ens/toy", eval_split="test", fit_split="val",
                                       calibrators=("ts",), n_boot=0))
    t = ev.results[0].fitted.to_json()["params"]["temperature"]
    lp = np.log(softmax(zv).mean(0))
    grid = np.linspace(0.2, 5, 2000)
    nll = [-np.log(softmax(lp / g)[np.arange(len(yv)), yv]).mean() for g in grid]
    assert t == pytest.approx(grid[int(np.argmin(nll))], abs=5e-3)


def test_ten_members_stream_member_by_member_within_one_and_a_half_members(tmp_path, monkeypatch):
    m, n, k = 10, 10_000, 100
    rng = np.random.default_rng(3)
    path = tmp_path / "ten.h5"
    with h5py.File(path, "w") as f:                  # written member by member, as a collector would
        g = f.create_group("big/data/test")
        ds = g.create_dataset("members", shape=(m, n, k), dtype=np.float32, chunks=(1, 1000, k))
        for i in range(m):
            ds[i] = rng.normal(size=(n, k)).astype(np.float32)
        ds.attrs["kind"] = "ensemble"
        g["labels"] = rng.integers(0, k, n)
    info = list_runs(path)[0].split("test")
    one_member = n * k * 4
    reads = []
    real = mr.file_blocks

    def counting(f, file, info_):
        block = real(f, file, info_)

        def spy(i, start, stop):
            reads.append((i, stop - start))
            return block(i, start, stop)
        return spy

    monkeypatch.setattr(mr, "file_blocks", counting)
    tracemalloc.start()
    try:
        d = mr.decompose(str(path), info)
        _, peak_decompose = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        total = np.zeros(k)
        for scores, _, _ in iter_split(path, "big/data", "test", chunk_rows=mr.chunk_rows(k)):
            total += scores.sum(0)
        _, peak_stream = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert d.total.shape == (n,)
    assert peak_decompose < 1.5 * one_member, peak_decompose
    assert peak_stream < 1.5 * one_member, peak_stream
    assert max(rows for _, rows in reads) * k * 4 < one_member / 4     # never a whole member at once
    assert {i for i, _ in reads} == set(range(m))
    assert sum(rows for _, rows in reads) == 2 * m * n                 # each member row read once per pass



@pytest.mark.parametrize("layout", ["gzip, a chunk per member", "a chunk per member", "contiguous"])
def test_members_read_the_same_ensemble_whatever_the_layout_with_a_cache_fitted_to_it(tmp_path, monkeypatch,
                                                                                     layout):
    """Each chunk of rows reads every member in turn: a compressed chunk must stay cached until every band of rows
    has been read from it (each member's chunk once, not once per chunk of rows), an uncompressed one needs no
    cache at all; the values are the numpy ensemble's either way."""
    z, y = toy(m=5, n=900, k=7, seed=4)
    path = tmp_path / "layout.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("r/d/test")
        opts = {"contiguous": {}, "a chunk per member": {"chunks": (1, 900, 7)},
                "gzip, a chunk per member": {"chunks": (1, 900, 7), "compression": "gzip"}}[layout]
        g.create_dataset("members", data=z, **opts).attrs["kind"] = "ensemble"
        g["labels"] = y
    opened = []
    real = mr._reopened

    def spy(*a):
        ds = real(*a)
        opened.append((ds.chunks, ds.id.get_access_plist().get_chunk_cache()))
        return ds
    monkeypatch.setattr(mr, "_reopened", spy)
    run = list_runs(path)[0]
    data = read_split(path, run, "test", chunk_rows=50)          # 18 chunks of rows, 5 members each
    np.testing.assert_allclose(data.scores, softmax(z).mean(0), rtol=1e-12, atol=1e-15)
    if layout == "contiguous":                  # nothing to cache: the resolved handle is kept as it is
        assert opened == []
        with h5py.File(path, "r") as f:
            assert f["r/d/test/members"].chunks is None
        return
    ((chunks, (slots, nbytes, _)),) = opened
    if layout == "a chunk per member":
        assert nbytes == 0
    else:
        assert nbytes >= 5 * 900 * 7 * 4 and slots > 5              # every member's chunk at once

def _raw(path, members, labels, kind="ensemble", logits=None):
    with h5py.File(path, "w") as f:
        g = f.create_group("r/d/test")
        g["members"] = members
        if kind is not None:
            g["members"].attrs["kind"] = kind
        g["labels"] = labels
        if logits is not None:
            g["logits"] = logits


def test_bad_members_are_one_sentence(tmp_path):
    z, y = toy(m=3, n=20, k=4)
    cases = [
        (dict(members=z[:1], labels=y), "M = 1 member"),
        (dict(members=z, labels=y, kind=None), 'kind = "ensemble" or "mc-dropout"'),
        (dict(members=z, labels=y, kind="bagging"), "'bagging'"),
        (dict(members=z, labels=y[:-1]), "one label per row"),
        (dict(members=z[0], labels=y), "must be 3-D"),
        (dict(members=z, labels=y, logits=np.zeros((20, 5), np.float32)), "must share their classes"),
    ]
    for i, (kw, fragment) in enumerate(cases):
        path = tmp_path / f"bad{i}.h5"
        _raw(path, **kw)
        with pytest.raises(CalibviewError) as e:
            list_runs(path)
        assert fragment in str(e.value) and str(e.value).count(". ") == 0, (kw.keys(), str(e.value))
    with pytest.raises(CalibviewError, match="different class counts"):
        stack_members("x", [(z[0], y), (z[0][:, :3], y)])
    with pytest.raises(CalibviewError, match="other labels"):
        stack_members("x", [(z[0], y), (z[1], (y + 1) % 4)])
    with pytest.raises(CalibviewError, match="at least 2"):
        stack_members("x", [(z[0], y)])
    with pytest.raises(CalibviewError, match="at least 2"):
        write_members(tmp_path / "w.h5", "m", "d", {"test": (z[:1], y)})
    path = tmp_path / "ok.h5"
    write_members(path, "m", "d", {"test": (z, y)})
    with pytest.raises(CalibviewError, match="not '7'"):
        Engine().evaluate(EvalRequest(file=str(path), run="m/d", eval_split="test", fit_split=None,
                                      calibrators=("none",), n_boot=0, member="7"))
    with pytest.raises(CalibviewError, match="no deterministic row"):
        read_split(path, "m/d", "test", member="deterministic")


def test_in_memory_members_match_the_file(members_file):
    path, (zv, yv), (z, y) = members_file
    run = arrays.register("ens", "toy", {"val": ("logits", None, yv), "test": ("logits", z[0] + 0.5, y)},
                          members={"val": ("ensemble", zv), "test": ("ensemble", z)})
    np.testing.assert_allclose(arrays.read_split(run.path, run.info, "test").scores,
                               read_split(path, "ens/toy", "test").scores, rtol=1e-12)
    a = mr.decompose(run.path, run.info.split("test"))
    b = mr.decompose(str(path), list_runs(path)[0].split("test"))
    np.testing.assert_allclose(a.epistemic, b.epistemic, rtol=1e-10, atol=1e-15)


# ------------------------------------------------------------------------------------ the demo's real ensemble

def test_the_demo_ensemble_is_the_two_cifar10_runs_and_beats_them_on_nll(demo_file):
    runs = {r.name: r for r in list_runs(demo_file)}
    run = runs["resnet110-ensemble/cifar10"]
    assert [(s.name, s.members, s.members_kind, s.kind) for s in run.splits] == [
        ("val", 2, "ensemble", "members"), ("test", 2, "ensemble", "members")]
    for split in ("val", "test"):          # the same images and labels as the demo's two CIFAR-10 runs
        for i, name in enumerate(("resnet110-brier/cifar10", "resnet110-flsd53/cifar10")):
            single = read_split(demo_file, name, split)
            np.testing.assert_array_equal(read_split(demo_file, run, split, member=str(i)).scores, single.scores)
            np.testing.assert_array_equal(read_split(demo_file, run, split).labels, single.labels)
    engine = Engine()
    nll = {}
    for member in (None, "0", "1"):
        ev = engine.evaluate(EvalRequest(file=str(demo_file), run=run.name, calibrators=("none", "ts"),
                                         n_boot=0, member=member))
        nll[member] = {r.name: r.metrics["nll"].value for r in ev.results}
    for cal in ("none", "ts"):
        assert nll[None][cal] < min(nll["0"][cal], nll["1"][cal]), nll
    assert nll[None]["none"] == pytest.approx(0.1564, abs=1e-3)     # vs 0.204 (Brier) and 0.185 (FLSD-53)



def test_members_in_tiny_chunks_are_refused_by_the_read_budget_or_read_in_blocks(tmp_path, monkeypatch, capsys):
    """Many tiny chunks cost HDF5 bookkeeping per chunk: over the budget the read is refused in one sentence, and
    with --allow-large-read the members are read in bounded blocks to the same numbers as a plain layout."""
    import json

    import h5py

    from calibview.cli import main
    from calibview.core.io.limits import cost

    rng = np.random.default_rng(4)
    z = rng.normal(size=(2, 300, 20)).astype(np.float32)
    y = rng.integers(0, 20, 300)
    for name, chunks in (("tiny.h5", (1, 1, 1)), ("plain.h5", None)):
        with h5py.File(tmp_path / name, "w") as f:
            g = f.create_group("m/d/test")
            ds = g.create_dataset("members", data=z, chunks=chunks)
            ds.attrs["kind"] = "ensemble"
            g.create_dataset("labels", data=y)
    args = ["--calibrators", "none", "--n-boot", "0", "--eval-split", "test", "--quiet", "--json"]
    monkeypatch.setattr(cost, "read_budget", lambda: 1 << 20)      # 12,000 chunks: about 49 MB of bookkeeping
    capsys.readouterr()
    assert main(["metrics", str(tmp_path / "tiny.h5"), *args]) == 2
    err = capsys.readouterr().err
    assert "members" in err and "HDF5 chunks" in err and "--allow-large-read" in err and len(err.splitlines()) == 1
    out = {}
    for name, extra in (("tiny.h5", ["--allow-large-read"]), ("plain.h5", [])):
        assert main(["metrics", str(tmp_path / name), *args, *extra]) == 0
        out[name] = json.loads(capsys.readouterr().out)
    for key in ("nll", "ece", "brier", "accuracy"):
        assert out["tiny.h5"][0][key] == out["plain.h5"][0][key]
