"""``calibview report`` writes mcb_dsc.png (and one more file per --format), curves.csv's CORP columns, and with
--corp draws the CORP curves on the diagrams."""

import csv

import pytest

from calibview.cli import main

pytestmark = pytest.mark.qt


def test_report_writes_mcb_dsc_png_and_pdf_and_the_corp_columns(demo_file, tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["report", str(demo_file), "--run", "resnet110-brier/cifar10", "--calibrators", "none,ts",
               "--n-boot", "20", "--out", str(out), "--format", "pdf", "--corp", "bootstrap"])
    assert rc == 0
    assert (out / "mcb_dsc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "mcb_dsc.pdf").read_bytes()[:5] == b"%PDF-"
    assert (out / "diagram.pdf").is_file()
    with open(out / "curves.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sum(1 for r in rows if r["corp"] and r["corp_lo"] and r["corp_cons_hi"]) > 100


def test_report_without_figure_options_writes_the_png_and_a_bad_corp_choice_is_refused(demo_file, tmp_path):
    out = tmp_path / "rep"
    assert main(["report", str(demo_file), "--run", "resnet110-brier/cifar10", "--calibrators", "none,ts",
                 "--n-boot", "0", "--out", str(out)]) == 0
    assert (out / "mcb_dsc.png").is_file() and not (out / "mcb_dsc.pdf").exists()
    with pytest.raises(SystemExit) as e:
        main(["report", str(demo_file), "--out", str(tmp_path / "x"), "--corp", "nope"])
    assert e.value.code == 2


def test_report_corp_class_writes_the_class_tables_and_figures(demo_file, tmp_path):
    import numpy as np
    from scipy.special import softmax
    import h5py

    out = tmp_path / "rep"
    run = "resnet110-brier/cifar100"
    rc = main(["report", str(demo_file), "--run", run, "--calibrators", "none,ts", "--n-boot", "20",
               "--out", str(out), "--corp-class", "bear,97", "--format", "png,svg"])
    assert rc == 0
    for name in ("corp_class_bear.png", "corp_class_bear.svg", "corp_class_wolf.png"):
        assert (out / name).is_file(), name
    with open(out / "corp_class_scores.csv", newline="") as fh:
        scores = list(csv.DictReader(fh))
    assert [(r["class_name"], r["calibrator"]) for r in scores] == [("bear", "none"), ("bear", "ts"),
                                                                    ("wolf", "none"), ("wolf", "ts")]
    with h5py.File(demo_file, "r") as f:
        z, y = f[f"{run}/test/logits"][()].astype(np.float64), f[f"{run}/test/labels"][()]
    p, a = softmax(z, axis=1)[:, 97], (y == 97).astype(float)
    assert float(scores[2]["brier"]) == pytest.approx(np.mean((p - a) ** 2), abs=1e-12)
    with open(out / "corp_class.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["class_name"] for r in rows} == {"bear", "wolf"}
    assert sum(1 for r in rows if r["corp"] and r["corp_cons_lo"] and r["corp_lo"]) > 50


def test_report_refuses_an_unknown_class_in_one_sentence_and_writes_nothing(demo_file, tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["report", str(demo_file), "--run", "resnet110-brier/cifar10", "--calibrators", "none",
               "--n-boot", "0", "--out", str(out), "--corp-class", "unicorn"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no class 'unicorn'" in err[0] and "airplane" in err[0]
    assert not out.exists() or not any(out.iterdir())


def test_report_corp_class_leaves_out_the_runs_without_that_class_with_a_note(demo_file, tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["report", str(demo_file), "--calibrators", "none", "--n-boot", "0", "--out", str(out),
               "--corp-class", "bear", "--no-diagram"])
    assert rc == 0
    with open(out / "corp_class_scores.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["model"], r["dataset"], r["class_name"]) for r in rows} == {("resnet110-brier", "cifar100", "bear")}
    err = capsys.readouterr().err
    assert "--corp-class left a run out" in err and "resnet110-brier/cifar10 has no class 'bear'" in err
