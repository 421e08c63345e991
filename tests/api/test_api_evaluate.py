"""calibview.evaluate on arrays against the file path: the same arrays written to an HDF5 file and evaluated by
``calibview metrics --json`` / ``calibview report`` are the reference (every key, floats to 1e-12)."""

from __future__ import annotations

import gc
import json
import math
import struct
import sys

import h5py
import numpy as np
import pytest
import torch

import calibview as cv
from calibview.cli import main
from calibview.core.errors import CalibviewError
from calibview.core.io import arrays
from calibview.core.io.writer import write_run

NINE = ["none", "ts", "ts-grid", "hb", "ir", "vs", "ms", "dirichlet", "mrr"]


def _data(n_fit=400, n_test=300, k=5, seed=0, dtype=np.float32):
    """Logits with signal and over-confidence (scaled by 3), labels drawn from the softmax at scale 1."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n_fit + n_test, k)) * 1.5
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.array([rng.choice(k, p=row) for row in p])
    z = (3 * z).astype(dtype)
    return (z[n_fit:], y[n_fit:]), (z[:n_fit], y[:n_fit])


def _file(tmp_path, test, fit, probs=False, name="run.h5"):
    path = tmp_path / name
    key = "probs" if probs else "logits"
    write_run(path, "model", "data", "fit", labels=fit[1], **{key: fit[0]})
    write_run(path, "model", "data", "test", labels=test[1], **{key: test[0]})
    return path


def _cli_rows(capsys, path, calibrators, *extra):
    capsys.readouterr()
    rc = main(["metrics", str(path), "--json", "--fit-split", "fit", "--eval-split", "test", "--calibrators",
               ",".join(calibrators), "--device", "cpu", "--quiet", *extra])
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)


def _assert_rows_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert set(g) == set(w)
        for key in w:
            a, b = g[key], w[key]
            if isinstance(b, float) and isinstance(a, (int, float)):
                assert a == pytest.approx(b, rel=1e-12, abs=1e-12), key
            else:
                assert a == b, key          # None (JSON null) equal, strings, ints and the nonfinite dict


def test_nine_calibrators_equal_the_file_path(tmp_path, capsys):
    test, fit = _data()
    want = _cli_rows(capsys, _file(tmp_path, test, fit), NINE, "--n-boot", "40")
    res = cv.evaluate(*test, fit=fit, calibrators=NINE, n_boot=40, device="cpu")
    assert [r["calibrator"] for r in res.rows] == NINE
    assert all(r["fit_split"] == "fit" and r["eval_split"] == "test" for r in res.rows)
    _assert_rows_equal(res.rows, want)
    assert any(r["ece_lo"] is not None for r in res.rows)        # the intervals were compared too


def test_ablation_equals_the_file_path(tmp_path, capsys):
    test, fit = _data(seed=1)
    want = _cli_rows(capsys, _file(tmp_path, test, fit), ["none", "ts"], "--bins", "10,15",
                     "--bandwidth", "0.05,0.1", "--n-boot", "20")
    res = cv.evaluate(*test, fit=fit, calibrators=["none", "ts"], bins=[10, 15], bandwidth=[0.05, 0.1], n_boot=20,
                      device="cpu")
    assert len(res.rows) == 8 and len(res.evaluations) == 4
    assert {r["bins"] for r in res.rows} == {10, 15}
    _assert_rows_equal(res.rows, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_dtypes_and_torch_equal_the_file_path(tmp_path, capsys, dtype):
    test, fit = _data(seed=2, dtype=dtype)
    want = _cli_rows(capsys, _file(tmp_path, test, fit), ["none", "ts"], "--n-boot", "0")
    res = cv.evaluate(*test, fit=fit, calibrators=["none", "ts"], n_boot=0, device="cpu")
    _assert_rows_equal(res.rows, want)
    as_torch = cv.evaluate(torch.from_numpy(test[0]), torch.from_numpy(test[1]),
                           fit=(torch.from_numpy(fit[0]), torch.from_numpy(fit[1])), calibrators=["none", "ts"],
                           n_boot=0, device="cpu")
    _assert_rows_equal(as_torch.rows, want)


def test_probabilities_equal_the_file_path(tmp_path, capsys):
    (zt, yt), (zf, yf) = _data(seed=3, dtype=np.float64)
    soft = lambda z: np.exp(z - z.max(1, keepdims=True)) / np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)
    test, fit = (soft(zt), yt), (soft(zf), yf)
    want = _cli_rows(capsys, _file(tmp_path, test, fit, probs=True), ["none", "ts", "hb"], "--n-boot", "0")
    res = cv.evaluate(*test, fit=fit, probs=True, calibrators=["none", "ts", "hb"], n_boot=0, device="cpu")
    _assert_rows_equal(res.rows, want)


def test_float32_input_is_used_in_place():
    """No (N, K) copy of float32 input, from numpy or from a CPU tensor; float16 is widened to float32 once."""
    test, fit = _data(seed=4)
    for scores in (test[0], torch.from_numpy(test[0])):
        res = cv.evaluate(scores, test[1], fit=fit, calibrators=["none", "ts"], n_boot=0, device="cpu")
        held = arrays.lookup(res.run.path).data
        assert held["test"].scores.dtype == np.float32
        assert np.shares_memory(held["test"].scores, test[0])
        assert np.shares_memory(held["fit"].scores, fit[0])
        assert test[0].flags.writeable                 # the caller's array keeps its flags
    half = cv.evaluate(test[0].astype(np.float16), test[1], n_boot=0, device="cpu")
    assert arrays.lookup(half.run.path).data["test"].scores.dtype == np.float32
    assert arrays.lookup(half.run.path).info.split("test").dtype == "float16"


def test_released_arrays_leave_the_registry():
    test, _ = _data(seed=5)
    res = cv.evaluate(*test, n_boot=0, device="cpu")
    path = res.run.path
    assert arrays.lookup(path).info.name == "model/data"
    del res
    gc.collect()
    with pytest.raises(CalibviewError, match="released"):
        arrays.lookup(path)


# --- validation: the file reader's sentences -------------------------------------------------------------------

def _raw_file(path, scores, labels):
    """A file written without the writer's checks, so that reading it meets the bad values."""
    with h5py.File(path, "w") as f:
        g = f.create_group("model/data/test")
        g["logits"], g["labels"] = scores, labels


