"""`calibview report --layout grid --format png,pdf --dpi 300 --figure-width 7in`: publication figures (issue 11)."""

import csv

import pytest

from calibview.cli import main

RUN = "resnet110-brier/cifar100"


@pytest.mark.qt
def test_report_writes_a_2100_px_png_and_a_vector_pdf(tmp_path):
    from PySide6 import QtGui

    out = tmp_path / "fig"
    assert main(["report", "--run", RUN, "--calibrators", "none,ts,hb,mrr", "--n-boot", "0", "--layout", "grid",
                 "--format", "png,pdf", "--dpi", "300", "--figure-width", "7in", "--out", str(out),
                 "--quiet"]) == 0
    img = QtGui.QImage(str(out / "diagram.png"))
    assert img.width() == 2100
    assert "layout=grid" in img.text("Description") and "dpi=300" in img.text("Description")
    pdf = (out / "diagram.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"/Subtype /Image" not in pdf and b"/Subtype/Image" not in pdf
    with open(out / "curves.csv", newline="") as f:
        xs = [float(r["x"]) for r in csv.DictReader(f)]
    assert min(xs) >= 0.01 - 1e-9                    # nothing below 1/K (K = 100)...
    assert xs[0] == pytest.approx(0.01, abs=1e-3)    # ...and the grid starts right there


def test_bad_figure_options_are_one_sentence(tmp_path, capsys):
    assert main(["report", "--run", RUN, "--calibrators", "none", "--n-boot", "0", "--format", "gif",
                 "--out", str(tmp_path / "x"), "--quiet"]) != 0
    assert "gif" in capsys.readouterr().err
    assert main(["report", "--run", RUN, "--calibrators", "none", "--n-boot", "0", "--figure-width", "7 furlongs",
                 "--out", str(tmp_path / "x"), "--quiet"]) != 0
