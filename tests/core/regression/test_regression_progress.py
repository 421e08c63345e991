"""evaluate_regression's progress and cancel, as the window's worker uses them."""

import threading

import h5py
import numpy as np
import pytest

from calibview.core.errors import Cancelled
from calibview.core.io.regression.discovery import list_regression_runs
from calibview.core.regression.evaluate import RegRequest, evaluate_regression


@pytest.fixture
def run(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "r.h5"
    with h5py.File(path, "w") as f:
        for split in ("val", "test"):
            m = rng.normal(size=200)
            g = f.create_group(f"/m/d/{split}")
            g["mean"], g["targets"], g["var"] = m, m + rng.normal(size=200), np.ones(200)
    return list_regression_runs(path)[0]


def test_progress_rises_to_one_and_numbers_do_not_change(run):
    req = RegRequest(run=run, eval_split="test", fit_split="val", calibrators=("none", "var-scaling"), n_boot=120)
    seen = []
    ev = evaluate_regression(req, progress=lambda f, m: seen.append(f))
    plain = evaluate_regression(req)
    assert seen[0] == 0.0 and seen[-1] == 1.0 and all(a <= b for a, b in zip(seen, seen[1:]))
    assert len(seen) > 4                           # within each recalibrator's bootstrap too
    for a, b in zip(ev.results, plain.results):
        assert {k: v.value for k, v in a.metrics.items()} == pytest.approx({k: v.value for k, v in b.metrics.items()},
                                                                           nan_ok=True)


def test_cancel_stops_it_between_bootstrap_blocks(run):
    cancel = threading.Event()
    calls = []

    def progress(fraction, message):
        calls.append(message)
        if "bootstrap" in message:
            cancel.set()                            # as the window's Cancel button does, mid-bootstrap

    req = RegRequest(run=run, eval_split="test", fit_split="val", calibrators=("none", "var-scaling"), n_boot=200)
    with pytest.raises(Cancelled):
        evaluate_regression(req, progress=progress, cancel=cancel)
    assert not any(m.startswith("var-scaling") for m in calls)