def _reader_message(tmp_path, capsys, scores, labels):
    path = tmp_path / "bad.h5"
    _raw_file(path, scores, labels)
    capsys.readouterr()
    assert main(["metrics", str(path), "--calibrators", "none", "--n-boot", "0", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    return err.replace(str(path), "calibview.evaluate").replace("/model/data/test/logits", "scores") \
        .replace("/model/data/test/labels", "labels")


@pytest.mark.parametrize("case", ["nan", "label", "rows", "float_labels"])
def test_bad_arrays_give_the_readers_sentence(tmp_path, capsys, case):
    z, y = _data(seed=6)[0]
    z = z.copy()
    if case == "nan":
        z[3, 1] = np.nan
    elif case == "label":
        y = y.copy()
        y[7] = 9
    elif case == "rows":
        y = y[:-2]
    else:
        y = y.astype(np.float64)
    want = _reader_message(tmp_path, capsys, z, y)
    with pytest.raises(CalibviewError) as e:
        cv.evaluate(z, y, n_boot=0, device="cpu")
    got = str(e.value)
    assert got == want.removeprefix("calibview: ").removeprefix("error: ")
    assert got.count(". ") == 0 and got.endswith(".")        # one sentence


def test_fit_is_required_for_calibrators():
    test, _ = _data(seed=7)
    with pytest.raises(CalibviewError, match=r"\(ts, hb\) need fit=\(scores, labels\)"):
        cv.evaluate(*test, calibrators=["none", "ts", "hb"])
    cv.evaluate(*test, calibrators="none", n_boot=0, device="cpu")     # none alone needs no fit


def test_other_refusals_are_one_sentence():
    test, fit = _data(seed=8)
    cases = [
        (dict(calibrators=["tz"], fit=fit), "Unknown calibrator 'tz'"),
        (dict(fit=(fit[0][:, :3], fit[1] % 3), calibrators=["ts"]), "different class counts"),
        (dict(fit=fit, calibrators=["ts"], options={"hb": {"bins": 20}}), "options for 'hb'"),
        (dict(fit=fit, calibrators=["hb"], options={"hb": {"binz": 20}}), "binz"),
        (dict(fit=fit, kernel=["gaussian", "box"]), "Unknown kernel 'box'"),
        (dict(level=95), "for 95 %, give 0.95"),
        (dict(fit=fit[0]), "fit must be a \\(scores, labels\\) pair"),
        (dict(class_names=["a", "b"]), "2 class names were given"),
        (dict(meta={"group": np.zeros(3)}), "meta\\['group'\\] has 3 values"),
        (dict(fit=fit, calibrators=["platt"]), "binary problems only"),
    ]
    for kw, match in cases:
        with pytest.raises(CalibviewError, match=match):
            cv.evaluate(*test, **{"n_boot": 0, "device": "cpu", **kw})


def test_progress_plain_line_without_tqdm(monkeypatch, capsys):
    test, _ = _data(seed=9)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)         # import fails as if tqdm were not installed
    cv.evaluate(*test, n_boot=0, device="cpu", progress=True)
    err = capsys.readouterr().err
    assert "calibview: 100% done" in err and err.endswith("\n")


def test_progress_with_tqdm(capsys):
    pytest.importorskip("tqdm")
    test, _ = _data(seed=9)
    cv.evaluate(*test, n_boot=0, device="cpu", progress=True)
    assert "100%" in capsys.readouterr().err


# --- the Result ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def result():
    test, fit = _data(seed=10)
    return cv.evaluate(*test, fit=fit, calibrators=["none", "ts", "hb"], n_boot=50, device="cpu",
                       class_names=list("abcde"))


def test_estimates_and_intervals(result):
    row = next(r for r in result.rows if r["calibrator"] == "ts")
    assert result["ts"].ece == row["ece"]
    assert result["ts"].interval("ece") == (row["ece_lo"], row["ece_hi"])
    assert result["ts"].interval("ece")[0] <= result["ts"].ece <= result["ts"].interval("ece")[1]
    assert result["none"].nll == next(r for r in result.rows if r["calibrator"] == "none")["nll"]
    with pytest.raises(AttributeError, match="not a metric"):
        result["ts"].eec
    with pytest.raises(KeyError, match="No calibrator 'vs'"):
        result["vs"]
    assert list(result) == ["none", "ts", "hb"]
    assert result.calibrators["ts"].fitted_.method == "ts" and result.calibrators["ts"].temperature_ > 1


def test_to_pandas(result, monkeypatch):
    pd = pytest.importorskip("pandas")
    df = result.to_pandas()
    assert isinstance(df, pd.DataFrame) and len(df) == 3
    assert df.loc[df.calibrator == "ts", "ece"].item() == result["ts"].ece
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="needs pandas, which is not installed"):
        result.to_pandas()


