"""Slices against independent computations: a slice's point metrics are those of the subset written to a file of
its own and evaluated alone; its intervals (and those of its difference to the whole split) are percentiles of
the metric recomputed by brute force on each explicitly restricted resample; quantile groups follow np.quantile."""

import logging

import numpy as np
import pytest
import torch

from calibview.core.stats import resampling
from calibview.core.evaluation.engine import Engine, evaluate
from calibview.core.errors import CalibviewError
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.logits import read_split
from calibview.core.io.writer import write_run
from calibview.core.evaluation.toplabel.absent import BINARY_METRICS
from calibview.core.stats.corp.parts import WHOLE_SPLIT_ONLY
from calibview.core.stats.metrics import METRIC_NAMES

#: what a slice record holds of its own (this run has K > 2: the log score's CORP columns are null)
SLICED = [m for m in METRIC_NAMES if m not in WHOLE_SPLIT_ONLY | set(BINARY_METRICS)]
from calibview.core.evaluation.slices import evaluate_slices, slice_codes

K = 4
CAL = ("none", "ts", "hb")


def _data(seed=0, n=(400, 500), k=K):
    rng = np.random.default_rng(seed)
    out = {}
    for split, m in zip(("val", "test"), n):
        y = rng.integers(0, k, m)
        grp = rng.integers(0, 3, m)
        z = rng.normal(size=(m, k)) * 2
        z[np.arange(m), y] += rng.normal(1.5, 1.0, m) + 0.8 * grp    # group c is more confident and more right
        meta = {"grp": np.array(["a", "b", "c"])[grp], "score": rng.normal(size=m), "tiny": (np.arange(m) < 8) * 1}
        out[split] = (z.astype(np.float32), y, meta)
    return out


def _write(path, data, rows=None):
    for split, (z, y, meta) in data.items():
        if split == "test" and rows is not None:
            z, y, meta = z[rows], y[rows], {c: v[rows] for c, v in meta.items()}
        write_run(path, "net", "toy", split, logits=z, labels=y, meta=meta,
                  class_names=[f"c{i}" for i in range(K)])
    return path


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    data = _data()
    return _write(tmp_path_factory.mktemp("slices") / "toy.h5", data), data


def _req(path, **kw):
    base = dict(file=str(path), run="net/toy", calibrators=CAL, n_boot=30, seed=2, bins=10, device="cpu")
    base.update(kw)
    return EvalRequest(**base)


@pytest.mark.parametrize("by", ["grp", "score", "class"])
def test_point_metrics_equal_the_subset_evaluated_alone(toy, tmp_path, by):
    path, data = toy
    result = evaluate_slices(Engine(), _req(path), by)
    test_meta, labels = data["test"][2], data["test"][1]
    names, codes = (slice_codes(test_meta[by]) if by != "class" else
                    (tuple(f"c{i}" for i in range(K)), labels))
    assert tuple(s.name for s in result.slices) == names
    for i, name in enumerate(names):
        rows = np.flatnonzero(codes == i)
        sub = _write(tmp_path / f"{by}_{i}.h5", data, rows)
        ev = evaluate(_req(sub, n_boot=0))
        for cal in CAL:
            rec = next(r for r in result.records if r["calibrator"] == cal and r["slice"] == name)
            assert rec["n"] == rows.size and rec["slice_column"] == by
            got = np.array([rec[m] for m in SLICED])
            want = np.array([ev.result(cal).metrics[m].value for m in SLICED])
            assert all(np.isnan(rec[m]) for m in WHOLE_SPLIT_ONLY)      # refit on logits, redraws: not per slice
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, equal_nan=True, err_msg=f"{by} {name} {cal}")


@pytest.mark.parametrize("bootstrap", ["multinomial", "poisson"])
def test_whole_split_record_is_the_metrics_row(toy, bootstrap):
    # slices have no jackknife, so the two agree under the percentile method (BCa falls back to it in slices)
    path, _ = toy
    req = _req(path, interval="percentile", bootstrap=bootstrap)
    engine = Engine()
    result = evaluate_slices(engine, req, "grp")
    ev = engine.evaluate(req)
    for cal in CAL:
        rec = next(r for r in result.records if r["calibrator"] == cal and r["slice"] is None)
        assert rec["n"] == 500 and not rec["flagged"]
        for m in SLICED:
            est = ev.result(cal).metrics[m]
            assert rec[m] == pytest.approx(est.value, abs=1e-12, nan_ok=True), m
            assert rec[f"{m}_lo"] == pytest.approx(est.lo, abs=2e-6, nan_ok=True), m      # float32 sums
            assert rec[f"{m}_hi"] == pytest.approx(est.hi, abs=2e-6, nan_ok=True), m
            assert rec[f"delta_{m}"] == pytest.approx(0.0, abs=1e-15) or not np.isfinite(est.value)


