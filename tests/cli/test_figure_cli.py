"""`calibview report --layout grid --format png,pdf --dpi 300 --figure-width 7in`: publication figures."""

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


@pytest.mark.qt
def test_binary_run_gets_a_positive_class_diagram(tmp_path):
    import numpy as np
    from PySide6 import QtGui

    from calibview.core.io.writer import write_run
    rng = np.random.default_rng(0)
    path = tmp_path / "bin.h5"
    for split in ("val", "test"):
        y = rng.integers(0, 2, 2000)
        z = rng.normal(0, 1.5, 2000) + (2 * y - 1) * 1.2 + 0.8
        write_run(path, "net", "toy", split, logits=np.stack([-z / 2, z / 2], 1).astype(np.float32), labels=y)
    out = tmp_path / "out"
    assert main(["report", str(path), "--calibrators", "none,platt", "--n-boot", "0", "--layout", "overlay",
                 "--format", "png", "--figure-width", "3.5in", "--out", str(out), "--quiet"]) == 0
    assert QtGui.QImage(str(out / "diagram.png")).width() == 1050
    assert QtGui.QImage(str(out / "diagram_positive.png")).width() == 1050


def test_positive_class_vectors():
    import numpy as np
    from types import SimpleNamespace

    from calibview.core.stats.positive_class import positive_class
    conf = np.array([0.9, 0.6, 0.8, 0.7])
    pred = np.array([1, 0, 0, 1])
    s = SimpleNamespace(k=2, conf=conf, pred=pred, labels=np.array([1, 1, 0, 0]), brier=np.zeros(4))
    pc = positive_class("ts", "TS", s)
    assert pc.stats.n == 4 and pc.stats.mean_correct == 0.5
    assert pc.stats.conf_std == pytest.approx(np.std([0.9, 0.4, 0.2, 0.7]))       # p(y=1), not the top label
    with pytest.raises(ValueError):
        positive_class("ts", "TS", SimpleNamespace(k=3))
