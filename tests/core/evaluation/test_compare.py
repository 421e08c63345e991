"""Compare models against independent computations: the paired differences' intervals are percentiles of
metric(run on resample r) - metric(reference on resample r), each recomputed by brute force on the rows repeated by
the engine's resample counts; the point estimates are those of each run evaluated alone; runs whose samples differ
are refused with one sentence."""

import numpy as np
import pytest
import torch

from calibview.core.stats import resampling
from calibview.core.evaluation.compare import REFUSAL, check_comparable, compare, requests_for
from calibview.core.reports.contrasts import compare_columns, compare_csv
from calibview.core.evaluation.engine import Engine
from calibview.core.errors import CalibviewError
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.logits import read_split
from calibview.core.io.writer import write_run
from calibview.core.evaluation.toplabel.absent import BINARY_METRICS
from calibview.core.stats.metrics import METRIC_NAMES, NO_INTERVAL

K = 4


def _logits(rng, y, k, sharp):
    z = rng.normal(size=(y.size, k)) * sharp
    z[np.arange(y.size), y] += rng.normal(1.5, 1.0, y.size)
    return z.astype(np.float32)


def _file(path, n=(300, 360), k=K, seed=0):
    """Models a, b (sharper: over-confident) and c on one test set; d on other labels; e on fewer samples; f on
    another dataset with the same labels; g with more classes."""
    rng = np.random.default_rng(seed)
    val_y, test_y = rng.integers(0, k, n[0]), rng.integers(0, k, n[1])
    for model, sharp in (("a", 1.0), ("b", 2.5), ("c", 1.3)):
        for split, y in (("val", val_y), ("test", test_y)):
            write_run(path, model, "toy", split, logits=_logits(rng, y, k, sharp), labels=y)
    other = test_y.copy()
    other[[3, 50]] = (other[[3, 50]] + 1) % k
    for model, dataset, y, kk in (("d", "toy", other, k), ("e", "toy", test_y[:-10], k),
                                  ("f", "other", test_y, k), ("g", "toy", test_y, k + 1)):
        for split, yy in (("val", val_y), ("test", y)):
            write_run(path, model, dataset, split, logits=_logits(rng, yy, kk, 1.0), labels=yy)
    return path


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return _file(tmp_path_factory.mktemp("compare") / "toy.h5")


def _req(path, run="a/toy", **kw):
    base = dict(file=str(path), run=run, calibrators=("none", "ts"), n_boot=40, seed=3, bins=8, device="cpu")
    base.update(kw)
    return EvalRequest(**base)


def _brute(p, y, w, bins):
    """accuracy, NLL, Brier and ECE of the rows repeated by the weights ``w``, straight from the definitions."""
    idx = np.repeat(np.arange(w.size), w)
    p, y = p[idx], y[idx]
    conf, correct = p.max(1), (p.argmax(1) == y).astype(float)
    edges = np.linspace(0, 1, bins + 1)
    b = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, bins - 1)
    ece = sum(abs(correct[b == j].sum() - conf[b == j].sum()) for j in range(bins)) / y.size
    nll = -np.log(p[np.arange(y.size), y]).mean()
    brier = ((p - np.eye(p.shape[1])[y]) ** 2).sum(1).mean()
    return np.array([correct.mean(), nll, brier, ece])


BRUTE = ("accuracy", "nll", "brier", "ece")


