"""The window's CORP toggle and MCB-DSC tab: switching CORP on draws every shown calibrator's PAV step curve (then
its consistency band) in the overlay and the grid, computed once on the worker; a bandwidth move then recomputes
nothing (counted, not timed); the tab's points are the decomposition of the same curves."""

import numpy as np
import pytest

from calibview.core.reports import corp as corp_report

pytestmark = pytest.mark.window(n_boot=50, demo=True)
WAIT_MS = 120_000


def _on(qtbot, window, bootstrap=False):
    if bootstrap:
        window.corp.toggle.bootstrap.setChecked(True)
    else:
        window.corp.toggle.action.setChecked(True)
    qtbot.waitUntil(lambda: bool(window.canvas.corp[0])
                    and all(c.has_bands for c in window.canvas.corp[0].values()), timeout=WAIT_MS)


def test_corp_is_drawn_once_and_a_bandwidth_move_recomputes_nothing(qtbot, window):
    assert window.corp.toggle.action in window.view_menu.actions()
    _on(qtbot, window)
    names = set(window.canvas.names())
    assert set(window.canvas.corp[0]) == names
    drawn = {s.name: s.corp_items for s in window.canvas._series}
    assert all(items is not None and items.visible for items in drawn.values())
    counters, asked = dict(corp_report.COUNTERS), window.session.corp.asked
    step_data = {n: items.step.yData.copy() for n, items in drawn.items()}
    for h in (0.02, 0.08, 0.15):
        window.session.set_bandwidth(h)
        qtbot.wait(20)
    assert dict(corp_report.COUNTERS) == counters and window.session.corp.asked == asked
    for s in window.canvas._series:               # the same items, the same data: nothing redrawn
        assert s.corp_items is drawn[s.name]
        np.testing.assert_array_equal(s.corp_items.step.yData, step_data[s.name])
    window.canvas.set_layout("grid")
    grid = window.canvas.grid_view
    with_corp = {s.item.color_key: s.corp_items for _, s in grid.all_series() if s.corp_items is not None}
    faint = {s.item.color_key for _, s in grid.all_series() if s.faint}
    assert faint == {"none"} and set(with_corp) == names - faint      # the grey reference has no steps
    window.session.set_bandwidth(0.05)
    assert dict(corp_report.COUNTERS) == counters
    assert {s.item.color_key: s.corp_items for _, s in grid.all_series() if s.corp_items is not None} == with_corp
    window.corp.toggle.action.setChecked(False)
    assert window.canvas.corp[0] == {} and window.session.corp.asked == asked


def test_the_bootstrap_band_and_the_export_carry_the_corp_curves(qtbot, window, tmp_path):
    _on(qtbot, window, bootstrap=True)
    assert window.corp.toggle.action.isChecked()
    assert all(s.corp_items.bootstrap for s in window.canvas._series)
    panels = window.canvas.figure_panels("grid")
    assert any(it.corp is not None and it.corp.boot_lo is not None for p in panels for it in p.items)
    paths = window.canvas.export_figure(tmp_path / "fig.pdf", formats=["pdf"])
    assert paths[0].stat().st_size > 1000


def test_the_mcb_dsc_tab_shows_the_curves_decomposition(qtbot, window):
    tabs = window.table.tabs
    tabs.setCurrentWidget(window.corp.tab)
    qtbot.waitUntil(lambda: len(window.corp.tab.view.points) == len(window.session.evaluation.results),
                    timeout=WAIT_MS)
    ev = window.session.evaluation
    # the rows carry corp_mcb / corp_dsc / corp_unc, so the tab reads them (and computes no curves); they equal
    # the decomposition of the PAV curve computed here from the same per-sample vectors
    from calibview.core.evaluation.engine import Engine
    from calibview.core.reports.corp import corp_set

    cs = corp_set(Engine(), ev, bands=False)          # its own engine: the window's lives on the worker thread
    for p in window.corp.tab.view.points:
        m = next(r for r in ev.results if r.name == p["calibrator"]).metrics
        assert p["mcb"] == m["corp_mcb"].value and p["dsc"] == m["corp_dsc"].value
        d = cs.of(p["calibrator"]).decomposition
        assert p["mcb"] == pytest.approx(d["mcb"], abs=1e-12) and p["dsc"] == pytest.approx(d["dsc"], abs=1e-12)
        assert p["score"] == pytest.approx(d["score"], abs=1e-12)


