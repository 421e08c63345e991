"""The Members tab on the demo's 2-member ensemble: the ensemble first, each member's row equal to the metrics of
that member's own run in the demo (the members are those runs), and the spread over them."""

import numpy as np
import pytest

pytestmark = pytest.mark.window(n_boot=0)
WAIT_MS = 120_000


def test_members_tab_rows_are_the_member_runs(qtbot, window, demo_file):
    from calibview.core.evaluation.engine import evaluate
    from calibview.core.evaluation.request import EvalRequest

    window.open_files([demo_file])
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    window.session.select_run(str(demo_file), "resnet110-ensemble/cifar10")
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None
                    and window.session.evaluation.run.name == "resnet110-ensemble/cifar10", timeout=WAIT_MS)
    view = window.members_view
    window.table.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.rows is not None, timeout=WAIT_MS)
    assert view.builds == 1
    labels = [view.table.item(i, 0).text() for i in range(view.table.rowCount())]
    assert labels == ["Ensemble", "Member 0", "Member 1", "Members min", "Members mean", "Members max"]
    rows = dict(view.rows)
    for member, run in (("0", "resnet110-brier/cifar10"), ("1", "resnet110-flsd53/cifar10")):
        own = evaluate(EvalRequest(file=str(demo_file), run=run, calibrators=("none",), n_boot=0))
        for m in ("accuracy", "nll", "ece", "brier"):
            assert rows[member]["none"][m] == pytest.approx(own.result("none").metrics[m].value, abs=1e-9), m
    nll = [rows[m]["none"]["nll"] for m in ("0", "1")]
    assert view.spread("none")["mean"]["nll"] == pytest.approx(np.mean(nll))
    assert rows["ensemble"]["none"]["nll"] < min(nll)           # the ensemble beats its members
    view.calibrator.setCurrentIndex(view.calibrator.findData("ts"))
    assert view.builds == 1 and view.table.rowCount() == 6


def test_a_run_without_members_says_so(qtbot, window, demo_file):
    window.open_files([demo_file])
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    window.table.tabs.setCurrentWidget(window.members_view)
    assert window.members_view.rows is None and "no ensemble" in window.members_view.caption.text()