def test_html_table_uses_the_units_convention(result):
    from calibview.core.reports import units

    text = result._repr_html_()
    assert "<table>" in text and "ECE %" in text and "CAL ×100" in text and "<th>NLL</th>" in text
    ts = result["ts"]
    lo, hi = ts.interval("ece")
    assert units.fmt_estimate("ece", ts.ece, lo, hi) in text          # "2.47 [0.80, 3.85]"
    assert f"{100 * ts.ece:.2f} [" in text


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.qt
def test_diagram_displays_and_exports(result, tmp_path):
    fig = result.diagram()
    assert _png_size(fig._repr_png_()) == (900, 700)
    pdf = result.diagram(tmp_path / "fig.pdf", layout="grid", width="7in", dpi=300)
    assert pdf.paths == [tmp_path / "fig.pdf"] and (tmp_path / "fig.pdf").read_bytes()[:5] == b"%PDF-"
    png = result.diagram(tmp_path / "fig.png", width="3.5in", dpi=200)
    assert _png_size(png.paths[0].read_bytes())[0] == 700
    with pytest.raises(CalibviewError, match="unknown figure format"):
        result.diagram(tmp_path / "fig.gif")
    with pytest.raises(CalibviewError, match="layout"):
        result.diagram(tmp_path / "fig.pdf", layout="stacked")


@pytest.mark.qt
def test_report_writes_the_cli_folder(tmp_path, capsys):
    test, fit = _data(seed=11)
    path = _file(tmp_path, test, fit)
    cal = ["none", "ts", "hb"]
    rc = main(["report", str(path), "--fit-split", "fit", "--eval-split", "test", "--calibrators", ",".join(cal),
               "--n-boot", "30", "--device", "cpu", "--quiet", "--out", str(tmp_path / "cli")])
    assert rc == 0
    res = cv.evaluate(*test, fit=fit, calibrators=cal, n_boot=30, device="cpu")
    written = res.report(tmp_path / "api")
    names = lambda d: sorted(p.name for p in d.iterdir())
    assert names(tmp_path / "api") == names(tmp_path / "cli")
    assert {p.name for p in written} == set(names(tmp_path / "api"))
    for f in ("metrics.csv", "curves.csv", "ranking.csv", "selective.csv", "audit.csv"):
        assert (tmp_path / "api" / f).read_text() == (tmp_path / "cli" / f).read_text(), f
    got = json.loads((tmp_path / "api" / "calibrators.json").read_text())
    want = json.loads((tmp_path / "cli" / "calibrators.json").read_text())
    for g, w in zip(got, want):
        g["fit"].pop("file", None), w["fit"].pop("file", None)
        assert g == w
    assert _png_size((tmp_path / "api" / "diagram.png").read_bytes()) == (1800, 1400)
    with pytest.raises(CalibviewError, match="not empty"):
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "x.txt").write_text("x")
        res.report(tmp_path / "other")


def test_exported_names():
    from calibview.api.evaluation import evaluate
    from calibview.api.result import Result

    assert cv.evaluate is evaluate and cv.Result is Result
    assert math.isfinite(cv.evaluate(*_data(seed=12)[0], n_boot=0, device="cpu")["none"].ece)


def test_binary_scores_of_class_one_are_accepted():
    # a binary model's (N,) logit or probability of class 1, as most binary models give it
    from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

    rng = np.random.default_rng(4)
    z = rng.normal(size=400) * 2
    y = (rng.random(400) < 1 / (1 + np.exp(-z))).astype(int)
    p = 1 / (1 + np.exp(-z))
    for scores, probs in ((z, False), (z[:, None], False), (p, True)):
        res = cv.evaluate(scores, y, fit=(scores, y), calibrators=["none", "platt"], probs=probs, n_boot=0)
        assert res["none"].nll == pytest.approx(log_loss(y, p), rel=1e-9)
        assert res["none"].brier == pytest.approx(2 * brier_score_loss(y, p), rel=1e-9)   # both classes' terms
        assert res["none"].auroc == pytest.approx(roc_auc_score(y, p), abs=1e-12)
