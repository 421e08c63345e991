"""The shared set-up of the window tests: a window (its settings in the test's own INI file), a bare Session, and
the small logits files the tests open.

``window`` is set up as the test's (or its module's) ``window`` marker says, e.g. ``pytestmark =
pytest.mark.window(n_boot=0, size=(1280, 800))``; ``demo=True`` opens the demo and waits for its evaluation.

Nothing here imports Qt, pyqtgraph or calibview.plot at module level: tests/gui/model runs with Qt blocked
(tests/qtless.py), and this file is its conftest too. Qt is imported inside the fixtures that need it.
"""

from pathlib import Path

import numpy as np
import pytest

#: bootstrap resamples of a window's evaluations unless its marker says otherwise (the suite stays quick; the
#: intervals themselves are tested in the core)
N_BOOT = 100
WAIT_MS = 120_000


def pytest_configure(config):
    config.addinivalue_line("markers", "window(n_boot=100, size=None, demo=False): how the `window` fixture is set "
                                       "up (tests/gui/conftest.py)")


def _wait_idle(qtbot, window, timeout: int = WAIT_MS) -> None:
    """Until the window's session has an evaluation and computes nothing."""
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=timeout)


@pytest.fixture
def make_window(qtbot, tmp_path):
    """``make_window(n_boot=0, settings="settings.ini", size=None, show=True)``: a MainWindow whose settings live
    in ``settings`` (a QSettings, or a file name in tmp_path), resized to ``size`` before it is shown; every
    window made is closed at the end of the test."""
    from PySide6 import QtCore

    from calibview.gui.main_window import MainWindow

    made = []

    def make(*, n_boot: int = 0, settings="settings.ini", size=None, show: bool = True):
        if not isinstance(settings, QtCore.QSettings):
            settings = QtCore.QSettings(str(tmp_path / settings), QtCore.QSettings.IniFormat)
        w = MainWindow(settings=settings)
        qtbot.addWidget(w)
        w.session.n_boot = n_boot
        if size is not None:
            w.resize(*size)
        if show:
            w.show()
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


@pytest.fixture
def window(request, make_window, qtbot, demo_file):
    """The shown window of a test, as its ``window`` marker says (n_boot, size, demo); its settings are
    tmp_path / "settings.ini"."""
    marker = request.node.get_closest_marker("window")
    options = {"n_boot": N_BOOT, **(marker.kwargs if marker else {})}
    demo = options.pop("demo", False)
    w = make_window(**options)
    if demo:
        w.open_files([demo_file])
        _wait_idle(qtbot, w)
    return w


@pytest.fixture
def session(qtbot):
    """A Session without a window; its worker thread is joined at the end of the test."""
    from calibview.gui.session import Session

    s = Session()
    yield s
    s.shutdown()


# --- small files -------------------------------------------------------------------------------------------------

@pytest.fixture
def domains_file(tmp_path) -> Path:
    """net/toy: val and test from one domain; deploy label-shifted (class 0 dominant) and sharper: over-confident."""
    from calibview.core.io.writer import write_run

    path, n, k = tmp_path / "d.h5", 600, 5
    rng = np.random.default_rng(0)
    for split, scale, prior in (("val", 2.0, None), ("test", 2.0, None), ("deploy", 3.5, [0.6] + [0.1] * 4)):
        y = rng.choice(k, size=n, p=prior)
        z = rng.normal(size=(n, k))
        z[np.arange(n), y] += 1.2
        write_run(path, "net", "toy", split, logits=(scale * z).astype(np.float32), labels=y)
    return path


@pytest.fixture
def runs_file(tmp_path) -> Path:
    """Runs on one test set: a/toy (calibrated) and b/toy (over-confident), c/toy on other labels (5 of 500
    differ), d/more on another dataset."""
    from calibview.core.io.writer import write_run

    path, n, k = tmp_path / "r.h5", 500, 4
    rng = np.random.default_rng(0)
    val_y, test_y = rng.integers(0, k, n), rng.integers(0, k, n)
    other = test_y.copy()
    other[:5] = (other[:5] + 1) % k
    z = {}
    for split, y in (("val", val_y), ("test", test_y)):
        z[split] = rng.normal(size=(n, k))
        z[split][np.arange(n), y] += 1.5
    for model, dataset, scale, y_test in (("a", "toy", 1.7, test_y), ("b", "toy", 4.0, test_y),
                                          ("c", "toy", 1.0, other), ("d", "more", 1.0, test_y)):
        for split, y in (("val", val_y), ("test", y_test)):       # b: a's logits, sharper (over-confident)
            write_run(path, model, dataset, split, logits=(scale * z[split]).astype(np.float32), labels=y)
    return path


@pytest.fixture
def sliced_file(tmp_path) -> Path:
    """m/d with metadata columns site (A or B; B over-confident: its logits scaled up) and age."""
    from calibview.core.io.writer import write_run

    path, n, k = tmp_path / "s.h5", 1200, 4
    rng = np.random.default_rng(0)
    for split in ("val", "test"):
        y = rng.integers(0, k, n)
        z = rng.normal(size=(n, k))
        z[np.arange(n), y] += 1.0
        site = np.where(rng.random(n) < 0.5, "A", "B")
        z[site == "B"] *= 3.0
        write_run(path, "m", "d", split, logits=(1.5 * z).astype(np.float32), labels=y,
                  meta={"site": site, "age": rng.uniform(20, 80, n)})
    return path


@pytest.fixture
def binary_file(tmp_path) -> Path:
    """gnb/synthetic: an over-confident binary model (so that platt and beta apply: seven calibrators)."""
    from calibview.core.io.writer import write_run

    path, n = tmp_path / "binary.h5", 3000
    rng = np.random.default_rng(3)
    for split in ("val", "test"):
        y = rng.integers(0, 2, n)
        z = rng.normal(size=n) + 1.6 * (2 * y - 1)
        write_run(path, "gnb", "synthetic", split, logits=np.stack([np.zeros(n), 2.5 * z], 1).astype(np.float32),
                  labels=y)
    return path


@pytest.fixture
def big_file(tmp_path):
    """``big_file(n=400_000, k=100)``: big/data with uninformative float32 logits, uncompressed: long enough to
    evaluate that a test can cancel it, supersede it or watch the event loop meanwhile."""
    from calibview.core.io.writer import write_run

    def make(n: int = 400_000, k: int = 100) -> Path:
        path = tmp_path / f"big-{n}-{k}.h5"
        rng = np.random.default_rng(0)
        for split in ("val", "test"):
            y = rng.integers(0, k, n)
            z = rng.normal(size=(n, k)).astype(np.float32)
            write_run(path, "big", "data", split, logits=z, labels=y, compression=None)
        return path
    return make


@pytest.fixture
def nan_file(tmp_path) -> Path:
    """m/d with one row of NaN logits: it passes the metadata check and fails in the worker."""
    import h5py

    path = tmp_path / "nan.h5"
    z = np.zeros((20, 3), np.float32)
    z[3] = np.nan
    with h5py.File(path, "w") as f:
        f["m/d/test/logits"] = z
        f["m/d/test/labels"] = np.zeros(20, np.int64)
    return path
