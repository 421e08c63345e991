"""The Conformal tab: sets computed once on the view's thread, then every slider move read from the cached scores
(a pass counter, not wall time), the values those of the conformal command at the same level, the bars and the
histogram what a person sees, and the slider's redraw time measured in the real event loop."""

import numpy as np
import pytest

from calibview.core.evaluation.conformal import evaluate_conformal
from calibview.core.evaluation.engine import Engine

pytestmark = pytest.mark.window(n_boot=0, demo=True)
WAIT_MS = 120_000


def _computed(qtbot, window):
    view = window.conformal_view
    window.table.tabs.setCurrentWidget(view)
    view.compute.click()
    qtbot.waitUntil(lambda: view.sweeps is not None, timeout=WAIT_MS)
    return view


def test_the_slider_reads_the_cached_scores_and_matches_the_command(qtbot, window):
    view = _computed(qtbot, window)
    assert view.builds == 1
    ev = window.session.evaluation
    req = ev.request
    names = [view.calibrator.itemData(i) for i in range(view.calibrator.count())]
    assert names == [r.name for r in ev.results]
    times = []
    for alpha in (0.02, 0.05, 0.1, 0.2, 0.3):
        view.set_alpha(alpha)
        qtbot.wait(1)                               # the redraw runs in the event loop, as a drag's would
        times.append(view.last_redraw_ms)
        for score in ("lac", "aps", "raps"):
            view.score.setCurrentIndex(view.score.findData(score))
            pt = view.current()
            ref = evaluate_conformal(Engine(), req.file, ev.run.name, calib_split=req.fit_split,
                                     eval_split=req.eval_split, alphas=(alpha,), scores=(score,),
                                     calibrators=("none",), n_boot=0)
            rec = next(r for r in ref.records if r["group"] == "all")
            assert pt.qhat == rec["qhat"] and pt.coverage == pytest.approx(rec["coverage"], abs=1e-15)
            assert pt.mean_size == pytest.approx(rec["mean_set_size"], abs=1e-12)
    assert view.builds == 1                         # no slider move or score change read the splits again
    assert max(times) < 100, times                  # 10,000 x 10 demo run: a few ms
    # what is drawn: one bar per class from the target line, the histogram of set sizes
    pt = view.current()
    opts = view.bars.opts
    np.testing.assert_allclose(np.asarray(opts["y0"]) + np.asarray(opts["height"]),
                               pt.class_coverage[pt.class_n > 0])
    assert view.target.value() == pytest.approx(1 - view.alpha())
    assert np.asarray(view.hist.opts["height"]).sum() == pytest.approx(1.0)
    assert "coverage" in view.summary.text() and "qhat" in view.summary.text()


def test_a_new_evaluation_drops_the_sets_and_a_calibrator_is_flagged(qtbot, window):
    view = _computed(qtbot, window)
    view.calibrator.setCurrentIndex(view.calibrator.findData("ts"))
    assert "fitted on val" in view.summary.text()
    window.session.evaluate()
    qtbot.waitUntil(lambda: view.sweeps is None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not window.session.busy, timeout=WAIT_MS)
    assert view.compute.isEnabled() and view.current() is None
