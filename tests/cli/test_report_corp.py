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