def _brute(p, y, w, bins):
    """ECE, Brier and class-wise ECE of the rows repeated by the weights ``w``, straight from the definitions."""
    idx = np.repeat(np.arange(w.size), w)
    p, y = p[idx], y[idx]
    n, k = p.shape
    edges = np.linspace(0, 1, bins + 1)
    conf, correct = p.max(1), (p.argmax(1) == y).astype(float)
    b = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, bins - 1)
    ece = sum(abs(correct[b == j].sum() - conf[b == j].sum()) for j in range(bins)) / n
    onehot = np.eye(k)[y]
    brier = ((p - onehot) ** 2).sum(1).mean()
    cw = 0.0
    for c in range(k):
        bc = np.clip(np.searchsorted(edges, p[:, c], side="left") - 1, 0, bins - 1)
        cw += sum(abs((p[bc == j, c] - onehot[bc == j, c]).sum()) for j in range(bins)) / n
    return np.array([ece, brier, cw / k])


@pytest.mark.parametrize("grouped, by, bootstrap", [(False, "grp", "multinomial"), (True, "grp", "multinomial"),
                                                    (False, "class", "multinomial"), (False, "grp", "poisson"),
                                                    (True, "grp", "poisson")],
                         ids=["samples", "units", "class slices", "poisson samples", "poisson units"])
def test_intervals_equal_brute_force_on_restricted_resamples(tmp_path, monkeypatch, grouped, by, bootstrap):
    if grouped:      # the large-split path (random groups of samples), on a small split
        monkeypatch.setattr(resampling, "UNIT_LIMIT", 100)
        monkeypatch.setattr(resampling, "MIN_UNITS", 64)
        monkeypatch.setattr(resampling, "MAX_UNITS", 64)
    data = _data(seed=5, n=(300, 360))
    path = _write(tmp_path / "b.h5", data)
    req = _req(path, calibrators=("ts",), n_boot=25, bins=8, interval="percentile", bootstrap=bootstrap)
    engine = Engine()
    result = evaluate_slices(engine, req, by, min_slice=20)
    counts, units = engine.resamples(req)
    counts = counts.numpy().astype(int)
    assert (units is not None) == grouped
    weights = counts if units is None else counts[:, units.numpy()]           # (R, N) draws of each sample
    z, y = read_split(path, "net/toy", "test").scores, data["test"][1]
    p = engine.fitted(req)["ts"].apply(torch.from_numpy(z.astype(np.float64))).exp().numpy()
    whole = np.array([_brute(p, y, w, 8) for w in weights])
    for s in result.slices:
        mask = np.isin(np.arange(y.size), s.rows)
        own = np.array([_brute(p, y, w * mask, 8) for w in weights])
        rec = next(r for r in result.records if r["slice"] == s.name)
        for j, m in enumerate(("ece", "brier", "classwise_ece")):
            lo, hi = np.percentile(own[:, j], [2.5, 97.5])
            lo, hi = min(lo, rec[m]), max(hi, rec[m])        # widened to contain the estimate
            assert (rec[f"{m}_lo"], rec[f"{m}_hi"]) == pytest.approx((lo, hi), abs=2e-6), (s.name, m)
            dlo, dhi = np.percentile(own[:, j] - whole[:, j], [2.5, 97.5])
            assert (rec[f"delta_{m}_lo"], rec[f"delta_{m}_hi"]) == pytest.approx((dlo, dhi), abs=4e-6), (s.name, m)
        assert rec["flagged"] == bool(rec["delta_ece_lo"] > 0 or rec["delta_ece_hi"] < 0)


def test_an_over_confident_group_is_flagged(tmp_path):
    data = _data(seed=3, n=(600, 600))
    rng = np.random.default_rng(9)
    for split, (z, y, meta) in data.items():          # group a: labels of 40 % of its samples are noise
        noisy = (meta["grp"] == "a") & (rng.uniform(size=y.size) < 0.4)
        y[noisy] = rng.integers(0, K, int(noisy.sum()))
    path = _write(tmp_path / "f.h5", data)
    result = evaluate_slices(Engine(), _req(path, calibrators=("ts",), n_boot=100), "grp")
    flagged = {r["slice"]: (r["delta_ece_lo"], r["delta_ece_hi"]) for r in result.records if r["flagged"]}
    assert "a" in flagged and flagged["a"][0] > 0, flagged       # over-confident: its ECE exceeds the split's


