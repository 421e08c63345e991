"""Splits larger than memory: streamed from disk in chunks (forced here with a tiny --max-memory and small chunks),
with the same numbers as a loaded split; calibrators that cannot stream refuse; progress per chunk; cancel.
The group bootstrap of large splits is checked against the sample bootstrap."""

import threading

import h5py
import numpy as np
import pytest
import torch

from calibview.core.stats import resampling
from calibview.core.io import discovery, memory, stream
from calibview.core.errors import Cancelled, CalibviewError
from calibview.core.evaluation.engine import evaluate
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.writer import write_splits
from calibview.core.stats.metrics import METRIC_NAMES

TINY = 1             # bytes: every split is streamed


def _logits(rng, n, k, temperature=2.0):
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k))
    z[np.arange(n), y] += rng.normal(1.5, 1.0, n)      # informative, and overconfident once scaled
    return (z * temperature).astype(np.float32), y


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("stream")
    rng = np.random.default_rng(5)
    (zv, yv), (zt, yt) = _logits(rng, 3000, 7), _logits(rng, 4100, 7)
    f16 = d / "f16.h5"
    write_splits(f16, "m", "d", {"val": ("logits", zv.astype(np.float16), yv),
                                 "test": ("logits", zt.astype(np.float16), yt)})
    probs = d / "probs.h5"
    pv = torch.softmax(torch.from_numpy(zv).double(), 1).numpy()
    pt = torch.softmax(torch.from_numpy(zt).double(), 1).numpy()
    pt[0, :] = 0.0
    pt[0, yt[0]] = 1.0                    # exact zeros: -inf log-probabilities must stream too
    write_splits(probs, "m", "d", {"val": ("probs", pv, yv), "test": ("probs", pt, yt)})
    return f16, probs


def _pair(file, calibrators, n_boot=40, **kw):
    common = dict(file=str(file), run="m/d", calibrators=calibrators, n_boot=n_boot, **kw)
    return evaluate(EvalRequest(**common)), evaluate(EvalRequest(max_memory=TINY, chunk_rows=333, **common))


@pytest.mark.parametrize("which", [0, 1], ids=["float16 logits", "probabilities"])
def test_streamed_evaluation_matches_the_loaded_one(files, which):
    loaded, streamed = _pair(files[which], ("none", "ts", "vs"))
    for a, b in zip(loaded.results, streamed.results):
        for m in METRIC_NAMES:
            va, vb = a.metrics[m], b.metrics[m]
            tol = 1e-12 if a.name != "vs" else 1e-7        # VS: the same optimum, reached along other chunks
            for x, y in ((va.value, vb.value), (va.lo, vb.lo), (va.hi, vb.hi)):
                assert x == pytest.approx(y, rel=tol, abs=tol, nan_ok=True), (a.name, m)
        np.testing.assert_allclose(a.per_class_ece, b.per_class_ece, rtol=1e-9, atol=1e-12)
        assert a.argmax_changed == b.argmax_changed
    t_loaded = loaded.result("ts").fitted.params["temperature"]
    assert streamed.result("ts").fitted.params["temperature"] == pytest.approx(t_loaded, rel=1e-9)
    assert t_loaded > 1.2            # the synthetic model is overconfident: the fit did something
    np.testing.assert_allclose(streamed.result("vs").fitted.params["w"], loaded.result("vs").fitted.params["w"],
                               rtol=0, atol=1e-10)


def test_streamed_split_reads_like_the_file(files):
    f16, _ = files
    with h5py.File(f16, "r") as f:
        raw = f["/m/d/test/logits"][...].astype(np.float32)
    run = discovery.find_run(discovery.list_runs(f16), "m/d")
    with stream.StreamedSplit(str(f16), run, "test", chunk_rows=1000) as split:
        assert split.shape == raw.shape and split.dtype == torch.float32
        np.testing.assert_array_equal(split[990:2010].numpy(), raw[990:2010])
        got = torch.cat([z for _, z, _ in split.chunks()]).numpy()
        np.testing.assert_array_equal(got, raw)
        with pytest.raises(TypeError):
            split[[1, 2]]


def test_calibrators_that_need_memory_refuse_a_streamed_fit_split(files):
    for name in ("hb", "ir", "ms", "ts-grid"):
        with pytest.raises(CalibviewError, match="needs the whole fit split in memory.*stream from disk"):
            evaluate(EvalRequest(file=str(files[0]), run="m/d", calibrators=("none", name), n_boot=0,
                                 max_memory=TINY))
    # a fit split that fits in memory works with a streamed evaluation split
    big_test_only = 4100 * 7 * 4 - 1
    res = evaluate(EvalRequest(file=str(files[0]), run="m/d", calibrators=("none", "hb"), n_boot=0,
                               max_memory=big_test_only))
    assert res.result("hb").metrics["ece"].value < res.result("none").metrics["ece"].value