def test_the_class_corp_tab_draws_one_class_and_a_bandwidth_move_asks_nothing(qtbot, window, tmp_path, demo_file):
    import h5py
    from scipy.special import softmax

    from calibview.core.reports import corp_class as cc

    tab = window.corp.class_tab
    window.table.tabs.setCurrentWidget(tab)
    qtbot.waitUntil(lambda: tab.result is not None and tab.result[1].bands, timeout=WAIT_MS)
    ev = window.session.evaluation
    fc, cs = tab.result
    assert fc.cls == 0 and set(cs.curves) == {r.name for r in ev.results}
    with h5py.File(demo_file, "r") as f:
        z = f[f"{ev.run.name}/{ev.request.eval_split}/logits"][()].astype(np.float64)
    np.testing.assert_allclose(fc.forecasts["none"], softmax(z, axis=1)[:, 0], rtol=0, atol=1e-12)
    drawn = [s for _, s in tab.view.all_series()]
    assert {s.item.color_key for s in drawn if s.corp_items is not None and s.corp_items.has_band} == set(cs.curves)
    passes, asked = cc.COUNTERS["passes"], tab.asked
    for h in (0.02, 0.1):
        window.session.set_bandwidth(h)
        qtbot.wait(20)
    assert cc.COUNTERS["passes"] == passes and tab.asked == asked and tab.view.bandwidth[0] == 0.1
    tab.set_class(3)
    qtbot.waitUntil(lambda: tab.result[0].cls == 3 and tab.result[1].bands, timeout=WAIT_MS)
    assert cc.COUNTERS["passes"] == passes + 1          # one read of the split for the new class
    tab.set_class(0)
    qtbot.waitUntil(lambda: tab.result[0].cls == 0 and tab.result[1].bands, timeout=WAIT_MS)
    assert cc.COUNTERS["passes"] == passes + 1          # the first class's probabilities are cached
    tab.bootstrap.setChecked(True)
    assert any(s.corp_items is not None and s.corp_items.bootstrap for _, s in tab.view.all_series())
    paths = tab.export_figure(tmp_path / "class.pdf", formats=["pdf"])
    assert paths[0].stat().st_size > 1000


def test_the_class_corp_tab_follows_a_new_run(qtbot, window, demo_file):
    tab = window.corp.class_tab
    window.table.tabs.setCurrentWidget(tab)
    qtbot.waitUntil(lambda: tab.result is not None and tab.result[1].bands, timeout=WAIT_MS)
    window.session.select_run(str(demo_file), "resnet110-brier/cifar100")
    qtbot.waitUntil(lambda: window.session.evaluation is not None and window.session.evaluation.k == 100
                    and not window.session.evaluation.pending, timeout=WAIT_MS)
    assert tab.classes.count() == 100 and tab.classes.currentText() == "0: apple"
    qtbot.waitUntil(lambda: tab.result is not None and tab.result[1].bands, timeout=WAIT_MS)
    fc, cs = tab.result
    assert fc.outcome.size == window.session.evaluation.n_eval and fc.name == "apple"
    assert set(cs.curves) == {r.name for r in window.session.evaluation.results}


def test_the_chosen_class_survives_a_re_evaluation(qtbot, window):
    tab = window.corp.class_tab
    window.table.tabs.setCurrentWidget(tab)
    tab.set_class(4)
    qtbot.waitUntil(lambda: tab.result is not None and tab.result[0].cls == 4 and tab.result[1].bands,
                    timeout=WAIT_MS)
    window.session.set_calibrators(["none", "ts", "hb"])
    window.session.evaluate()
    qtbot.waitUntil(lambda: {r.name for r in window.session.evaluation.results} == {"none", "ts", "hb"}
                    and not window.session.evaluation.pending, timeout=WAIT_MS)
    assert tab.current_class() == 4
    qtbot.waitUntil(lambda: tab.result is not None and set(tab.result[1].curves) == {"none", "ts", "hb"},
                    timeout=WAIT_MS)
    assert tab.result[0].cls == 4