def test_quantile_groups_follow_np_quantile():
    rng = np.random.default_rng(1)
    v = rng.normal(size=103)
    names, codes = slice_codes(v, slice_bins=4)
    e = np.quantile(v, [0, 0.25, 0.5, 0.75, 1])
    want = np.where(v <= e[1], 0, np.where(v <= e[2], 1, np.where(v <= e[3], 2, 3)))
    np.testing.assert_array_equal(codes, want)
    assert names[0] == f"[{e[0]:.4g}, {e[1]:.4g}]" and names[3] == f"({e[3]:.4g}, {e[4]:.4g}]"
    tied = np.array([0.0] * 60 + [1.0] * 30 + [np.nan] * 5)                   # repeated edges merge, NaN: missing
    names, codes = slice_codes(tied, slice_bins=4)
    assert names == ("[0, 1]", "missing") and np.bincount(codes).tolist() == [90, 5]
    cats, codes = slice_codes(np.array([10, 2, 2, 10, 3]))
    assert cats == ("2", "3", "10") and codes.tolist() == [2, 0, 0, 2, 1]
    cats, codes = slice_codes(np.array(["b", "a", "b"], dtype=object))
    assert cats == ("a", "b") and codes.tolist() == [1, 0, 1]


def test_small_slices_are_reported_not_flagged_and_named_in_a_warning(toy, caplog):
    path, _ = toy
    with caplog.at_level(logging.WARNING, logger="calibview"):
        result = evaluate_slices(Engine(), _req(path, calibrators=("none",)), "tiny", min_slice=30)
    assert result.small == ("1",)
    rec = next(r for r in result.records if r["slice"] == "1")
    assert rec["n"] == 8 and not rec["flagged"] and np.isnan(rec["ece_lo"]) and np.isfinite(rec["ece"])
    assert "1 (n=8)" in caplog.text


def test_user_errors_are_one_sentence(toy):
    path, _ = toy
    with pytest.raises(CalibviewError, match=r"no metadata column 'region' \(available: grp, score, tiny"):
        evaluate_slices(Engine(), _req(path), "region")
    with pytest.raises(CalibviewError, match="No slice of 'grp' .* reaches min_slice=1000"):
        evaluate_slices(Engine(), _req(path, calibrators=("none",)), "grp", min_slice=1000)
    with pytest.raises(CalibviewError, match="min_slice must be a whole number"):
        evaluate_slices(Engine(), _req(path), "grp", min_slice=0)


def test_class_view_counts_and_accuracy_match_the_engine(toy):
    path, _ = toy
    engine = Engine()
    req = _req(path, calibrators=("none",))
    result = evaluate_slices(engine, req, "class")
    r = engine.evaluate(req).result("none")
    recs = [x for x in result.records if x["slice"] is not None]
    assert [x["slice"] for x in recs] == [f"c{i}" for i in range(K)]
    np.testing.assert_array_equal([x["n"] for x in recs], r.per_class_count)
    np.testing.assert_allclose([x["accuracy"] for x in recs], r.per_class_accuracy, rtol=0, atol=1e-15)


def test_a_streamed_split_gives_the_same_points_without_classwise_intervals(toy):
    path, _ = toy
    a = evaluate_slices(Engine(), _req(path, calibrators=("none", "ts")), "grp")
    b = evaluate_slices(Engine(), _req(path, calibrators=("none", "ts"), max_memory=1000), "grp")
    assert any("streamed" in n for n in b.notes)
    for ra, rb in zip(a.records, b.records):
        np.testing.assert_allclose([rb[m] for m in SLICED], [ra[m] for m in SLICED], rtol=0,
                                   atol=1e-12, equal_nan=True)
        if rb["slice"] is not None:
            assert np.isnan(rb["classwise_ece_lo"]) and rb["ece_lo"] == pytest.approx(ra["ece_lo"], abs=1e-12)