@pytest.mark.parametrize("grouped", [False, True], ids=["samples", "units"])
def test_delta_intervals_equal_brute_force_on_the_same_resamples(tmp_path, monkeypatch, grouped):
    if grouped:      # the large-split path (random groups of samples), on a small split
        monkeypatch.setattr(resampling, "UNIT_LIMIT", 100)
        monkeypatch.setattr(resampling, "MIN_UNITS", 64)
    path = _file(tmp_path / "b.h5", seed=4)
    reqs = requests_for(_req(path, n_boot=30), ["a/toy", "b/toy", "c/toy"])
    engine = Engine()
    result = compare(engine, reqs, reference=1)
    counts, units = engine.resamples(reqs[1])
    for other in reqs:                       # the resamples are those of every run (same N, K, n_boot, seed)
        c2, u2 = engine.resamples(other)
        assert torch.equal(c2, counts) and (u2 is None or torch.equal(u2, units))
    assert (units is not None) == grouped
    counts = counts.numpy().astype(int)
    weights = counts if units is None else counts[:, units.numpy()]           # (R, N) draws of each sample
    brute = {}
    for req in reqs:
        data = read_split(path, req.run, "test")
        for cal in ("none", "ts"):
            p = engine.fitted(req)[cal].apply(torch.from_numpy(data.scores.astype(np.float64))).exp().numpy()
            brute[(req.run, cal)] = np.array([_brute(p, data.labels, w, 8) for w in weights])
    assert result.reference_run == "b/toy"
    for run in ("a/toy", "c/toy"):
        for cal in ("none", "ts"):
            row = result.row(run, cal)
            assert row["reference"] == "b/toy"
            diff = brute[(run, cal)] - brute[("b/toy", cal)]
            for j, m in enumerate(BRUTE):
                lo, hi = np.percentile(diff[:, j], [2.5, 97.5])
                assert (row[f"delta_{m}_lo"], row[f"delta_{m}_hi"]) == pytest.approx((lo, hi), abs=4e-6), (run, m)
                assert row[f"significant_{m}"] == bool(lo > 0 or hi < 0) or abs(lo) < 4e-6 or abs(hi) < 4e-6
    for cal in ("none", "ts"):                   # the reference's own rows: delta 0, no interval, no mark
        row = result.row("b/toy", cal)
        assert all(row[f"delta_{m}"] == 0.0 and np.isnan(row[f"delta_{m}_lo"]) and row[f"significant_{m}"] is None
                   for m in METRIC_NAMES if m not in BINARY_METRICS)
        assert all(row[f"delta_{m}"] is None for m in BINARY_METRICS)          # K > 2: absent, no difference


def test_rows_are_each_run_evaluated_alone_and_marks_follow_the_intervals(toy):
    reqs = requests_for(_req(toy), ["a/toy", "b/toy"])
    result = compare(Engine(), reqs)
    for req in reqs:
        ev = Engine().evaluate(req)                          # a fresh engine: nothing shared with the comparison
        for cal in ("none", "ts"):
            row, est = result.row(req.run, cal), ev.result(cal).metrics
            for m in METRIC_NAMES:
                for suffix, value in (("", est[m].value), ("_lo", est[m].lo), ("_hi", est[m].hi)):
                    if m in BINARY_METRICS or (m in NO_INTERVAL and suffix):  # K > 2: absent; p: no interval
                        assert row[m + suffix] is None and np.isnan(value)
                        continue
                    assert row[m + suffix] == pytest.approx(value, abs=1e-12, nan_ok=True), (req.run, m + suffix)
    ref = {cal: Engine().evaluate(reqs[0]).result(cal).metrics for cal in ("none",)}
    row = result.row("b/toy", "none")
    for m in METRIC_NAMES:
        if m in BINARY_METRICS:
            continue
        assert row[f"delta_{m}"] == pytest.approx(row[m] - ref["none"][m].value, abs=1e-12, nan_ok=True)
        lo, hi = row[f"delta_{m}_lo"], row[f"delta_{m}_hi"]
        if np.isfinite(lo):
            assert lo <= hi and row[f"significant_{m}"] == (lo > 0 or hi < 0)
        else:
            assert row[f"significant_{m}"] is None
    # b is over-confident, a nearly calibrated: b's ECE is worse, and says so
    assert row["significant_ece"] and row["delta_ece_lo"] > 0


@pytest.mark.parametrize("other, words", [
    ("d/toy", "labels of their test splits differ at 2 of 360 rows (first at row 3)"),
    ("e/toy", "have 350 and 360 samples"),
    ("f/other", "different datasets"),
    ("g/toy", "K = 5 and K = 4"),
])
def test_runs_on_other_samples_are_refused_with_one_sentence(toy, other, words):
    with pytest.raises(CalibviewError) as e:
        check_comparable(requests_for(_req(toy), ["a/toy", other]))
    text = str(e.value)
    assert words in text and text.endswith(f"{REFUSAL}.") and text.count(". ") == 0 and "\n" not in text