def test_progress_per_chunk_and_cancel(files):
    seen = []
    evaluate(EvalRequest(file=str(files[0]), run="m/d", calibrators=("none", "ts"), n_boot=0, max_memory=TINY,
                         chunk_rows=500), progress=lambda f, m: seen.append((f, m)))
    scored = [m for _, m in seen if m.startswith("scoring") and m.endswith("rows")]
    assert len(scored) == 9 and scored[-1] == "scoring Uncalibrated, Temperature scaling: 4,100 of 4,100 rows"
    assert sum("temperature scaling: pass" in m for _, m in seen) >= 6       # >= one pass of 6 chunks
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions)

    cancel = threading.Event()

    def stop_early(f, m):
        if m.startswith("temperature scaling: pass 1"):
            cancel.set()
    with pytest.raises(Cancelled):
        evaluate(EvalRequest(file=str(files[0]), run="m/d", calibrators=("none", "ts"), n_boot=0, max_memory=TINY,
                             chunk_rows=500), progress=stop_early, cancel=cancel)


def test_a_bad_row_is_reported_when_a_pass_reaches_it(tmp_path):
    rng = np.random.default_rng(1)
    z, y = _logits(rng, 2000, 4)
    z[1234, 2] = np.nan
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as f:            # written around calibview, which refuses to write such a file
        f["m/d/test/logits"] = z
        f["m/d/test/labels"] = y
    before = path.read_bytes()
    with pytest.raises(CalibviewError, match=r"NaN or Inf \(first at row 1234\)"):
        evaluate(EvalRequest(file=str(path), run="m/d", calibrators=("none",), n_boot=0, max_memory=TINY,
                             chunk_rows=300, fit_split=None))
    assert path.read_bytes() == before


def test_memory_sizes():
    assert memory.parse_size("2G") == 2 << 30 and memory.parse_size("512m") == 512 << 20
    assert memory.parse_size("1.5GiB") == int(1.5 * (1 << 30)) and memory.parse_size("1000") == 1000
    assert memory.parse_size("auto") is None
    for bad in ("lots", "-1G", "0"):
        with pytest.raises(CalibviewError):
            memory.parse_size(bad)


def test_group_bootstrap_agrees_with_the_sample_bootstrap(tmp_path, monkeypatch):
    """Large splits resample random groups of samples. Forced on a small split (2,000 groups of ~10 samples),
    the intervals match the sample bootstrap's to within Monte Carlo error, and the centres are untouched."""
    rng = np.random.default_rng(3)
    zv, yv = _logits(rng, 2000, 5)
    zt, yt = _logits(rng, 20_000, 5)
    zt[:10_000] = zt[:10_000] * 0.5          # two halves of different quality, in file order: groups are random
    path = tmp_path / "groups.h5"
    write_splits(path, "m", "d", {"val": ("logits", zv, yv), "test": ("logits", zt, yt)})
    req = EvalRequest(file=str(path), run="m/d", calibrators=("none", "ts"), n_boot=400, seed=1)
    samples = evaluate(req)
    monkeypatch.setattr(resampling, "UNIT_LIMIT", 1000)
    monkeypatch.setattr(resampling, "MIN_UNITS", 2000)
    monkeypatch.setattr(resampling, "MAX_UNITS", 2000)
    units = resampling.bootstrap_units(20_000, 5)
    assert int(units.max()) + 1 == 2000 and set(torch.bincount(units).tolist()) == {10}
    groups = evaluate(req)
    for a, b in zip(samples.results, groups.results):
        for m in ("accuracy", "nll", "brier", "ece", "ace", "classwise_ece", "smece", "cal", "tot"):
            ea, eb = a.metrics[m], b.metrics[m]
            assert ea.value == eb.value
            wa, wb = ea.hi - ea.lo, eb.hi - eb.lo
            assert wb == pytest.approx(wa, rel=0.2), (a.name, m, wa, wb)
            assert eb.lo < eb.value < eb.hi or m in ("classwise_ece",), (a.name, m)


def test_cli_max_memory_streams(files, capsys):
    import json

    from calibview.cli import main
    args = ["metrics", str(files[0]), "--calibrators", "none,ts", "--n-boot", "0", "--json", "--quiet"]
    assert main(args) == 0
    loaded = json.loads(capsys.readouterr().out)
    assert main(args + ["--max-memory", "10k"]) == 0
    streamed = json.loads(capsys.readouterr().out)
    assert [r["calibrator"] for r in streamed] == ["none", "ts"]
    for a, b in zip(loaded, streamed):
        assert a == {k: pytest.approx(v, rel=1e-12) if isinstance(v, float) else v for k, v in b.items()}
    assert main(args + ["--max-memory", "lots"]) == 2
    assert "Cannot read the memory size 'lots'" in capsys.readouterr().err
