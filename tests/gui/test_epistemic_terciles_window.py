"""The window's split by epistemic tercile: the toggle is enabled only for a run with members (with a tooltip
saying why not otherwise), switching it on computes the split once on the worker, and the bandwidth slider then
redraws the three curves with no engine call and no second split (counted, not timed)."""

import numpy as np
import pytest

pytestmark = pytest.mark.window(n_boot=0)
WAIT_MS = 120_000


@pytest.fixture
def members_file(tmp_path):
    from tests.plot.test_epistemic_terciles import write_members_run

    path = tmp_path / "members.h5"
    write_members_run(path)
    return path


def _select(qtbot, window, path, run):
    window.session.select_run(str(path.resolve()), run)
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None
                    and window.session.evaluation.run.name == run, timeout=WAIT_MS)


def test_the_toggle_is_disabled_with_a_reason_for_a_run_without_members(qtbot, window, members_file):
    window.open_files([members_file])
    _select(qtbot, window, members_file, "plain/toy")
    action = window.tercile_toggle.action
    assert not action.isEnabled() and not window.tercile_toggle.button.isEnabled()
    assert "members" in action.toolTip() and "plain/toy" in action.toolTip()
    assert action in window.menuBar().actions()[2].menu().actions()          # View menu
    assert action.shortcut().toString() == "Ctrl+Shift+M"
    _select(qtbot, window, members_file, "ens/toy")
    assert action.isEnabled() and "mutual information" in action.toolTip()
    action.setChecked(True)
    _select(qtbot, window, members_file, "plain/toy")                # back to a plain run: switched off
    assert not action.isEnabled() and not action.isChecked() and window.canvas.terciles.series == []


def test_the_slider_redraws_the_terciles_without_evaluating(qtbot, window, members_file, monkeypatch):
    from calibview.core.evaluation.engine import Engine
    from calibview.core.evaluation.members import terciles, uncertainty

    window.open_files([members_file])
    _select(qtbot, window, members_file, "ens/toy")
    calls = {"evaluate": 0, "scored": 0, "decompose": 0, "split": 0}

    def counted(name, fn):
        def wrapper(*a, **kw):
            calls[name] += 1
            return fn(*a, **kw)
        return wrapper

    monkeypatch.setattr(Engine, "evaluate", counted("evaluate", Engine.evaluate))
    monkeypatch.setattr(Engine, "scored", counted("scored", Engine.scored))
    monkeypatch.setattr(uncertainty, "decompose", counted("decompose", uncertainty.decompose))
    monkeypatch.setattr(terciles, "tercile_split", counted("split", terciles.tercile_split))
    window.tercile_toggle.action.trigger()
    qtbot.waitUntil(lambda: len(window.canvas.terciles.series) == 3, timeout=WAIT_MS)
    assert calls == {"evaluate": 0, "scored": 1, "decompose": 1, "split": 1}      # the scores were cached
    assert window.tercile_toggle.calibrator_name() == "ts"
    layer = window.canvas.terciles
    before = [s.curve.yData.copy() for s in layer.series]
    slider = window.bandwidth_bar.slider
    slider.setSliderDown(True)                                  # a drag: the curves follow, nothing is asked
    for value in (slider.value() + 150, slider.value() + 300):
        slider.setValue(value)
    h = window.session.bandwidth
    assert calls == {"evaluate": 0, "scored": 1, "decompose": 1, "split": 1}
    for s, y in zip(layer.series, before):
        ref = s.result.curve(h, "gaussian")
        x, yy = s.curve.xData, s.curve.yData
        ok = np.isfinite(yy)
        np.testing.assert_allclose(yy[ok], np.interp(x[ok], ref.x, ref.curve), atol=1e-9)
        assert not np.array_equal(np.nan_to_num(yy), np.nan_to_num(y))
    window.canvas.set_layout("grid")
    split = [s for p in window.canvas.grid_view.panels for s in p.series if s.name.endswith("(MI terciles)")]
    assert len(split) == 3 and all(s.state == (h, "gaussian") for s in split)
    slider.setValue(slider.value() - 200)
    assert all(s.state == (window.session.bandwidth, "gaussian") for s in split)
    # letting go re-evaluates CAL at the new bandwidth (the engine's cached fits), never the split itself
    slider.setSliderDown(False)                                 # emits sliderReleased
    qtbot.waitUntil(lambda: not window.session.busy and calls["evaluate"] == 1
                    and window.session.evaluation.request.bandwidth == window.session.bandwidth, timeout=WAIT_MS)
    qtbot.wait(200)
    assert (calls["decompose"], calls["split"]) == (1, 1) and window.session.shown_terciles() is not None
    assert len(window.canvas.terciles.series) == 3
    window.tercile_toggle.action.trigger()                      # off, then on again: the split is kept
    assert window.canvas.terciles.series == []
    window.tercile_toggle.action.trigger()
    assert len(window.canvas.terciles.series) == 3 and calls["split"] == 1