def test_other_settings_one_run_or_the_same_run_twice_are_refused(toy):
    with pytest.raises(CalibviewError, match="different seed"):
        check_comparable([_req(toy), _req(toy, run="b/toy", seed=9)])
    with pytest.raises(CalibviewError, match="at least two runs"):
        check_comparable([_req(toy)])
    with pytest.raises(CalibviewError, match="given twice"):
        check_comparable([_req(toy), _req(toy)])
    with pytest.raises(CalibviewError, match="reference must be one"):
        compare(Engine(), requests_for(_req(toy), ["a/toy", "b/toy"]), reference=2)


def test_compare_csv_has_every_metric_its_delta_and_mark(toy):
    result = compare(Engine(), requests_for(_req(toy, n_boot=0), ["a/toy", "c/toy"]))
    text = compare_csv(result.rows)
    head = text.splitlines()[0].split(",")
    assert head == compare_columns()
    for m in METRIC_NAMES:
        assert {m, f"delta_{m}", f"delta_{m}_lo", f"delta_{m}_hi", f"significant_{m}"} <= set(head)
    assert "reference" in head and len(text.splitlines()) == 1 + 4
    # without resamples: no interval, no mark (empty), but the point differences
    row = dict(zip(head, text.splitlines()[3].split(",")))
    assert row["significant_ece"] == "" and row["delta_ece_lo"] == "" and float(row["delta_ece"]) != 0.0


def test_requests_with_keeps_the_settings_and_each_runs_fit_split(toy, tmp_path):
    from calibview.core.evaluation.compare import candidates, requests_with
    from calibview.core.io.discovery import list_runs

    runs = {r.name: r for r in list_runs(toy)}
    write_run(tmp_path / "one.h5", "solo", "toy", "test", logits=np.zeros((360, K), np.float32),
              labels=read_split(toy, "a/toy", "test").labels)
    solo = list_runs(tmp_path / "one.h5")[0]               # no split to fit on: uncalibrated only
    base = _req(toy, fit_split="val")
    reqs = requests_with(base, [runs["b/toy"], solo])
    assert reqs[0] is base and [r.run for r in reqs] == ["a/toy", "b/toy", "solo/toy"]
    assert reqs[1].fit_split == "val" and reqs[1].calibrators == base.calibrators
    assert reqs[2].file == solo.file and reqs[2].fit_split is None and reqs[2].calibrators == ("none",)
    assert all((r.n_boot, r.seed, r.bins, r.eval_split) == (40, 3, 8, "test") for r in reqs)
    check_comparable(reqs)                                  # the same labels in another file: comparable
    why = dict((r.name, w) for r, w in candidates(list(runs.values()), runs["a/toy"], "test"))
    assert "a/toy" not in why and why["b/toy"] is None and why["d/toy"] is None       # labels: checked on tick
    assert "different datasets" in why["f/other"] and "K = 5" in why["g/toy"] and "350 and 360" in why["e/toy"]


def test_labels_of_shards_are_read_in_shard_order(toy, tmp_path):
    from calibview.core.evaluation.compare import read_labels
    from calibview.core.io.discovery import list_runs

    data = read_split(toy, "a/toy", "test")
    val = read_split(toy, "a/toy", "val")
    for i, rows in enumerate((slice(0, 100), slice(100, None))):       # model a's test split in two shards
        write_run(tmp_path / f"part-{i}.h5", "a", "toy", "test", logits=np.asarray(data.scores[rows]),
                  labels=data.labels[rows])
        write_run(tmp_path / f"part-{i}.h5", "a", "toy", "val", logits=np.asarray(val.scores[rows]),
                  labels=val.labels[rows])
    pattern = str(tmp_path / "part-*.h5")
    run = list_runs(toy)[0]
    from calibview.core.io import shards
    np.testing.assert_array_equal(read_labels(pattern, shards.list_runs(pattern)[0], "test"), data.labels)
    reqs = [_req(toy, run="b/toy"), _req(pattern, run="a/toy")]
    check_comparable(reqs)                            # the same samples in shards: comparable
    result = compare(Engine(), reqs)
    row = result.row("a/toy", "ts")                   # a's shards: the numbers of a's single file
    single = Engine().evaluate(_req(toy, run="a/toy")).result("ts").metrics
    assert row["reference"] == "b/toy" and run.name == "a/toy"
    for m in ("accuracy", "nll", "ece"):
        assert row[m] == pytest.approx(single[m].value, abs=1e-12)