def test_smooth_intervals_can_be_left_out_for_many_slices(toy):
    path, _ = toy
    engine = Engine()
    full = evaluate_slices(engine, _req(path, calibrators=("ts",)), "grp")
    lean = evaluate_slices(engine, _req(path, calibrators=("ts",)), "grp", smooth_intervals=False)
    assert any("smece, cal, sharpness_gap" in n for n in lean.notes)
    assert not any("smece, cal, sharpness_gap" in n for n in full.notes)
    # ~170 samples per slice in 10 bins: the small-sample bias of binned ECE is pointed out
    assert any("3 slice(s) have fewer than 50 samples per bin" in n for n in full.notes)
    for a, b in zip(full.records, lean.records):
        for m in SLICED:
            assert a[m] == b[m]
            if b["slice"] is not None and (m in ("smece", "cal", "sharpness_gap") or m.startswith("corp_")):
                assert np.isnan(b[f"{m}_lo"]) and np.isnan(b[f"delta_{m}_hi"])
            else:
                np.testing.assert_equal((a[f"{m}_lo"], a[f"delta_{m}_hi"]), (b[f"{m}_lo"], b[f"delta_{m}_hi"]), m)


def test_shards_give_the_numbers_of_one_file(tmp_path):
    data = _data(seed=4, n=(300, 300))
    one = _write(tmp_path / "one.h5", data)

    def cut(split, rows):
        z, y, meta = data[split]
        return z[rows], y[rows], {c: v[rows] for c, v in meta.items()}

    for i, (a, b) in enumerate(((0, 150), (150, 300))):      # shard i holds rows a..b of both splits
        _write(tmp_path / f"shard-{i}.h5", {s: cut(s, np.arange(a, b)) for s in ("val", "test")})
    x = evaluate_slices(Engine(), _req(one, calibrators=("none", "ts")), "grp")
    y = evaluate_slices(Engine(), _req(str(tmp_path / "shard-*.h5"), calibrators=("none", "ts")), "grp")
    for ra, rb in zip(x.records, y.records):
        assert (ra["slice"], ra["n"]) == (rb["slice"], rb["n"])
        np.testing.assert_allclose([rb[m] for m in SLICED], [ra[m] for m in SLICED], rtol=0,
                                   atol=1e-12, equal_nan=True)


def test_many_class_slices_multiply_only_their_own_class_densely(tmp_path, monkeypatch):
    """The per-class view at K = 50: each class slice's class-wise resamples need the dense (R x n) @ (n x K)
    product for at most its own class (the only one with a label entry in the first bin), and the grid-based
    intervals are left out above 16 slices."""
    from calibview.core.evaluation import slices as slices_mod

    seen = []
    real = slices_mod.ClasswiseBootstrap.__init__

    def spy(self, *a, **kw):
        seen.append(kw.get("columns"))
        real(self, *a, **kw)

    monkeypatch.setattr(slices_mod.ClasswiseBootstrap, "__init__", spy)
    rng = np.random.default_rng(0)
    k = 50
    for split, m in (("val", 1500), ("test", 2000)):
        y = rng.integers(0, k, m)
        z = rng.normal(size=(m, k))
        z[np.arange(m), y] += rng.normal(3, 1.5, m)
        write_run(tmp_path / "k50.h5", "net", "toy", split, logits=z.astype(np.float32), labels=y)
    req = _req(tmp_path / "k50.h5", calibrators=("none", "ts"), n_boot=50, bins=15)
    result = evaluate_slices(Engine(), req, "class", min_slice=20)
    mine = [c for c in seen if c is not None]          # the other two: the engine's, for the whole split
    assert len(seen) == 2 + len(mine) and len(mine) == 2 * sum(s.n >= 20 for s in result.slices)
    assert all(len(c) <= 1 for c in mine)
    assert any("smece, cal, sharpness_gap" in n for n in result.notes)
    rec = next(r for r in result.records if r["slice"] == "7" and r["calibrator"] == "ts")
    assert np.isfinite(rec["classwise_ece_lo"]) and np.isnan(rec["smece_lo"]) and np.isfinite(rec["smece"])


def test_a_metric_without_a_value_for_slices_is_nan(toy, monkeypatch):
    from calibview.core.evaluation import slices as slices_mod

    monkeypatch.setattr(slices_mod, "METRIC_NAMES", slices_mod.METRIC_NAMES + ("future_metric",))
    path, _ = toy
    result = evaluate_slices(Engine(), _req(path, calibrators=("none",)), "grp")
    for rec in result.records:
        assert all(np.isnan(rec[f"{p}future_metric{q}"]) for p in ("", "delta_") for q in ("", "_lo", "_hi"))
