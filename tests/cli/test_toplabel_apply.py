"""``calibview apply`` on top-label runs: a report's top-label isotonic calibrator maps the test split's
confidences exactly as scikit-learn's isotonic regression fitted on the validation split's (confidence,
correct) pairs does, the predictions and labels are carried over unchanged, and a calibrator of the other form
is refused in one sentence."""

from __future__ import annotations

import h5py
import numpy as np
from sklearn.isotonic import IsotonicRegression

from calibview.cli.program import main
from _toplabel_data import write_mixed


def _files(tmp_path):
    path = tmp_path / "runs.h5"
    return path, write_mixed(path, seed=3, k=5, sizes={"val": 3000, "test": 2000}, shift=2.5, scale=2.0)


def test_isotonic_apply_matches_sklearn(tmp_path, capsys):
    path, splits = _files(tmp_path)
    rep = tmp_path / "rep"
    assert main(["report", str(path), "-o", str(rep), "--run", "top/toy", "--calibrators", "none,ir",
                 "--n-boot", "0", "--no-diagram", "--quiet"]) == 0
    out = tmp_path / "applied.h5"
    assert main(["apply", str(rep / "calibrators.json"), str(path), "--run", "top/toy", "--split", "test",
                 "--use", "ir", "-o", str(out)]) == 0
    conf_v, pred_v, y_v = splits["val"]
    conf_t, pred_t, y_t = splits["test"]
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(conf_v, (pred_v == y_v).astype(float))
    with h5py.File(out, "r") as f:
        g = f["top+ir/toy/test"]
        np.testing.assert_allclose(g["confidence"][:], iso.predict(conf_t), rtol=0, atol=1e-12)
        np.testing.assert_array_equal(g["predictions"][:], pred_t)
        np.testing.assert_array_equal(g["labels"][:], y_t)


def test_other_form_is_refused(tmp_path, capsys):
    path, _ = _files(tmp_path)
    rep = tmp_path / "rep"
    assert main(["report", str(path), "-o", str(rep), "--run", "logit/toy", "--calibrators", "none,ir",
                 "--n-boot", "0", "--no-diagram", "--quiet"]) == 0
    capsys.readouterr()
    out = tmp_path / "applied.h5"
    # the logit run's isotonic calibrator (every class's scores) on the top-label run
    assert main(["apply", str(rep / "calibrators.json"), str(path), "--run", "top/toy", "--split", "test",
                 "--use", "ir", "-o", str(out), "--allow-other-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "top-label run" in err, err
    assert not out.exists()
