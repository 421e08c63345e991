"""Top-label runs in the commands beyond metrics: slices (by class, by a metadata column; never by epistemic),
several eval splits (domains), report --compare and per-class thresholds give the numbers of the logit run of the
same data written next to them; conformal refuses them in one sentence, or skips them with a note."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from calibview.cli.program import main
from calibview.core.errors import CalibviewError
from calibview.core.io import logits as lg
from calibview.core.io.toplabel.write import from_scores, write_toplabel
from calibview.core.io.writer import write_run

#: per-slice columns that a top-label run shares with the logit run it came from (same confidences, same labels)
SHARED = ("n", "accuracy", "ece", "ace", "mce", "debiased_ece", "smece", "aurc")
#: what a top-label run cannot have
ABSENT = ("nll", "brier", "classwise_ece", "auroc")


def _write(path, splits, meta=None):
    """The logit run ``logit/data`` and the same data as top-label runs ``top/data`` (K = 10 stated) and
    ``topk/data`` (K unknown); ``splits`` {name: (logits (N, K), labels (N,))}."""
    k = next(iter(splits.values()))[0].shape[1]
    for name, (z, y) in splits.items():
        write_run(path, "logit", "data", name, logits=z, labels=y, meta=(meta or {}).get(name))
    top = {name: (*from_scores(z), y) for name, (z, y) in splits.items()}
    write_toplabel(path, "top", "data", top, num_classes=k, meta=meta)
    write_toplabel(path, "topk", "data", top, meta=meta)
    return path


@pytest.fixture(scope="module")
def cifar(shared_data, tmp_path_factory):
    d = np.load(shared_data / "mukhoti_brier_cifar10_resnet110.npz")
    rng = np.random.default_rng(5)
    splits = {"val": (d["logits_val"], d["labels_val"]), "test": (d["logits_test"][:6000], d["labels_test"][:6000]),
              "deploy": (d["logits_test"][6000:], d["labels_test"][6000:])}
    meta = {s: {"site": rng.choice(np.array(["north", "south", "west"]), y.shape[0]),
                "age": rng.normal(40.0, 10.0, y.shape[0])} for s, (_, y) in splits.items()}
    return _write(tmp_path_factory.mktemp("deploy") / "cifar.h5", splits, meta), splits, meta


def _json(capsys, argv):
    capsys.readouterr()
    assert main(argv + ["--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def _slices(capsys, path, run, by, calibrators="none", n_boot=30, extra=()):
    recs = _json(capsys, ["slices", str(path), "--run", run, "--by", by, "--calibrators", calibrators,
                          "--n-boot", str(n_boot), "--eval-split", "test", "--fit-split", "val", *extra])
    return {(r["calibrator"], r["slice"]): r for r in recs}


def _same(a, b, columns, rel=1e-12):
    for c in columns:
        assert a[c] == pytest.approx(b[c], rel=rel, abs=1e-15), (c, a[c], b[c])


def test_slices_by_class_equal_the_logit_run(cifar, capsys):
    path, splits, _ = cifar
    logit = _slices(capsys, path, "logit/data", "class")
    top = _slices(capsys, path, "top/data", "class")
    topk = _slices(capsys, path, "topk/data", "class")
    y = splits["test"][1]
    assert set(logit) == set(top) == set(topk) == {("none", None)} | {("none", str(c)) for c in range(10)}
    for key, rec in top.items():
        # point estimates and the paired intervals: the same confidences, labels and resamples
        _same(rec, logit[key], SHARED + ("ece_lo", "ece_hi", "delta_ece", "delta_ece_lo", "delta_ece_hi"))
        _same(topk[key], rec, SHARED + ("ece_lo", "ece_hi", "delta_ece"))
        assert rec["flagged"] == logit[key]["flagged"]
        for m in ABSENT:
            assert rec[m] is None and rec[f"{m}_lo"] is None and rec[f"delta_{m}"] is None, m
            assert key[1] is not None or logit[key][m] is not None      # the whole split of the logit run has it
        if key[1] is not None:       # n and accuracy of each class against a count of the labels
            rows = y == int(key[1])
            assert rec["n"] == int(rows.sum())
            z = splits["test"][0][rows]
            assert rec["accuracy"] == pytest.approx(float(np.mean(z.argmax(1) == y[rows])), rel=1e-12)
    assert topk[("none", None)]["k"] == 0 and top[("none", None)]["k"] == 10


def test_top_label_calibrators_sliced_alike_whatever_k(cifar, capsys):
    path = cifar[0]
    top = _slices(capsys, path, "top/data", "class", calibrators="none,hb,ir")
    topk = _slices(capsys, path, "topk/data", "class", calibrators="none,hb,ir")
    assert set(top) == set(topk) and {c for c, _ in top} == {"none", "hb", "ir"}
    for key in top:
        _same(topk[key], top[key], SHARED + ("ece_lo", "ece_hi", "delta_ece_lo", "delta_ece_hi"))


def test_unknown_k_slices_the_labels_present(tmp_path, capsys):
    rng = np.random.default_rng(2)
    splits = {}
    for s in ("val", "test"):
        y = rng.choice(np.array([0, 1, 3]), 900)             # class 2 never is a label
        z = rng.normal(size=(900, 4))
        z[np.arange(900), y] += 2.0
        splits[s] = (z, y)
    path = _write(tmp_path / "k.h5", splits)
    logit = _slices(capsys, path, "logit/data", "class", n_boot=0)
    topk = _slices(capsys, path, "topk/data", "class", n_boot=0)
    assert [s for _, s in topk] == [None, "0", "1", "3"]
    assert logit[("none", "2")]["n"] == 0                       # K = 4 known: the empty class is listed
    for key, rec in topk.items():
        _same(rec, logit[key], SHARED)


def test_slices_by_a_metadata_column(cifar, capsys):
    path, splits, meta = cifar
    for column, extra in (("site", ()), ("age", ("--slice-bins", "4"))):
        logit = _slices(capsys, path, "logit/data", column, extra=extra)
        top = _slices(capsys, path, "top/data", column, extra=extra)
        assert set(top) == set(logit) and len(top) == (4 if column == "site" else 5)
        for key, rec in top.items():
            _same(rec, logit[key], SHARED + ("ece_lo", "ece_hi", "delta_ece"))
            assert rec["nll"] is None and rec["slice_column"] == column
    site, top = meta["test"]["site"], _slices(capsys, path, "top/data", "site", n_boot=0)
    for name in ("north", "south", "west"):
        assert top[("none", name)]["n"] == int((site == name).sum())


def test_slices_by_epistemic_is_refused(cifar, capsys):
    capsys.readouterr()
    assert main(["slices", str(cifar[0]), "--run", "top/data", "--by", "epistemic", "--calibrators", "none",
                 "--n-boot", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("calibview: error: Run top/data is a top-label run, so it cannot be sliced by epistemic: that "
                   "needs the members' probabilities of every class, and a top-label run stores only the "
                   "confidence of the predicted class.")


REFUSAL = ("conformal prediction sets need every class's probability, and a top-label run stores only the "
           "confidence of the predicted class.")


def test_conformal_refuses_a_top_label_run(tmp_path, cifar, capsys):
    path, splits, _ = cifar
    only = tmp_path / "only.h5"
    write_toplabel(only, "top", "data", {s: (*from_scores(z), y) for s, (z, y) in splits.items()})
    for argv in (["conformal", str(only)], ["conformal", str(path), "--run", "top/data"]):
        capsys.readouterr()
        assert main(argv + ["--n-boot", "0"]) == 2
        err = capsys.readouterr().err
        assert err.strip() == f"calibview: error: Run top/data is a top-label run: {REFUSAL}", err
    # a file that holds other runs too: the top-label ones are skipped with a note, as logit calibrators are
    capsys.readouterr()
    assert main(["conformal", str(path), "--n-boot", "0", "--alpha", "0.1", "--score", "lac", "--json"]) == 0
    captured = capsys.readouterr()
    assert {(r["model"], r["group"]) for r in json.loads(captured.out)} >= {("logit", "all")}
    assert {r["model"] for r in json.loads(captured.out)} == {"logit"}
    for run in ("top/data", "topk/data"):
        assert f"note: run {run} is a top-label run: skipping it ({REFUSAL[:-1]})" in captured.err


def test_reading_logits_of_a_top_label_split_names_the_form(cifar):
    with pytest.raises(CalibviewError, match="is a top-label split .* needs every class's logit or probability"):
        lg.read_split(cifar[0], "top/data", "test")


def test_two_eval_splits_equal_the_logit_run(cifar, capsys, tmp_path):
    path = cifar[0]
    argv = ["--calibrators", "none", "--n-boot", "40", "--eval-split", "test,deploy", "--fit-split", "val"]
    rows = _json(capsys, ["metrics", str(path), *argv])
    by = {(r["model"], r["eval_split"]): r for r in rows}
    for split in ("test", "deploy"):
        _same(by[("top", split)], by[("logit", split)], ("accuracy", "ece", "ece_lo", "ece_hi", "ace", "smece"))
        _same(by[("topk", split)], by[("top", split)], ("accuracy", "ece", "ece_lo", "ece_hi", "tot", "cal"))
        assert by[("top", split)]["nll"] is None
    out = tmp_path / "report"
    assert main(["report", str(path), *argv, "-o", str(out), "--no-diagram", "--quiet"]) == 0
    with open(out / "domains.csv", newline="") as f:
        dom = {(r["model"], r["eval_split"]): r for r in csv.DictReader(f)}
    for model in ("top", "topk"):
        deploy = dom[(model, "deploy")]
        assert float(deploy["delta_ece"]) == pytest.approx(by[(model, "deploy")]["ece"] - by[(model, "test")]["ece"],
                                                           rel=1e-12)
        assert float(deploy["delta_ece"]) == pytest.approx(float(dom[("logit", "deploy")]["delta_ece"]), rel=1e-12)
        for m in ABSENT:
            for row in (deploy, dom[(model, "test")]):
                assert row[m] == row[f"{m}_lo"] == row[f"delta_{m}"] == row[f"delta_{m}_hi"] == "", (model, m)
    with open(out / "ranking.csv", newline="") as f:
        ranking = [r for r in csv.DictReader(f) if r["model"] == "top"]
    assert ranking and all(r["brier"] == r["rank_brier"] == "" and r["ece"] for r in ranking)


def test_report_compare_of_top_label_runs(cifar, tmp_path):
    path = cifar[0]
    base = ["--calibrators", "none,hb", "--n-boot", "30", "--no-diagram", "--quiet"]
    out = tmp_path / "kk"
    assert main(["report", str(path), "--compare", "top/data,topk/data", "-o", str(out), *base]) == 0  # K 10, ?
    with open(out / "compare.csv", newline="") as f:
        rows = {(r["model"], r["calibrator"]): r for r in csv.DictReader(f)}
    for cal in ("none", "hb"):
        r = rows[("topk", cal)]
        assert float(r["delta_ece"]) == 0.0 and float(r["delta_tot"]) == 0.0 and r["significant_ece"] == "false"
        assert r["delta_nll"] == r["delta_brier"] == r["significant_nll"] == ""
    out = tmp_path / "mixed"
    assert main(["report", str(path), "--compare", "logit/data,top/data", "-o", str(out), *base]) == 0
    with open(out / "compare.csv", newline="") as f:
        rows = {(r["model"], r["calibrator"]): r for r in csv.DictReader(f)}
    r, ref = rows[("top", "none")], rows[("logit", "none")]
    assert float(r["delta_ece"]) == pytest.approx(float(r["ece"]) - float(ref["ece"]), abs=1e-15)
    # TOT and the sharpness gap are on the top-label Brier for one and the full Brier for the other: no difference
    for m in ABSENT + ("tot", "sharpness_gap"):
        assert r[f"delta_{m}"] == r[f"delta_{m}_lo"] == r[f"significant_{m}"] == "", m
    assert r["tot"] != "" and ref["tot"] != ""


def test_per_class_thresholds_with_unknown_k(cifar, tmp_path):
    path = cifar[0]
    out = tmp_path / "thr"
    assert main(["report", str(path), "--calibrators", "none", "--n-boot", "0", "--target-precision", "0.97",
                 "--eval-split", "test", "--fit-split", "val", "-o", str(out), "--no-diagram", "--quiet"]) == 0
    with open(out / "thresholds.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    cols = ("class", "threshold", "fit_n_accepted", "eval_n_accepted", "eval_precision")
    by = {m: [tuple(r[c] for c in cols) for r in rows if r["model"] == m] for m in ("logit", "top", "topk")}
    assert len(by["logit"]) == 10 and by["top"] == by["logit"] and by["topk"] == by["logit"]
